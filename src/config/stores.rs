//! Java key stores and trust stores (`ssl.keystore.*`, `ssl.truststore.*`, `ssl.key.password`)
//! turned into what librdkafka can load.
//!
//! librdkafka (OpenSSL) reads PEM; Java clients use JKS or PKCS#12 files with passwords.
//! eosmirror reads those stores itself, checks their passwords as Java does, and hands
//! librdkafka the certificates and the decrypted key as PEM text in memory
//! (`ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`): nothing is written to disk, so
//! nothing is left behind. PEM files are passed by path. The store's format is taken
//! from the file itself; `ssl.*store.type` only decides when the content is not
//! recognisable (Java 9+ reads JKS and PKCS#12 under either type, too).
//!
//! Every failure is a [`StoreError`] naming the setting to change; none quotes a
//! password or key material.

use std::fmt;

use openssl::pkcs12::Pkcs12;
use openssl::pkey::PKey;
use openssl::x509::X509;

use super::jks::{self, Entry, JksError, KeyError};

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
    bytes: Vec<u8>,
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
        bytes,
    })
}

/// Why a key or trust store cannot be used, and which setting to change.
///
/// Why a type: the messages are the user's only clue when TLS setup fails; each names
/// the Java setting to fix and never a password or key material.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store's integrity check failed with the configured password.
    #[error(
        "the {format} store's integrity check failed: {setting} is not this store's password \
         (or the file is damaged); set {setting} to the password the store was created with"
    )]
    WrongStorePassword {
        /// `ssl.truststore.password` or `ssl.keystore.password`.
        setting: &'static str,
        /// The store's format.
        format: StoreFormat,
    },
    /// The store is encrypted and no password is configured.
    #[error("the {format} store is password protected; add {setting}=<the store's password>")]
    PasswordNeeded {
        /// `ssl.truststore.password` or `ssl.keystore.password`.
        setting: &'static str,
        /// The store's format.
        format: StoreFormat,
    },
    /// The private key's own password check failed.
    #[error(
        "the private key `{alias}` cannot be decrypted: {setting} is not the key's password; \
         set ssl.key.password to the key's password (without it, Java and eosmirror use \
         ssl.keystore.password)"
    )]
    WrongKeyPassword {
        /// The key's alias in the store.
        alias: String,
        /// The setting whose value was tried.
        setting: &'static str,
    },
    /// The file is not a valid store of its format.
    #[error("not a valid {format} store ({detail}); point the setting at the right file")]
    Damaged {
        /// The store's format.
        format: StoreFormat,
        /// Where the structure breaks (never content).
        detail: String,
    },
    /// A trust store without any certificate.
    #[error(
        "the trust store holds no certificate; it must hold the certificate of the CA that \
         signed the brokers' certificates"
    )]
    NoCertificates,
    /// A key store without a private key.
    #[error(
        "the key store holds no private key; for client certificates (mTLS) it must hold the \
         client's private key with its certificate"
    )]
    NoPrivateKey,
    /// A key store with more than one private key: Java's key manager picks one per
    /// handshake by the server's accepted issuers, which librdkafka cannot do.
    #[error(
        "the key store holds {} private keys ({}); librdkafka takes exactly one, so copy the \
         one to use into a store of its own: keytool -importkeystore -srckeystore {src} \
         -srcalias {first} -destkeystore {dest} -deststoretype PKCS12 and set \
         ssl.keystore.location={dest}",
        aliases.len(),
        aliases.join(", "),
        first = shell_quote(&aliases[0]),
        src = shell_quote(path),
        dest = shell_quote(&derived_path(path, "p12"))
    )]
    SeveralKeys {
        /// The store file.
        path: String,
        /// Aliases of the private key entries.
        aliases: Vec<String>,
    },
    /// Content eosmirror cannot decode, with the command that converts it.
    #[error("{detail}; convert the store once with: {command}")]
    NeedsConversion {
        /// What cannot be read.
        detail: String,
        /// A copy-pasteable command, followed by the setting to change.
        command: String,
    },
}

/// Which setting a store belongs to: the names used in messages.
#[derive(Clone, Copy)]
enum Kind {
    Trust,
    Key,
}

