//! The commands, one file each: each takes its command line (`crate::cli`),
//! turns it into the plain options of the engines it drives, and calls
//! them. Engines never see a clap type, and no command calls another
//! command: `cutover` builds verify's options itself.

pub mod cutover;
pub mod failover;
pub mod plan;
pub mod run;
pub mod status;
pub mod translate;
pub mod verify;

use crate::cli::common::{ConnectionArgs, TopicArgs};
use crate::clusters::Endpoints;

/// The clusters and mirror named by the connection options every command
/// but `failover` shares with `run`.
fn endpoints(args: &ConnectionArgs) -> Endpoints {
    Endpoints {
        source_config: args.consumer_config.clone(),
        target_config: args.producer_config.clone(),
        source_alias: args.source_alias.clone(),
    }
}

/// The topic options as given, for messages that quote them.
fn topics_given(args: &TopicArgs) -> String {
    format!(
        "--include {:?}{}",
        args.include,
        args.exclude
            .as_ref()
            .map(|e| format!(" --exclude {e:?}"))
            .unwrap_or_default()
    )
}
