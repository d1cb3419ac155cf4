//! Benchmark worker for zookeeper-client 0.11 with tokio, driven by the
//! zklock bench orchestrator; same command line, stages and JSON as every
//! other worker (see bench/README.md):
//!
//! ```text
//! zkrs-bench <mode> <connect string> <lock path> [name=value ...]
//! ```
//!
//! Locks are the crate's own recipe, `Client::lock` with Curator-compatible
//! node names (`LockPrefix::new_curator(dir, "lock-")`). In the timed loops
//! (uncontended, contended, waiters) a lock is released as dropping the
//! crate's `LockClient` does it: its node's `delete` runs in a task of its
//! own and the loop goes on, as zklock's worker drops its guard. The `held`
//! mode awaits each `delete`. The guard is forgotten, leaking its path
//! string: a small allocation per acquisition (bench/FIGURES.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use zookeeper_client as zk;

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

async fn stage(name: &str) -> BoxResult<()> {
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "S {name}")?;
        out.flush()?;
    }
    let n = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)
    })
    .await??;
    if n == 0 {
        return Err("the orchestrator went away".into());
    }
    Ok(())
}

async fn connect(cluster: &str) -> BoxResult<zk::Client> {
    Ok(zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(cluster)
        .await?)
}

/// Takes the lock on `dir`; returns the path of our node.
async fn take(client: &zk::Client, dir: &str) -> BoxResult<String> {
    let prefix = zk::LockPrefix::new_curator(dir, "lock-")?;
    let lock = client
        .lock(prefix, b"", zk::LockOptions::new(zk::Acls::anyone_all()))
        .await?;
    let path = lock.lock_path().to_owned();
    // Released by `release` below, awaited, not by a background task.
    std::mem::forget(lock);
    Ok(path)
}

async fn release(client: &zk::Client, node: &str) -> BoxResult<()> {
    client.delete(node, None).await?;
    Ok(())
}

/// Releases without waiting: the delete goes on in a task of its own.
fn release_in_background(client: &zk::Client, node: String) {
    let client = client.clone();
    tokio::spawn(async move {
        if let Err(e) = client.delete(&node, None).await {
            eprintln!("zkrs-bench: releasing {node}: {e}");
        }
    });
}

fn ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

struct Params(BTreeMap<String, String>);

