//! Which source topics are replicated: MirrorMaker's `--include` /
//! `--exclude` semantics.
//!
//! The patterns are MirrorMaker's (`crate::pattern`: a Java regex over
//! whole names, `,` between alternatives, `*` alone for all topics).
//! Internal topics (`__consumer_offsets`, `__transaction_state`,
//! eosmirror's own `__eosmirror.*`) are never replicated, whatever matches.

use crate::pattern::{NamePattern, PatternError};

/// A compiled include/exclude pair.
#[derive(Debug, Clone)]
pub struct TopicFilter {
    include: NamePattern,
    exclude: Option<NamePattern>,
}

impl TopicFilter {
    /// An empty `exclude` (a script's `--exclude "$UNSET"`) excludes
    /// nothing, as no `--exclude` does, and is the same selection for a
    /// fleet's comparison.
    pub fn new(include: &str, exclude: Option<&str>) -> Result<TopicFilter, PatternError> {
        Ok(TopicFilter {
            include: NamePattern::topics("--include", include)?,
            exclude: exclude
                .filter(|e| !e.trim().trim_matches(['"', '\'']).is_empty())
                .map(|e| NamePattern::topics("--exclude", e))
                .transpose()?,
        })
    }

    /// Topics matching one pattern of `option` (same syntax as `--include`).
    pub fn pattern(option: &'static str, pattern: &str) -> Result<TopicFilter, PatternError> {
        Ok(TopicFilter {
            include: NamePattern::topics(option, pattern)?,
            exclude: None,
        })
    }

    /// The include and exclude patterns as compiled: what tells two
    /// selections apart (see `replication::selection`).
    pub fn patterns(&self) -> (&str, Option<&str>) {
        (
            self.include.as_str(),
            self.exclude.as_ref().map(NamePattern::as_str),
        )
    }

    /// Whether `topic` is replicated.
    pub fn matches(&self, topic: &str) -> bool {
        !topic.starts_with("__") && self.selects(topic)
    }

    /// Whether `topic` is selected by the patterns but not replicated
    /// because its name starts with `__` (as MirrorMaker 2 leaves such
    /// topics out by default, and unlike MirrorMaker 1), other than Kafka's
    /// and eosmirror's own: worth telling a user who may expect it copied.
    pub fn left_out_as_internal(&self, topic: &str) -> bool {
        topic.starts_with("__")
            && !KAFKAS_OWN.iter().any(|own| topic.starts_with(own))
            && self.selects(topic)
    }

    fn selects(&self, topic: &str) -> bool {
        self.include.matches(topic) && !self.exclude.as_ref().is_some_and(|e| e.matches(topic))
    }
}

/// Prefixes of the internal topics of Kafka itself and of eosmirror.
const KAFKAS_OWN: &[&str] = &[
    "__consumer_offsets",
    "__transaction_state",
    "__cluster_metadata",
    "__share_group_state",
    "__eosmirror.",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(include: &str, exclude: Option<&str>) -> TopicFilter {
        TopicFilter::new(include, exclude).unwrap()
    }

    #[test]
    fn an_empty_exclude_is_no_exclude() {
        for empty in ["", " ", "''", "\"\""] {
            let f = filter("orders.*", Some(empty));
            assert_eq!(
                f.patterns(),
                filter("orders.*", None).patterns(),
                "{empty:?}"
            );
            assert!(f.matches("orders.eu"));
        }
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

    /// Other tools' `__` topics are left out too, and said to be; Kafka's
    /// and eosmirror's own go without a word.
    #[test]
    fn other_double_underscore_topics_are_left_out_and_told() {
        let all = filter(".*", Some("__debezium-old.*"));
        assert!(!all.matches("__debezium-heartbeat.db1"));
        assert!(all.left_out_as_internal("__debezium-heartbeat.db1"));
        assert!(!all.left_out_as_internal("__debezium-old.db1"), "excluded");
        assert!(!all.left_out_as_internal("orders"), "copied");
        for own in [
            "__consumer_offsets",
            "__transaction_state",
            "__eosmirror.position.a",
        ] {
            assert!(!all.left_out_as_internal(own), "{own}");
        }
        assert!(!filter("orders", None).left_out_as_internal("__debezium-heartbeat.db1"));
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
