//! The parser checked against a maintained implementation, the `java-properties` crate,
//! on many generated files.
//!
//! Why: the hand-written cases in `properties.rs` cover the rules one at a time; these
//! inputs combine them (continuations inside escapes, separators after escaped
//! whitespace, comments after emptied lines, ...) the way real files and typos do. Java 17's
//! `java.util.Properties.load` is the reference: where the oracle departs from it, the
//! generator stays out of that input class and a case below pins eosmirror to what Java
//! does (each checked with a throwaway Java program):
//!
//! 1. A file whose last line ends with a continuation backslash and no line break:
//!    the oracle drops that whole line; Java drops only the backslash (`a=b\` is `a=b`).
//! 2. A logical line emptied by its continuation backslash right at the end of the
//!    input (`\` + line break): the oracle yields nothing; Java loads the key `""`.
//!    The generated files therefore end with a line of their own (`z=end`).
//! 3. Continuation lines starting with Unicode whitespace other than space, tab and form
//!    feed (vertical tab, U+00A0, U+3000, ...): the oracle strips it (`trim_start`); Java
//!    keeps it. The alphabet has none of these.
//! 4. `\u+123`: the oracle reads the four characters with `u16::from_str_radix`, which
//!    takes a leading `+`; Java says "Malformed \uxxxx encoding" and eosmirror too. The
//!    alphabet has no `+`.
//! 5. A comment line that ends with a backslash, right after a line holding only a
//!    continuation backslash (`\` + line break + `#c\` + line break + `k=v`): Java
//!    still takes it for a comment (the logical line is empty) that ends at its own line
//!    end, so `k=v` is a property; the oracle continues the comment into it. Such
//!    files are left out of the comparison ([`oracle_continues_a_comment`]).
//!
//! Classes the comparison skips because the oracle rejects them (it returns an error):
//! any `\u` escape of a UTF-16 surrogate, paired or not (Java and eosmirror combine a
//! pair into one character; eosmirror rejects an unpaired one, where Java would store a
//! broken string), and malformed `\u` escapes (rejected by all three). The test counts
//! the compared files so that it cannot silently compare nothing.
//!
//! Both decode UTF-8 and skip a leading byte order mark, unlike Java's ISO-8859-1
//! `load(InputStream)`; see the module documentation of `properties`.

use super::parse;

/// Pieces the files are made of: every character with a meaning to the format, valid
/// escapes, and ordinary and non-ASCII text.
const PIECES: &[&str] = &[
    "\\", "\\", "\\", "=", "=", ":", ":", " ", " ", " ", "\t", "\u{c}", "\n", "\n", "\r", "\r\n",
    "#", "!", "\\\n", "\\\r\n", "\\\r", "\\\\", "\\ ", "\\=", "\\:", "\\#", "\\!", "\\t", "\\n",
    "\\r", "\\f", "\\b", "\\u0041", "\\u00e9", "\\u00E9", "\\u20AC", "\\u003D", "\\u005c", "a",
    "b", "k", "key", "x.y", "v", "0", "1", "4", "9", "A", "d", "F", "é", "€", "中", "😀", "\u{7}",
    "\0", "\"", "'", "/", "$",
];

/// Escapes the oracle rejects (surrogates, paired or not) or all three reject
/// (malformed): rarer, so that most files are compared.
const REJECTED: &[&str] = &[
    "\\u",
    "\\uD83D\\uDE00",
    "\\uD83D",
    "\\uDE00",
    "\\u12G4",
    "\\u12",
];

/// A deterministic xorshift64* generator, so every run checks the same files.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn generate(rng: &mut XorShift) -> String {
    let mut text = String::new();
    for _ in 0..rng.below(40) {
        let piece = if rng.below(40) == 0 {
            REJECTED[rng.below(REJECTED.len())]
        } else {
            PIECES[rng.below(PIECES.len())]
        };
        text.push_str(piece);
    }
    // Its own last line keeps the file out of the oracle's end-of-input departures
    // (classes 1 and 2 above); a continuation before it joins it, as in Java.
    text.push_str("\nz=end\n");
    text
}

