//! Quantities as users write them, on the command line and in files: byte
//! sizes and rates with units (`5MB`, `512KiB`) and record counts. One
//! parser for every `*.bytes` option, the throttle flags and the throttle
//! file, so they all accept the same spellings.

/// Parses a number of bytes (a rate or a size): an integer or decimal number with an optional unit,
/// `K`/`KB`, `M`/`MB`, `G`/`GB` (powers of 1000) or `KiB`, `MiB`, `GiB`
/// (powers of 1024), case-insensitive: `1000000`, `5MB`, `512KiB`, `1.5M`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "m" | "mb" => 1000 * 1000,
        "g" | "gb" => 1000 * 1000 * 1000,
        "ki" | "kib" => 1 << 10,
        "mi" | "mib" => 1 << 20,
        "gi" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {t:?} (use e.g. 1000000, 5MB or 512KiB)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{t:?} is not a number of bytes (use e.g. 1000000, 5MB or 512KiB)"))?;
    let bytes = (value * factor as f64).round();
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("{t:?} must be at least 1 byte"));
    }
    Ok(bytes as u64)
}

/// Parses a record rate: a positive integer.
pub fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1 (leave the limit out for none)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{:?} is not a positive integer", text.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_with_units_and_counts() {
        assert_eq!(parse_bytes("1000000"), Ok(1_000_000));
        assert_eq!(parse_bytes("10MB"), Ok(10_000_000));
        assert_eq!(parse_bytes("10mb"), Ok(10_000_000));
        assert_eq!(parse_bytes("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_bytes(" 1.5 M "), Ok(1_500_000));
        assert_eq!(parse_bytes("2GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("100B"), Ok(100));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("10XB").unwrap_err().contains("unknown unit"));
        assert!(parse_bytes("MB").is_err());
        assert!(parse_bytes("-5MB").is_err());
        assert!(parse_bytes("").is_err());
        assert_eq!(parse_count("2000"), Ok(2000));
        assert!(parse_count("0").is_err());
        assert!(parse_count("2k").is_err());
    }
}
