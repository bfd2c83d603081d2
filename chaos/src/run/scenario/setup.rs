//! A scenario's setup: its topic and files, the fault proxies its faults
//! need, the workload, the tail of the target and the first eosmirror,
//! up to the first copies.

use std::fs;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use tokio::runtime::Runtime;

use super::catalogue::Scenario;
use super::kinds::{FaultKind, Side};
use super::state::Run;
use crate::run::clusters::ClusterSpec;
use crate::run::faults::ProxyGroup;
use crate::run::mirror::MirrorSpec;
use crate::run::rng::Rng;
use crate::run::tail::Tail;
use crate::run::workload::{Workload, WorkloadSpec};
use crate::run::Config;

impl<'a> Run<'a> {
    pub(super) fn setup(
        cfg: &'a Config,
        rt: &'a Runtime,
        sc: &'a Scenario,
        seed: u64,
        kinds: Vec<FaultKind>,
    ) -> Result<Run<'a>> {
        let stamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() % 10_000_000_000;
        let topic = format!("chaos-{}-{stamp}", sc.name);
        let dir = cfg.work_dir.join(&topic);
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        cfg.source.create_topic(&topic, cfg.partitions)?;
        let needs = |side: Side| kinds.iter().any(|k| k.path() == Some(side));
        let source_proxy = if needs(Side::Source) {
            Some(ProxyGroup::start(rt, "source", &cfg.source.proxies)?)
        } else {
            None
        };
        let target_proxy = if needs(Side::Target) {
            Some(ProxyGroup::start(rt, "target", &cfg.target.proxies)?)
        } else {
            None
        };
        let bootstrap = |spec: &ClusterSpec, proxied: bool| {
            if proxied {
                spec.proxied_bootstrap()
                    .unwrap_or_else(|| spec.bootstrap.clone())
            } else {
                spec.bootstrap.clone()
            }
        };
        let consumer_config = dir.join("consumer.properties");
        let producer_config = dir.join("producer.properties");
        cfg.source.write_properties(
            &consumer_config,
            &bootstrap(&cfg.source, source_proxy.is_some()),
        )?;
        cfg.target.write_properties(
            &producer_config,
            &bootstrap(&cfg.target, target_proxy.is_some()),
        )?;
        cfg.source.write_properties(
            &dir.join("consumer-direct.properties"),
            &cfg.source.bootstrap,
        )?;
        cfg.target.write_properties(
            &dir.join("producer-direct.properties"),
            &cfg.target.bootstrap,
        )?;
        let mut rng = Rng::new(seed);
        let run_id = rng.next();
        let spec = MirrorSpec {
            binary: cfg.eosmirror.clone(),
            consumer_config,
            producer_config,
            state_dir: dir.join("state-0"),
            alias: topic.clone(),
            prefix: format!("{topic}-txn"),
            topic: topic.clone(),
            transaction_timeout_ms: cfg.transaction_timeout_ms,
            commit_interval_ms: cfg.commit_interval_ms,
            fleet_session_timeout_ms: cfg.fleet_session_timeout_ms,
            log_dir: dir.clone(),
        };
        let tail = Tail::start(&cfg.target, &topic, cfg.partitions, run_id);
        let group = format!("{topic}-group");
        let workload = Workload::start(WorkloadSpec {
            source: cfg.source.clone(),
            topic: topic.clone(),
            partitions: cfg.partitions,
            rate: cfg.rate,
            run: run_id,
            seed,
            group: group.clone(),
        })?;
        let mut run = Run {
            cfg,
            rt,
            sc,
            seed,
            rng,
            kinds,
            topic,
            dir,
            source_proxy,
            target_proxy,
            spec,
            extra: Vec::new(),
            mirror: None,
            started_mirrors: 0,
            workload: Some(workload),
            tail,
            group,
            faults: Vec::new(),
            deviations: Vec::new(),
            outcomes: Vec::new(),
            connections_reset: 0,
            fault_phase: Instant::now(),
            gap_done: false,
            run_id,
            finished: None,
        };
        run.start_mirror()?;
        // Warm up: the first copies arrive.
        let deadline = Instant::now() + Duration::from_secs(120);
        while run.tail.with_judge(|j| j.copied()) == 0 {
            run.watch();
            if Instant::now() > deadline {
                return Err(anyhow!(
                    "no record reached the target within 120 s; eosmirror output:\n{}",
                    run.mirror_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        run.fault_phase = Instant::now();
        Ok(run)
    }
}
