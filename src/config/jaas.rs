//! The Java `sasl.jaas.config` value: parsing and mapping to librdkafka SASL settings.
//!
//! Syntax, as Kafka's `JaasConfig` reads it with a `java.io.StreamTokenizer`:
//! `<LoginModuleClass> <flag> name="value" name2=value2 ... ;` with `//` and `/* */`
//! comments, quoted values with backslash escapes, and exactly one entry for a client.
//! One leniency: an unquoted value may start with a digit (Java's tokenizer turns such a
//! token into a number and then rejects it).
//!
//! Mapping: `PlainLoginModule` and `ScramLoginModule` become `sasl.username` /
//! `sasl.password`. Kerberos and OAUTHBEARER logins are refused with the librdkafka
//! settings to write instead: their Java configuration relies on JVM login machinery and
//! callback handler classes whose librdkafka counterparts have different settings (and,
//! in eosmirror's default build, no GSSAPI/OIDC support compiled in).
//!
//! Every value in a JAAS line is treated as secret: errors name options, never values.

use std::fmt;

use super::secrets::redact;

const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const OAUTH_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
const KRB5_MODULES: &[&str] = &[
    "com.sun.security.auth.module.Krb5LoginModule",
    "com.ibm.security.auth.module.Krb5LoginModule",
];

/// One parsed JAAS login module entry.
pub struct JaasEntry {
    module: String,
    /// Options in order; a repeated name keeps its last value, as in Java's `HashMap`.
    options: Vec<(String, String)>,
}

impl JaasEntry {
    /// The login module class name, as written.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// The value of option `name` (the last one, if repeated); may be a secret.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Option values are part of the secret `sasl.jaas.config`: show names only.
        let names: Vec<&str> = self.options.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("JaasEntry")
            .field("module", &self.module)
            .field("options", &names)
            .finish()
    }
}

/// What the JAAS line becomes for librdkafka.
#[derive(PartialEq, Eq)]
pub struct SaslCredentials {
    pub(crate) username: String,
    pub(crate) password: String,
    /// Options that have no librdkafka meaning (names only).
    pub(crate) ignored_options: Vec<String>,
}

impl fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaslCredentials")
            .field("username", &self.username)
            .field("password", &redact("password", &self.password))
            .field("ignored_options", &self.ignored_options)
            .finish()
    }
}

/// Why a JAAS line cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum JaasError {
    /// Not valid JAAS syntax.
    Syntax(String),
    /// Valid, but not something eosmirror translates; the text says what to write instead.
    Unsupported(String),
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Char(char),
}

impl Token {
    /// Java's `StreamTokenizer.sval`: only words and quoted strings have one.
    fn text(self) -> Option<String> {
        match self {
            Token::Word(s) | Token::Quoted(s) => Some(s),
            Token::Char(_) => None,
        }
    }
}

/// `java.io.StreamTokenizer` as configured by Kafka's `JaasConfig`.
struct Tokenizer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '-' | '.') || (c as u32) >= 160
}

impl Tokenizer<'_> {
    fn next_token(&mut self) -> Option<Token> {
        loop {
            let c = self.chars.next()?;
            match c {
                c if c <= ' ' => continue,
                '/' => {
                    if self.chars.peek() == Some(&'*') {
                        self.chars.next();
                        let mut prev = '\0';
                        for c in self.chars.by_ref() {
                            if prev == '*' && c == '/' {
                                break;
                            }
                            prev = c;
                        }
                    } else {
                        // `//` and a lone `/` (the tokenizer's comment character) both
                        // comment out the rest of the line.
                        for c in self.chars.by_ref() {
                            if c == '\n' || c == '\r' {
                                break;
                            }
                        }
                    }
                }
                '"' | '\'' => return Some(Token::Quoted(self.quoted(c))),
                c if is_word_char(c) => {
                    let mut word = String::from(c);
                    while let Some(&c) = self.chars.peek() {
                        if !is_word_char(c) {
                            break;
                        }
                        word.push(c);
                        self.chars.next();
                    }
                    return Some(Token::Word(word));
                }
                other => return Some(Token::Char(other)),
            }
        }
    }

    /// A quoted string: ends at the matching quote, or (unterminated, as in Java) at a
    /// line break or the end of input. Escapes `\a \b \f \n \r \t \v`, octal `\ooo`, and
    /// `\` + any other character.
    fn quoted(&mut self, quote: char) -> String {
        let mut out = String::new();
        while let Some(&c) = self.chars.peek() {
            if c == '\n' || c == '\r' {
                break;
            }
            self.chars.next();
            if c == quote {
                break;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(e) = self.chars.next() else { break };
            let decoded = match e {
                'a' => '\u{7}',
                'b' => '\u{8}',
                'f' => '\u{c}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'v' => '\u{b}',
                '0'..='7' => {
                    let mut value = e as u32 - '0' as u32;
                    let max_digits = if e <= '3' { 3 } else { 2 };
                    for _ in 1..max_digits {
                        match self.chars.peek() {
                            Some(&d @ '0'..='7') => {
                                value = value * 8 + (d as u32 - '0' as u32);
                                self.chars.next();
                            }
                            _ => break,
                        }
                    }
                    char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER)
                }
                other => other,
            };
            out.push(decoded);
        }
        out
    }
}

