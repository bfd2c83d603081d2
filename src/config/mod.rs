//! Client configuration: Java client `.properties` files turned into librdkafka settings.
//!
//! Users come from Apache Kafka's MirrorMaker and pass the same `--consumer.config` and
//! `--producer.config` files. This module reads them exactly as Java does
//! ([`properties`]), translates Java client keys into librdkafka keys ([`translate`]),
//! and keeps every secret out of errors, `Debug` output and logs ([`secrets`]). A TLS
//! file without a trust store trusts the system's CA store, as Java does
//! ([`SystemStore`]).
//!
//! ```no_run
//! use std::path::Path;
//! use eosmirror::config::{load_client_config, ClientRole};
//!
//! let translated = load_client_config(Path::new("consumer.properties"), ClientRole::Consumer)?;
//! for dropped in &translated.dropped {
//!     eprintln!("consumer.properties {dropped}");
//! }
//! let mut client_config = translated.client_config();
//! client_config.set("isolation.level", "read_committed");
//! # Ok::<(), eosmirror::config::ConfigError>(())
//! ```

mod error;
// `jaas`, `jks` and `pem` are public only so that the fuzz targets in fuzz/ (a crate of
// their own) call the parsers eosmirror uses on user files, not copies of them.
pub mod jaas;
pub mod jks;
mod librdkafka;
pub mod pem;
pub mod properties;
mod role;
mod rules;
pub mod secrets;
mod stores;
mod system_trust;
pub mod translate;

use std::path::Path;

pub use error::ConfigError;
pub use properties::{parse, DuplicateKey, Properties, PropertiesError, Property};
pub use role::ClientRole;
pub use secrets::{is_secret_key, redact, Redacted, SafeValue};
pub use stores::{StoreFormat, StoreProblem};
pub use system_trust::{StoreOrigin, SystemStore, SystemTrustProblem};
pub use translate::{translate, DroppedKey, Translated};

/// Reads the Java client properties file at `path` and translates it for a client of kind
/// `role`.
///
/// Why: the one call behind `--consumer.config` / `--producer.config`; all errors name
/// the file.
pub fn load_client_config(path: &Path, role: ClientRole) -> Result<Translated, ConfigError> {
    let props = Properties::load(path)?;
    translate(&props, role, path)
}

#[cfg(test)]
mod tests;