impl Kind {
    fn password_setting(self) -> &'static str {
        match self {
            Kind::Trust => "ssl.truststore.password",
            Kind::Key => "ssl.keystore.password",
        }
    }
    fn location_setting(self) -> &'static str {
        match self {
            Kind::Trust => "ssl.truststore.location",
            Kind::Key => "ssl.keystore.location",
        }
    }
}

/// What a store holds, decoded: certificates as PEM, the private key (if any) as
/// unencrypted PKCS#8 PEM.
struct Decoded {
    /// Certificates: for a key entry its chain (leaf first), then trusted certificates.
    certs: Vec<X509>,
    /// The private key and its chain, from the key entry.
    key: Option<(PKey<openssl::pkey::Private>, Vec<X509>)>,
}

/// librdkafka settings for a trust store: its path for PEM, else the certificates as PEM
/// text (`ssl.ca.pem`).
///
/// As Java's trust manager does, a trust store's trusted certificate entries and the
/// first certificate of each key entry are trusted.
pub(crate) fn trust_store_settings(
    store: &StoreFile,
    password: Option<&str>,
) -> Result<Vec<(&'static str, String)>, StoreError> {
    if store.format == StoreFormat::Pem {
        return Ok(vec![("ssl.ca.location", store.path.clone())]);
    }
    let decoded = decode(store, Kind::Trust, password, None)?;
    if decoded.certs.is_empty() {
        return Err(StoreError::NoCertificates);
    }
    Ok(vec![("ssl.ca.pem", certs_pem(&decoded.certs, store)?)])
}

/// librdkafka settings for a client key store: paths for PEM (the key's password is then
/// librdkafka's `ssl.key.password`), else the certificate chain and the decrypted key as
/// PEM text (`ssl.certificate.pem`, `ssl.key.pem`).
///
/// `key_password` is Java's `ssl.key.password`; without it the store password is used
/// for the key too, as in Java.
pub(crate) fn key_store_settings(
    store: &StoreFile,
    store_password: Option<&str>,
    key_password: Option<&str>,
) -> Result<Vec<(&'static str, String)>, StoreError> {
    if store.format == StoreFormat::Pem {
        return Ok(vec![
            ("ssl.certificate.location", store.path.clone()),
            ("ssl.key.location", store.path.clone()),
        ]);
    }
    let decoded = decode(store, Kind::Key, store_password, key_password)?;
    let Some((key, chain)) = decoded.key else {
        return Err(StoreError::NoPrivateKey);
    };
    let key_pem = key
        .private_key_to_pem_pkcs8()
        .map_err(|_| damaged(store, "the private key cannot be encoded"))?;
    Ok(vec![
        ("ssl.certificate.pem", certs_pem(&chain, store)?),
        (
            "ssl.key.pem",
            String::from_utf8(key_pem).map_err(|_| damaged(store, "PEM is not text"))?,
        ),
    ])
}

fn damaged(store: &StoreFile, detail: &str) -> StoreError {
    StoreError::Damaged {
        format: store.format,
        detail: detail.to_string(),
    }
}

fn certs_pem(certs: &[X509], store: &StoreFile) -> Result<String, StoreError> {
    let mut out = String::new();
    for cert in certs {
        let pem = cert
            .to_pem()
            .map_err(|_| damaged(store, "a certificate cannot be encoded"))?;
        out.push_str(&String::from_utf8_lossy(&pem));
    }
    Ok(out)
}

fn decode(
    store: &StoreFile,
    kind: Kind,
    password: Option<&str>,
    key_password: Option<&str>,
) -> Result<Decoded, StoreError> {
    match store.format {
        StoreFormat::Jks | StoreFormat::Jceks => decode_jks(store, kind, password, key_password),
        StoreFormat::Pkcs12 => decode_pkcs12(store, kind, password),
        StoreFormat::Pem => unreachable!("PEM stores are passed by path"),
    }
}

/// The `keytool` command that rewrites `store` as PKCS#12, and the setting to change.
fn to_pkcs12_command(store: &StoreFile, kind: Kind) -> String {
    let dest = derived_path(&store.path, "p12");
    format!(
        "keytool -importkeystore -srckeystore {} -srcstoretype {} -destkeystore {} \
         -deststoretype PKCS12, then set {}={dest}",
        shell_quote(&store.path),
        store.format,
        shell_quote(&dest),
        kind.location_setting()
    )
}