/// Whether `s` looks like a fully qualified Java class name (`lower.case.package.Class`).
/// Only such a first word is quoted in errors: a malformed value may start with a secret.
fn looks_like_class_name(s: &str) -> bool {
    let segments: Vec<&str> = s.split('.').collect();
    let identifier = |seg: &str| {
        seg.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && seg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    let (class, packages) = segments.split_last().unwrap_or((&"", &[]));
    !packages.is_empty()
        && segments.iter().all(|seg| identifier(seg))
        && class.starts_with(|c: char| c.is_ascii_uppercase())
        && packages
            .iter()
            .all(|p| p.starts_with(|c: char| c.is_ascii_lowercase()))
}

/// "login module `x.y.Z`", or a neutral phrase when the word does not look like a class.
fn describe_module(module: &str) -> String {
    if looks_like_class_name(module) {
        format!("login module `{module}`")
    } else {
        "the first word (which is not a login module class name)".into()
    }
}

/// Parses a client's `sasl.jaas.config` value: exactly one login module entry.
pub fn parse(text: &str) -> Result<JaasEntry, JaasError> {
    let syntax = JaasError::Syntax;
    let mut tokens = Tokenizer {
        chars: text.chars().peekable(),
    };
    let mut entries = Vec::new();
    while let Some(first) = tokens.next_token() {
        let module = first
            .text()
            .ok_or_else(|| syntax("expected a login module class name first".into()))?;
        let flag = tokens.next_token().and_then(Token::text).ok_or_else(|| {
            syntax(format!(
                "no control flag after {}",
                describe_module(&module)
            ))
        })?;
        if !["required", "requisite", "sufficient", "optional"]
            .contains(&flag.to_ascii_lowercase().as_str())
        {
            return Err(syntax(format!(
                "the control flag after {} must be required, requisite, sufficient or optional",
                describe_module(&module)
            )));
        }
        let mut options: Vec<(String, String)> = Vec::new();
        let terminated = loop {
            // Only names confirmed by a following `=` are quoted in errors: a stray
            // token may be half of an unquoted password.
            let expected = || {
                let after = match options.last() {
                    Some((name, _)) => format!("option `{name}`"),
                    None => "the control flag".to_string(),
                };
                syntax(format!(
                    "expected `name=value` or `;` after {after} (quote values that contain \
                     spaces or special characters)"
                ))
            };
            let name = match tokens.next_token() {
                None => break false,
                Some(Token::Char(';')) => break true,
                Some(Token::Char(_)) => return Err(expected()),
                Some(Token::Word(n) | Token::Quoted(n)) => n,
            };
            if tokens.next_token() != Some(Token::Char('=')) {
                return Err(expected());
            }
            let value = tokens
                .next_token()
                .and_then(Token::text)
                .ok_or_else(|| syntax(format!("option `{name}` has no value after `=`")))?;
            options.retain(|(n, _)| *n != name);
            options.push((name, value));
        };
        if !terminated {
            return Err(syntax(
                "the login module entry is not terminated by `;` (an unterminated quoted \
                 value also causes this)"
                    .into(),
            ));
        }
        entries.push(JaasEntry { module, options });
    }
    match entries.len() {
        1 => Ok(entries.remove(0)),
        0 => Err(syntax("no login module given".into())),
        n => Err(syntax(format!(
            "holds {n} login modules; a client uses exactly one"
        ))),
    }
}

/// Maps a parsed entry to librdkafka credentials. `features` is librdkafka's
/// `builtin.features` list, used to say whether the alternative settings would work in
/// this build.
pub fn credentials(entry: &JaasEntry, features: &str) -> Result<SaslCredentials, JaasError> {
    let has = |feature: &str| features.split(',').any(|f| f.trim() == feature);
    let module = entry.module.as_str();
    if module == PLAIN_MODULE || module == SCRAM_MODULE {
        return user_password(entry);
    }
    let text = if KRB5_MODULES.contains(&module) {
        kerberos_instructions(entry, has("sasl_gssapi"))
    } else if module == OAUTH_MODULE {
        oauth_instructions(entry, has("oidc"))
    } else if module.ends_with(".IAMLoginModule") {
        format!(
            "{} (AWS MSK IAM authentication) has no librdkafka counterpart eosmirror \
             can use. Enable SASL/SCRAM (or TLS client certificates) on the MSK cluster \
             for eosmirror's user and use that here: security.protocol=SASL_SSL, \
             sasl.mechanism=SCRAM-SHA-512 and a ScramLoginModule sasl.jaas.config",
            describe_module(module)
        )
    } else {
        format!(
            "{} is not known to eosmirror, which translates only \
             {PLAIN_MODULE} and {SCRAM_MODULE}. Remove sasl.jaas.config and set librdkafka's \
             SASL settings (sasl.mechanism, sasl.username, sasl.password, sasl.kerberos.*, \
             sasl.oauthbearer.*) in the file directly",
            describe_module(module)
        )
    };
    Err(JaasError::Unsupported(text))
}

fn user_password(entry: &JaasEntry) -> Result<SaslCredentials, JaasError> {
    let short = entry.module.rsplit('.').next().unwrap_or(&entry.module);
    if entry
        .option("tokenauth")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err(JaasError::Unsupported(
            "tokenauth=true (delegation token login) is not supported by librdkafka; \
             use a SCRAM user's own credentials"
                .into(),
        ));
    }
    let get = |name: &str| {
        entry
            .option(name)
            .map(str::to_string)
            .ok_or_else(|| JaasError::Syntax(format!("{short} needs a `{name}` option")))
    };
    Ok(SaslCredentials {
        username: get("username")?,
        password: get("password")?,
        ignored_options: entry
            .options
            .iter()
            .map(|(n, _)| n)
            .filter(|n| !["username", "password", "tokenauth"].contains(&n.as_str()))
            .cloned()
            .collect(),
    })
}