/// Whether `text` may hold departure 5: a natural line holding only a backslash,
/// followed by one starting with `#` or `!` and ending with an odd number of
/// backslashes. (A superset: the first line may not start a logical line.)
fn oracle_continues_a_comment(text: &str) -> bool {
    let lines: Vec<&str> = text
        .split("\r\n")
        .flat_map(|l| l.split(['\n', '\r']))
        .collect();
    let trimmed = |l: &str| l.trim_start_matches([' ', '\t', '\u{c}']).to_string();
    lines.windows(2).any(|pair| {
        let next = trimmed(pair[1]);
        let odd = next.len() - next.trim_end_matches('\\').len();
        trimmed(pair[0]) == "\\" && next.starts_with(['#', '!']) && odd % 2 == 1
    })
}

/// The oracle's pairs, reduced as `Properties` keeps them: first position, last value.
fn oracle(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    java_properties::PropertiesIter::new_with_encoding(text.as_bytes(), encoding_rs::UTF_8)
        .read_into(|k, v| match pairs.iter_mut().find(|(seen, _)| *seen == k) {
            Some(pair) => pair.1 = v,
            None => pairs.push((k, v)),
        })
        .ok()?;
    Some(pairs)
}

#[test]
fn agrees_with_the_java_properties_crate_on_generated_files() {
    let mut rng = XorShift(0x5EED_F0E5);
    let (mut compared, mut oracle_rejected, mut skipped) = (0, 0, 0);
    for _ in 0..10_000 {
        let text = generate(&mut rng);
        if oracle_continues_a_comment(&text) {
            skipped += 1;
            continue;
        }
        let Some(want) = oracle(&text) else {
            oracle_rejected += 1;
            continue;
        };
        let got: Vec<(String, String)> = parse(&text)
            .unwrap_or_else(|e| panic!("{text:?}: the oracle reads it, eosmirror says {e}"))
            .iter()
            .map(|p| (p.key().to_string(), p.value().to_string()))
            .collect();
        assert_eq!(got, want, "{text:?}");
        compared += 1;
    }
    assert!(
        compared > 6000,
        "only {compared} compared ({oracle_rejected} rejected by the oracle, {skipped} skipped)"
    );
}

/// What Java 17 does in the classes where the oracle departs from it (see the module
/// documentation), so that the generator's blind spots are still checked.
#[test]
fn where_the_oracle_departs_eosmirror_does_what_java_does() {
    let pairs = |text: &str| -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .iter()
            .map(|p| (p.key().to_string(), p.value().to_string()))
            .collect()
    };
    let kv = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    // 1. Last line continued into the end of the input.
    assert_eq!(pairs("a=b\\"), kv("a", "b"));
    assert_eq!(pairs("x=1\na=b\\")[1], ("a".into(), "b".into()));
    // 2. A line emptied by its continuation at the end of the input.
    assert_eq!(pairs("\\\n"), kv("", ""));
    assert_eq!(pairs("\\"), kv("", ""));
    // 3. Only space, tab and form feed are skipped at the start of a continuation line.
    assert_eq!(pairs("a=b\\\n\u{b}c"), kv("a", "b\u{b}c"));
    assert_eq!(pairs("a=b\\\n\u{a0}c"), kv("a", "b\u{a0}c"));
    assert_eq!(pairs("a=b\\\n\u{3000}c"), kv("a", "b\u{3000}c"));
    assert_eq!(pairs("a=b\\\n \t\u{c}c"), kv("a", "bc"));
    // 4. `\u` needs four hex digits, a sign is not one.
    assert!(parse("a=\\u+123").is_err());
    assert!(
        java_properties::read("a=\\u+123".as_bytes()).is_ok(),
        "oracle changed"
    );
    // 5. A comment after an emptied line ends at its own line end.
    assert_eq!(pairs("\\\n#c\\\nk=v"), kv("k", "v"));
    assert_eq!(pairs("\\\r  !c\\\rk=v\n"), kv("k", "v"));
    assert!(oracle_continues_a_comment("\\\n#c\\\nk=v"));
}
