//! The one place values are turned into bytes and back: serde + bincode 2
//! with the standard configuration, so every stored value shares one encoding
//! that the header's format version covers.

use bincode::config::Config;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Largest value we ever store (a header with three names) is a few hundred
/// bytes. The limit matters when decoding damaged bytes: without it a garbled
/// length prefix makes bincode allocate whatever size it claims.
const MAX_VALUE_BYTES: usize = 64 * 1024;

/// bincode's standard configuration (little-endian varints) plus the
/// decoding limit above; the limit does not change the encoding.
fn config() -> impl Config {
    bincode::config::standard().with_limit::<MAX_VALUE_BYTES>()
}

/// Encodes a value for storage.
///
/// # Panics
/// Only if `value` is not one of this crate's plain structs (integers and
/// short strings), which cannot fail to encode.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, config()).expect("plain stored structs always encode")
}

/// Decodes a stored value, requiring every byte to be consumed: trailing
/// bytes mean the value is not what we think it is.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let (value, used) = decode_prefix(bytes)?;
    if used != bytes.len() {
        return Err(format!(
            "{} trailing bytes after a {}-byte value",
            bytes.len() - used,
            used
        ));
    }
    Ok(value)
}

/// Decodes a value from the start of `bytes`, returning how many bytes it
/// used. Lets the header read its version before trusting the rest.
pub(crate) fn decode_prefix<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, usize), String> {
    bincode::serde::decode_from_slice(bytes, config()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_and_rejects_trailing_bytes() {
        let bytes = encode(&(7_i64, String::from("x")));
        assert_eq!(decode::<(i64, String)>(&bytes), Ok((7, "x".into())));

        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<(i64, String)>(&longer).is_err());
        assert!(decode::<(i64, String)>(&bytes[..1]).is_err());
    }

    #[test]
    fn garbled_length_prefix_is_an_error_not_an_allocation() {
        // Varint tag 0xFD announces a u64 length: here u64::MAX / 2 bytes.
        let bytes = [0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F];
        assert!(decode::<String>(&bytes).is_err());
    }
}
