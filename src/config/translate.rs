//! Java client settings → librdkafka settings.
//!
//! Walks a parsed properties file in order and applies the rule table of
//! [`rules`](super::rules): keys pass through, are renamed or converted, are dropped with
//! a reason, are refused because eosmirror owns them, or are handed to the dedicated
//! translations of JAAS lines, key/trust stores and compression levels. A TLS client
//! without any trust store gets the system's CA store ([`system_trust`](super::system_trust)).
//! Finally every resulting setting is checked by librdkafka itself.

use std::fmt;
use std::path::{Path, PathBuf};

use rdkafka::config::ClientConfig;

use super::error::ConfigError;
use super::jaas::{self, JaasError};
use super::librdkafka::{self, Rejection};
use super::properties::{DuplicateKey, Properties, Property};
use super::role::ClientRole;
use super::rules::{self, Action, Handler};
use super::secrets::{is_secret_key, redact, scrub, SafeValue};
use super::stores::{self, StoreError, StoreFormat, StoreReadError};
use super::system_trust::{self, Lookup, SystemStore};

/// A key from the file that was ignored, with the reason, to be logged as a warning.
///
/// Holds no value, so it is safe to log as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedKey {
    /// The key as written in the file.
    pub key: String,
    /// Its line.
    pub line: usize,
    /// Why it is ignored.
    pub reason: String,
}

impl fmt::Display for DroppedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: `{}` ignored: {}",
            self.line, self.key, self.reason
        )
    }
}

/// The result of translating one file: librdkafka settings plus what to warn about.
///
/// `Debug` redacts secret values; `settings` itself holds them in clear, for the client.
#[derive(Clone, PartialEq, Eq)]
pub struct Translated {
    /// librdkafka key/value pairs, in file order, validated by librdkafka. Settings that
    /// eosmirror owns (transactions, isolation, offsets) are not among them: eosmirror
    /// adds those itself.
    pub settings: Vec<(String, String)>,
    /// Keys that were ignored, each with its reason.
    pub dropped: Vec<DroppedKey>,
    /// Keys set more than once in the file (the last value won).
    pub duplicates: Vec<DuplicateKey>,
    /// The system CA store put into `ssl.ca.location` because the file uses TLS and
    /// names no trust store; to be logged (it is a path, never a secret).
    pub system_trust: Option<SystemStore>,
}

impl Translated {
    /// A librdkafka client configuration holding these settings, to which eosmirror adds
    /// the settings it owns.
    pub fn client_config(&self) -> ClientConfig {
        self.settings.iter().cloned().collect()
    }
}

impl fmt::Debug for Translated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings: Vec<_> = self
            .settings
            .iter()
            .map(|(k, v)| (k.as_str(), redact(k, v)))
            .collect();
        f.debug_struct("Translated")
            .field("settings", &settings)
            .field("dropped", &self.dropped)
            .field("duplicates", &self.duplicates)
            .field("system_trust", &self.system_trust)
            .finish()
    }
}

/// Translates the Java client settings in `props` (read from `source_file`) into
/// librdkafka settings for a client of kind `role`.
///
/// Why: MirrorMaker users bring Java `.properties` files; this is the one place that
/// decides what each line means to librdkafka, and errors name `source_file`, the line
/// and the fix.
pub fn translate(
    props: &Properties,
    role: ClientRole,
    source_file: &Path,
) -> Result<Translated, ConfigError> {
    translate_with(props, role, source_file, &Lookup::from_process())
}

/// [`translate`], looking for the system CA store where `trust` says (tests inject
/// their own environment and paths).
pub(crate) fn translate_with(
    props: &Properties,
    role: ClientRole,
    source_file: &Path,
    trust: &Lookup<'_>,
) -> Result<Translated, ConfigError> {
    let mut t = Translator {
        props,
        role,
        file: source_file,
        settings: Vec::new(),
        dropped: Vec::new(),
        handled: Vec::new(),
    };
    for property in props.iter() {
        t.entry(property)?;
    }
    let system_trust = t.system_trust(trust)?;
    t.validate()?;
    Ok(Translated {
        settings: t.settings.into_iter().map(|s| (s.key, s.value)).collect(),
        dropped: t.dropped,
        duplicates: props.duplicates().to_vec(),
        system_trust,
    })
}

