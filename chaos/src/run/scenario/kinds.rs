//! The kinds of fault a scenario draws from, the network path each needs
//! a proxy on, and why one cannot run with a given configuration.

use serde::Serialize;

use crate::run::Config;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// 1. eosmirror killed with SIGKILL at a random moment, restarted.
    KillMirror,
    /// 2. SIGSTOP longer than the transaction timeout while a second
    ///    instance takes over, then SIGCONT: the zombie must be fenced,
    ///    rejoin the fleet and leave cleanly.
    Zombie,
    /// 3. Target path blackholed (connections kept, nothing forwarded).
    TargetBlackhole,
    /// 4. Target path connections reset repeatedly.
    TargetReset,
    /// 5a. Source path blackholed.
    SourceBlackhole,
    /// 5b. Source path connections reset repeatedly.
    SourceReset,
    /// 6a. Latency and/or a bandwidth cap on the target path.
    SlowTarget,
    /// 6b. Latency and/or a bandwidth cap on the source path.
    SlowSource,
    /// 7. Target broker SIGKILLed and restarted.
    TargetBrokerKill,
    /// 8. Source broker SIGKILLed and restarted.
    SourceBrokerKill,
    /// 9. eosmirror's state dir deleted or corrupted between restarts.
    StateLoss,
    /// 10. Source records deleted (DeleteRecords) before they were copied.
    SourceGap,
    /// 11. The source topic deleted and created again under the same name
    ///     while eosmirror runs, then written to.
    SourceTopicRecreated,
    /// 12. A source transaction held open while `eosmirror cutover` runs,
    ///     then committed.
    OpenSourceTransaction,
    /// 13. A second instance joins the fleet, takes a share of the lanes,
    ///     and is killed with SIGKILL: its lanes move back after the
    ///     session timeout.
    InstanceKill,
    /// 14. A second instance joins the fleet, takes a share of the lanes,
    ///     and leaves on SIGTERM, handing them back.
    ScaleOutIn,
    /// 15. A second instance started with another lane count than the
    ///     deployment's while the first copies: it must be refused, naming
    ///     the count to use, and the copy stays exact (a lane-count change
    ///     is not supported, so it must never start).
    LaneCountChange,
}

impl FaultKind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillMirror => "kill-mirror",
            FaultKind::Zombie => "zombie",
            FaultKind::TargetBlackhole => "target-blackhole",
            FaultKind::TargetReset => "target-reset",
            FaultKind::SourceBlackhole => "source-blackhole",
            FaultKind::SourceReset => "source-reset",
            FaultKind::SlowTarget => "slow-target",
            FaultKind::SlowSource => "slow-source",
            FaultKind::TargetBrokerKill => "target-broker-kill",
            FaultKind::SourceBrokerKill => "source-broker-kill",
            FaultKind::StateLoss => "state-loss",
            FaultKind::SourceGap => "source-gap",
            FaultKind::SourceTopicRecreated => "source-topic-recreated",
            FaultKind::OpenSourceTransaction => "open-source-transaction",
            FaultKind::InstanceKill => "instance-kill",
            FaultKind::ScaleOutIn => "scale-out-in",
            FaultKind::LaneCountChange => "lane-count-change",
        }
    }

    /// The network path it needs a proxy on, if any.
    pub(super) fn path(self) -> Option<Side> {
        match self {
            FaultKind::TargetBlackhole | FaultKind::TargetReset | FaultKind::SlowTarget => {
                Some(Side::Target)
            }
            FaultKind::SourceBlackhole | FaultKind::SourceReset | FaultKind::SlowSource => {
                Some(Side::Source)
            }
            _ => None,
        }
    }

    pub(super) fn needs_brokers(self) -> bool {
        matches!(
            self,
            FaultKind::TargetBrokerKill | FaultKind::SourceBrokerKill
        )
    }

    /// Faults that replace or pause the eosmirror process (at most one per
    /// event).
    pub(super) fn is_process(self) -> bool {
        self.path().is_none()
    }

    /// Process faults that start a second instance and wait, with the
    /// network faults of their event in force, for it to join the fleet or
    /// be refused. A blackhole in that time makes it give up at start
    /// ("cannot reach the cluster") before it can do either.
    pub(super) fn awaits_second_instance(self) -> bool {
        matches!(
            self,
            FaultKind::InstanceKill | FaultKind::ScaleOutIn | FaultKind::LaneCountChange
        )
    }

    /// Network faults that forward nothing.
    pub(super) fn is_blackhole(self) -> bool {
        matches!(
            self,
            FaultKind::TargetBlackhole | FaultKind::SourceBlackhole
        )
    }

    /// Whether `self` and `other` make no sense in one event: two process
    /// faults, two faults on one path, or a second instance awaited
    /// through a blackhole.
    pub(super) fn clashes_with(self, other: FaultKind) -> bool {
        let awaited_through_blackhole =
            |a: FaultKind, b: FaultKind| a.awaits_second_instance() && b.is_blackhole();
        (self.is_process() && other.is_process())
            || (self.path().is_some() && self.path() == other.path())
            || awaited_through_blackhole(self, other)
            || awaited_through_blackhole(other, self)
    }

    /// One-off faults with a script of their own instead of events.
    pub(super) fn is_scripted(self) -> bool {
        matches!(
            self,
            FaultKind::SourceTopicRecreated | FaultKind::OpenSourceTransaction
        )
    }
}