impl Params {
    fn usize(&self, key: &str, default: usize) -> BoxResult<usize> {
        match self.0.get(key) {
            None => Ok(default),
            Some(v) => Ok(v.parse().map_err(|_| format!("{key}={v} is not a count"))?),
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(json) => {
            println!("{json}");
        }
        Err(e) => {
            eprintln!("zkrs-bench: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(args: &[String]) -> BoxResult<String> {
    let [mode, cluster, path, rest @ ..] = args else {
        return Err("usage: zkrs-bench <mode> <connect> <path> [name=value ...]".into());
    };
    let mut m = BTreeMap::new();
    for a in rest {
        let (k, v) = a
            .split_once('=')
            .ok_or_else(|| format!("{a:?} is not name=value"))?;
        m.insert(k.to_owned(), v.to_owned());
    }
    let p = Params(m);
    let mut out = format!("{{\"impl\":\"zkrs\",\"mode\":\"{mode}\"");
    match mode.as_str() {
        "uncontended" => uncontended(cluster, path, &p, &mut out).await?,
        "contended" => contended(cluster, path, &p, &mut out).await?,
        "waiters" => waiters(cluster, path, &p, &mut out).await?,
        "held" => held(cluster, path, &p, &mut out).await?,
        other => return Err(format!("unknown mode {other:?}").into()),
    }
    out.push('}');
    Ok(out)
}

async fn cycle(client: &zk::Client, dir: &str) -> BoxResult<()> {
    let node = take(client, dir).await?;
    release_in_background(client, node);
    Ok(())
}

async fn uncontended(cluster: &str, path: &str, p: &Params, out: &mut String) -> BoxResult<()> {
    let cycles = p.usize("cycles", 1000)?;
    let warm = p.usize("warm", cycles / 2)?;
    let client = connect(cluster).await?;
    cycle(&client, path).await?;
    stage("rest").await?;
    for _ in 0..warm {
        cycle(&client, path).await?;
    }
    stage("ready").await?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        cycle(&client, path).await?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stage("done").await?;
    out.push_str(",\"latencies_ns\":[");
    for (i, l) in lat.iter().enumerate() {
        let _ = write!(out, "{}{l}", if i > 0 { "," } else { "" });
    }
    out.push(']');
    Ok(())
}

async fn contended(cluster: &str, path: &str, p: &Params, out: &mut String) -> BoxResult<()> {
    let sessions = p.usize("sessions", 8)?.max(1);
    let cycles = p.usize("cycles", 100)?;
    let warm = p.usize("warm", cycles / 4)?;
    let hold = Duration::from_micros(p.usize("hold_us", 0)? as u64);
    let t0 = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(connect(cluster).await?);
    }
    let warmed = Arc::new(Barrier::new(sessions + 1));
    let go = Arc::new(Barrier::new(sessions + 1));
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (id, client) in clients.iter().enumerate() {
        let (client, path) = (client.clone(), path.to_owned());
        let (warmed, go) = (warmed.clone(), go.clone());
        let (inside, overlaps) = (inside.clone(), overlaps.clone());
        tasks.push(tokio::spawn(async move {
            let mut record: Vec<[u64; 3]> = Vec::with_capacity(cycles);
            let mut result: BoxResult<()> = Ok(());
            for round in 0..2 {
                let n = if round == 0 { warm } else { cycles };
                for _ in 0..n {
                    if result.is_err() {
                        break;
                    }
                    let node = match take(&client, &path).await {
                        Ok(node) => node,
                        Err(e) => {
                            result = Err(e);
                            break;
                        }
                    };
                    let acquired = ns(t0);
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    if !hold.is_zero() {
                        tokio::time::sleep(hold).await;
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    if round == 1 {
                        record.push([id as u64, acquired, ns(t0)]);
                    }
                    release_in_background(&client, node);
                    result = Ok(());
                }
                if round == 0 {
                    warmed.wait().await;
                    go.wait().await;
                }
            }
            result.map(|()| record)
        }));
    }
    warmed.wait().await;
    stage("ready").await?;
    go.wait().await;
    let mut timeline = Vec::new();
    for t in tasks {
        timeline.extend(t.await??);
    }
    stage("done").await?;
    out.push_str(",\"timeline\":[");
    for (i, r) in timeline.iter().enumerate() {
        let _ = write!(
            out,
            "{}[{},{},{}]",
            if i > 0 { "," } else { "" },
            r[0],
            r[1],
            r[2]
        );
    }
    let _ = write!(
        out,
        "],\"overlaps_seen\":{}",
        overlaps.load(Ordering::SeqCst)
    );
    Ok(())
}

async fn waiters(cluster: &str, path: &str, p: &Params, out: &mut String) -> BoxResult<()> {
    let n = p.usize("waiters", 1000)?;
    let sessions = p.usize("sessions", 10)?.max(1);
    let holder = connect(cluster).await?;
    let held = take(&holder, path).await?;
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(connect(cluster).await?);
    }
    stage("ready").await?;
    let t0 = Instant::now();
    let last_done = Arc::new(AtomicU64::new(0));
    let passed = Arc::new(AtomicUsize::new(0));
    // One task per waiter.
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let (client, path) = (clients[i % sessions].clone(), path.to_owned());
        let (last_done, passed) = (last_done.clone(), passed.clone());
        tasks.push(tokio::spawn(async move {
            cycle(&client, &path).await?;
            passed.fetch_add(1, Ordering::SeqCst);
            last_done.fetch_max(ns(t0), Ordering::SeqCst);
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    stage("queued").await?;
    let released = ns(t0);
    release(&holder, &held).await?;
    let mut errors = 0;
    let mut first_error = String::new();
    for t in tasks {
        if let Err(e) = t.await? {
            errors += 1;
            if first_error.is_empty() {
                first_error = e.to_string().replace(['"', '\\'], "'");
            }
        }
    }
    let pass_ns = last_done.load(Ordering::SeqCst).saturating_sub(released);
    stage("done").await?;
    let _ = write!(
        out,
        ",\"pass_ns\":{pass_ns},\"passed\":{},\"errors\":{errors},\"first_error\":\"{first_error}\"",
        passed.load(Ordering::SeqCst)
    );
    Ok(())
}

async fn held(cluster: &str, path: &str, p: &Params, out: &mut String) -> BoxResult<()> {
    let locks = p.usize("locks", 10_000)?;
    let client = connect(cluster).await?;
    let dirs: Vec<String> = (0..locks).map(|i| format!("{path}/l{i}")).collect();
    stage("ready").await?;
    let t = Instant::now();
    let mut nodes = Vec::with_capacity(locks);
    for d in &dirs {
        nodes.push(take(&client, d).await?);
    }
    let take_ns = t.elapsed().as_nanos();
    stage("held").await?;
    let t = Instant::now();
    for node in &nodes {
        release(&client, node).await?;
    }
    let release_ns = t.elapsed().as_nanos();
    stage("done").await?;
    let _ = write!(out, ",\"take_ns\":{take_ns},\"release_ns\":{release_ns}");
    Ok(())
}
