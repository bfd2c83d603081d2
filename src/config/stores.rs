//! Java key stores and trust stores (`ssl.keystore.*`, `ssl.truststore.*`) versus what
//! librdkafka can load.
//!
//! librdkafka reads CA certificates only as PEM (`ssl.ca.location`), and client
//! certificates as PEM (`ssl.certificate.location` + `ssl.key.location`) or PKCS#12
//! (`ssl.keystore.location`). Java stores are usually JKS, sometimes PKCS#12 or PEM. The
//! store's format is taken from the file itself; `ssl.*store.type` only decides when the
//! content is not recognisable.
//!
//! Formats librdkafka cannot read are refused with the conversion commands to run. Doing
//! the conversion in memory instead is a change confined to [`trust_store_settings`] and
//! [`key_store_settings`].

use std::fmt;
use std::path::Path;

/// The format of a Java key or trust store file.
///
/// Why public: it is part of the "cannot read this store" errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFormat {
    /// Java KeyStore (magic `FE ED FE ED`), Java's default store type.
    Jks,
    /// Java Cryptography Extension KeyStore (magic `CE CE CE CE`).
    Jceks,
    /// PKCS#12 (DER, starts with an ASN.1 SEQUENCE byte `0x30`).
    Pkcs12,
    /// PEM text (`-----BEGIN ...`).
    Pem,
}

impl StoreFormat {
    /// Recognises the format from the file's first bytes.
    fn sniff(bytes: &[u8]) -> Option<StoreFormat> {
        match bytes {
            [0xFE, 0xED, 0xFE, 0xED, ..] => Some(StoreFormat::Jks),
            [0xCE, 0xCE, 0xCE, 0xCE, ..] => Some(StoreFormat::Jceks),
            [0x30, ..] => Some(StoreFormat::Pkcs12),
            _ if bytes.windows(11).any(|w| w == b"-----BEGIN ") => Some(StoreFormat::Pem),
            _ => None,
        }
    }

    /// The format named by a Java `ssl.keystore.type` / `ssl.truststore.type` value.
    fn from_java_type(name: &str) -> Option<StoreFormat> {
        match name.trim().to_ascii_uppercase().as_str() {
            "JKS" => Some(StoreFormat::Jks),
            "JCEKS" => Some(StoreFormat::Jceks),
            "PKCS12" | "PKCS#12" => Some(StoreFormat::Pkcs12),
            "PEM" => Some(StoreFormat::Pem),
            _ => None,
        }
    }
}

impl fmt::Display for StoreFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreFormat::Jks => "JKS",
            StoreFormat::Jceks => "JCEKS",
            StoreFormat::Pkcs12 => "PKCS12",
            StoreFormat::Pem => "PEM",
        })
    }
}

/// A store file that was read and recognised.
pub(crate) struct StoreFile {
    pub(crate) path: String,
    pub(crate) format: StoreFormat,
}

/// Why a store file could not be used at all.
#[derive(Debug)]
pub(crate) enum StoreReadError {
    Io(std::io::Error),
    /// Neither the content nor the configured type says what the file is.
    Unrecognised,
}

/// Reads the store at `path` and determines its format: from the content when
/// recognisable, else from the Java type setting (`declared_type`).
pub(crate) fn read_store(
    path: &str,
    declared_type: Option<&str>,
) -> Result<StoreFile, StoreReadError> {
    let bytes = std::fs::read(path).map_err(StoreReadError::Io)?;
    let format = StoreFormat::sniff(&bytes)
        .or_else(|| declared_type.and_then(StoreFormat::from_java_type))
        .ok_or(StoreReadError::Unrecognised)?;
    Ok(StoreFile {
        path: path.to_string(),
        format,
    })
}

