//! Exactly-once through crashes and through loss of the local state: eosmirror
//! killed with SIGKILL at random instants, its state dir deleted, corrupted
//! or belonging to other clusters, and an idle partition whose progress
//! history aged out. Every copy is judged by reading both clusters
//! (`read_committed`), never through eosmirror's own code.
//!
//! Each test uses its own `--source.alias`, so its internal topics and
//! transactional ids are its own: a killed instance of another test (whose
//! open transactions hold back the last stable offset until they are fenced)
//! never slows down this test's position reads.
//!
//! One file per case: SIGKILL at random moments (`sigkill`), the state dir
//! deleted (`state_deleted`), corrupted (`state_corrupt`), belonging to
//! other clusters (`state_foreign`) or ahead of a target that lost its
//! positions (`state_ahead`), and the idle partition
//! (`idle_partition`); the helpers they share write records and judge the
//! copy (`copy`), run eosmirror under a test's own alias (`runs`), query
//! the brokers (`brokers`) and look at state dirs from outside (`state_dirs`).

#[path = "../support/mod.rs"]
mod support;

mod brokers;
mod copy;
mod idle_partition;
mod runs;
mod sigkill;
mod state_ahead;
mod state_corrupt;
mod state_deleted;
mod state_dirs;
mod state_foreign;
