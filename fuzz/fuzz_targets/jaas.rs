//! `sasl.jaas.config` values: `eosmirror::config::jaas::{parse, credentials}` on
//! arbitrary text.
//!
//! Beyond "no panic":
//! - a JAAS line built from the input (split at NUL bytes into option values, quoted
//!   as Java's `StreamTokenizer` reads them) parses back to exactly those values;
//! - whatever login module it names, the password and client secret never appear in
//!   the credentials' `Debug` output or in the error text.
#![no_main]

use eosmirror::config::jaas::{credentials, parse, JaasError};
use libfuzzer_sys::fuzz_target;

const MODULES: &[&str] = &[
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
    "com.sun.security.auth.module.Krb5LoginModule",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    "com.example.OtherLoginModule",
];
const FEATURES: &[&str] = &["", "ssl,sasl_plain,sasl_scram,sasl_gssapi,oidc"];
/// Marks the secret values; no other part of the built line holds it.
const MARK: char = '\u{1F511}';

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(entry) = parse(&text) {
        for features in FEATURES {
            let _ = credentials(&entry, features);
        }
    }
    check_built_line(data.first().copied().unwrap_or(0), &text);
});

fn check_built_line(selector: u8, text: &str) {
    let module = MODULES[usize::from(selector) % MODULES.len()];
    let mut values = text.split('\0').map(|v| v.replace(MARK, ""));
    let mut next = || values.next().unwrap_or_default();
    let options = [
        ("username", next(), selector & 0x10 != 0),
        (
            "password",
            format!("{}{MARK}", next()),
            selector & 0x20 != 0,
        ),
        ("principal", next(), false),
        ("keyTab", next(), true),
        ("clientId", next(), false),
        ("clientSecret", format!("{MARK}{}", next()), true),
        ("serviceName", next(), selector & 0x40 != 0),
    ];
    let mut line = format!("{module} required");
    for (name, value, single_quotes) in &options {
        line.push_str(&format!(" {name}={}", quote(value, *single_quotes)));
    }
    line.push(';');

    let entry = parse(&line).unwrap_or_else(|e| panic!("{line:?}: {e:?}"));
    assert_eq!(entry.module(), module);
    for (name, value, _) in &options {
        assert_eq!(entry.option(name), Some(value.as_str()), "option {name}");
    }
    assert!(
        !format!("{entry:?}").contains(MARK),
        "a secret in Debug output"
    );
    for features in FEATURES {
        let shown = match credentials(&entry, features) {
            Ok(c) => format!("{c:?}"),
            Err(JaasError::Syntax(m) | JaasError::Unsupported(m)) => m,
        };
        assert!(
            !shown.contains(MARK),
            "a secret shown for {module}: {shown:?}"
        );
    }
}

/// A quoted JAAS value that Java's `StreamTokenizer` reads back as `value`: a quoted
/// string ends at its quote or a line break, so those and the backslash are escaped.
fn quote(value: &str, single: bool) -> String {
    let q = if single { '\'' } else { '"' };
    let mut out = String::from(q);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}
