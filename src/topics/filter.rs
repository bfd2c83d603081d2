//! Which source topics are replicated: MirrorMaker's `--include` /
//! `--exclude` semantics.
//!
//! MirrorMaker takes a Java regex that must match the whole topic name;
//! `,` separates alternatives (`A,B` means `A|B`), and `*` alone means all
//! topics. Internal topics (`__consumer_offsets`, `__transaction_state`,
//! eosmirror's own `__eosmirror.*`) are never replicated, whatever matches.

use regex::Regex;

/// A compiled include/exclude pair.
#[derive(Debug, Clone)]
pub struct TopicFilter {
    include: Regex,
    exclude: Option<Regex>,
}

/// A pattern that is not a valid regex (or uses Java regex features the
/// Rust engine lacks, such as look-around or back-references).
#[derive(Debug, thiserror::Error)]
#[error("{option} pattern {pattern:?} is not a valid regex: {reason}. eosmirror accepts Java-style regexes without look-around or back-references; separate alternatives with ',' or '|', use '*' for all topics")]
pub struct FilterError {
    option: &'static str,
    pattern: String,
    reason: String,
}

impl TopicFilter {
    pub fn new(include: &str, exclude: Option<&str>) -> Result<TopicFilter, FilterError> {
        Ok(TopicFilter {
            include: compile("--include", include)?,
            exclude: exclude.map(|e| compile("--exclude", e)).transpose()?,
        })
    }

    /// Topics matching one pattern of `option` (same syntax as `--include`).
    pub fn pattern(option: &'static str, pattern: &str) -> Result<TopicFilter, FilterError> {
        Ok(TopicFilter {
            include: compile(option, pattern)?,
            exclude: None,
        })
    }

    /// Whether `topic` is replicated.
    pub fn matches(&self, topic: &str) -> bool {
        !topic.starts_with("__")
            && self.include.is_match(topic)
            && !self.exclude.as_ref().is_some_and(|e| e.is_match(topic))
    }
}

/// Normalises a MirrorMaker pattern the way MirrorMaker does (trim, drop
/// spaces and surrounding quotes, `,` → `|`, lone `*` → everything) and
/// anchors it, because Java's `matches()` is a whole-string match.
fn compile(option: &'static str, pattern: &str) -> Result<Regex, FilterError> {
    let normalised: String = pattern
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .chars()
        .filter(|c| *c != ' ')
        .map(|c| if c == ',' { '|' } else { c })
        .collect();
    let body = if normalised == "*" {
        ".*".to_string()
    } else {
        normalised
    };
    Regex::new(&format!("^(?:{body})$")).map_err(|e| FilterError {
        option,
        pattern: pattern.to_string(),
        reason: e
            .to_string()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &str, exclude: Option<&str>) -> TopicFilter {
        TopicFilter::new(include, exclude).unwrap()
    }

    #[test]
    fn whole_name_must_match() {
        let f = filter("orders|payments.*", None);
        assert!(f.matches("orders"));
        assert!(f.matches("payments"));
        assert!(f.matches("payments.eu"));
        assert!(!f.matches("orders.eu"));
        assert!(!f.matches("old-orders"));
    }

    #[test]
    fn comma_separates_alternatives_and_star_means_all() {
        let f = filter("a, b", None);
        assert!(f.matches("a") && f.matches("b") && !f.matches("a,b"));
        let all = filter("*", None);
        assert!(all.matches("anything") && all.matches("x.y-z_1"));
        assert!(filter("'orders'", None).matches("orders"));
    }

    #[test]
    fn internal_topics_never_match() {
        let all = filter(".*", None);
        assert!(!all.matches("__consumer_offsets"));
        assert!(!all.matches("__transaction_state"));
        assert!(!all.matches("__eosmirror.progress.source"));
        assert!(!filter("__.*", None).matches("__consumer_offsets"));
    }

    #[test]
    fn exclude_wins() {
        let f = filter(".*", Some("tmp.*,test"));
        assert!(f.matches("orders"));
        assert!(!f.matches("tmp-1"));
        assert!(!f.matches("test"));
        assert!(f.matches("tests"));
    }

    #[test]
    fn unsupported_java_syntax_is_named() {
        let err = TopicFilter::new("(?!internal).*", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--include"), "{err}");
        assert!(err.contains("look-around"), "{err}");
    }
}
