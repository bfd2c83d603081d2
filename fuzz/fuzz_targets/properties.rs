//! `.properties` files (`--consumer.config`, `--producer.config`, `--throttle.file`):
//! `eosmirror::config::properties::parse` on arbitrary text.
//!
//! Beyond "no panic":
//! - every line number it reports is a line of the input, and a repeated key's earlier
//!   line comes before its later one;
//! - a `\u` escape error points at a backslash of the input;
//! - what it returns, written back out with Java's `Properties.store` escaping, parses
//!   to the same keys and values in the same order;
//! - the input split at NUL bytes into keys and values, written out the same way,
//!   parses back to exactly those pairs, and `Debug` shows no secret key's value.
#![no_main]

use eosmirror::config::properties::{parse, PropertiesError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    check_text(&text);
    check_written_pairs(&text);
});

fn check_text(text: &str) {
    // Positions are counted after a leading byte order mark, which the parser skips.
    let body = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines = natural_lines(body);
    match parse(text) {
        Ok(props) => {
            for p in props.iter() {
                assert!((1..=lines.len()).contains(&p.line()), "line {}", p.line());
            }
            for d in props.duplicates() {
                assert!(d.previous_line < d.line, "{d:?}");
                assert!(props.get(&d.key).is_some(), "{d:?}");
            }
            let pairs: Vec<(String, String)> = props
                .iter()
                .map(|p| (p.key().to_string(), p.value().to_string()))
                .collect();
            assert_eq!(reparsed(&store(&pairs)), pairs, "store/load round trip");
        }
        Err(PropertiesError::BadEscape { line, column, .. }) => {
            let at = lines.get(line - 1).and_then(|l| l.chars().nth(column - 1));
            assert_eq!(at, Some('\\'), "error at line {line}, column {column}");
        }
        Err(other) => panic!("parse of text cannot fail with {other:?}"),
    }
}

fn check_written_pairs(text: &str) {
    const MARK: char = '\u{1F511}';
    let mut parts = text.split('\0');
    let mut pairs: Vec<(String, String)> = Vec::new();
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        let mut key = k.replace(MARK, "");
        let mut value = v.replace(MARK, "");
        // Every third pair is a secret: its value must never show in `Debug`.
        if pairs.len() % 3 == 2 {
            key.push_str(".password");
            value.push(MARK);
        }
        if pairs.iter().all(|(seen, _)| *seen != key) {
            pairs.push((key, value));
        }
    }
    let written = store(&pairs);
    let props = parse(&written).expect("escaped text parses");
    let got: Vec<(String, String)> = props
        .iter()
        .map(|p| (p.key().to_string(), p.value().to_string()))
        .collect();
    assert_eq!(got, pairs, "written as {written:?}");
    assert!(props.duplicates().is_empty());
    let debug = format!("{props:?}");
    assert!(!debug.contains(MARK), "a secret value in Debug output");
}

fn reparsed(text: &str) -> Vec<(String, String)> {
    parse(text)
        .expect("escaped text parses")
        .iter()
        .map(|p| (p.key().to_string(), p.value().to_string()))
        .collect()
}

/// The input's natural lines, ended by `\n`, `\r\n` or a lone `\r` as the parser counts
/// them.
fn natural_lines(text: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' || c == '\r' {
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            lines.push(String::new());
        } else {
            lines.last_mut().unwrap().push(c);
        }
    }
    lines
}

/// `key=value` lines escaped as Java's `Properties.store` writes them (`saveConvert`),
/// except that non-ASCII stays literal (the file is UTF-8) and a leading U+FEFF is
/// escaped (the parser takes it for a byte order mark).
fn store(pairs: &[(String, String)]) -> String {
    let mut out = String::new();
    for (key, value) in pairs {
        escape(key, true, &mut out);
        out.push('=');
        escape(value, false, &mut out);
        out.push('\n');
    }
    out
}

fn escape(s: &str, is_key: bool, out: &mut String) {
    for (i, c) in s.chars().enumerate() {
        match c {
            ' ' if is_key || i == 0 => out.push_str("\\ "),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\u{c}' => out.push_str("\\f"),
            '=' | ':' | '#' | '!' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\u{feff}' => out.push_str("\\uFEFF"),
            c => out.push(c),
        }
    }
}
