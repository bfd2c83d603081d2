//! The scenario catalogue: every scenario's name, faults and expected
//! outcome, in the order `all` runs them.

use super::kinds::FaultKind;

/// A scenario: a set of fault kinds and what must come out.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name (`--scenario`).
    pub name: &'static str,
    /// What it does.
    pub about: &'static str,
    /// Fault kinds its events draw from.
    pub kinds: &'static [FaultKind],
    /// The expected outcome, stated.
    pub expected: &'static str,
}

const EXACT: &str =
    "zero anomalies; eosmirror recovers by itself after every fault and stops cleanly (exit 0)";

/// Every scenario, in the order `all` runs them.
pub const SCENARIOS: &[Scenario] = &[
    Scenario { name: "kill", about: "eosmirror killed with SIGKILL at random moments, restarted", kinds: &[FaultKind::KillMirror], expected: EXACT },
    Scenario { name: "zombie", about: "eosmirror frozen (SIGSTOP) longer than the transaction timeout while a second instance takes over, then thawed", kinds: &[FaultKind::Zombie], expected: "zero anomalies; each thawed zombie is fenced, learns from the fleet's group that its lanes moved, rejoins and leaves cleanly on SIGTERM" },
    Scenario { name: "target-blackhole", about: "target path blackholed (connections kept, nothing forwarded), sometimes longer than the transaction timeout, then healed", kinds: &[FaultKind::TargetBlackhole], expected: EXACT },
    Scenario { name: "target-reset", about: "target path connections reset repeatedly", kinds: &[FaultKind::TargetReset], expected: EXACT },
    Scenario { name: "source-network", about: "source path blackholed, or its connections reset repeatedly", kinds: &[FaultKind::SourceBlackhole, FaultKind::SourceReset], expected: EXACT },
    Scenario { name: "slow-links", about: "latency and bandwidth limits on the source and target paths", kinds: &[FaultKind::SlowTarget, FaultKind::SlowSource], expected: EXACT },
    Scenario { name: "target-broker-kill", about: "target broker killed with SIGKILL and restarted", kinds: &[FaultKind::TargetBrokerKill], expected: EXACT },
    Scenario { name: "source-broker-kill", about: "source broker killed with SIGKILL and restarted (the source is unavailable meanwhile)", kinds: &[FaultKind::SourceBrokerKill], expected: EXACT },
    Scenario { name: "state-loss", about: "eosmirror's state dir deleted or corrupted between restarts", kinds: &[FaultKind::StateLoss], expected: EXACT },
    Scenario { name: "source-gap", about: "source records removed by DeleteRecords before they were copied", kinds: &[FaultKind::SourceGap], expected: "eosmirror stops that partition with an error naming the deleted offsets (not silence), copies the others on, and exits non-zero at shutdown; restarted with --on.source.gap skip it copies everything else exactly once: zero anomalies" },
    Scenario { name: "source-topic-recreated", about: "the source topic deleted and created again under the same name while eosmirror runs, then written to", kinds: &[FaultKind::SourceTopicRecreated], expected: "eosmirror stops with an error naming the recreated topic (not silence); the copy holds every record of the old topic exactly once and nothing of the new one" },
    Scenario { name: "open-source-transaction-at-cutover", about: "a source transaction held open (a two-phase-commit sink) while eosmirror cutover runs, then committed", kinds: &[FaultKind::OpenSourceTransaction], expected: "cutover does not complete while the transaction is open and names its partition; after the commit it completes, and everything is copied exactly: zero anomalies" },
    Scenario { name: "fleet", about: "a second instance joins the fleet and takes a share of the lanes, then is killed with SIGKILL (its lanes move back after the session timeout) or leaves on SIGTERM (it hands them back)", kinds: &[FaultKind::InstanceKill, FaultKind::ScaleOutIn], expected: "zero anomalies; every second instance is assigned lanes by the fleet's group, and one that leaves on SIGTERM exits 0" },
    Scenario { name: "lane-count-change", about: "a second instance started with another lane count than the deployment's while the first copies", kinds: &[FaultKind::LaneCountChange], expected: "zero anomalies; every such instance exits non-zero before it writes anything, naming the lane count to use, and the first copies on" },
    Scenario { name: "combined", about: "all of the above but the source gap, drawn at random, several at once, under load", kinds: &[
        FaultKind::KillMirror, FaultKind::Zombie, FaultKind::TargetBlackhole, FaultKind::TargetReset,
        FaultKind::SourceBlackhole, FaultKind::SourceReset, FaultKind::SlowTarget, FaultKind::SlowSource,
        FaultKind::TargetBrokerKill, FaultKind::SourceBrokerKill, FaultKind::StateLoss,
        FaultKind::InstanceKill, FaultKind::ScaleOutIn, FaultKind::LaneCountChange,
    ], expected: EXACT },
];

/// The scenario called `name`.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}
