//! Sizes and switches of a run, from the environment (see bench/README.md,
//! "Sizes and switches").

use std::time::Duration;

use crate::model::Impl;

/// Sizes and switches, from the environment (see bench/README.md).
pub struct Sizes {
    pub quick: bool,
    pub cycles: usize,
    pub sessions: usize,
    pub contended_cycles: usize,
    pub hold_us: usize,
    pub waiters: Vec<(usize, usize)>,
    pub locks: usize,
    pub rounds: usize,
    pub fsync: Vec<bool>,
    pub impls: Vec<Impl>,
    /// zklock's waiters variants: `blocking` (a thread per waiter) and
    /// `nonblocking` (the non-blocking acquire handles: one thread for all).
    pub zklock_variants: Vec<String>,
    /// Implementations run in the second (largest) waiters mode.
    pub w2_impls: Vec<Impl>,
    /// zklock's idle mode: clients, each holding one lock; the idle window;
    /// the session timeout they ask for.
    pub idle_clients: usize,
    pub idle_ms: usize,
    pub idle_timeout_ms: usize,
    /// zklock's refused mode: clients, each holding one lock while half of
    /// its other writes are refused; the window; the session timeout.
    pub refused_clients: usize,
    pub refused_ms: usize,
    pub refused_timeout_ms: usize,
    /// Modes to run: unc, cont, w1, w2, held, fp (footprint), idle, refused, lc
    /// (zklock's uncontended and contended runs again with the leader
    /// check off), unlock (zklock's uncontended and contended runs again,
    /// released by `unlock()`, which waits for the delete's reply), requeue
    /// (zklock's contended run again, each turn ending in
    /// `Mutex::requeue`; with cont).
    pub modes: Vec<String>,
    pub worker_timeout: Duration,
    /// The heap of the bench's ZooKeeper servers (`-Xmx`), `BENCH_ZK_HEAP`.
    pub zk_heap: String,
}

/// A comma list of implementation keys from the environment, or `all`.
fn impl_list(key: &str, default: &str) -> Vec<Impl> {
    let v = std::env::var(key)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned());
    Impl::ALL
        .into_iter()
        .filter(|i| {
            v.split(',')
                .any(|w| w.trim() == "all" || w.trim() == i.key())
        })
        .collect()
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl Sizes {
    pub fn runs(&self, mode: &str) -> bool {
        self.modes.iter().any(|m| m == mode)
    }

    pub fn from_env() -> Sizes {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let q = |full: usize, small: usize| if quick { small } else { full };
        let impls = impl_list("BENCH_IMPLS", "all");
        // Curator and kazoo list every child on every attempt: at 10 000
        // waiters that took Curator over 6 minutes and 5 GB here.
        let w2_impls = impl_list("BENCH_W2_IMPLS", "zklock,zkrs")
            .into_iter()
            .filter(|i| impls.contains(i))
            .collect();
        let fsync = std::env::var("BENCH_FSYNC").unwrap_or_else(|_| "on,off".into());
        Sizes {
            quick,
            cycles: env_usize("BENCH_CYCLES", q(3000, 200)).max(1),
            sessions: env_usize("BENCH_SESSIONS", 8).max(1),
            contended_cycles: env_usize("BENCH_CONTENDED_CYCLES", q(100, 25)).max(1),
            hold_us: env_usize("BENCH_HOLD_US", 0),
            waiters: vec![
                (
                    env_usize("BENCH_WAITERS_1", q(1000, 200)),
                    env_usize("BENCH_WAITER_SESSIONS_1", 10).max(1),
                ),
                // Issue 10's size: 10 000 over 100 sessions.
                (
                    env_usize("BENCH_WAITERS_2", q(10_000, 1000)),
                    env_usize("BENCH_WAITER_SESSIONS_2", q(100, 20)).max(1),
                ),
            ],
            locks: env_usize("BENCH_LOCKS", q(10_000, 500)),
            idle_clients: env_usize("BENCH_IDLE_CLIENTS", 10).max(1),
            idle_ms: env_usize("BENCH_IDLE_S", q(10, 5)).max(1) * 1000,
            idle_timeout_ms: env_usize("BENCH_IDLE_TIMEOUT_MS", 10_000).max(1),
            refused_clients: env_usize("BENCH_REFUSED_CLIENTS", 6).max(1),
            refused_ms: env_usize("BENCH_REFUSED_S", q(30, 10)).max(1) * 1000,
            refused_timeout_ms: env_usize("BENCH_REFUSED_TIMEOUT_MS", 6_000).max(1),
            rounds: env_usize("BENCH_ROUNDS", 1).max(1),
            fsync: fsync
                .split(',')
                .filter_map(|w| match w.trim() {
                    "on" => Some(true),
                    "off" => Some(false),
                    _ => None,
                })
                .collect(),
            impls,
            w2_impls,
            zklock_variants: std::env::var("BENCH_ZKLOCK_VARIANTS")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "blocking,nonblocking".into())
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect(),
            modes: std::env::var("BENCH_MODES")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "unc,cont,w1,w2,held,fp,idle,refused,lc,unlock,requeue".into())
                .split(',')
                .map(|m| m.trim().to_owned())
                .collect(),
            worker_timeout: Duration::from_secs(env_usize("BENCH_WORKER_TIMEOUT_S", 600) as u64),
            // The test kit's default heap can run out in the 10 000-waiter
            // mode on a busy machine: the replies queued for slow readers,
            // each listing every waiter's name, fill it.
            zk_heap: std::env::var("BENCH_ZK_HEAP")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| "2g".into()),
        }
    }
}
