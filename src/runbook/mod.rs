//! The runbooks that move consumers from the source to the target: each
//! composes the engines (catch-up, verify, group offset translation) into
//! one operation with one report.
//!
//! - [`cutover`]: the orderly migration; the source is still there.
//! - [`failover`]: the source is gone; the offsets recorded on the target
//!   are all there is.

pub mod cutover;
pub mod failover;