fn decode_jks(
    store: &StoreFile,
    kind: Kind,
    password: Option<&str>,
    key_password: Option<&str>,
) -> Result<Decoded, StoreError> {
    let parsed = jks::parse(&store.bytes, password).map_err(|e| match e {
        JksError::WrongPassword => StoreError::WrongStorePassword {
            setting: kind.password_setting(),
            format: store.format,
        },
        JksError::Damaged(detail) => StoreError::Damaged {
            format: store.format,
            detail,
        },
        JksError::SecretKeyEntry(alias) => StoreError::NeedsConversion {
            detail: format!(
                "the JCEKS store holds a secret key entry (`{alias}`), which only a JVM can \
                 read"
            ),
            command: to_pkcs12_command(store, kind),
        },
    })?;
    let der = |bytes: &[u8]| {
        X509::from_der(bytes).map_err(|_| damaged(store, "a certificate is not valid DER"))
    };
    let mut certs = Vec::new();
    let mut keys = Vec::new();
    for entry in &parsed.entries {
        match entry {
            Entry::TrustedCert { cert, .. } => certs.push(der(cert)?),
            Entry::PrivateKey {
                alias,
                protected,
                chain,
            } => {
                let chain = chain
                    .iter()
                    .map(|c| der(c))
                    .collect::<Result<Vec<_>, _>>()?;
                if let Some(leaf) = chain.first() {
                    certs.push(leaf.clone());
                }
                keys.push((alias, protected, chain));
            }
        }
    }
    let key = match (kind, keys.len()) {
        (Kind::Trust, _) | (Kind::Key, 0) => None,
        (Kind::Key, 1) => {
            let (alias, protected, chain) = keys.remove(0);
            let (setting, pw) = match (key_password, password) {
                (Some(k), _) => ("ssl.key.password", k),
                (None, Some(p)) => ("ssl.keystore.password", p),
                (None, None) => {
                    return Err(StoreError::PasswordNeeded {
                        setting: "ssl.keystore.password",
                        format: store.format,
                    })
                }
            };
            let pkcs8 = jks::recover_key(protected, pw).map_err(|e| match e {
                KeyError::WrongPassword => StoreError::WrongKeyPassword {
                    alias: alias.clone(),
                    setting,
                },
                KeyError::UnsupportedProtection => StoreError::NeedsConversion {
                    detail: format!(
                        "the private key `{alias}` is protected with an algorithm only a JVM \
                         implements (JCEKS keys use PBEWithMD5AndTripleDES)"
                    ),
                    command: to_pkcs12_command(store, kind),
                },
                KeyError::Damaged => damaged(store, "a protected private key is malformed"),
            })?;
            let key = PKey::private_key_from_pkcs8(&pkcs8)
                .map_err(|_| damaged(store, "a private key is not valid PKCS#8"))?;
            Some((key, chain))
        }
        (Kind::Key, _) => {
            return Err(StoreError::SeveralKeys {
                path: store.path.clone(),
                aliases: keys.iter().map(|(a, _, _)| a.to_string()).collect(),
            })
        }
    };
    Ok(Decoded { certs, key })
}

