//! Reading Java's own key store formats (JKS, and the certificate part of JCEKS) without a
//! JVM.
//!
//! librdkafka (OpenSSL) cannot read these files, yet they are what MirrorMaker users
//! have: cloud vendors hand out `*.truststore.jks` files. The format (from OpenJDK's
//! `sun.security.provider.JavaKeyStore`), all integers big-endian:
//!
//! ```text
//! magic u32 (FEEDFEED JKS, CECECECE JCEKS)   version u32 (1 or 2)   count u32
//! count × entry:
//!   tag u32: 1 private key, 2 trusted certificate, 3 secret key (JCEKS only)
//!   alias: u16 length + modified UTF-8         creation date: u64 ms
//!   tag 1: protected key (u32 length + bytes), chain length u32, chain × certificate
//!   tag 2: certificate
//!   certificate: (version 2 only: type as u16 length + UTF-8, "X.509") u32 length + DER
//! SHA-1(password as UTF-16BE ‖ "Mighty Aphrodite" ‖ every byte above)   20 bytes
//! ```
//!
//! JKS private keys are protected with Sun's `KeyProtector` (OID 1.3.6.1.4.1.42.2.17.1.1):
//! `salt(20) ‖ ciphertext ‖ check(20)`, the ciphertext XORed with a keystream of chained
//! SHA-1 digests `d_i = SHA-1(password ‖ d_{i-1})`, `d_0 = salt`, and `check =
//! SHA-1(password ‖ plaintext)`, the plaintext being a PKCS#8 `PrivateKeyInfo`.

use openssl::sha::Sha1;

/// What the integrity digest is salted with (a constant of OpenJDK's implementation).
const INTEGRITY_SALT: &[u8] = b"Mighty Aphrodite";
/// DER of the OID 1.3.6.1.4.1.42.2.17.1.1 (Sun's JKS `KeyProtector`).
const KEY_PROTECTOR_OID: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0x2A, 0x02, 0x11, 0x01, 0x01];
const SHA1_LEN: usize = 20;

/// A parsed JKS or JCEKS file: its entries, in file order.
pub struct KeyStore {
    /// The entries, in file order.
    pub entries: Vec<Entry>,
}

/// One key store entry. Holds no secret in clear: private keys stay encrypted until
/// [`recover_key`] is called with the key password.
pub enum Entry {
    /// A private key with its certificate chain (leaf first), DER encoded.
    PrivateKey {
        /// The entry's name in the store, for messages naming the key.
        alias: String,
        /// `EncryptedPrivateKeyInfo` DER as stored.
        protected: Vec<u8>,
        /// The certificate chain, leaf first.
        chain: Vec<Vec<u8>>,
    },
    /// A trusted certificate (a CA the owner trusts), DER encoded.
    TrustedCert {
        /// The certificate, DER encoded.
        cert: Vec<u8>,
    },
}

/// Why a JKS/JCEKS file cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum JksError {
    /// The file's structure is broken (truncated, bad magic, unknown tag); the text says
    /// where, never quoting content.
    Damaged(String),
    /// The integrity digest does not match: the store password is wrong (or the file
    /// was changed).
    WrongPassword,
    /// A JCEKS secret key entry: Java serialised objects whose length cannot be known
    /// without a JVM, so nothing after it can be read.
    SecretKeyEntry(String),
}

/// Why a private key entry cannot be decrypted.
#[derive(Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The check digest does not match: wrong key password.
    WrongPassword,
    /// Not protected with the JKS `KeyProtector` (e.g. a JCEKS key, which uses
    /// PBEWithMD5AndTripleDES).
    UnsupportedProtection,
    /// The encrypted key's structure is broken.
    Damaged,
}

