//! JKS / JCEKS key and trust stores (`ssl.keystore.location`, `ssl.truststore.location`):
//! `eosmirror::config::jks::{parse, recover_key}`.
//!
//! Beyond "no panic" on arbitrary bytes:
//! - a store accepted with a password carries the integrity digest of that password
//!   (checked here independently of the reader);
//! - a store built from the input (trusted certificates and private keys protected
//!   with Sun's `KeyProtector`) reads back entry for entry with its password, and a
//!   wrong store password or wrong key password never yields entries or keys.
#![no_main]

use eosmirror::config::jks::{parse, recover_key, Entry, JksError, KeyError};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use openssl::sha::Sha1;

const PASSWORDS: &[&str] = &["changeit", "", "pässwörd", "changeit2"];
/// DER of the OID 1.3.6.1.4.1.42.2.17.1.1 (Sun's JKS `KeyProtector`).
const KEY_PROTECTOR_OID: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0x2A, 0x02, 0x11, 0x01, 0x01];

fuzz_target!(|data: &[u8]| {
    check_raw(data);
    let _ = check_built(&mut Unstructured::new(data));
});

fn check_raw(data: &[u8]) {
    if let Ok(store) = parse(data, None) {
        for entry in &store.entries {
            if let Entry::PrivateKey { protected, .. } = entry {
                for pw in PASSWORDS {
                    let _ = recover_key(protected, pw);
                }
            }
        }
    }
    for pw in PASSWORDS {
        if parse(data, Some(pw)).is_ok() {
            let body = &data[..data.len() - 20];
            assert_eq!(
                &data[data.len() - 20..],
                integrity(pw, body),
                "password {pw:?}"
            );
        }
    }
    let _ = recover_key(data, PASSWORDS[0]);
}

enum Built {
    Trusted(Vec<u8>),
    Key {
        alias: String,
        plain: Vec<u8>,
        chain: Vec<Vec<u8>>,
    },
}

fn check_built(u: &mut Unstructured) -> Result<()> {
    let version: u32 = if u.arbitrary()? { 2 } else { 1 };
    let jceks: bool = u.arbitrary()?;
    let store_pw = *u.choose(PASSWORDS)?;
    let key_pw = *u.choose(PASSWORDS)?;
    let mut built = Vec::new();
    let mut bytes = Vec::new();
    bytes.extend(
        if jceks {
            0xCECE_CECEu32
        } else {
            0xFEED_FEEDu32
        }
        .to_be_bytes(),
    );
    bytes.extend(version.to_be_bytes());
    let count = u.int_in_range(0..=4u32)?;
    bytes.extend(count.to_be_bytes());
    for _ in 0..count {
        let alias: String = u.arbitrary()?;
        let alias: String = alias.replace('\0', "").chars().take(100).collect();
        let is_key: bool = u.arbitrary()?;
        bytes.extend(if is_key { 1u32 } else { 2 }.to_be_bytes());
        bytes.extend((alias.len() as u16).to_be_bytes());
        bytes.extend(alias.as_bytes());
        bytes.extend(u.arbitrary::<u64>()?.to_be_bytes());
        if is_key {
            let plain: Vec<u8> = u.arbitrary()?;
            let salt: [u8; 20] = u.arbitrary()?;
            let protected = protect(&plain, key_pw, &salt);
            bytes.extend((protected.len() as u32).to_be_bytes());
            bytes.extend(&protected);
            let n = u.int_in_range(0..=3u32)?;
            bytes.extend(n.to_be_bytes());
            let mut chain = Vec::new();
            for _ in 0..n {
                let cert: Vec<u8> = u.arbitrary()?;
                write_cert(&mut bytes, version, &cert);
                chain.push(cert);
            }
            built.push(Built::Key {
                alias,
                plain,
                chain,
            });
        } else {
            let cert: Vec<u8> = u.arbitrary()?;
            write_cert(&mut bytes, version, &cert);
            built.push(Built::Trusted(cert));
        }
    }
    let digest = integrity(store_pw, &bytes);
    bytes.extend(digest);

    for pw in PASSWORDS {
        match parse(&bytes, Some(pw)) {
            Ok(store) if *pw == store_pw => check_entries(&store.entries, &built, key_pw),
            Err(JksError::WrongPassword) if *pw != store_pw => {}
            other => panic!(
                "store password {store_pw:?}, tried {pw:?}: {:?}",
                other.map(|s| s.entries.len())
            ),
        }
    }
    let store = parse(&bytes, None).expect("no password: the digest is not checked");
    check_entries(&store.entries, &built, key_pw);
    Ok(())
}

fn check_entries(entries: &[Entry], built: &[Built], key_pw: &str) {
    assert_eq!(entries.len(), built.len());
    for (entry, want) in entries.iter().zip(built) {
        match (entry, want) {
            (Entry::TrustedCert { cert }, Built::Trusted(want)) => assert_eq!(cert, want),
            (
                Entry::PrivateKey {
                    alias,
                    protected,
                    chain,
                },
                Built::Key {
                    alias: want_alias,
                    plain,
                    chain: want_chain,
                },
            ) => {
                assert_eq!((alias, chain), (want_alias, want_chain));
                for pw in PASSWORDS {
                    match recover_key(protected, pw) {
                        Ok(got) if *pw == key_pw => assert_eq!(&got, plain),
                        Err(KeyError::WrongPassword) if *pw != key_pw => {}
                        other => panic!("key password {key_pw:?}, tried {pw:?}: {other:?}"),
                    }
                }
            }
            _ => panic!("entry kinds differ"),
        }
    }
}

fn write_cert(bytes: &mut Vec<u8>, version: u32, cert: &[u8]) {
    if version == 2 {
        bytes.extend(5u16.to_be_bytes());
        bytes.extend(b"X.509");
    }
    bytes.extend((cert.len() as u32).to_be_bytes());
    bytes.extend(cert);
}

fn password_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// SHA-1(password as UTF-16BE ‖ "Mighty Aphrodite" ‖ body), as OpenJDK's JavaKeyStore.
fn integrity(password: &str, body: &[u8]) -> [u8; 20] {
    let mut sha = Sha1::new();
    sha.update(&password_bytes(password));
    sha.update(b"Mighty Aphrodite");
    sha.update(body);
    sha.finish()
}

/// An `EncryptedPrivateKeyInfo` as Sun's `KeyProtector.protect` writes it.
fn protect(plain: &[u8], password: &str, salt: &[u8; 20]) -> Vec<u8> {
    let pw = password_bytes(password);
    let mut data = salt.to_vec();
    let mut digest = *salt;
    for chunk in plain.chunks(20) {
        let mut sha = Sha1::new();
        sha.update(&pw);
        sha.update(&digest);
        digest = sha.finish();
        data.extend(chunk.iter().zip(digest.iter()).map(|(c, k)| c ^ k));
    }
    let mut sha = Sha1::new();
    sha.update(&pw);
    sha.update(plain);
    data.extend(sha.finish());
    let mut algorithm = der(0x06, KEY_PROTECTOR_OID);
    algorithm.extend([0x05, 0x00]);
    let mut info = der(0x30, &algorithm);
    info.extend(der(0x04, &data));
    der(0x30, &info)
}

fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend(content);
    out
}
