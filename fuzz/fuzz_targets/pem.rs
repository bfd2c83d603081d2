//! Inline PEM values (`ssl.truststore.certificates`, `ssl.keystore.certificate.chain`,
//! `ssl.keystore.key`): `eosmirror::config::pem::normalize` on arbitrary text.
//!
//! Beyond "no panic": what it returns is standard PEM (marker lines, base64 lines of at
//! most 64 characters, as many END markers as BEGIN markers) and normalizing it again
//! changes nothing.
#![no_main]

use eosmirror::config::pem::normalize;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(pem) = normalize(&text) else { return };
    assert_eq!(normalize(&pem).as_ref(), Ok(&pem), "not idempotent");
    assert!(pem.ends_with('\n'));
    let mut open = false;
    for line in pem.split_terminator('\n') {
        if line.starts_with("-----BEGIN ") && line.ends_with("-----") {
            assert!(!open, "BEGIN inside a block");
            open = true;
        } else if line.starts_with("-----END ") && line.ends_with("-----") {
            assert!(open, "END outside a block");
            open = false;
        } else {
            assert!(open, "text outside a block: {line:?}");
            assert!(
                (1..=64).contains(&line.len()),
                "base64 line of {}",
                line.len()
            );
            assert!(line
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')));
        }
    }
    assert!(!open, "unterminated block");
});
