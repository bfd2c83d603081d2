//! The `java.util.Properties.load` file format, reproduced exactly.
//!
//! MirrorMaker users hand eosmirror the same `--consumer.config` / `--producer.config`
//! files they gave the Java clients, so a file must mean here what it means to Java:
//! natural lines versus logical lines, `#`/`!` comments, the three key terminators, line
//! continuation with an odd number of trailing backslashes, the escape sequences and
//! "later key wins" duplicates.
//!
//! Two deliberate differences from `Properties.load(InputStream)`, both about bytes, not
//! syntax: the text is decoded as UTF-8 (Java's `InputStream` overload decodes
//! ISO-8859-1, which turns UTF-8 non-ASCII into mojibake) and a leading UTF-8 byte order
//! mark is ignored instead of becoming part of the first key.

use std::fmt;
use std::path::{Path, PathBuf};

use super::secrets::redact;

/// One `key=value` pair of a properties file, with the line it came from.
///
/// Why: translation errors must point at the line to fix.
#[derive(Clone, PartialEq, Eq)]
pub struct Property {
    key: String,
    value: String,
    line: usize,
}

impl Property {
    /// The key, with escapes decoded.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value, with escapes decoded (may hold a secret: show it through
    /// [`redact`](super::secrets::redact)).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The 1-based natural line on which the logical line that set this value starts
    /// (the last one, if the key is repeated).
    pub fn line(&self) -> usize {
        self.line
    }
}

impl fmt::Debug for Property {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Property")
            .field("key", &self.key)
            .field("value", &redact(&self.key, &self.value))
            .field("line", &self.line)
            .finish()
    }
}

/// A key that appeared more than once; the later value replaced the earlier one, as in
/// Java.
///
/// Why: an overridden line is almost always an editing mistake worth a warning. Holds no
/// values, so it is safe to log as is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The repeated key.
    pub key: String,
    /// Line of the value that was overridden.
    pub previous_line: usize,
    /// Line of the value that is kept.
    pub line: usize,
}

/// The parsed content of a properties file: an ordered map from key to value.
///
/// Why ordered: warnings and errors then follow the order of the file. A repeated key
/// keeps the position of its first occurrence and the value of its last.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<Property>,
    duplicates: Vec<DuplicateKey>,
}

impl Properties {
    /// Reads and parses the properties file at `path`.
    ///
    /// Why: the common entry point for `--consumer.config` / `--producer.config`; errors
    /// name the file.
    pub fn load(path: &Path) -> Result<Properties, PropertiesError> {
        let bytes = std::fs::read(path).map_err(|source| PropertiesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|e| PropertiesError::NotUtf8 {
            path: path.to_path_buf(),
            line: line_of_offset(&bytes, e.valid_up_to()),
        })?;
        parse(text).map_err(|e| e.in_file(path))
    }

    /// The value of `key`, if the file sets it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.property(key).map(Property::value)
    }

    /// The whole entry for `key` (value and line), if the file sets it.
    pub fn property(&self, key: &str) -> Option<&Property> {
        self.entries.iter().find(|p| p.key == key)
    }

    /// All entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Property> {
        self.entries.iter()
    }

    /// Number of distinct keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the file sets no key at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keys that were set more than once, in the order the repeats were met.
    pub fn duplicates(&self) -> &[DuplicateKey] {
        &self.duplicates
    }

    fn insert(&mut self, key: String, value: String, line: usize) {
        match self.entries.iter_mut().find(|p| p.key == key) {
            Some(existing) => {
                self.duplicates.push(DuplicateKey {
                    key,
                    previous_line: existing.line,
                    line,
                });
                existing.value = value;
                existing.line = line;
            }
            None => self.entries.push(Property { key, value, line }),
        }
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.entries
                    .iter()
                    .map(|p| (&p.key, redact(&p.key, &p.value))),
            )
            .finish()
    }
}