/// Password bytes as Java feeds a `char[]` to the digests: UTF-16 big-endian.
fn password_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], JksError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(JksError::Damaged(format!(
                "truncated: {what} at byte {} runs past the end",
                self.at
            )));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u16(&mut self, what: &str) -> Result<u16, JksError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, JksError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn utf(&mut self, what: &str) -> Result<String, JksError> {
        let n = self.u16(what)? as usize;
        // Modified UTF-8 differs from UTF-8 only for NUL and supplementary characters,
        // which only matter for display here.
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }

    fn blob(&mut self, what: &str) -> Result<Vec<u8>, JksError> {
        let n = self.u32(what)? as usize;
        Ok(self.take(n, what)?.to_vec())
    }

    fn cert(&mut self, version: u32) -> Result<Vec<u8>, JksError> {
        if version == 2 {
            let kind = self.utf("certificate type")?;
            if kind != "X.509" {
                return Err(JksError::Damaged(format!(
                    "holds a `{kind}` certificate; only X.509 is supported"
                )));
            }
        }
        self.blob("certificate")
    }
}

/// Parses a JKS or JCEKS file. With a `password`, the integrity digest is verified, as
/// Java does; without one (Java's null password) it is not.
pub fn parse(bytes: &[u8], password: Option<&str>) -> Result<KeyStore, JksError> {
    let mut r = Reader { bytes, at: 0 };
    let magic = r.u32("magic number")?;
    let jceks = match magic {
        0xFEED_FEED => false,
        0xCECE_CECE => true,
        _ => return Err(JksError::Damaged("not a JKS or JCEKS file".into())),
    };
    let version = r.u32("version")?;
    if version != 1 && version != 2 {
        return Err(JksError::Damaged(format!(
            "unknown format version {version}"
        )));
    }
    let count = r.u32("entry count")?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let tag = r.u32("entry tag")?;
        let alias = r.utf("alias")?;
        r.take(8, "creation date")?;
        let entry = match tag {
            1 => {
                let protected = r.blob("protected key")?;
                let n = r.u32("certificate chain length")?;
                let chain = (0..n)
                    .map(|_| r.cert(version))
                    .collect::<Result<Vec<_>, _>>()?;
                Entry::PrivateKey {
                    alias,
                    protected,
                    chain,
                }
            }
            2 => Entry::TrustedCert {
                cert: r.cert(version)?,
            },
            3 if jceks => return Err(JksError::SecretKeyEntry(alias)),
            other => {
                return Err(JksError::Damaged(format!(
                    "unknown entry tag {other} (alias `{alias}`)"
                )))
            }
        };
        entries.push(entry);
    }
    let body_end = r.at;
    let digest = r.take(SHA1_LEN, "integrity digest")?;
    if let Some(password) = password {
        let mut sha = Sha1::new();
        sha.update(&password_bytes(password));
        sha.update(INTEGRITY_SALT);
        sha.update(&bytes[..body_end]);
        if sha.finish() != digest {
            return Err(JksError::WrongPassword);
        }
    }
    Ok(KeyStore { entries })
}

/// Decrypts a JKS private key entry (`protected`, an `EncryptedPrivateKeyInfo`) with
/// `password`, returning the PKCS#8 `PrivateKeyInfo` DER.
pub fn recover_key(protected: &[u8], password: &str) -> Result<Vec<u8>, KeyError> {
    let (oid, data) = encrypted_private_key_info(protected).ok_or(KeyError::Damaged)?;
    if oid != KEY_PROTECTOR_OID {
        return Err(KeyError::UnsupportedProtection);
    }
    if data.len() < 2 * SHA1_LEN {
        return Err(KeyError::Damaged);
    }
    let (salt, rest) = data.split_at(SHA1_LEN);
    let (encrypted, check) = rest.split_at(rest.len() - SHA1_LEN);
    let pw = password_bytes(password);
    let mut plain = Vec::with_capacity(encrypted.len());
    let mut digest = [0u8; SHA1_LEN];
    digest.copy_from_slice(salt);
    for chunk in encrypted.chunks(SHA1_LEN) {
        let mut sha = Sha1::new();
        sha.update(&pw);
        sha.update(&digest);
        digest = sha.finish();
        plain.extend(chunk.iter().zip(digest.iter()).map(|(c, k)| c ^ k));
    }
    let mut sha = Sha1::new();
    sha.update(&pw);
    sha.update(&plain);
    if sha.finish() != check {
        return Err(KeyError::WrongPassword);
    }
    Ok(plain)
}

