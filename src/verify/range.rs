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

/// A `--since` value that is not a time.
#[derive(Debug, thiserror::Error)]
pub enum BadTime {
    #[error("--since {0:?}: expected milliseconds since the epoch (1796025600000) or an RFC 3339 time (2026-11-30T08:00:00Z, 2026-11-30T09:00:00+01:00)")]
    Format(String),
    /// RFC 3339 in form, but no such time (31 February, hour 25, ...).
    #[error("--since {text:?}: no such time ({reason}); expected milliseconds since the epoch (1796025600000) or an RFC 3339 time (2026-11-30T08:00:00Z, 2026-11-30T09:00:00+01:00)")]
    Invalid { text: String, reason: String },
    /// Before 1970: Kafka takes a negative time for "the end" (-1) or
    /// "the start" (-2), not a time.
    #[error("--since {0:?}: before 1970 (Kafka has no records then, and reads a negative time as the end of a partition); to check every record, leave --since out")]
    BeforeEpoch(String),
}

/// RFC 3339's `date-time`: jiff also reads looser forms (no seconds, basic
/// format, bracketed time zones, offsets up to 25 hours), which `--since`
/// does not promise, so the form is checked here and the calendar by jiff.
fn rfc3339_form() -> &'static regex::Regex {
    static FORM: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    FORM.get_or_init(|| {
        regex::Regex::new(
            r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$",
        )
        .expect("a valid regex")
    })
}

/// Parses epoch milliseconds or an RFC 3339 time into epoch milliseconds.
/// Digits past the millisecond are dropped.
pub fn parse_time(text: &str) -> Result<i64, BadTime> {
    let ms = parse_any_time(text)?;
    if ms < 0 {
        return Err(BadTime::BeforeEpoch(text.to_string()));
    }
    Ok(ms)
}

/// [`parse_time`], before 1970 too.
fn parse_any_time(text: &str) -> Result<i64, BadTime> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    if !rfc3339_form().is_match(t) {
        return Err(BadTime::Format(text.to_string()));
    }
    let time: jiff::Timestamp = t.parse().map_err(|e: jiff::Error| BadTime::Invalid {
        text: text.to_string(),
        reason: e.to_string(),
    })?;
    Ok(time.as_millisecond())
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
    fn a_time_before_1970_is_refused_not_read_as_the_end() {
        for text in ["-1", "-2", "1969-12-31T23:59:59Z"] {
            let e = parse_time(text).unwrap_err();
            assert!(matches!(e, BadTime::BeforeEpoch(_)), "{text}: {e}");
            assert!(e.to_string().contains("leave --since out"), "{e}");
        }
    }

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
        assert_eq!(
            parse_time("2024-02-29t23:59:59.123456z").unwrap(),
            1_709_251_199_123
        );
        assert_eq!(
            parse_time("2024-12-31 23:00:00-01:00").unwrap(),
            1_735_689_600_000
        );
        for bad in [
            "",
            "yesterday",
            "2026-11-30",
            "2026-11-30T08:00:00",
            "2026-11-30T08:00Z",
            "20261130T080000Z",
            "2026-11-30T08:00:00Z[UTC]",
            "2026-11-30T08:00:00+0100",
            "2026-11-30T08:00:00+24:00",
        ] {
            assert!(matches!(parse_time(bad), Err(BadTime::Format(_))), "{bad}");
        }
    }

    #[test]
    fn times_that_do_not_exist_are_refused() {
        for bad in [
            "2026-02-31T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-11-30T25:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T08:60:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-11-00T00:00:00Z",
        ] {
            let e = parse_time(bad).expect_err(bad);
            assert!(matches!(e, BadTime::Invalid { .. }), "{bad}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("--since {bad:?}: no such time (")),
                "{e}"
            );
        }
        // Leap years: every fourth, not centuries, but every fourth century.
        assert_eq!(parse_time("2000-02-29T00:00:00Z").unwrap(), 951_782_400_000);
        assert_eq!(
            parse_time("2028-02-29T00:00:00Z").unwrap(),
            1_835_395_200_000
        );
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