/// Why a properties file could not be read.
///
/// Messages name the file (when known), the line and what to change. They never quote a
/// value, since values may be secrets.
#[derive(Debug, thiserror::Error)]
pub enum PropertiesError {
    /// The file could not be read at all.
    #[error("cannot read properties file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The file is not UTF-8 text.
    #[error(
        "{}:{line}: not valid UTF-8; save the file as UTF-8 (or write non-ASCII characters \
         as \\uXXXX escapes)",
        path.display()
    )]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// First line holding an invalid byte.
        line: usize,
    },
    /// A `\u` escape is not followed by four hexadecimal digits, or encodes half of a
    /// UTF-16 surrogate pair without the other half.
    #[error(
        "{}line {line}, column {column}: {problem} in {part}; write \\u followed by exactly \
         four hex digits (a character outside the BMP as a \\uD8xx\\uDCxx pair), or write \
         a literal backslash as \\\\",
        FileLabel(file.as_deref())
    )]
    BadEscape {
        /// The file, when parsed from one (see [`Properties::load`]).
        file: Option<PathBuf>,
        /// 1-based natural line of the offending backslash.
        line: usize,
        /// 1-based column (in characters) of the offending backslash.
        column: usize,
        /// What is wrong with the escape.
        problem: EscapeProblem,
        /// Where: "the key" or "the value of key `<key>`".
        part: String,
    },
}

impl PropertiesError {
    fn in_file(self, path: &Path) -> Self {
        match self {
            PropertiesError::BadEscape {
                line,
                column,
                problem,
                part,
                ..
            } => PropertiesError::BadEscape {
                file: Some(path.to_path_buf()),
                line,
                column,
                problem,
                part,
            },
            other => other,
        }
    }
}

/// What is wrong with a `\u` escape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EscapeProblem {
    /// Fewer than four characters follow `\u`, or one of them is not a hex digit
    /// (Java: "Malformed \uxxxx encoding").
    Malformed,
    /// A high surrogate not followed by a low one, or a low one on its own. Java would
    /// silently store a broken string; eosmirror's strings must be valid Unicode.
    UnpairedSurrogate,
}

impl fmt::Display for EscapeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EscapeProblem::Malformed => "malformed \\uXXXX escape",
            EscapeProblem::UnpairedSurrogate => "unpaired UTF-16 surrogate escape",
        })
    }
}

struct FileLabel<'a>(Option<&'a Path>);

impl fmt::Display for FileLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}: ", path.display()),
            None => Ok(()),
        }
    }
}

/// Parses properties text exactly as `java.util.Properties.load` does (see the module
/// documentation for the two byte-level differences).
///
/// Why a separate function from [`Properties::load`]: tests and callers holding text in
/// memory need no file.
pub fn parse(text: &str) -> Result<Properties, PropertiesError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = LineReader::new(text);
    let mut props = Properties::default();
    while let Some(line) = reader.read_line() {
        let (key, value) = split_key_value(&line.chars);
        let key_text = unescape(&line, 0..key.end, "the key")?;
        let value_part = format!("the value of key `{key_text}`");
        let value_text = unescape(&line, value, &value_part)?;
        props.insert(key_text, value_text, line.start_line);
    }
    Ok(props)
}

/// A character's place in the file.
#[derive(Clone, Copy)]
struct Position {
    line: usize,
    column: usize,
}

/// A logical line: natural lines joined at continuations, with comments, leading
/// whitespace and continuation backslashes removed. `positions[i]` is where `chars[i]`
/// came from.
struct LogicalLine {
    chars: Vec<char>,
    positions: Vec<Position>,
    /// The natural line of the first character kept. Separate from `positions` because
    /// a logical line may end up empty (a lone continuation backslash at the end of the
    /// input, which Java still loads as the key `""`) and still needs a line number.
    start_line: usize,
}

impl LogicalLine {
    fn push(&mut self, c: char, pos: Position) {
        if self.chars.is_empty() {
            self.start_line = pos.line;
        }
        self.chars.push(c);
        self.positions.push(pos);
    }

    /// Drops a continuation backslash, the last character.
    fn pop(&mut self) {
        self.chars.pop();
        self.positions.pop();
    }
}

/// Java's `Properties.LineReader`: yields logical lines.
struct LineReader {
    chars: Vec<(char, Position)>,
    next: usize,
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

impl LineReader {
    fn new(text: &str) -> Self {
        let mut chars = Vec::with_capacity(text.len());
        let (mut line, mut column) = (1, 1);
        let mut iter = text.chars().peekable();
        while let Some(c) = iter.next() {
            chars.push((c, Position { line, column }));
            let ends_line = c == '\n' || (c == '\r' && iter.peek() != Some(&'\n'));
            if ends_line {
                line += 1;
                column = 1;
            } else {
                column += 1;
            }
        }
        LineReader { chars, next: 0 }
    }

    fn bump(&mut self) -> Option<(char, Position)> {
        let item = self.chars.get(self.next).copied();
        self.next += 1;
        item
    }