fn decode_pkcs12(
    store: &StoreFile,
    kind: Kind,
    password: Option<&str>,
) -> Result<Decoded, StoreError> {
    let p12 =
        Pkcs12::from_der(&store.bytes).map_err(|_| damaged(store, "the content is not PKCS#12"))?;
    // Java reads a password-less PKCS#12 store only when nothing in it is encrypted and
    // it carries no integrity MAC; OpenSSL with an empty password behaves alike.
    let parsed = p12.parse2(password.unwrap_or("")).map_err(|e| {
        let reasons = e.to_string().to_ascii_lowercase();
        if reasons.contains("mac verify") || reasons.contains("decrypt") {
            if password.is_none() {
                StoreError::PasswordNeeded {
                    setting: kind.password_setting(),
                    format: store.format,
                }
            } else {
                StoreError::WrongStorePassword {
                    setting: kind.password_setting(),
                    format: store.format,
                }
            }
        } else if reasons.contains("unsupported") {
            StoreError::NeedsConversion {
                detail: "the PKCS12 store is encrypted with a legacy algorithm (such as \
                         RC2-40, written by older JDKs and OpenSSL 1.x) that eosmirror's \
                         OpenSSL does not include"
                    .into(),
                command: to_pkcs12_command(store, kind),
            }
        } else {
            damaged(store, "OpenSSL cannot read it")
        }
    })?;
    let mut certs: Vec<X509> = Vec::new();
    if let Some(cert) = &parsed.cert {
        certs.push(cert.clone());
    }
    if let Some(ca) = &parsed.ca {
        certs.extend(ca.iter().map(|c| c.to_owned()));
    }
    let key = parsed.pkey.map(|k| (k, certs.clone()));
    Ok(Decoded { certs, key })
}

impl fmt::Debug for StoreFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreFile")
            .field("path", &self.path)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// `path` with its extension replaced by `ext` (or `converted.<ext>` if it already had
