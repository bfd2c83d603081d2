//! Why a client configuration file cannot be used, in terms a user can act on.
//!
//! Every message names the file, the line and key, and what to change. No message
//! contains a secret: values appear only as [`SafeValue`], and free-text reasons are built
//! from key names, option names and librdkafka's scrubbed explanations.

use std::path::PathBuf;

use super::properties::PropertiesError;
use super::secrets::SafeValue;
use super::stores::StoreError;
use super::system_trust::SystemTrustError;

/// A client configuration file that eosmirror cannot turn into librdkafka settings.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not a readable properties file.
    #[error(transparent)]
    Properties(#[from] PropertiesError),

    /// librdkafka refused a setting: an unknown key or a bad value.
    #[error(
        "{}:{line}: `{key}` rejected by librdkafka: {reason}. Fix the value, or remove the \
         line if it is a Java client setting eosmirror does not know",
        file.display()
    )]
    Rejected {
        /// The properties file.
        file: PathBuf,
        /// Line of the key.
        line: usize,
        /// The key as written in the file.
        key: String,
        /// librdkafka's explanation (secrets scrubbed).
        reason: String,
    },

    /// The value contradicts what exactly-once replication needs.
    #[error(
        "{}:{line}: {key}={value} breaks exactly-once replication: {reason}. Remove the line; \
         eosmirror sets `{key}` itself",
        file.display()
    )]
    ExactlyOnce {
        /// The properties file.
        file: PathBuf,
        /// Line of the key.
        line: usize,
        /// The key.
        key: String,
        /// The offending value.
        value: SafeValue,
        /// What exactly-once requires, and why.
        reason: &'static str,
    },

    /// The value cannot be translated to librdkafka's form.
    #[error("{}:{line}: {key}={value}: {reason}", file.display())]
    InvalidValue {
        /// The properties file.
        file: PathBuf,
        /// Line of the key.
        line: usize,
        /// The key.
        key: String,
        /// The offending value.
        value: SafeValue,
        /// What is wrong and what to write instead.
        reason: String,
    },

    /// A Java feature with no librdkafka equivalent that eosmirror can set up for the user.
    #[error("{}:{line}: {key}: {reason}", file.display())]
    Unsupported {
        /// The properties file.
        file: PathBuf,
        /// Line of the key.
        line: usize,
        /// The key.
        key: String,
        /// Why, and which settings to use instead.
        reason: String,
    },

    /// `sasl.jaas.config` is not valid JAAS syntax. The value is never shown.
    #[error(
        "{}:{line}: sasl.jaas.config: {reason} (the value is not shown because it holds \
         credentials)",
        file.display()
    )]
    Jaas {
        /// The properties file.
        file: PathBuf,
        /// Line of `sasl.jaas.config`.
        line: usize,
        /// What is wrong, naming options but no values.
        reason: String,
    },

    /// A key or trust store that cannot be used as configured: a wrong password, a damaged
    /// file, content only a JVM can read. The problem names the setting to change.
    #[error("{}:{line}: {key}={}: {problem}", file.display(), path.display())]
    Store {
        /// The properties file.
        file: PathBuf,
        /// Line of `ssl.truststore.location` or `ssl.keystore.location`.
        line: usize,
        /// `ssl.truststore.location` or `ssl.keystore.location`.
        key: String,
        /// The store file.
        path: PathBuf,
        /// What is wrong and which setting to change (boxed: it is the largest variant).
        problem: Box<StoreError>,
    },

    /// A key or trust store file named in the configuration cannot be read.
    #[error(
        "{}:{line}: {key}={}: cannot read the file: {source}. Fix the path (relative paths \
         are resolved against eosmirror's working directory, as in Java) or the file's \
         permissions",
        file.display(),
        path.display()
    )]
    StoreUnreadable {
        /// The properties file.
        file: PathBuf,
        /// Line of the key.
        line: usize,
        /// `ssl.truststore.location` or `ssl.keystore.location`.
        key: String,
        /// The store file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },

    /// Two lines of the file set the same librdkafka setting.
    #[error(
        "{}: `{first_key}` (line {first_line}) and `{second_key}` (line {second_line}) both \
         set librdkafka's `{setting}`; keep only one of them",
        file.display()
    )]
    Conflict {
        /// The properties file.
        file: PathBuf,
        /// The librdkafka setting both lines produce.
        setting: String,
        /// The earlier key.
        first_key: String,
        /// Its line.
        first_line: usize,
        /// The later key.
        second_key: String,
        /// Its line.
        second_line: usize,
    },

    /// TLS without a trust store, and no system CA store to trust instead.
    #[error(
        "{}:{line}: security.protocol={protocol} and no ssl.truststore.location: eosmirror \
         then trusts the system's CA store, as Java does, but {problem}. Set \
         ssl.truststore.location (and ssl.truststore.password) to a trust store holding the \
         CA that signed the brokers' certificates, or set SSL_CERT_FILE to a PEM file of \
         trusted CA certificates, or install the system's CA certificates (the \
         ca-certificates package)",
        file.display()
    )]
    NoTrustStore {
        /// The properties file.
        file: PathBuf,
        /// Line of `security.protocol`.
        line: usize,
        /// `SSL` or `SASL_SSL`, as written.
        protocol: String,
        /// What the lookup found wrong.
        problem: SystemTrustError,
    },
}