/// librdkafka settings for a trust store, or the instructions to convert it.
///
/// Only PEM is usable as is (`ssl.ca.location`). JKS, JCEKS and PKCS#12 are refused with
/// the commands that turn them into PEM; converting them here in memory (to `ssl.ca.pem`)
/// would replace that branch.
pub(crate) fn trust_store_settings(
    store: &StoreFile,
    file: &Path,
) -> Result<Vec<(&'static str, String)>, String> {
    let src = shell_quote(&store.path);
    let pem = derived_path(&store.path, "pem");
    let commands = match store.format {
        StoreFormat::Pem => return Ok(vec![("ssl.ca.location", store.path.clone())]),
        StoreFormat::Pkcs12 => format!(
            "  openssl pkcs12 -in {src} -nokeys -out {}\n",
            shell_quote(&pem)
        ),
        StoreFormat::Jks | StoreFormat::Jceks => {
            let p12 = derived_path(&store.path, "p12");
            format!(
                "  keytool -importkeystore -srckeystore {src} -srcstoretype {} \
                 -destkeystore {p12q} -deststoretype PKCS12\n  \
                 openssl pkcs12 -in {p12q} -nokeys -out {pemq}\n",
                store.format,
                p12q = shell_quote(&p12),
                pemq = shell_quote(&pem),
            )
        }
    };
    Err(format!(
        "Convert it to PEM once (the tools ask for the trust store password; if OpenSSL 3 \
         reports an unsupported algorithm, add -legacy to the openssl command):\n{commands}\
         then in {} replace ssl.truststore.location, ssl.truststore.password and \
         ssl.truststore.type with the librdkafka setting\n  ssl.ca.location={pem}",
        file.display()
    ))
}

/// librdkafka settings for a client key store, or the instructions to convert it.
///
/// PEM maps to `ssl.certificate.location` + `ssl.key.location` (OpenSSL finds the
/// certificate chain and the key in the same file); PKCS#12 is read by librdkafka
/// directly (`ssl.keystore.location`). JKS and JCEKS are refused with the `keytool`
/// command that turns them into PKCS#12; converting them here in memory would replace
/// that branch.
pub(crate) fn key_store_settings(
    store: &StoreFile,
    file: &Path,
) -> Result<Vec<(&'static str, String)>, String> {
    match store.format {
        StoreFormat::Pem => Ok(vec![
            ("ssl.certificate.location", store.path.clone()),
            ("ssl.key.location", store.path.clone()),
        ]),
        StoreFormat::Pkcs12 => Ok(vec![("ssl.keystore.location", store.path.clone())]),
        StoreFormat::Jks | StoreFormat::Jceks => {
            let p12 = derived_path(&store.path, "p12");
            Err(format!(
                "librdkafka reads PKCS12 key stores, so convert it once (keytool asks for the \
                 source and destination passwords; give the key the same password as the \
                 store):\n  keytool -importkeystore -srckeystore {} -srcstoretype {} \
                 -destkeystore {} -deststoretype PKCS12\nthen in {} set\n  \
                 ssl.keystore.location={p12}\nset ssl.keystore.password to the new store's \
                 password and remove ssl.keystore.type",
                shell_quote(&store.path),
                store.format,
                shell_quote(&p12),
                file.display()
            ))
        }
    }
}

/// `path` with its extension replaced by `ext` (or `converted.<ext>` if it already had
/// that extension), as the suggested output file of a conversion.
fn derived_path(path: &str, ext: &str) -> String {
    let p = Path::new(path);
    let candidate = if p.extension().is_some_and(|e| e == ext) {
        p.with_extension(format!("converted.{ext}"))
    } else {
        p.with_extension(ext)
    };
    candidate.to_string_lossy().into_owned()
}

