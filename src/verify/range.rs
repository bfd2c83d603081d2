//! Which records to verify: `--since`, `--last`, `--start`, and turning
//! them into offset ranges per partition.

use std::collections::BTreeMap;

/// The part of each partition to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// Everything the copy holds.
    All,
    /// Records with timestamps at or after this (ms since the epoch).
    Since(i64),
    /// The last N records.
    Last(u64),
}

/// A `--since` value that is neither epoch milliseconds nor RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("--since {0:?}: expected milliseconds since the epoch (1796025600000) or an RFC 3339 time (2026-11-30T08:00:00Z, 2026-11-30T09:00:00+01:00)")]
pub struct BadTime(String);

/// Parses epoch milliseconds or an RFC 3339 time into epoch milliseconds.
pub fn parse_time(text: &str) -> Result<i64, BadTime> {
    let bad = || BadTime(text.to_string());
    let t = text.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    let b = t.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num =
        |r: std::ops::Range<usize>| t.get(r).and_then(|s| s.parse::<i64>().ok()).ok_or_else(bad);
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let mut rest = &t[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let ms: String = fraction[..digits]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = ms.parse::<i64>().map_err(|_| bad())?;
        rest = &fraction[digits..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && matches!(&rest[..1], "+" | "-") && &rest[3..4] == ":" => {
            let h = rest[1..3].parse::<i64>().map_err(|_| bad())?;
            let m = rest[4..6].parse::<i64>().map_err(|_| bad())?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (h * 60 + m)
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Which side a `--start` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SideName {
    Source,
    Target,
}

/// `--start` values: explicit first offsets per side and partition.
pub type Starts = BTreeMap<(SideName, String, i32), i64>;

/// A `--start` value that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("--start {0:?}: expected SIDE:TOPIC:PARTITION=OFFSET, e.g. source:orders:0=1200 or target:source.orders:0=0")]
pub struct BadStart(String);

pub fn parse_starts(values: &[String]) -> Result<Starts, BadStart> {
    let mut starts = Starts::new();
    for value in values {
        let bad = || BadStart(value.clone());
        let (place, offset) = value.rsplit_once('=').ok_or_else(bad)?;
        let (side, rest) = place.split_once(':').ok_or_else(bad)?;
        let (topic, partition) = rest.rsplit_once(':').ok_or_else(bad)?;
        let side = match side {
            "source" => SideName::Source,
            "target" => SideName::Target,
            _ => return Err(bad()),
        };
        let partition = partition.parse().map_err(|_| bad())?;
        let offset = offset.parse().map_err(|_| bad())?;
        if topic.is_empty() || offset < 0 {
            return Err(bad());
        }
        starts.insert((side, topic.to_string(), partition), offset);
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_epoch_millis_or_rfc3339() {
        assert_eq!(parse_time("1796025600000").unwrap(), 1_796_025_600_000);
        assert_eq!(parse_time("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_time("2026-11-30T08:00:00Z").unwrap(),
            1_796_025_600_000
        );
        assert_eq!(
            parse_time("2026-11-30T09:00:00.5+01:00").unwrap(),
            1_796_025_600_500
        );
        assert_eq!(
            parse_time("2000-02-29T00:00:00-00:30").unwrap(),
            951_784_200_000
        );
        for bad in [
            "",
            "yesterday",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T08:00:00",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn starts_name_side_topic_partition_and_offset() {
        let s = parse_starts(&["source:a.b:c:3=10".into(), "target:x:0=0".into()]).unwrap();
        assert_eq!(s[&(SideName::Source, "a.b:c".into(), 3)], 10);
        assert_eq!(s[&(SideName::Target, "x".into(), 0)], 0);
        for bad in ["x:t:0=1", "source:t=1", "source:t:0=-1", "source::0=1"] {
            assert!(parse_starts(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