    fn read_line(&mut self) -> Option<LogicalLine> {
        let mut line = LogicalLine {
            chars: Vec::new(),
            positions: Vec::new(),
            start_line: 1,
        };
        let mut skip_whitespace = true;
        let mut appended_line_begin = false;
        let mut preceding_backslash = false;
        loop {
            let Some((c, pos)) = self.bump() else {
                if line.chars.is_empty() {
                    return None;
                }
                if preceding_backslash {
                    line.pop();
                }
                return Some(line);
            };
            if skip_whitespace {
                if is_whitespace(c) || (!appended_line_begin && (c == '\r' || c == '\n')) {
                    continue;
                }
                skip_whitespace = false;
                appended_line_begin = false;
            }
            if line.chars.is_empty() && (c == '#' || c == '!') {
                // A comment runs to the end of its natural line; a trailing backslash
                // does not continue it.
                while let Some((c, _)) = self.bump() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                }
                skip_whitespace = true;
                continue;
            }
            if c != '\n' && c != '\r' {
                line.push(c, pos);
                preceding_backslash = c == '\\' && !preceding_backslash;
                continue;
            }
            if line.chars.is_empty() {
                skip_whitespace = true;
                continue;
            }
            if self.next >= self.chars.len() {
                // The line break is the input's last character. Java's readLine returns
                // the line here, minus a continuation backslash, even when nothing is
                // left: `\` + line break at the very end loads the key `""`.
                if preceding_backslash {
                    line.pop();
                }
                return Some(line);
            }
            if !preceding_backslash {
                return Some(line);
            }
            // Continuation: drop the backslash, skip the next line's leading whitespace.
            line.pop();
            skip_whitespace = true;
            appended_line_begin = true;
            preceding_backslash = false;
            if c == '\r' && self.chars.get(self.next).map(|&(c, _)| c) == Some('\n') {
                self.next += 1;
            }
        }
    }
}

/// Splits a logical line into the (still escaped) key and value ranges, as Java's
/// `Properties.load0` does.
fn split_key_value(chars: &[char]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let limit = chars.len();
    let mut key_len = 0;
    let mut value_start = limit;
    let mut has_separator = false;
    let mut preceding_backslash = false;
    while key_len < limit {
        let c = chars[key_len];
        if (c == '=' || c == ':') && !preceding_backslash {
            value_start = key_len + 1;
            has_separator = true;
            break;
        }
        if is_whitespace(c) && !preceding_backslash {
            value_start = key_len + 1;
            break;
        }
        preceding_backslash = c == '\\' && !preceding_backslash;
        key_len += 1;
    }
    while value_start < limit {
        let c = chars[value_start];
        if !is_whitespace(c) {
            if !has_separator && (c == '=' || c == ':') {
                has_separator = true;
            } else {
                break;
            }
        }
        value_start += 1;
    }
    (0..key_len, value_start..limit)
}

/// Java's `loadConvert`: decodes `\t \n \r \f \uXXXX` and `\` + any other character.
/// UTF-16 surrogate pairs written as two `\u` escapes are combined into one character.
fn unescape(
    line: &LogicalLine,
    range: std::ops::Range<usize>,
    part: &str,
) -> Result<String, PropertiesError> {
    let chars = &line.chars[range.clone()];
    let offset = range.start;
    let error = |at: usize, problem| {
        let pos = line.positions[offset + at];
        PropertiesError::BadEscape {
            file: None,
            line: pos.line,
            column: pos.column,
            problem,
            part: part.to_string(),
        }
    };
    let mut out = String::with_capacity(chars.len());
    // A high surrogate waiting for its low half, with the index of its backslash.
    let mut pending_high: Option<(u16, usize)> = None;
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        let c = chars[i];
        i += 1;
        let unit = if c != '\\' {
            None
        } else {
            // readLine never leaves an unescaped backslash at the end of a line.
            let Some(&escaped) = chars.get(i) else { break };
            i += 1;
            match escaped {
                'u' => {
                    let digits = chars
                        .get(i..i + 4)
                        .ok_or(error(start, EscapeProblem::Malformed))?;
                    let mut unit: u16 = 0;
                    for d in digits {
                        let v = d
                            .to_digit(16)
                            .ok_or(error(start, EscapeProblem::Malformed))?;
                        unit = (unit << 4) | v as u16;
                    }
                    i += 4;
                    Some(unit)
                }
                't' => Some(u16::from(b'\t')),
                'n' => Some(u16::from(b'\n')),
                'r' => Some(u16::from(b'\r')),
                'f' => Some(0x0c),
                other => {
                    if let Some((_, at)) = pending_high {
                        return Err(error(at, EscapeProblem::UnpairedSurrogate));
                    }
                    out.push(other);
                    continue;
                }
            }
        };
        match (unit, pending_high.take()) {
            (None, Some((_, at))) => return Err(error(at, EscapeProblem::UnpairedSurrogate)),
            (None, None) => out.push(c),
            (Some(u @ 0xD800..=0xDBFF), None) => pending_high = Some((u, start)),
            (Some(low @ 0xDC00..=0xDFFF), Some((high, _))) => {
                let code = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                out.push(
                    char::from_u32(code).ok_or(error(start, EscapeProblem::UnpairedSurrogate))?,
                );
            }
            (Some(0xDC00..=0xDFFF), None) => {
                return Err(error(start, EscapeProblem::UnpairedSurrogate))
            }
            (Some(_), Some((_, at))) => return Err(error(at, EscapeProblem::UnpairedSurrogate)),
            (Some(u), None) => out
                .push(char::from_u32(u32::from(u)).ok_or(error(start, EscapeProblem::Malformed))?),
        }
    }
    if let Some((_, at)) = pending_high {
        return Err(error(at, EscapeProblem::UnpairedSurrogate));
    }
    Ok(out)
}