/// that extension), as the suggested output file of a conversion.
fn derived_path(path: &str, ext: &str) -> String {
    let p = std::path::Path::new(path);
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
    use std::path::Path;

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

    fn store(path: &str, format: StoreFormat, bytes: Vec<u8>) -> StoreFile {
        StoreFile {
            path: path.into(),
            format,
            bytes,
        }
    }

    #[test]
    fn pem_stores_map_to_locations() {
        let pem = store("/x/ca.pem", StoreFormat::Pem, Vec::new());
        assert_eq!(
            trust_store_settings(&pem, None).unwrap(),
            vec![("ssl.ca.location", "/x/ca.pem".to_string())]
        );
        assert_eq!(
            key_store_settings(&pem, None, None).unwrap(),
            vec![
                ("ssl.certificate.location", "/x/ca.pem".to_string()),
                ("ssl.key.location", "/x/ca.pem".to_string())
            ]
        );
    }

    /// Runs keytool (from the JDK the Kafka tests need anyway) in `dir`; `None` when it is
    /// not installed, so these tests skip rather than fail on a machine without Java.
    fn keytool(dir: &Path, args: &[&str]) -> Option<()> {
        let out = std::process::Command::new("keytool")
            .arg("-noprompt")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()?;
        assert!(
            out.status.success(),
            "keytool {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(())
    }

    fn read(dir: &Path, name: &str) -> StoreFile {
        read_store(dir.join(name).to_str().unwrap(), None).unwrap()
    }

    /// A JKS key store whose key password differs from the store password, a PKCS12
    /// one, and a JKS trust store, all made by keytool.
    #[test]
    fn stores_made_by_keytool() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let gen = [
            "-genkeypair",
            "-alias",
            "me",
            "-keyalg",
            "RSA",
            "-keysize",
            "2048",
            "-dname",
            "CN=unit",
            "-validity",
            "2",
        ];
        let Some(()) = keytool(
            d,
            &[
                &gen[..],
                &[
                    "-keystore",
                    "k.jks",
                    "-storetype",
                    "JKS",
                    "-storepass",
                    "store-pw",
                    "-keypass",
                    "key-pw",
                ],
            ]
            .concat(),
        ) else {
            eprintln!("skipped: no keytool");
            return;
        };
        keytool(
            d,
            &[
                &gen[..],
                &[
                    "-keystore",
                    "k.p12",
                    "-storetype",
                    "PKCS12",
                    "-storepass",
                    "p12-pw",
                ],
            ]
            .concat(),
        );
        keytool(
            d,
            &[
                "-exportcert",
                "-rfc",
                "-alias",
                "me",
                "-keystore",
                "k.p12",
                "-storepass",
                "p12-pw",
                "-file",
                "me.pem",
            ],
        );
        keytool(
            d,
            &[
                "-importcert",
                "-alias",
                "ca",
                "-file",
                "me.pem",
                "-keystore",
                "t.jks",
                "-storetype",
                "JKS",
                "-storepass",
                "trust-pw",
            ],
        );
        keytool(
            d,
            &[
                "-importcert",
                "-alias",
                "ca",
                "-file",
                "me.pem",
                "-keystore",
                "t.p12",
                "-storetype",
                "PKCS12",
                "-storepass",
                "trust-pw",
            ],
        );
        let me_pem = std::fs::read_to_string(d.join("me.pem")).unwrap();
        let me = X509::from_pem(me_pem.as_bytes()).unwrap();

        // Trust stores: the certificate, as PEM, in both formats.
        for name in ["t.jks", "t.p12"] {
            let t = read(d, name);
            let settings = trust_store_settings(&t, Some("trust-pw")).unwrap();
            assert_eq!(settings[0].0, "ssl.ca.pem");
            let got = X509::from_pem(settings[0].1.as_bytes()).unwrap();
            assert_eq!(got.to_der().unwrap(), me.to_der().unwrap(), "{name}");
            assert!(
                matches!(
                    trust_store_settings(&t, Some("nope")),
                    Err(StoreError::WrongStorePassword {
                        setting: "ssl.truststore.password",
                        ..
                    })
                ),
                "{name}"
            );
        }
        // JKS trust store without a password: read without the integrity check, as Java.
        assert!(trust_store_settings(&read(d, "t.jks"), None).is_ok());
        assert!(matches!(
            trust_store_settings(&read(d, "t.p12"), None),
            Err(StoreError::PasswordNeeded { .. })
        ));

        // JKS key store: the key password decrypts the key; the store password alone
        // does not, and says which setting to add.
        let k = read(d, "k.jks");
        let settings = key_store_settings(&k, Some("store-pw"), Some("key-pw")).unwrap();
        let check_pair = |settings: &[(&str, String)]| {
            assert_eq!(settings[0].0, "ssl.certificate.pem");
            assert_eq!(settings[1].0, "ssl.key.pem");
            let cert = X509::from_pem(settings[0].1.as_bytes()).unwrap();
            let key = PKey::private_key_from_pem(settings[1].1.as_bytes()).unwrap();
            assert!(cert.public_key().unwrap().public_eq(&key));
        };
        check_pair(&settings);
        let e = key_store_settings(&k, Some("store-pw"), None).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::WrongKeyPassword {
                    setting: "ssl.keystore.password",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("set ssl.key.password"), "{e}");
        let e = key_store_settings(&k, Some("store-pw"), Some("wrong")).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::WrongKeyPassword {
                    setting: "ssl.key.password",
                    ..
                }
            ),
            "{e:?}"
        );
        let e = key_store_settings(&k, Some("wrong"), Some("key-pw")).unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::WrongStorePassword {
                    setting: "ssl.keystore.password",
                    ..
                }
            ),
            "{e:?}"
        );

        // PKCS12 key store.
        let k = read(d, "k.p12");
        check_pair(&key_store_settings(&k, Some("p12-pw"), None).unwrap());
        assert!(matches!(
            key_store_settings(&k, Some("wrong"), None),
            Err(StoreError::WrongStorePassword { .. })
        ));
        // A trust store has no key.
        assert!(matches!(
            key_store_settings(&read(d, "t.jks"), Some("trust-pw"), None),
            Err(StoreError::NoPrivateKey)
        ));

        // No message carries a password.
        for e in [
            key_store_settings(&read(d, "k.jks"), Some("store-pw"), Some("wrong")).unwrap_err(),
            key_store_settings(&read(d, "k.jks"), Some("wrong"), None).unwrap_err(),
            trust_store_settings(&read(d, "t.p12"), Some("wrong")).unwrap_err(),
        ] {
            let msg = format!("{e} {e:?}");
            for pw in ["store-pw", "key-pw", "p12-pw", "trust-pw", "wrong"] {
                assert!(!msg.contains(pw), "{msg}");
            }
        }
    }

    #[test]
    fn several_keys_name_the_keytool_command() {
        let e = StoreError::SeveralKeys {
            path: "/x/my keys.jks".into(),
            aliases: vec!["a".into(), "b".into()],
        };
        let msg = e.to_string();
        assert!(
            msg.contains(
                "keytool -importkeystore -srckeystore '/x/my keys.jks' -srcalias a \
                 -destkeystore '/x/my keys.p12' -deststoretype PKCS12"
            ),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }
}