/// Source or target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Source,
    Target,
}

pub(super) fn side_name(side: Side) -> &'static str {
    match side {
        Side::Source => "source",
        Side::Target => "target",
    }
}

/// Why `kind` cannot run with this configuration, if it cannot.
pub(super) fn unavailable(cfg: &Config, kind: FaultKind) -> Option<String> {
    if kind.needs_brokers() {
        if !cfg.broker_faults {
            return Some("broker faults are disabled (--no-broker-faults)".into());
        }
        if cfg.brokers.is_none() {
            return Some(
                "needs local control of the brokers (tests/kafka/cluster); the clusters are remote"
                    .into(),
            );
        }
    }
    match kind.path() {
        Some(Side::Source) if cfg.source.proxies.is_empty() => Some(
            "needs a fault proxy on the source path (--source-proxy LISTEN=BROKER, with the broker advertising LISTEN)".into(),
        ),
        Some(Side::Target) if cfg.target.proxies.is_empty() => Some(
            "needs a fault proxy on the target path (--target-proxy LISTEN=BROKER, with the broker advertising LISTEN)".into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_instance_is_never_awaited_through_a_blackhole() {
        for awaited in [
            FaultKind::InstanceKill,
            FaultKind::ScaleOutIn,
            FaultKind::LaneCountChange,
        ] {
            for blackhole in [FaultKind::SourceBlackhole, FaultKind::TargetBlackhole] {
                assert!(awaited.clashes_with(blackhole), "{awaited:?} {blackhole:?}");
                assert!(blackhole.clashes_with(awaited), "{blackhole:?} {awaited:?}");
            }
            // Slow or reset links heal on their own: still drawn together.
            assert!(!awaited.clashes_with(FaultKind::SlowTarget));
            assert!(!awaited.clashes_with(FaultKind::SourceReset));
        }
        // A restart of the only instance under a blackhole is a fault worth
        // drawing: it must recover once the path heals.
        assert!(!FaultKind::KillMirror.clashes_with(FaultKind::TargetBlackhole));
        assert!(FaultKind::KillMirror.clashes_with(FaultKind::Zombie));
        assert!(FaultKind::SourceReset.clashes_with(FaultKind::SourceBlackhole));
        assert!(!FaultKind::SourceReset.clashes_with(FaultKind::TargetBlackhole));
    }
}
