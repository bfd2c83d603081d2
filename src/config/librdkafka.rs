//! Asking librdkafka itself whether a setting is valid, and what this build supports.
//!
//! librdkafka's property table is the authority on key names, value ranges and enums,
//! and it knows which features were compiled in; eosmirror does not copy that table.

use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;

/// Why librdkafka refused one setting.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// librdkafka has no property of that name.
    UnknownKey,
    /// librdkafka's explanation, which may quote the value (callers scrub secrets).
    Invalid(String),
}

/// Sets `key=value` on a fresh librdkafka configuration object, the way a client would,
/// and reports librdkafka's verdict.
///
/// Each setting is checked on its own so that the verdict names exactly one key.
pub(crate) fn check(key: &str, value: &str) -> Result<(), Rejection> {
    let mut config = ClientConfig::new();
    config.set(key, value);
    match config.create_native_config() {
        Ok(_) => Ok(()),
        Err(KafkaError::ClientConfig(RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN, ..)) => {
            Err(Rejection::UnknownKey)
        }
        Err(KafkaError::ClientConfig(_, description, ..)) => Err(Rejection::Invalid(description)),
        Err(KafkaError::Nul(_)) => Err(Rejection::Invalid(
            "contains a NUL character (\\u0000), which librdkafka cannot take".into(),
        )),
        Err(_) => Err(Rejection::Invalid("librdkafka refused the setting".into())),
    }
}

/// librdkafka's `builtin.features` (comma separated, e.g. `gzip,snappy,ssl,sasl,...`),
/// or an empty string if it cannot be read.
///
/// Why: the advice for Kerberos and OAUTHBEARER depends on whether this build has
/// `sasl_gssapi` / `oidc`.
pub(crate) fn builtin_features() -> String {
    ClientConfig::new()
        .create_native_config()
        .and_then(|native| native.get("builtin.features"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_known_keys_and_aliases() {
        assert_eq!(check("bootstrap.servers", "a:9092,b:9092"), Ok(()));
        assert_eq!(check("acks", "all"), Ok(()));
        assert_eq!(check("linger.ms", "5"), Ok(()));
        assert_eq!(check("security.protocol", "SASL_SSL"), Ok(()));
        assert_eq!(check("compression.type", "zstd"), Ok(()));
        assert_eq!(check("max.partition.fetch.bytes", "1048576"), Ok(()));
    }

    #[test]
    fn rejects_unknown_keys_and_bad_values() {
        assert_eq!(check("no.such.key", "1"), Err(Rejection::UnknownKey));
        let Err(Rejection::Invalid(why)) = check("linger.ms", "soon") else {
            panic!("linger.ms=soon accepted")
        };
        // librdkafka names the property an alias resolves to (queue.buffering.max.ms).
        assert!(why.contains("Invalid value"), "{why}");
        assert!(matches!(
            check("compression.type", "brotli"),
            Err(Rejection::Invalid(_))
        ));
        assert!(
            matches!(check("client.id", "a\0b"), Err(Rejection::Invalid(m)) if m.contains("NUL"))
        );
    }

    #[test]
    fn reports_builtin_features() {
        let features = builtin_features();
        assert!(features.split(',').any(|f| f == "ssl"), "{features}");
        assert!(features.split(',').any(|f| f == "sasl_scram"), "{features}");
    }
}
