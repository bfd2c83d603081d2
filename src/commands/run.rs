//! `eosmirror run`: assembles configuration, checks both clusters, opens the
//! local cache and hands over to the supervisor.

use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use eosmirror_state::{ClusterIdentity, OpenOutcome, StateStore};

use crate::cli::run_args::{OnSourceGap, RunArgs};
use crate::clusters::{connection_only, load_client_config, Cluster, CONNECT_TIMEOUT};
use crate::config::ClientRole;
use crate::connect::cluster_id;
use crate::groups::sync::GroupSync;
use crate::health::Health;
use crate::pattern::NamePattern;
use crate::replication::client_settings::{self, LaneCheck};
use crate::replication::lane::{GapPolicy, WorkerSettings};
use crate::replication::limits::{BatchLimits, BufferBudget};
use crate::replication::membership::{FleetSettings, LaneOwnership};
use crate::replication::other_deployments::{refuse_other_deployments, Deployment};
use crate::replication::park::SourceEnds;
use crate::replication::progress::InternalTopics;
use crate::replication::selection::Selection;
use crate::replication::supervisor::{self, SupervisorSettings};
use crate::replication::throttle::{self, Throttle};
use crate::shutdown::Shutdown;
use crate::topics::filter::TopicFilter;
use crate::topics::internal::ToolConnection;
use crate::topics::target::TargetTopicOptions;

fn instance_id() -> u64 {
    crate::clock::unix_nanos() ^ (u64::from(std::process::id()) << 32)
}

