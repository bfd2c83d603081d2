//! Refusing a start while another deployment copies the same source alias
//! under another `--transactional.id.prefix`.
//!
//! The internal topics are named by the alias alone, the lanes'
//! transactional ids and the fleet's group by prefix and alias. Two
//! prefixes on one alias make two fleets that never fence each other, each
//! copying every record into the same target partitions. Every committed
//! lane transaction commits its fleet group's offset on the alias's
//! position topic (the fence), so another group with offsets there is
//! another deployment, running or stopped: its group keeps them until the
//! target's offsets retention (7 days by default) or until it is deleted.
//! Two deployments that both start before either commits are not told
//! apart.

use anyhow::bail;

use crate::clusters::Cluster;
use crate::groups::TopicPartition;
use crate::topics::internal::ToolConnection;

/// What names this deployment on the target.
pub struct Deployment<'a> {
    /// `--transactional.id.prefix`.
    pub prefix: &'a str,
    /// `--source.alias`.
    pub alias: &'a str,
    /// The alias's position topic, whose partitions are the lanes.
    pub position_topic: &'a str,
    pub lanes: u32,
}

impl Deployment<'_> {
    /// The fleet's group of this deployment.
    fn group(&self) -> String {
        format!("{}.{}", self.prefix, self.alias)
    }
}

/// Fails naming the other deployment's group and prefix when a group named
/// like a fleet of this alias (`<prefix>.<alias>`), other than this
/// deployment's, has offsets on the position topic. Only such offsets
/// refuse: a listing or a group that does not answer (a target broker
/// restarting, another team's group eosmirror may not describe) is logged
/// and the start goes on. Blocking.
pub fn refuse_other_deployments(
    target: &Cluster,
    deployment: &Deployment<'_>,
    tools: &ToolConnection,
) -> anyhow::Result<()> {
    let groups = target.groups();
    let own = deployment.group();
    let suffix = format!(".{}", deployment.alias);
    let lanes: Vec<TopicPartition> = (0..deployment.lanes as i32)
        .map(|lane| (deployment.position_topic.to_string(), lane))
        .collect();
    let answers = groups.list_groups().and_then(|listed| {
        let candidates: Vec<String> = listed
            .into_iter()
            .filter(|group| group.ends_with(&suffix) && *group != own)
            .collect();
        groups.committed_each(&candidates, &lanes)
    });
    let answers = match answers {
        Ok(answers) => answers,
        Err(e) => {
            tracing::warn!(
                "could not look for another deployment of this alias on the target: {e}"
            );
            return Ok(());
        }
    };
    for (group, offsets) in answers {
        match offsets {
            Ok(offsets) if offsets.is_empty() => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(%group, "could not tell whether this group is another deployment of this alias: {e}");
                continue;
            }
        }
        let prefix = group.strip_suffix(&suffix).unwrap_or(&group);
        bail!(
            "the consumer group {group} on the target has offsets on {topic}: another eosmirror deployment, with --transactional.id.prefix {prefix}, copies --source.alias {alias}. Its lanes' transactional ids are not this run's ({own}.lane-N), so neither would fence the other and both would copy every record. Run with --transactional.id.prefix {prefix}; or, if that deployment is stopped for good, delete its group first: `kafka-consumer-groups.sh {tools} --delete --group {group}`. Nothing was copied",
            topic = deployment.position_topic,
            alias = deployment.alias,
        );
    }
    Ok(())
}
