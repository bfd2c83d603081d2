//! Source→target offsets: the exact mapping eosmirror records with every
//! copy, read back for verify, translation, cutover and failover.

pub mod history;
pub mod mapping;
pub mod tail;
pub mod topics_now;
