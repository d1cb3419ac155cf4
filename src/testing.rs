//! **Unstable** hooks for this project's own deterministic simulator and
//! tests (feature `testing`, off by default). Nothing here is covered by
//! semantic versioning: any release may change or remove it. Programs that
//! use zklock leave the feature off.
//!
//! With the feature, [`ClientBuilder::build_manual`](crate::ClientBuilder::build_manual)
//! hands out a [`Client`](crate::Client) together with its [`Core`]: the
//! sans-I/O core that an I/O thread drives in every other client, which the
//! caller drives itself, on a clock of its own;
//! [`Pending::try_take_at`](crate::recipes::Pending::try_take_at) polls a
//! handle on that clock. The feature also adds diagnostic counters the tests read
//! ([`Client::watch_events_received`](crate::Client::watch_events_received),
//! [`BatchMutex::local_waiters`](crate::recipes::BatchMutex::local_waiters)).

pub use crate::machine::{Core, CoreEvent};