/// A librdkafka setting and the file line it came from.
struct Setting {
    key: String,
    value: String,
    source_key: String,
    line: usize,
}

struct Translator<'a> {
    props: &'a Properties,
    role: ClientRole,
    file: &'a Path,
    settings: Vec<Setting>,
    dropped: Vec<DroppedKey>,
    handled: Vec<Handler>,
}

/// The value as the Java client sees it: `ConfigDef` trims every value, passwords
/// too (a store password written with a trailing space works in Java).
fn java_value(p: &Property) -> &str {
    p.value().trim_matches(|c: char| c <= ' ')
}

/// Protocols without TLS.
const PLAINTEXT: &[&str] = &["PLAINTEXT", "SASL_PLAINTEXT"];
/// Protocols without SASL.
const WITHOUT_SASL: &[&str] = &["PLAINTEXT", "SSL"];

impl<'a> Translator<'a> {
    fn file(&self) -> PathBuf {
        self.file.to_path_buf()
    }

    fn entry(&mut self, p: &Property) -> Result<(), ConfigError> {
        let Some(rule) = rules::lookup(p.key()) else {
            return self.set(p.key(), java_value(p).to_string(), p);
        };
        if !rule.roles.contains(&self.role) {
            let owners: Vec<String> = rule.roles.iter().map(ToString::to_string).collect();
            let role = self.role;
            self.drop(
                p,
                format!(
                    "a {} setting, which a {role} does not use (the Java {role} ignores it too)",
                    owners.join("/")
                ),
            );
            return Ok(());
        }
        if p.key() == "metadata.broker.list" && self.props.property("bootstrap.servers").is_some() {
            // The Java client knows only bootstrap.servers: an old broker
            // list left beside it is ignored, whatever it says.
            self.drop(
                p,
                "the old Scala clients' name for the brokers; bootstrap.servers in this file is used, as by the Java client".into(),
            );
            return Ok(());
        }
        match &rule.action {
            Action::Rename { to, convert } => {
                let value = java_value(p);
                match convert {
                    None => self.set(to, value.to_string(), p),
                    Some(convert) => match convert(value) {
                        Ok(Some(converted)) => self.set(to, converted, p),
                        Ok(None) => {
                            self.drop(p, "empty value; librdkafka's default applies".into());
                            Ok(())
                        }
                        Err(reason) => Err(self.invalid(p, reason)),
                    },
                }
            }
            Action::Drop(reason) => {
                self.drop(p, (*reason).to_string());
                Ok(())
            }
            Action::Owned { allowed, why } => {
                let value = java_value(p);
                if allowed.is_empty() || allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                    self.drop(p, format!("eosmirror sets `{}` itself: {why}", p.key()));
                    Ok(())
                } else {
                    Err(ConfigError::ExactlyOnce {
                        file: self.file(),
                        line: p.line(),
                        key: p.key().to_string(),
                        value: SafeValue::new(p.key(), value),
                        reason: why,
                    })
                }
            }
            Action::Unsupported(reason) => Err(ConfigError::Unsupported {
                file: self.file(),
                line: p.line(),
                key: p.key().to_string(),
                reason: (*reason).to_string(),
            }),
            Action::Special(handler) => {
                if self.handled.contains(handler) {
                    return Ok(());
                }
                self.handled.push(*handler);
                match handler {
                    Handler::TrustStore | Handler::KeyStore
                        if self.protocol_among(PLAINTEXT).is_some() =>
                    {
                        // The Java client loads no store without TLS: a
                        // leftover path must not refuse a working file.
                        let protocol = self.protocol_among(PLAINTEXT).unwrap_or_default();
                        for q in self.group(*handler) {
                            self.drop(
                                q,
                                format!("a TLS setting, unused with security.protocol={protocol} (the Java client does not load it either)"),
                            );
                        }
                        Ok(())
                    }
                    Handler::Jaas if self.protocol_among(WITHOUT_SASL).is_some() => {
                        // The Java client reads no JAAS entry without SASL: a
                        // leftover login module must not refuse a working file.
                        let protocol = self.protocol_among(WITHOUT_SASL).unwrap_or_default();
                        self.drop(
                            p,
                            format!("unused with security.protocol={protocol} (the Java client does not use it either); if the cluster needs SASL, set security.protocol=SASL_SSL or SASL_PLAINTEXT"),
                        );
                        Ok(())
                    }
                    Handler::Jaas => self.jaas(p),
                    Handler::TrustStore => self.trust_store(),
                    Handler::KeyStore => self.key_store(),
                    Handler::CompressionLevel => self.compression_levels(),
                }
            }
        }
    }

    /// Adds a librdkafka setting; two file lines producing the same setting conflict.
    fn set(&mut self, key: &str, value: String, from: &Property) -> Result<(), ConfigError> {
        let same = |other: &str| librdkafka_name(other) == librdkafka_name(key);
        if let Some(earlier) = self.settings.iter().find(|s| same(&s.key)) {
            // One value under two names (`sasl.mechanism` beside
            // librdkafka's `sasl.mechanisms`) leaves nothing to choose.
            if earlier.key != key && earlier.value == value {
                return Ok(());
            }
            return Err(ConfigError::Conflict {
                file: self.file(),
                setting: key.to_string(),
                first_key: earlier.source_key.clone(),
                first_line: earlier.line,
                second_key: from.key().to_string(),
                second_line: from.line(),
            });
        }
        self.settings.push(Setting {
            key: key.to_string(),
            value,
            source_key: from.key().to_string(),
            line: from.line(),
        });
        Ok(())
    }

    fn drop(&mut self, p: &Property, reason: String) {
        self.dropped.push(DroppedKey {
            key: p.key().to_string(),
            line: p.line(),
            reason,
        });
    }

    fn invalid(&self, p: &Property, reason: String) -> ConfigError {
        ConfigError::InvalidValue {
            file: self.file(),
            line: p.line(),
            key: p.key().to_string(),
            value: SafeValue::new(p.key(), java_value(p)),
            reason,
        }
    }

    /// The handler's keys that the file sets, in rule-table order.
    fn group(&self, handler: Handler) -> Vec<&'a Property> {
        rules::handler_keys(handler)
            .filter_map(|k| self.props.property(k))
            .collect()
    }

    fn jaas(&mut self, p: &Property) -> Result<(), ConfigError> {
        let problem = |t: &Self, problem| match problem {
            JaasError::Syntax(reason) => ConfigError::Jaas {
                file: t.file(),
                line: p.line(),
                reason,
            },
            JaasError::Unsupported(reason) => ConfigError::Unsupported {
                file: t.file(),
                line: p.line(),
                key: p.key().to_string(),
                reason,
            },
        };
        let entry = jaas::parse(java_value(p)).map_err(|e| problem(self, e))?;
        let credentials = jaas::credentials(&entry, &librdkafka::builtin_features())
            .map_err(|e| problem(self, e))?;
        self.set("sasl.username", credentials.username, p)?;
        self.set("sasl.password", credentials.password, p)?;
        for option in credentials.ignored_options {
            self.drop(
                p,
                format!("JAAS option `{option}` has no librdkafka counterpart and is ignored"),
            );
        }
        Ok(())
    }

    /// Reads the store named by `location`, mapping failures to errors naming the line.
    fn read_store(
        &self,
        location: &Property,
        declared_type: Option<&Property>,
    ) -> Result<stores::StoreFile, ConfigError> {
        let path = java_value(location);
        stores::read_store(path, declared_type.map(java_value)).map_err(|e| match e {
            StoreReadError::Io(source) => ConfigError::StoreUnreadable {
                file: self.file(),
                line: location.line(),
                key: location.key().to_string(),
                path: PathBuf::from(path),
                source,
            },
            StoreReadError::Unrecognised => self.invalid(
                location,
                "the file is neither a JKS, JCEKS, PKCS12 nor a PEM store; point the key at \
                 the right file"
                    .into(),
            ),
        })
    }

    /// Drops `*.type` / `*.password` keys of a store whose location is not set, except a
    /// `PEM` type that accompanies inline PEM text (`inline_keys`), which Java requires.
    fn orphan_store_keys(
        &mut self,
        location_key: &str,
        inline_keys: &[&str],
        others: Vec<&Property>,
    ) {
        let has_inline = inline_keys.iter().any(|k| self.props.get(k).is_some());
        for p in others {
            let pem_type = p.key().ends_with(".type") && java_value(p).eq_ignore_ascii_case("PEM");
            if !(has_inline && pem_type) {
                self.drop(p, format!("has no effect without {location_key}"));
            }
        }
    }

    /// The error for a store that was read but cannot be used.
    fn store_error(
        &self,
        location: &Property,
        store: &stores::StoreFile,
        problem: StoreError,
    ) -> ConfigError {
        ConfigError::Store {
            file: self.file(),
            line: location.line(),
            key: location.key().to_string(),
            path: PathBuf::from(&store.path),
            problem: Box::new(problem),
        }
    }

    /// `ssl.truststore.*`: a PEM file is passed by path; JKS and PKCS12 stores are read
    /// with `ssl.truststore.password` and their certificates handed over as PEM text.
    fn trust_store(&mut self) -> Result<(), ConfigError> {
        let props = self.props;
        let location = props.property("ssl.truststore.location");
        let password = props.property("ssl.truststore.password");
        let declared = props.property("ssl.truststore.type");
        let Some(location) = location else {
            let others = [declared, password].into_iter().flatten().collect();
            self.orphan_store_keys(
                "ssl.truststore.location",
                &["ssl.truststore.certificates"],
                others,
            );
            return Ok(());
        };
        let store = self.read_store(location, declared)?;
        let settings = stores::trust_store_settings(&store, password.map(java_value))
            .map_err(|problem| self.store_error(location, &store, problem))?;
        for (key, value) in settings {
            self.set(key, value, location)?;
        }
        if let Some(password) = password.filter(|_| store.format == StoreFormat::Pem) {
            self.drop(password, "a PEM trust store has no password".into());
        }
        Ok(())
    }

    /// `ssl.keystore.*` and `ssl.key.password`: a PEM file is passed by path (its key
    /// decrypted by librdkafka with `ssl.key.password`); JKS and PKCS12 stores are read
    /// and decrypted here and handed over as PEM text.
    fn key_store(&mut self) -> Result<(), ConfigError> {
        let props = self.props;
        let location = props.property("ssl.keystore.location");
        let password = props.property("ssl.keystore.password");
        let declared = props.property("ssl.keystore.type");
        let key_password = props.property("ssl.key.password");
        let Some(location) = location else {
            let others = [declared, password].into_iter().flatten().collect();
            self.orphan_store_keys(
                "ssl.keystore.location",
                &["ssl.keystore.key", "ssl.keystore.certificate.chain"],
                others,
            );
            if let Some(key_password) = key_password {
                if props.get("ssl.keystore.key").is_some() {
                    // Decrypts the inline PEM key (ssl.key.pem), as in Java.
                    let value = java_value(key_password).to_string();
                    self.set("ssl.key.password", value, key_password)?;
                } else {
                    self.drop(
                        key_password,
                        "has no effect without ssl.keystore.location or ssl.keystore.key".into(),
                    );
                }
            }
            return Ok(());
        };
        let store = self.read_store(location, declared)?;
        let settings = stores::key_store_settings(
            &store,
            password.map(java_value),
            key_password.map(java_value),
        )
        .map_err(|problem| self.store_error(location, &store, problem))?;
        for (key, value) in settings {
            self.set(key, value, location)?;
        }
        if store.format == StoreFormat::Pem {
            if let Some(password) = password {
                self.drop(
                    password,
                    "a PEM key store has no store password (the private key's password is \
                     ssl.key.password)"
                        .into(),
                );
            }
            if let Some(key_password) = key_password {
                let value = java_value(key_password).to_string();
                self.set("ssl.key.password", value, key_password)?;
            }
        }
        Ok(())
    }

    /// The file's `security.protocol` when it is one of `protocols`: under
    /// a plaintext one (`PLAINTEXT`, `SASL_PLAINTEXT`) no TLS store is
    /// loaded, under one without SASL (`PLAINTEXT`, `SSL`) no JAAS entry is
    /// read.
    fn protocol_among(&self, protocols: &[&str]) -> Option<&'a str> {
        self.props
            .property("security.protocol")
            .map(java_value)
            .filter(|v| protocols.iter().any(|t| v.eq_ignore_ascii_case(t)))
    }

    /// The value of a librdkafka setting produced so far.
    fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|s| s.key == key)
            .map(|s| s.value.as_str())
    }

    /// TLS (`SSL`, `SASL_SSL`) with no trust store at all (no `ssl.truststore.*`, no
    /// librdkafka `ssl.ca.location`/`ssl.ca.pem`): trusts the system's CA store, as the
    /// JVM trusts its own, by setting `ssl.ca.location` to it. Other files are left
    /// alone, and so is one that turns certificate verification off.
    fn system_trust(&mut self, lookup: &Lookup<'_>) -> Result<Option<SystemStore>, ConfigError> {
        let Some(protocol) = self.props.property("security.protocol") else {
            return Ok(None);
        };
        let tls = ["SSL", "SASL_SSL"]
            .iter()
            .any(|p| java_value(protocol).eq_ignore_ascii_case(p));
        let has_ca = ["ssl.ca.location", "ssl.ca.pem"]
            .iter()
            .any(|k| self.setting(k).is_some());
        let unverified = self
            .setting("enable.ssl.certificate.verification")
            .is_some_and(|v| {
                ["false", "f", "0"]
                    .iter()
                    .any(|f| v.eq_ignore_ascii_case(f))
            });
        if !tls || has_ca || unverified {
            return Ok(None);
        }
        let store = system_trust::find(lookup).map_err(|problem| ConfigError::NoTrustStore {
            file: self.file(),
            line: protocol.line(),
            protocol: java_value(protocol).to_string(),
            problem,
        })?;
        self.set(
            "ssl.ca.location",
            store.path.to_string_lossy().into_owned(),
            protocol,
        )?;
        Ok(Some(store))
    }

    fn compression_levels(&mut self) -> Result<(), ConfigError> {
        let codec = self
            .props
            .property("compression.type")
            .map(|p| java_value(p).to_ascii_lowercase());
        for p in self.group(Handler::CompressionLevel) {
            let wanted = p.key().split('.').nth(1).unwrap_or_default();
            if codec.as_deref() == Some(wanted) {
                self.set("compression.level", java_value(p).to_string(), p)?;
            } else {
                self.drop(p, format!("applies only with compression.type={wanted}"));
            }
        }
        Ok(())
    }

    /// Lets librdkafka check every setting, naming the file line of the first it refuses.
    fn validate(&self) -> Result<(), ConfigError> {
        for s in &self.settings {
            let Err(rejection) = librdkafka::check(&s.key, &s.value) else {
                continue;
            };
            let renamed = if s.key == s.source_key {
                String::new()
            } else {
                format!(" (`{}` becomes librdkafka's `{}`)", s.source_key, s.key)
            };
            let reason = match rejection {
                Rejection::UnknownKey => format!(
                    "no such librdkafka setting{renamed}, and no Java client setting that \
                     eosmirror translates; check the spelling"
                ),
                Rejection::Invalid(why) if is_secret_key(&s.key) => {
                    format!("{}{renamed}", scrub(&why, &s.value))
                }
                Rejection::Invalid(why) => format!("{why}{renamed}"),
            };
            return Err(ConfigError::Rejected {
                file: self.file(),
                line: s.line,
                key: s.source_key.clone(),
                reason,
            });
        }
        Ok(())
    }
}

/// librdkafka's own name of a setting it also takes under another (an
/// alias): two lines setting one property under both names would leave
/// the winner to the order rdkafka hands them over in, which its hash map
/// makes random.
fn librdkafka_name(key: &str) -> &str {
    match key {
        "bootstrap.servers" => "metadata.broker.list",
        "sasl.mechanism" => "sasl.mechanisms",
        "max.in.flight" => "max.in.flight.requests.per.connection",
        "linger.ms" => "queue.buffering.max.ms",
        "retries" => "message.send.max.retries",
        "compression.type" => "compression.codec",
        "acks" => "request.required.acks",
        "delivery.timeout.ms" => "message.timeout.ms",
        "max.partition.fetch.bytes" => "fetch.message.max.bytes",
        other => other,
    }
}