fn kerberos_instructions(entry: &JaasEntry, supported: bool) -> String {
    let shown = |name: &str, placeholder: &str| {
        entry
            .option(name)
            .map(|v| redact(name, v).to_string())
            .unwrap_or_else(|| placeholder.to_string())
    };
    let build = if supported {
        ""
    } else {
        " Note: this eosmirror build's librdkafka has no GSSAPI support (builtin feature \
         `sasl_gssapi` is missing: it was built without cyrus-sasl), so Kerberos needs an \
         eosmirror built with rdkafka's `gssapi` feature."
    };
    format!(
        "Kerberos logins (Krb5LoginModule) are not translated: librdkafka obtains tickets \
         with kinit instead of the JVM's login module.{build} Remove sasl.jaas.config and \
         write librdkafka's settings:\n  sasl.mechanism=GSSAPI\n  sasl.kerberos.principal={}\n  \
         sasl.kerberos.keytab={}\n(sasl.kerberos.service.name has the same name and meaning \
         in both clients)",
        shown("principal", "<principal>"),
        shown("keyTab", "<path to the keytab>"),
    )
}

fn oauth_instructions(entry: &JaasEntry, supported: bool) -> String {
    let client_id = entry
        .option("clientId")
        .map(|v| redact("clientId", v).to_string())
        .unwrap_or_else(|| "<client id>".into());
    let build = if supported {
        ""
    } else {
        " Note: this eosmirror build's librdkafka has no OIDC support (builtin feature `oidc` \
         is missing: it was built without libcurl), so OAUTHBEARER needs an eosmirror built \
         with rdkafka's `curl` feature."
    };
    let unsecured = if entry
        .options
        .iter()
        .any(|(n, _)| n.starts_with("unsecuredLogin"))
    {
        "\nFor the test-only unsecured JWT login, write instead:\n  \
         sasl.oauthbearer.config=principal=<sub claim>\n  \
         enable.sasl.oauthbearer.unsecure.jwt=true"
    } else {
        ""
    };
    format!(
        "OAUTHBEARER logins (OAuthBearerLoginModule) are not translated: the Java client \
         fetches tokens through callback handler classes that cannot run in eosmirror.{build} \
         Remove sasl.jaas.config and sasl.login.callback.handler.class and write librdkafka's \
         OIDC settings:\n  sasl.mechanism=OAUTHBEARER\n  sasl.oauthbearer.method=oidc\n  \
         sasl.oauthbearer.client.id={client_id}\n  \
         sasl.oauthbearer.client.secret=<the clientSecret of the JAAS line>\n  \
         sasl.oauthbearer.token.endpoint.url=<the token endpoint URL>\n  \
         sasl.oauthbearer.scope=<scope, if the JAAS line has one>\n  \
         sasl.oauthbearer.extensions=<name=value,... for each extension_<name> option>\
         {unsecured}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(text: &str) -> Result<SaslCredentials, JaasError> {
        credentials(&parse(text)?, "ssl,sasl_plain,sasl_scram,sasl_oauthbearer")
    }

    fn syntax_error(text: &str) -> String {
        match parse(text) {
            Err(JaasError::Syntax(msg)) => msg,
            other => panic!("expected a syntax error for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn plain_module_maps_to_username_and_password() {
        let got = creds(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr\"et";"#,
        )
        .unwrap();
        assert_eq!(got.username, "alice");
        assert_eq!(got.password, "s3cr\"et");
        assert!(got.ignored_options.is_empty());
    }

    #[test]
    fn scram_module_with_unquoted_values_comments_and_extra_options() {
        let got = creds(
            "org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n\
             /* block */ username=bob // line comment\n\
             password='p w' serviceName=\"kafka\";",
        )
        .unwrap();
        assert_eq!(
            (got.username.as_str(), got.password.as_str()),
            ("bob", "p w")
        );
        assert_eq!(got.ignored_options, ["serviceName"]);
    }

    #[test]
    fn quoted_escapes_and_lenient_numeric_values() {
        let entry = parse(r#"m required a="t\tn\n\101\\\q" b=123abc c=-x d="x" d="y";"#).unwrap();
        assert_eq!(entry.option("a"), Some("t\tn\nA\\q"));
        assert_eq!(entry.option("b"), Some("123abc"));
        assert_eq!(entry.option("c"), Some("-x"));
        assert_eq!(entry.option("d"), Some("y"));
    }

    #[test]
    fn syntax_errors() {
        assert!(syntax_error("").contains("no login module"));
        assert!(syntax_error("m").contains("no control flag"));
        assert!(syntax_error("m mandatory;").contains("control flag"));
        assert!(syntax_error("m required a=\"b\"").contains("not terminated by `;`"));
        assert!(syntax_error("m required a=\"b;").contains("not terminated by `;`"));
        assert!(syntax_error("m required a;").contains("after the control flag"));
        assert!(syntax_error("m required a=;").contains("option `a` has no value"));
        assert!(syntax_error("m required a=b; n required;").contains("2 login modules"));
        assert!(syntax_error("= required;").contains("login module class name"));
        let msg = syntax_error("hunter2-SECRET");
        assert!(
            msg.contains("not a login module class name") && !msg.contains("hunter2"),
            "{msg}"
        );
        assert!(syntax_error("m required a=b, c=d;").contains("after option `a`"));
        // A stray token (here half of an unquoted password) is never quoted.
        let msg = syntax_error("m required password=hunter2 SECRET;");
        assert!(
            msg.contains("after option `password`") && !msg.contains("SECRET"),
            "{msg}"
        );
    }

    #[test]
    fn missing_credentials_and_token_auth() {
        let err =
            creds("org.apache.kafka.common.security.plain.PlainLoginModule required username=u;")
                .unwrap_err();
        assert_eq!(
            err,
            JaasError::Syntax("PlainLoginModule needs a `password` option".into())
        );
        let err = creds(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=u password=p tokenauth=true;",
        )
        .unwrap_err();
        assert!(matches!(err, JaasError::Unsupported(m) if m.contains("tokenauth")));
    }

    #[test]
    fn kerberos_is_refused_with_librdkafka_settings() {
        let entry = parse(
            r#"com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="/etc/k/client.keytab" principal="client@EXAMPLE.COM";"#,
        )
        .unwrap();
        let JaasError::Unsupported(msg) = credentials(&entry, "ssl,sasl_plain").unwrap_err() else {
            panic!()
        };
        assert!(
            msg.contains("sasl.kerberos.principal=client@EXAMPLE.COM"),
            "{msg}"
        );
        assert!(
            msg.contains("sasl.kerberos.keytab=/etc/k/client.keytab"),
            "{msg}"
        );
        assert!(msg.contains("sasl.mechanism=GSSAPI"), "{msg}");
        assert!(msg.contains("no GSSAPI support"), "{msg}");
        let JaasError::Unsupported(msg) = credentials(&entry, "ssl,sasl_gssapi").unwrap_err()
        else {
            panic!()
        };
        assert!(!msg.contains("no GSSAPI support"), "{msg}");
    }

    #[test]
    fn oauthbearer_is_refused_with_oidc_settings_and_no_secret() {
        let entry = parse(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="mirror" clientSecret="hunter2-SECRET" scope="kafka";"#,
        )
        .unwrap();
        let JaasError::Unsupported(msg) = credentials(&entry, "ssl").unwrap_err() else {
            panic!()
        };
        assert!(msg.contains("sasl.oauthbearer.method=oidc"), "{msg}");
        assert!(msg.contains("sasl.oauthbearer.client.id=mirror"), "{msg}");
        assert!(msg.contains("no OIDC support"), "{msg}");
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(!msg.contains("unsecure.jwt"), "{msg}");

        let entry = parse(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";"#,
        )
        .unwrap();
        let JaasError::Unsupported(msg) = credentials(&entry, "ssl,oidc").unwrap_err() else {
            panic!()
        };
        assert!(
            msg.contains("enable.sasl.oauthbearer.unsecure.jwt=true"),
            "{msg}"
        );
        assert!(!msg.contains("no OIDC support"), "{msg}");
    }

    #[test]
    fn unknown_module_is_refused() {
        let entry = parse("com.example.MyLoginModule required;").unwrap();
        let JaasError::Unsupported(msg) = credentials(&entry, "").unwrap_err() else {
            panic!()
        };
        assert!(
            msg.contains("`com.example.MyLoginModule` is not known"),
            "{msg}"
        );
    }

    /// MSK's IAM module has no librdkafka setting to move to: the message
    /// names what the cluster can offer instead.
    #[test]
    fn msk_iam_is_refused_with_what_to_use_instead() {
        let entry = parse("software.amazon.msk.auth.iam.IAMLoginModule required awsRoleArn=\"x\";")
            .unwrap();
        let JaasError::Unsupported(msg) = credentials(&entry, "").unwrap_err() else {
            panic!()
        };
        assert!(msg.contains("AWS MSK IAM"), "{msg}");
        assert!(msg.contains("SASL/SCRAM"), "{msg}");
        assert!(!msg.contains("awsRoleArn"), "{msg}");
    }

    #[test]
    fn class_name_shape() {
        assert!(looks_like_class_name(PLAIN_MODULE));
        assert!(looks_like_class_name("com.example.My$Module"));
        assert!(!looks_like_class_name("Module"));
        assert!(!looks_like_class_name("hunter2-SECRET"));
        assert!(!looks_like_class_name("Hunter2.Secret"));
        assert!(!looks_like_class_name("a..B"));
    }

    #[test]
    fn debug_output_hides_values() {
        let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="hunter2-SECRET";"#;
        let entry = parse(text).unwrap();
        let c = credentials(&entry, "").unwrap();
        let dbg = format!("{entry:?} {c:?}");
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(dbg.contains("password"));
    }
}
