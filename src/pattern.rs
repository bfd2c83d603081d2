//! MirrorMaker's name patterns, compiled one way for every option that
//! takes one: topics (`--include`, `--exclude`, `--start.over`, status's
//! filters) and consumer groups (`--groups`, `--groups.sync`).
//!
//! MirrorMaker takes a Java regex that must match the whole name; `,`
//! separates alternatives (`A,B` means `A|B`), `*` alone means every name,
//! and quotes around the whole pattern are dropped (they are what a shell
//! or a properties file left behind). Spaces differ by what the names may
//! contain: a topic name never holds one, so MirrorMaker drops every space
//! of a topic pattern; a group id may, so a group pattern keeps the spaces
//! inside a name and drops only those around a `,` and at either end (as
//! MirrorMaker 2's `groups` list does). A literal comma in a group pattern
//! is `\x2c`.

use regex::Regex;

/// A compiled pattern; matches whole names only.
#[derive(Debug, Clone)]
pub struct NamePattern(Regex);

/// A pattern that is not a valid regex (or uses Java regex features the
/// Rust engine lacks, such as look-around or back-references).
#[derive(Debug, thiserror::Error)]
#[error("{option} pattern {pattern:?} is not a valid regex: {reason}. eosmirror accepts Java-style regexes without look-around or back-references; separate alternatives with ',' or '|', use '*' for all {names}")]
pub struct PatternError {
    option: &'static str,
    pattern: String,
    reason: String,
    /// "topics" or "groups", for the hint.
    names: &'static str,
}

impl NamePattern {
    /// A topic pattern given with `option` (every space dropped).
    pub fn topics(option: &'static str, pattern: &str) -> Result<NamePattern, PatternError> {
        let normalised: String = unquote(pattern).chars().filter(|c| *c != ' ').collect();
        compile(option, pattern, "topics", &normalised.replace(',', "|"))
    }

    /// A consumer group pattern given with `option` (spaces inside a name
    /// kept).
    pub fn groups(option: &'static str, pattern: &str) -> Result<NamePattern, PatternError> {
        let alternatives: Vec<&str> = unquote(pattern).split(',').map(str::trim).collect();
        compile(option, pattern, "groups", &alternatives.join("|"))
    }

    /// The group names a pattern given to [`NamePattern::groups`] spells
    /// out whole (alternatives without regex syntax; a dot also matches
    /// itself). A broker's group listing may leave out a group that
    /// exists, so these are asked for by name.
    pub fn spelled_out_groups(pattern: &str) -> Vec<String> {
        unquote(pattern)
            .split([',', '|'])
            .map(str::trim)
            .filter(|name| {
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            })
            .map(str::to_string)
            .collect()
    }

    /// The pattern as compiled (after MirrorMaker's syntax was translated).
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        self.0.is_match(name)
    }
}

/// The pattern without surrounding spaces and quotes.
fn unquote(pattern: &str) -> &str {
    pattern.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// Compiles a normalised pattern (`,` already `|`): a lone `*` means
/// everything, and the regex is anchored because Java's `matches()` is a
/// whole-string match.
fn compile(
    option: &'static str,
    pattern: &str,
    names: &'static str,
    normalised: &str,
) -> Result<NamePattern, PatternError> {
    let body = if normalised == "*" { ".*" } else { normalised };
    // The body alone first: unbalanced parentheses (`a)|(b`) would
    // otherwise close the anchoring group and match parts of names.
    Regex::new(body)
        .and_then(|_| Regex::new(&format!("^(?:{body})$")))
        .map(NamePattern)
        .map_err(|e| PatternError {
            option,
            pattern: pattern.to_string(),
            reason: e
                .to_string()
                .lines()
                .last()
                .unwrap_or_default()
                .trim()
                .to_string(),
            names,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(pattern: &str) -> NamePattern {
        NamePattern::topics("--include", pattern).unwrap()
    }

    fn groups(pattern: &str) -> NamePattern {
        NamePattern::groups("--groups", pattern).unwrap()
    }

    #[test]
    fn names_spelled_out_are_the_plain_alternatives() {
        assert_eq!(
            NamePattern::spelled_out_groups("'billing|audit.v2, reports-eu|team.*|(a|b)'"),
            ["billing", "audit.v2", "reports-eu"]
        );
        assert!(NamePattern::spelled_out_groups("*").is_empty());
    }

    #[test]
    fn unbalanced_parentheses_are_refused_not_unanchored() {
        for pattern in ["orders)|(payments", "(orders", "orders)"] {
            let error = NamePattern::topics("--include", pattern).unwrap_err();
            assert_eq!(error.option, "--include");
        }
        assert!(topics("(orders)|(payments)").matches("payments"));
        assert!(!topics("(orders)|(payments)").matches("orders-archive"));
    }

    #[test]
    fn whole_name_must_match() {
        for p in [topics("billing|audit.*"), groups("billing|audit.*")] {
            assert!(p.matches("billing") && p.matches("audit") && p.matches("audit-eu"));
            assert!(!p.matches("billing-old") && !p.matches("old-billing"));
        }
    }

    #[test]
    fn comma_separates_alternatives_in_both_kinds() {
        for p in [topics("a, b"), groups("a, b"), groups(" a ,b ")] {
            assert!(p.matches("a") && p.matches("b"));
            assert!(!p.matches("a,b") && !p.matches("a, b") && !p.matches(" b"));
        }
        let p = groups("billing.*,audit");
        assert!(p.matches("billing-eu") && p.matches("audit") && !p.matches("audit-eu"));
        assert!(groups(r"a\x2cb").matches("a,b"));
    }

    #[test]
    fn star_means_all_and_quotes_are_dropped() {
        for p in [topics("*"), groups("*"), groups("'*'")] {
            assert!(p.matches("anything") && p.matches("x.y-z_1"));
        }
        assert!(topics("'orders'").matches("orders"));
        assert!(groups("\"billing\"").matches("billing"));
    }

    #[test]
    fn spaces_inside_group_names_are_kept() {
        let p = groups("team a.*, b");
        assert!(p.matches("team a") && p.matches("team a-eu") && p.matches("b"));
        assert!(!p.matches("teama"));
        // Topic names cannot hold a space: MirrorMaker drops them.
        assert!(topics("team a").matches("teama"));
    }

    #[test]
    fn a_bad_pattern_names_the_option_and_the_pattern() {
        let err = NamePattern::groups("--groups.sync", "billing,(audit")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("--groups.sync pattern \"billing,(audit\" is not a valid regex: "),
            "{err}"
        );
        assert!(
            err.contains("unclosed group") && err.ends_with("use '*' for all groups"),
            "{err}"
        );
        let err = NamePattern::topics("--include", "(?!internal).*")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--include") && err.contains("look-around"),
            "{err}"
        );
        assert!(err.ends_with("use '*' for all topics"), "{err}");
    }
}
