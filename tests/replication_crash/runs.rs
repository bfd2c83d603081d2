//! Running eosmirror under a test's own alias: its arguments, the names of
//! its internal topics, and a clean stop.

use std::time::Duration;

use crate::support::mirror::Mirror;

/// How long a graceful stop (SIGTERM) may take.
pub(crate) const STOP: Duration = Duration::from_secs(60);

/// Arguments giving the run its own alias (internal topics, transactional
/// ids) plus `extra`.
pub(crate) fn args<'a>(alias: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--source.alias", alias];
    args.extend_from_slice(extra);
    args
}

pub(crate) fn progress_topic(alias: &str) -> String {
    format!("__eosmirror.progress.{alias}")
}

pub(crate) fn position_topic(alias: &str) -> String {
    format!("__eosmirror.position.{alias}")
}

/// Stops eosmirror with SIGTERM and asserts a clean exit.
pub(crate) fn stop_cleanly(mirror: &mut Mirror) {
    let code = mirror.stop(STOP);
    assert_eq!(
        code,
        0,
        "eosmirror did not stop cleanly; output:\n{}",
        mirror.output()
    );
}