/// One DER element at the start of `der`: (tag, content, rest).
fn der_element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7F) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// `EncryptedPrivateKeyInfo ::= SEQUENCE { AlgorithmIdentifier { OID, params }, OCTET
/// STRING }` → (OID content, encrypted data).
fn encrypted_private_key_info(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let (0x30, info, _) = der_element(der)? else {
        return None;
    };
    let (0x30, algorithm, rest) = der_element(info)? else {
        return None;
    };
    let (0x06, oid, _) = der_element(algorithm)? else {
        return None;
    };
    let (0x04, data, _) = der_element(rest)? else {
        return None;
    };
    Some((oid, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JKS file built by hand: one trusted certificate entry, version 2.
    fn tiny_jks(password: &str, cert: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(0xFEED_FEEDu32.to_be_bytes());
        b.extend(2u32.to_be_bytes());
        b.extend(1u32.to_be_bytes());
        b.extend(2u32.to_be_bytes());
        b.extend(2u16.to_be_bytes());
        b.extend(b"ca");
        b.extend(0u64.to_be_bytes());
        b.extend(5u16.to_be_bytes());
        b.extend(b"X.509");
        b.extend((cert.len() as u32).to_be_bytes());
        b.extend(cert);
        let mut sha = Sha1::new();
        sha.update(&password_bytes(password));
        sha.update(INTEGRITY_SALT);
        sha.update(&b);
        b.extend(sha.finish());
        b
    }

    #[test]
    fn integrity_digest_decides_the_password() {
        let bytes = tiny_jks("pässword", b"DER");
        let store = parse(&bytes, Some("pässword")).unwrap();
        assert!(matches!(&store.entries[..],
            [Entry::TrustedCert { cert }] if cert == b"DER"));
        assert!(matches!(
            parse(&bytes, Some("wrong")),
            Err(JksError::WrongPassword)
        ));
        assert!(
            parse(&bytes, None).is_ok(),
            "no password: no check, as in Java"
        );
    }

    #[test]
    fn damaged_files_are_named_not_quoted() {
        let bytes = tiny_jks("p", b"DER");
        let Err(JksError::Damaged(why)) = parse(&bytes[..bytes.len() - 30], Some("p")) else {
            panic!()
        };
        assert!(why.contains("truncated"), "{why}");
        assert!(matches!(
            parse(b"\x30\x82", None),
            Err(JksError::Damaged(_))
        ));
    }

    #[test]
    fn key_protector_round_trip() {
        // Encrypt as Sun's KeyProtector does, then recover.
        let plain: Vec<u8> = (0..77u8).collect();
        let pw = password_bytes("key-pass");
        let salt = [7u8; SHA1_LEN];
        let mut digest = salt;
        let mut encrypted = Vec::new();
        for chunk in plain.chunks(SHA1_LEN) {
            let mut sha = Sha1::new();
            sha.update(&pw);
            sha.update(&digest);
            digest = sha.finish();
            encrypted.extend(chunk.iter().zip(digest.iter()).map(|(c, k)| c ^ k));
        }
        let mut sha = Sha1::new();
        sha.update(&pw);
        sha.update(&plain);
        let mut data = salt.to_vec();
        data.extend(&encrypted);
        data.extend(sha.finish());
        let mut algorithm = vec![0x06, KEY_PROTECTOR_OID.len() as u8];
        algorithm.extend(KEY_PROTECTOR_OID);
        algorithm.extend([0x05, 0x00]);
        let mut info = vec![0x30, algorithm.len() as u8];
        info.extend(&algorithm);
        info.extend([0x04, 0x81, data.len() as u8]);
        info.extend(&data);
        let mut der = vec![0x30, 0x81, info.len() as u8];
        der.extend(&info);

        assert_eq!(recover_key(&der, "key-pass").unwrap(), plain);
        assert_eq!(recover_key(&der, "nope"), Err(KeyError::WrongPassword));
        assert_eq!(recover_key(&der[..10], "key-pass"), Err(KeyError::Damaged));
    }
}