/// Quotes `s` for a POSIX shell when it holds anything but plain path characters, so the
/// suggested commands can be pasted as they are.
fn shell_quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+-,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(
            StoreFormat::sniff(&[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]),
            Some(StoreFormat::Jks)
        );
        assert_eq!(
            StoreFormat::sniff(&[0xCE, 0xCE, 0xCE, 0xCE, 0]),
            Some(StoreFormat::Jceks)
        );
        assert_eq!(
            StoreFormat::sniff(&[0x30, 0x82, 0x0A, 0x1B]),
            Some(StoreFormat::Pkcs12)
        );
        assert_eq!(
            StoreFormat::sniff(b"Bag Attributes\n-----BEGIN CERTIFICATE-----\n"),
            Some(StoreFormat::Pem)
        );
        assert_eq!(StoreFormat::sniff(b"hello"), None);
        assert_eq!(StoreFormat::sniff(b""), None);
    }

    #[test]
    fn java_type_names() {
        assert_eq!(StoreFormat::from_java_type("jks"), Some(StoreFormat::Jks));
        assert_eq!(
            StoreFormat::from_java_type(" PKCS12 "),
            Some(StoreFormat::Pkcs12)
        );
        assert_eq!(StoreFormat::from_java_type("PEM"), Some(StoreFormat::Pem));
        assert_eq!(
            StoreFormat::from_java_type("JCEKS"),
            Some(StoreFormat::Jceks)
        );
        assert_eq!(StoreFormat::from_java_type("BKS"), None);
    }

    #[test]
    fn content_wins_over_declared_type_and_type_is_the_fallback() {
        let dir = tempfile::tempdir().unwrap();
        let jks = dir.path().join("a.jks");
        std::fs::write(&jks, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let s = read_store(jks.to_str().unwrap(), Some("PEM")).unwrap();
        assert_eq!(s.format, StoreFormat::Jks);

        let odd = dir.path().join("odd.bin");
        std::fs::write(&odd, b"????").unwrap();
        let s = read_store(odd.to_str().unwrap(), Some("PKCS12"))
            .ok()
            .unwrap();
        assert_eq!(s.format, StoreFormat::Pkcs12);
        assert!(matches!(
            read_store(odd.to_str().unwrap(), None),
            Err(StoreReadError::Unrecognised)
        ));
        assert!(matches!(
            read_store(dir.path().join("nope").to_str().unwrap(), None),
            Err(StoreReadError::Io(_))
        ));
    }

    #[test]
    fn derived_paths() {
        assert_eq!(
            derived_path("/etc/kafka/trust.jks", "pem"),
            "/etc/kafka/trust.pem"
        );
        assert_eq!(
            derived_path("/etc/kafka/trust.p12", "p12"),
            "/etc/kafka/trust.converted.p12"
        );
        assert_eq!(derived_path("trust", "pem"), "trust.pem");
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("/etc/kafka/a.jks"), "/etc/kafka/a.jks");
        assert_eq!(shell_quote("/my dir/a.jks"), "'/my dir/a.jks'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn pem_stores_map_to_locations() {
        let file = Path::new("c.properties");
        let pem = StoreFile {
            path: "/x/ca.pem".into(),
            format: StoreFormat::Pem,
        };
        assert_eq!(
            trust_store_settings(&pem, file).unwrap(),
            vec![("ssl.ca.location", "/x/ca.pem".to_string())]
        );
        assert_eq!(
            key_store_settings(&pem, file).unwrap(),
            vec![
                ("ssl.certificate.location", "/x/ca.pem".to_string()),
                ("ssl.key.location", "/x/ca.pem".to_string())
            ]
        );
        let p12 = StoreFile {
            path: "/x/k.p12".into(),
            format: StoreFormat::Pkcs12,
        };
        assert_eq!(
            key_store_settings(&p12, file).unwrap(),
            vec![("ssl.keystore.location", "/x/k.p12".to_string())]
        );
    }

    #[test]
    fn conversion_commands() {
        let file = Path::new("/etc/mm/consumer.properties");
        let jks = StoreFile {
            path: "/x/trust.jks".into(),
            format: StoreFormat::Jks,
        };
        let fix = trust_store_settings(&jks, file).unwrap_err();
        assert!(
            fix.contains(
                "keytool -importkeystore -srckeystore /x/trust.jks -srcstoretype JKS \
             -destkeystore /x/trust.p12 -deststoretype PKCS12"
            ),
            "{fix}"
        );
        assert!(
            fix.contains("openssl pkcs12 -in /x/trust.p12 -nokeys -out /x/trust.pem"),
            "{fix}"
        );
        assert!(fix.contains("ssl.ca.location=/x/trust.pem"), "{fix}");
        assert!(fix.contains("/etc/mm/consumer.properties"), "{fix}");

        let p12 = StoreFile {
            path: "/x/trust.p12".into(),
            format: StoreFormat::Pkcs12,
        };
        let fix = trust_store_settings(&p12, file).unwrap_err();
        assert!(
            fix.contains("openssl pkcs12 -in /x/trust.p12 -nokeys -out /x/trust.pem"),
            "{fix}"
        );
        assert!(!fix.contains("keytool"), "{fix}");

        let jceks = StoreFile {
            path: "/x/key.jceks".into(),
            format: StoreFormat::Jceks,
        };
        let fix = key_store_settings(&jceks, file).unwrap_err();
        assert!(
            fix.contains(
                "keytool -importkeystore -srckeystore /x/key.jceks -srcstoretype JCEKS \
             -destkeystore /x/key.p12 -deststoretype PKCS12"
            ),
            "{fix}"
        );
        assert!(fix.contains("ssl.keystore.location=/x/key.p12"), "{fix}");
    }
}
