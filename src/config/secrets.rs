//! Which configuration values are secrets, and how to show values without leaking them.
//!
//! Client configuration files hold passwords, JAAS lines and private keys. Every `Debug`
//! and `Display` implementation in [`crate::config`] shows values only through the helpers
//! here, so a secret can never reach an error message, a log line or a panic message.

use std::fmt;

/// The text shown in place of a secret value.
pub const REDACTED: &str = "<redacted>";

/// Key fragments (lower case) that mark a value as secret wherever they appear in the key.
///
/// Broad on purpose: hiding a harmless value (say a token endpoint URL) costs a little
/// clarity, while showing a password costs a credential.
const SECRET_FRAGMENTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "jaas",
    "key.pem",
    "private.key",
    "sasl.oauthbearer.config",
];

/// Whether the value of `key` (a Java client key, a librdkafka key or a JAAS option name)
/// must be kept out of every message.
///
/// Why: values such as `sasl.jaas.config`, `ssl.truststore.password`, `sasl.password`,
/// `ssl.key.pem` or `sasl.oauthbearer.client.secret` are credentials. Matching is
/// case-insensitive (JAAS options are camel case: `clientSecret`) and covers any key
/// containing "password", "secret" or "token", plus inline private keys such as
/// `ssl.keystore.key`.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.ends_with(".key") || SECRET_FRAGMENTS.iter().any(|f| key.contains(f))
}

/// A borrowed value that displays as itself, or as [`REDACTED`] when its key is secret.
///
/// Why: the one way the configuration types format a value, so redaction cannot be
/// forgotten in a single `Debug` impl.
#[derive(Clone, Copy)]
pub struct Redacted<'a> {
    value: &'a str,
    secret: bool,
}

/// Pairs `value` with its `key` for display: secret keys show [`REDACTED`].
///
/// Why: call sites read as `redact(key, value)` and need no knowledge of which keys are
/// secret.
pub fn redact<'a>(key: &str, value: &'a str) -> Redacted<'a> {
    Redacted {
        value,
        secret: is_secret_key(key),
    }
}

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.secret {
            f.write_str(REDACTED)
        } else {
            f.write_str(self.value)
        }
    }
}

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.secret {
            f.write_str(REDACTED)
        } else {
            fmt::Debug::fmt(self.value, f)
        }
    }
}

/// An owned value that is safe to show: secret values are replaced at construction.
///
/// Why: errors outlive the configuration they describe, so they keep only this form; the
/// secret itself is never stored in an error.
#[derive(Clone, PartialEq, Eq)]
pub struct SafeValue(String);

impl SafeValue {
    /// Keeps `value` if `key` is not secret, [`REDACTED`] otherwise.
    pub fn new(key: &str, value: &str) -> Self {
        SafeValue(redact(key, value).to_string())
    }
}

impl fmt::Display for SafeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SafeValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Removes every occurrence of `secret` from `text`.
///
/// Why: librdkafka's own error strings quote the rejected value ("Invalid value for
/// configuration property ...: <value>"); when the key is secret that text must be
/// cleaned before it becomes part of an error.
pub fn scrub(text: &str, secret: &str) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret, REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_are_recognised() {
        for key in [
            "sasl.jaas.config",
            "ssl.truststore.password",
            "ssl.keystore.password",
            "ssl.key.password",
            "sasl.password",
            "ssl.key.pem",
            "ssl.keystore.key",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.assertion.private.key.pem",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "sasl.oauthbearer.config",
            "some.access.token",
            "clientSecret",
            "password",
            "listener.name.x.plain.sasl.jaas.config",
        ] {
            assert!(is_secret_key(key), "{key} should be secret");
        }
    }

    #[test]
    fn ordinary_keys_are_not_secret() {
        for key in [
            "bootstrap.servers",
            "sasl.username",
            "ssl.key.location",
            "ssl.keystore.location",
            "ssl.truststore.location",
            "ssl.certificate.pem",
            "ssl.ca.pem",
            "security.protocol",
            "username",
            "clientId",
            "keyTab",
            "key.serializer",
        ] {
            assert!(!is_secret_key(key), "{key} should not be secret");
        }
    }

    #[test]
    fn redact_hides_only_secret_values() {
        assert_eq!(redact("sasl.password", "hunter2").to_string(), REDACTED);
        assert_eq!(
            format!("{:?}", redact("sasl.password", "hunter2")),
            REDACTED
        );
        assert_eq!(redact("acks", "all").to_string(), "all");
        assert_eq!(format!("{:?}", redact("acks", "all")), "\"all\"");
    }

    #[test]
    fn safe_value_never_stores_the_secret() {
        let v = SafeValue::new("ssl.keystore.password", "hunter2");
        assert_eq!(v.to_string(), REDACTED);
        assert!(!format!("{v} {v:?}").contains("hunter2"));
        assert_eq!(SafeValue::new("acks", "1").to_string(), "1");
    }

    #[test]
    fn scrub_removes_all_occurrences() {
        assert_eq!(
            scrub("bad value hunter2 (hunter2)", "hunter2"),
            "bad value <redacted> (<redacted>)"
        );
        assert_eq!(scrub("unchanged", ""), "unchanged");
    }
}
