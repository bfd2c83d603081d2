//! A set of `u64` stored as disjoint half-open ranges.
//!
//! The workload's ledger and the checker's "seen" sets hold sequence numbers
//! that are contiguous except around faults, so storing ranges keeps their
//! memory proportional to the number of gaps, not to the number of records.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent half-open ranges `start..end`, keyed by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    /// start → end (exclusive); ranges never overlap or touch.
    ranges: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// An empty set.
    pub fn new() -> RangeSet {
        RangeSet::default()
    }

    /// Adds `start..end` (no-op when empty), merging with neighbours.
    pub fn insert_range(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let (mut start, mut end) = (start, end);
        // A range starting at or before `start` that reaches it.
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start {
                start = s;
                end = end.max(e);
                self.ranges.remove(&s);
            }
        }
        // Ranges starting inside `start..=end` are swallowed.
        let swallowed: Vec<(u64, u64)> = self
            .ranges
            .range(start..=end)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in swallowed {
            end = end.max(e);
            self.ranges.remove(&s);
        }
        self.ranges.insert(start, end);
    }

    /// Adds one value.
    pub fn insert(&mut self, value: u64) {
        self.insert_range(value, value + 1);
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: u64) -> bool {
        self.ranges
            .range(..=value)
            .next_back()
            .is_some_and(|(_, &e)| value < e)
    }

    /// Number of values in the set.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    /// Whether the set holds no value.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The largest value, if any.
    pub fn max(&self) -> Option<u64> {
        self.ranges.iter().next_back().map(|(_, &e)| e - 1)
    }

    /// The ranges in ascending order.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().map(|(&s, &e)| (s, e))
    }

    /// Values in `self` but not in `other`.
    pub fn difference(&self, other: &RangeSet) -> RangeSet {
        let mut out = RangeSet::new();
        for (s, e) in self.ranges() {
            let mut at = s;
            // Ranges of `other` that may overlap s..e: the one starting at or
            // before s, then those starting inside.
            let first = other.ranges.range(..=s).next_back().map(|(&a, &b)| (a, b));
            let inside = other.ranges.range(s + 1..e).map(|(&a, &b)| (a, b));
            for (os, oe) in first.into_iter().chain(inside) {
                if oe <= at {
                    continue;
                }
                if os > at {
                    out.insert_range(at, os.min(e));
                }
                at = at.max(oe);
                if at >= e {
                    break;
                }
            }
            if at < e {
                out.insert_range(at, e);
            }
        }
        out
    }

    /// Values in both sets.
    pub fn intersection(&self, other: &RangeSet) -> RangeSet {
        self.difference(&self.difference(other))
    }

    /// Adds every value of `other`.
    pub fn extend(&mut self, other: &RangeSet) {
        for (s, e) in other.ranges() {
            self.insert_range(s, e);
        }
    }

    /// Up to `limit` ranges as text (`3..5, 9`), for reports.
    pub fn describe(&self, limit: usize) -> String {
        let mut parts: Vec<String> = self
            .ranges()
            .take(limit)
            .map(|(s, e)| {
                if e == s + 1 {
                    s.to_string()
                } else {
                    format!("{s}..{e}")
                }
            })
            .collect();
        if self.ranges.len() > limit {
            parts.push(format!("… ({} ranges)", self.ranges.len()));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranges: &[(u64, u64)]) -> RangeSet {
        let mut s = RangeSet::new();
        for &(a, b) in ranges {
            s.insert_range(a, b);
        }
        s
    }

    #[test]
    fn merges_adjacent_and_overlapping() {
        let mut s = RangeSet::new();
        for v in [0, 1, 2, 5, 4, 3, 10] {
            s.insert(v);
        }
        assert_eq!(s.ranges().collect::<Vec<_>>(), vec![(0, 6), (10, 11)]);
        s.insert_range(7, 12);
        assert_eq!(s.ranges().collect::<Vec<_>>(), vec![(0, 6), (7, 12)]);
        s.insert_range(2, 8);
        assert_eq!(s.ranges().collect::<Vec<_>>(), vec![(0, 12)]);
        assert_eq!(s.len(), 12);
        assert!(s.contains(11) && !s.contains(12));
        assert_eq!(s.max(), Some(11));
    }

    #[test]
    fn difference_and_intersection() {
        let a = set(&[(0, 10), (20, 30)]);
        let b = set(&[(2, 4), (8, 22), (25, 26), (29, 40)]);
        assert_eq!(
            a.difference(&b).ranges().collect::<Vec<_>>(),
            vec![(0, 2), (4, 8), (22, 25), (26, 29)]
        );
        assert_eq!(
            a.intersection(&b).ranges().collect::<Vec<_>>(),
            vec![(2, 4), (8, 10), (20, 22), (25, 26), (29, 30)]
        );
        assert_eq!(a.difference(&RangeSet::new()), a);
        assert!(RangeSet::new().difference(&a).is_empty());
        assert_eq!(a.describe(1), "0..10, … (2 ranges)");
    }
}
