//! `eosmirror translate`: a consumer group's source offsets, translated
//! exactly into target offsets through the mapping eosmirror committed with
//! the copies; with `--apply`, committed to the same group on the target.

use anyhow::bail;

use crate::cli::groups_args::TranslateArgs;
use crate::clusters::connect_both;
use crate::groups::apply::apply;
use crate::groups::translate::{
    replicated_partitions, source_topic_ids, translate_groups, GroupOffsets, GroupTranslation,
};
use crate::topics::filter::TopicFilter;

/// Runs `eosmirror translate`. Blocking.
pub fn run(args: &TranslateArgs) -> anyhow::Result<GroupTranslation> {
    let topics = args
        .topic
        .as_deref()
        .map(|t| TopicFilter::pattern("--topic", t))
        .transpose()?;
    let endpoints = super::endpoints(&args.connection);
    let (source, target) = connect_both(&endpoints)?;
    let partitions = replicated_partitions(&source, &target, topics.as_ref())?;
    let offsets = source.groups().committed(&args.group, &partitions)?;
    if offsets.is_empty() {
        bail!(
            "group {:?} has no committed offsets on the source for any replicated topic{}; check the group name (eosmirror translate translates committed offsets only)",
            args.group,
            args.topic.as_ref().map(|t| format!(" matching {t:?}")).unwrap_or_default()
        );
    }
    let group = GroupOffsets::from([(args.group.clone(), offsets)]);
    let source_ids = source_topic_ids(&source, &group)?;
    let mut translation = translate_groups(&target, &endpoints.source_alias, &group, &source_ids)?
        .pop()
        .expect("one translation per group");
    if args.apply {
        let Some(target_offsets) = translation.target_offsets() else {
            bail!("{}not applying: some partitions have no translation, and a group is moved all at once or not at all", translation.to_text());
        };
        let applied = apply(
            &target.groups(),
            &args.group,
            &target_offsets,
            args.allow_rewind,
        )?;
        translation.record_applied(&applied);
    }
    Ok(translation)
}
