//! What every mode shares: the bench of one server configuration
//! ([`Bench`]: the orchestrator's session, where results go, how a worker
//! starts), and the readings taken around a timed loop ([`Span`]). The
//! modes themselves are `impl Bench` blocks in src/timed.rs (uncontended,
//! contended, their floors and variants) and src/scale.rs (waiters, held,
//! idle).

use std::time::{Duration, Instant};

use zklock::{Client, CreateMode, Op};
use zklock_bench::BoxResult;

use crate::model::{Impl, Results};
use crate::run::{Mntr, Proc, Server, Worker};
use crate::setup::Setup;
use crate::sizes::Sizes;

/// How long the orchestrator's own requests are tried again while their
/// outcome is unknown (connection lost, no answer in time): the server can
/// stall for minutes after the 10 000-waiter mode on a busy machine.
const RETRY_FOR: Duration = Duration::from_secs(300);

/// `op` on the orchestrator's session, tried again (a second apart) while
/// its outcome is unknown, for at most [`RETRY_FOR`].
pub fn retrying<T>(mut op: impl FnMut() -> zklock::Result<T>) -> zklock::Result<T> {
    let until = Instant::now() + RETRY_FOR;
    loop {
        match op() {
            Err(e) if e.is_outcome_unknown() && Instant::now() < until => {
                eprintln!("bench: the orchestrator's request: {e}; trying again");
                std::thread::sleep(Duration::from_secs(1));
            }
            other => return other,
        }
    }
}

/// The lock paths' parents are made persistent up front, for every
/// implementation alike, so that no container reaper removes one mid-run.
pub fn ensure(client: &Client, path: &str) -> BoxResult<()> {
    match retrying(|| client.create(path, b"", CreateMode::Persistent)) {
        Ok(_) => Ok(()),
        Err(e) if e.is_node_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// [`ensure`] for many paths, 500 to a multi; a multi that finds one of
/// them there already (a retried multi that had been applied) falls back
/// to one create each.
pub fn ensure_all(client: &Client, paths: &[String]) -> BoxResult<()> {
    for chunk in paths.chunks(500) {
        let ops: Vec<Op> = chunk
            .iter()
            .map(|p| Op::create(p, b"", CreateMode::Persistent))
            .collect();
        match retrying(|| client.multi(&ops)) {
            Ok(_) => {}
            Err(e) if e.is_node_exists() => {
                for p in chunk {
                    ensure(client, p)?;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Everything one server configuration needs.
pub struct Bench<'a> {
    pub setup: &'a Setup,
    pub sizes: &'a Sizes,
    pub server: Server,
    pub connect: String,
    pub client: Client,
    /// "on" or "off" (fsync), the first part of every row key.
    pub fs: &'static str,
    pub results: &'a mut Results,
}

impl Bench<'_> {
    pub fn start(&self, imp: Impl, mode: &str, path: &str, params: &[String]) -> BoxResult<Worker> {
        let mut args = vec![mode.to_owned(), self.connect.clone(), path.to_owned()];
        args.extend(params.iter().cloned());
        Worker::start(
            format!("{} {mode}", imp.label()),
            self.setup.command(imp, &args),
            self.sizes.worker_timeout,
        )
    }

    pub fn fresh_path(&self, name: &str) -> BoxResult<String> {
        let path = format!("/bench/{}-{name}", self.fs);
        ensure(&self.client, &path)?;
        Ok(path)
    }

    pub fn key(&self, k: &str) -> String {
        format!("{}/{k}", self.fs)
    }

    /// Runs one mode of one implementation; a failure becomes a note in the
    /// table instead of ending the whole run.
    pub fn attempt(&mut self, imp: Impl, prefix: &str, f: impl FnOnce(&mut Self) -> BoxResult<()>) {
        let t = Instant::now();
        match f(self) {
            Ok(()) => eprintln!(
                "bench: {} {} {prefix} done in {:.1} s",
                self.fs,
                imp.label(),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("bench: {} {} {prefix} FAILED: {e}", self.fs, imp.label());
                let first = e.to_string().lines().next().unwrap_or("").to_owned();
                let key = self.key(prefix);
                self.results
                    .note(&key, imp, &format!("failed: {first:.120}"));
            }
        }
    }
}

/// Warms the server's JIT with the kinds of request every lock sends, so
/// that the first implementation measured does not pay for a cold server.
pub fn warm_server(b: &Bench) -> BoxResult<()> {
    let path = format!("/bench/{}-server-warm", b.fs);
    ensure(&b.client, &path)?;
    let mutex = zklock::recipes::Mutex::new(&b.client, &path)?;
    for _ in 0..b.sizes.cycles.min(500) {
        mutex.lock()?.unlock()?;
    }
    Ok(())
}

/// The worker's `/proc` and the server's `mntr` read at the `ready` and
/// `done` stages: what a timed loop cost between them.
/// And the server's last zxid at both: the transactions committed between.
pub struct Span {
    pub p0: Proc,
    pub p1: Proc,
    pub m0: Mntr,
    pub m1: Mntr,
    pub z0: f64,
    pub z1: f64,
}

impl Default for Span {
    fn default() -> Span {
        Span {
            p0: Proc::default(),
            p1: Proc::default(),
            m0: Mntr::default(),
            m1: Mntr::default(),
            z0: f64::NAN,
            z1: f64::NAN,
        }
    }
}

impl Span {
    pub fn read(&mut self, stage: &str, server: &Server, pid: u32) {
        match stage {
            "ready" => {
                self.z0 = server.zxid();
                self.m0 = server.mntr();
                self.p0 = Proc::of(pid);
            }
            "done" => {
                self.p1 = Proc::of(pid);
                self.m1 = server.mntr();
                self.z1 = server.zxid();
            }
            _ => {}
        }
    }

    /// Transactions the server committed from `ready` to `done` (the
    /// change of its last zxid; the bench's four-letter words commit none).
    pub fn commits(&self) -> f64 {
        self.z1 - self.z0
    }
}