/// Runs replication until SIGTERM/SIGINT or a failure.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    super::refuse_flags(&args)?;
    let layout = super::layout(&args.deployment, &args.mirrormaker)?;
    let metrics_listener = match args.metrics_address {
        Some(address) => Some(crate::endpoint::bind(address).await?),
        None => None,
    };
    // A batch collects for one commit interval, then flushes and commits.
    let ready_window = Duration::from_millis(2 * args.commit_interval_ms) + Duration::from_secs(10);
    let filter = args.topics.filter()?;
    let start_over = args
        .start_over
        .as_deref()
        .map(|pattern| TopicFilter::pattern("--start.over", pattern))
        .transpose()?;
    let groups_sync = args
        .groups_sync
        .as_deref()
        .map(|g| NamePattern::groups("--groups.sync", g))
        .transpose()?;
    // What every instance of a fleet must share (see `selection`).
    let (include, exclude) = filter.patterns();
    let selection = Selection::of(&[
        ("--include", Some(include)),
        ("--exclude", exclude),
        (
            "--groups.sync",
            groups_sync.as_ref().map(NamePattern::as_str),
        ),
    ]);
    let throttle_limits = super::throttle_limits(&args.throttle)?;
    let mut source = load_client_config(&args.connection.consumer_config, ClientRole::Consumer)?;
    let mut target = load_client_config(&args.connection.producer_config, ClientRole::Producer)?;
    let source_connection = connection_only(&source);
    let target_connection = connection_only(&target);

    let (source_id, target_id) = {
        let (s, t) = (source_connection.clone(), target_connection.clone());
        let (sf, tf) = (
            args.connection.consumer_config.clone(),
            args.connection.producer_config.clone(),
        );
        tokio::task::spawn_blocking(move || {
            Ok::<_, anyhow::Error>((
                cluster_id(&s, "source", &sf, CONNECT_TIMEOUT)?,
                cluster_id(&t, "target", &tf, CONNECT_TIMEOUT)?,
            ))
        })
        .await??
    };
    if source_id == target_id {
        bail!("source and target are the same cluster (id {source_id}); point --producer.config at the target cluster");
    }
    let tools = ToolConnection::new(&target_connection, &args.connection.producer_config);
    {
        let target = Cluster {
            name: "target",
            connection: target_connection.clone(),
        };
        let tools = tools.clone();
        let prefix = args.deployment.transactional_id_prefix.clone();
        let alias = args.connection.source_alias.clone();
        tokio::task::spawn_blocking(move || {
            let position_topic = InternalTopics::for_alias(&alias).position;
            let deployment = Deployment {
                prefix: &prefix,
                alias: &alias,
                position_topic: &position_topic,
                lanes: layout.lanes(),
            };
            refuse_other_deployments(&target, &deployment, &tools)
        })
        .await??;
    }

    client_settings::for_lanes(
        &mut source,
        &mut target,
        &args.connection.source_alias,
        args.transaction_timeout_ms,
        &args.connection.producer_config,
    );

    let transactional_id_base = format!(
        "{}.{}",
        args.deployment.transactional_id_prefix, args.connection.source_alias
    );
    {
        let (source, target) = (source.clone(), target.clone());
        let check = LaneCheck {
            transactional_id_base: transactional_id_base.clone(),
            transaction_timeout: Duration::from_millis(args.transaction_timeout_ms),
            budget: BufferBudget::split(args.max_memory_bytes, layout.lanes() as usize),
            consumer_file: args.connection.consumer_config.clone(),
            producer_file: args.connection.producer_config.clone(),
        };
        if let Some(warning) = check.memory_beyond_bound(&source, layout.lanes()) {
            tracing::warn!("{warning}");
        }
        tokio::task::spawn_blocking(move || check.refuse_unusable(&source, &target)).await??;
    }

    let instance = instance_id();
    let fleet = FleetSettings {
        target: target_connection.clone(),
        instance,
        selection,
        group_id: transactional_id_base.clone(),
        position_topic: InternalTopics::for_alias(&args.connection.source_alias).position,
        session_timeout: Duration::from_millis(args.fleet_session_timeout_ms),
        revoke_wait: Duration::from_millis(args.shutdown_timeout_ms),
    };
    {
        let check = fleet.selection_check();
        tokio::task::spawn_blocking(move || check.before_joining())
            .await
            .expect("selection check panicked")?;
    }

    let identity = ClusterIdentity {
        source_alias: args.connection.source_alias.clone(),
        source_cluster_id: source_id,
        target_cluster_id: target_id,
    };
    let (state, outcome) = StateStore::open(&args.state_dir, &identity)?;
    match outcome {
        OpenOutcome::Created => {
            tracing::info!(dir = %args.state_dir.display(), "created local state")
        }
        OpenOutcome::Reopened => {
            tracing::info!(dir = %args.state_dir.display(), "reopened local state")
        }
        OpenOutcome::Rebuilt { moved_to, reason } => {
            tracing::warn!(dir = %args.state_dir.display(), moved_to = %moved_to.display(), %reason, "local state was unreadable; moved it aside, rebuilding from the target")
        }
    }

    let stall_limit = Duration::from_millis(args.health_stall_ms);
    let health = Arc::new(Health::new(stall_limit, ready_window));
    if let Some(listener) = metrics_listener {
        let recorder = crate::metrics::install()?;
        crate::endpoint::serve(listener, recorder, Arc::clone(&health));
    }
    let shutdown = Shutdown::default();
    shutdown.listen_for_signals()?;
    let throttle = Arc::new(Throttle::new(throttle_limits));
    match &args.throttle.throttle_file {
        Some(file) => {
            throttle::reload_on_sighup(throttle.clone(), file.clone())?;
            tracing::info!(file = %file.display(), "throttle: {throttle_limits} (SIGHUP re-reads the file)");
        }
        None if !throttle_limits.is_unlimited() => {
            tracing::info!("throttle: {throttle_limits}")
        }
        None => {}
    }

    let workers = Arc::new(WorkerSettings {
        source_ends: SourceEnds::new(source.clone()),
        park_after: args.park_after(),
        source,
        target,
        target_reader: target_connection.clone(),
        internal_topics: InternalTopics::for_alias(&args.connection.source_alias),
        layout,
        transactional_id_base: transactional_id_base.clone(),
        limits: BatchLimits {
            max_records: args.batch_max_records,
            max_bytes: args.batch_max_bytes,
            commit_interval: Duration::from_millis(args.commit_interval_ms),
            idle_poll: Duration::from_millis(500),
        },
        transaction_timeout: Duration::from_millis(args.transaction_timeout_ms),
        on_source_gap: match args.on_source_gap {
            OnSourceGap::Fail => GapPolicy::Fail,
            OnSourceGap::Skip => GapPolicy::Skip,
        },
        allow_nonempty_target: args.target_allow_nonempty,
        instance,
        source_cluster_id: identity.source_cluster_id.clone(),
        throttle,
        start_over,
        statistics_interval: args.statistics_interval(),
    });
    let supervisor_settings = SupervisorSettings {
        source_admin: source_connection,
        target_admin: target_connection,
        filter,
        target_topics: TargetTopicOptions {
            replication_factor: args.target_topics.target_replication_factor,
            add_partitions: args.target_topics.target_add_partitions,
            progress_retention: Duration::from_millis(args.target_topics.progress_retention_ms),
            layout,
            tools,
        },
        refresh_interval: Duration::from_millis(args.refresh_interval_ms),
        memory_limit_bytes: args.max_memory_bytes,
        shutdown_timeout: Duration::from_millis(args.shutdown_timeout_ms),
        metadata_timeout: CONNECT_TIMEOUT,
        progress_interval: Duration::from_millis(args.log_progress_ms),
        fleet,
    };
    let state = Arc::new(state);
    let lanes = Arc::new(LaneOwnership::default());
    let mut group_sync = None;
    if let Some(groups) = groups_sync {
        let sync = GroupSync {
            groups,
            interval: args.groups_sync_interval(),
            topics: supervisor_settings.filter.clone(),
            source: Cluster {
                name: "source",
                connection: supervisor_settings.source_admin.clone(),
            },
            target: Cluster {
                name: "target",
                connection: supervisor_settings.target_admin.clone(),
            },
            groups_topic: InternalTopics::for_alias(&args.connection.source_alias).groups,
            alias: args.connection.source_alias.clone(),
            state: Arc::clone(&state),
            lanes: Arc::clone(&lanes),
            layout,
            health: Arc::clone(&health),
        };
        group_sync = Some(tokio::spawn(sync.run(shutdown.clone())));
    }
    supervisor::run(
        supervisor_settings,
        workers,
        state,
        health,
        lanes,
        shutdown,
        group_sync,
    )
    .await?;
    tracing::info!("stopped cleanly");
    Ok(())
}