/// 1-based line number of byte `offset`, counting `\n`, `\r\n` and a lone `\r` as line
/// ends, like the parser.
fn line_of_offset(bytes: &[u8], offset: usize) -> usize {
    let before = &bytes[..offset];
    let mut line = 1;
    for (i, &b) in before.iter().enumerate() {
        if b == b'\n' || (b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
            line += 1;
        }
    }
    line
}

#[cfg(test)]
mod oracle_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .iter()
            .map(|p| (p.key().to_string(), p.value().to_string()))
            .collect()
    }

    fn one(text: &str) -> (String, String) {
        let mut all = pairs(text);
        assert_eq!(all.len(), 1, "{text:?} gave {all:?}");
        all.remove(0)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn javadoc_truth_beauty_examples() {
        for text in [
            "Truth = Beauty\n",
            "  Truth:Beauty\n",
            "Truth                    :Beauty\n",
            "Truth=Beauty",
            "\tTruth\tBeauty",
        ] {
            assert_eq!(one(text), kv("Truth", "Beauty"), "{text:?}");
        }
    }

    #[test]
    fn javadoc_fruits_continuation_example() {
        let text = "fruits                           apple, banana, pear, \\\n\
                    \x20                                cantaloupe, watermelon, \\\n\
                    \x20                                kiwi, mango\n";
        assert_eq!(
            one(text),
            kv(
                "fruits",
                "apple, banana, pear, cantaloupe, watermelon, kiwi, mango"
            )
        );
    }

    #[test]
    fn javadoc_cheeses_key_with_empty_value() {
        assert_eq!(one("cheeses\n"), kv("cheeses", ""));
        assert_eq!(one("cheeses   "), kv("cheeses", ""));
        assert_eq!(one("cheeses="), kv("cheeses", ""));
    }

    #[test]
    fn escaped_terminators_belong_to_the_key() {
        assert_eq!(one("\\:\\=\n"), kv(":=", ""));
        assert_eq!(one("a\\=b=c"), kv("a=b", "c"));
        assert_eq!(one("a\\:b:c"), kv("a:b", "c"));
        assert_eq!(
            one("key\\ with\\ spaces = value"),
            kv("key with spaces", "value")
        );
        assert_eq!(one("tab\\\tkey=v"), kv("tab\tkey", "v"));
    }

    #[test]
    fn key_ends_at_first_unescaped_terminator() {
        assert_eq!(one("a=b=c"), kv("a", "b=c"));
        assert_eq!(one("a:b:c"), kv("a", "b:c"));
        assert_eq!(one("a b = c"), kv("a", "b = c"));
        // One separator after whitespace is consumed, a second is part of the value.
        assert_eq!(one("a = = b"), kv("a", "= b"));
        assert_eq!(one("a : = b"), kv("a", "= b"));
        assert_eq!(one("a==b"), kv("a", "=b"));
        assert_eq!(one("a   =   b"), kv("a", "b"));
        assert_eq!(one("a\t:\tb"), kv("a", "b"));
        assert_eq!(one("a\u{c}b"), kv("a", "b"));
    }

    #[test]
    fn empty_keys() {
        assert_eq!(one("=value"), kv("", "value"));
        assert_eq!(one(":"), kv("", ""));
        assert_eq!(one("  = v"), kv("", "v"));
    }

    #[test]
    fn value_keeps_trailing_whitespace() {
        assert_eq!(one("a = b  \n"), kv("a", "b  "));
        assert_eq!(one("a = b\\ "), kv("a", "b "));
    }

    #[test]
    fn comments_and_blank_lines() {
        let text = "# comment\n! also comment\n   # indented comment\n\n   \n\t\na=1\n#b=2\n";
        assert_eq!(pairs(text), vec![kv("a", "1")]);
        // '#' and '!' elsewhere are ordinary characters.
        assert_eq!(one("a=#1!"), kv("a", "#1!"));
        assert_eq!(one("a#=1"), kv("a#", "1"));
    }

    #[test]
    fn comment_line_is_not_continued_by_trailing_backslash() {
        assert_eq!(pairs("# comment \\\nkey=value\n"), vec![kv("key", "value")]);
    }

    #[test]
    fn continuation_line_starting_with_hash_is_not_a_comment() {
        assert_eq!(
            one("a = b \\\n  # not a comment\n"),
            kv("a", "b # not a comment")
        );
    }

    #[test]
    fn continuation_rules() {
        // Odd number of trailing backslashes continues, even does not.
        assert_eq!(one("a=b\\\\\\\nc"), kv("a", "b\\c"));
        assert_eq!(pairs("a=b\\\\\nc"), vec![kv("a", "b\\"), kv("c", "")]);
        // Continuation into a key.
        assert_eq!(one("ke\\\n   y=v"), kv("key", "v"));
        // An empty line ends the logical line even after a backslash.
        assert_eq!(pairs("a=b\\\n\nc=d"), vec![kv("a", "b"), kv("c", "d")]);
        assert_eq!(pairs("a=b\\\n   \nc=d"), vec![kv("a", "b"), kv("c", "d")]);
        // A backslash at end of input is dropped.
        assert_eq!(one("a=b\\"), kv("a", "b"));
        // Continuation with CRLF and CR line ends.
        assert_eq!(one("a=b\\\r\n  c\r\n"), kv("a", "bc"));
        assert_eq!(one("a=b\\\r  c\r"), kv("a", "bc"));
    }

    #[test]
    fn line_terminators() {
        assert_eq!(
            pairs("a=1\rb=2\r\nc=3\nd=4"),
            vec![kv("a", "1"), kv("b", "2"), kv("c", "3"), kv("d", "4")]
        );
    }

    #[test]
    fn escapes() {
        assert_eq!(one("a=\\t\\n\\r\\f"), kv("a", "\t\n\r\u{c}"));
        assert_eq!(one("a=\\b\\\"\\'\\z\\\\"), kv("a", "b\"'z\\"));
        assert_eq!(one("\\u0041=\\u00e9\\u00C9"), kv("A", "éÉ"));
        assert_eq!(one("a=\\uD83D\\uDE00"), kv("a", "😀"));
        assert_eq!(one("a=\\#\\!"), kv("a", "#!"));
        assert_eq!(one("\\#notcomment=1"), kv("#notcomment", "1"));
        assert_eq!(one("a=é😀"), kv("a", "é😀"));
    }

    #[test]
    fn malformed_unicode_escape_reports_line_and_column() {
        let err = parse("a=1\n\nb = x\\u12G4\n").unwrap_err();
        match &err {
            PropertiesError::BadEscape {
                line,
                column,
                problem,
                part,
                file,
            } => {
                assert_eq!((*line, *column), (3, 6));
                assert_eq!(*problem, EscapeProblem::Malformed);
                assert_eq!(part, "the value of key `b`");
                assert!(file.is_none());
            }
            other => panic!("unexpected {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.starts_with("line 3, column 6: malformed \\uXXXX escape"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_unicode_escape_is_malformed() {
        for text in ["a=\\u12", "a=\\u", "\\u00=x", "a=\\u123"] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(
                    err,
                    PropertiesError::BadEscape {
                        problem: EscapeProblem::Malformed,
                        line: 1,
                        ..
                    }
                ),
                "{text:?}: {err:?}"
            );
        }
    }

    #[test]
    fn escape_error_on_continued_line_points_at_that_line() {
        let err = parse("a = one \\\n    two \\uZZZZ\n").unwrap_err();
        assert!(
            matches!(
                err,
                PropertiesError::BadEscape {
                    line: 2,
                    column: 9,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn unpaired_surrogates_are_rejected() {
        for text in [
            "a=\\uD83D",
            "a=\\uD83Dx",
            "a=\\uDE00",
            "a=\\uD83D\\u0041",
            "a=\\uD83D\\n",
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(
                    err,
                    PropertiesError::BadEscape {
                        problem: EscapeProblem::UnpairedSurrogate,
                        ..
                    }
                ),
                "{text:?}: {err:?}"
            );
        }
    }

    #[test]
    fn duplicates_override_and_are_recorded() {
        let props = parse("a=1\nb=2\na=3\na=4\n").unwrap();
        assert_eq!(props.get("a"), Some("4"));
        assert_eq!(props.property("a").unwrap().line(), 4);
        let keys: Vec<_> = props.iter().map(Property::key).collect();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(
            props.duplicates(),
            [
                DuplicateKey {
                    key: "a".into(),
                    previous_line: 1,
                    line: 3
                },
                DuplicateKey {
                    key: "a".into(),
                    previous_line: 3,
                    line: 4
                },
            ]
        );
    }

    #[test]
    fn order_lines_and_accessors() {
        let props = parse("# header\nz=1\n\ny = 2 \\\n  more\nx\n").unwrap();
        let got: Vec<_> = props
            .iter()
            .map(|p| (p.key(), p.value(), p.line()))
            .collect();
        assert_eq!(got, [("z", "1", 2), ("y", "2 more", 4), ("x", "", 6)]);
        assert_eq!(props.len(), 3);
        assert!(!props.is_empty());
        assert_eq!(props.get("missing"), None);
        assert!(parse("# nothing\n\n").unwrap().is_empty());
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn byte_order_mark_is_ignored() {
        assert_eq!(one("\u{feff}a=1"), kv("a", "1"));
    }

    #[test]
    fn backslash_only_line_then_comment() {
        // Java: after a line holding only a continuation backslash the logical line is
        // still empty, so a following '#' line is a comment.
        assert_eq!(pairs("\\\n# c\na=1"), vec![kv("a", "1")]);
    }

    #[test]
    fn lone_continuation_backslash_at_end_of_input() {
        // A logical line left empty by its continuation backslash at the end of the
        // input used to panic looking up its line number (`\\` alone) or be dropped
        // (`\\` + line break). Java 17 loads each of these as the key "" with the
        // value "" ...
        assert_eq!(one("\\"), kv("", ""));
        assert_eq!(one("\\\n"), kv("", ""));
        assert_eq!(one("\\\r"), kv("", ""));
        assert_eq!(one("  \\\n"), kv("", ""));
        assert_eq!(one("\\\n\\\n"), kv("", ""));
        let props = parse("x=1\n\\\n").unwrap();
        assert_eq!(props.property("").unwrap().line(), 2);
        assert_eq!(props.get("x"), Some("1"));
        // ... but nothing when the line break is CRLF or whitespace follows it, because
        // Java's readLine then reads on before it sees the end.
        assert!(parse("\\\r\n").unwrap().is_empty());
        assert!(parse("\\\n  ").unwrap().is_empty());
        assert!(parse("\\\n#c").unwrap().is_empty());
        assert_eq!(one("a\\\n\\\n"), kv("a", ""));
    }

    #[test]
    fn debug_redacts_secret_values() {
        let props = parse("sasl.password=hunter2\nacks=all\n").unwrap();
        let dbg = format!("{props:?} {:?}", props.property("sasl.password").unwrap());
        assert!(!dbg.contains("hunter2"), "{dbg}");
        assert!(dbg.contains("all"));
    }

    #[test]
    fn load_reads_file_and_names_it_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("consumer.properties");
        std::fs::write(&good, "bootstrap.servers=a:9092\n").unwrap();
        assert_eq!(
            Properties::load(&good).unwrap().get("bootstrap.servers"),
            Some("a:9092")
        );

        let bad = dir.path().join("bad.properties");
        std::fs::write(&bad, "a=1\nb=\\uXYZW\n").unwrap();
        let msg = Properties::load(&bad).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!("{}: line 2", bad.display())),
            "{msg}"
        );

        let latin1 = dir.path().join("latin1.properties");
        std::fs::write(&latin1, b"a=1\r\nb=caf\xe9\n").unwrap();
        let err = Properties::load(&latin1).unwrap_err();
        assert!(
            matches!(err, PropertiesError::NotUtf8 { line: 2, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("latin1.properties:2"));

        let missing = dir.path().join("missing.properties");
        let msg = Properties::load(&missing).unwrap_err().to_string();
        assert!(msg.contains("missing.properties"), "{msg}");
    }
}
