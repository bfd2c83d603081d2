//! Client configuration: Java client `.properties` files turned into librdkafka settings.
//!
//! Users come from Apache Kafka's MirrorMaker and pass the same `--consumer.config` and
//! `--producer.config` files. This module reads them exactly as Java does
//! ([`properties`]), translates Java client keys into librdkafka keys (`translate`),
//! and keeps every secret out of errors, `Debug` output and logs (`secrets`). A TLS
//! file without a trust store trusts the system's CA store, as Java does
//! (`system_trust`).
//!
//! The one call behind both flags is `load_client_config`; what it
//! drops is reported by the caller, naming the file.

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
mod secrets;
mod stores;
mod system_trust;
mod translate;

use std::path::Path;

pub(crate) use error::ConfigError;
pub(crate) use properties::Properties;
pub(crate) use role::ClientRole;
pub(crate) use translate::{translate, Translated};

/// Reads the Java client properties file at `path` and translates it for a client of kind
/// `role`.
///
/// Why: the one call behind `--consumer.config` / `--producer.config`; all errors name
/// the file.
pub(crate) fn load_client_config(path: &Path, role: ClientRole) -> Result<Translated, ConfigError> {
    let props = Properties::load(path)?;
    translate(&props, role, path)
}

#[cfg(test)]
mod tests;
