//! Curator's and kazoo's locks at the end of ZooKeeper's sequence counter,
//! measured on a real ZooKeeper 3.8 server (`testkit::zk::ZkHarness`, which
//! sets a lock parent's stored cversion a few creates before 2147483647),
//! beside zklock's recipes there (the zookeeper binary's `sequence_end`).

use std::thread;
use std::time::{Duration, Instant};

use testkit::peers::{acquired_node, line_millis, Peer, PeerKind, REPLY_TIMEOUT};
use testkit::sequence_of;
use testkit::zk::ZkHarness;
use zklock::{Client, CreateMode};
use zklock_proto::lock::past_the_end;

const TICK: Duration = Duration::from_millis(200);
const SESSION: Duration = Duration::from_secs(4);
const ROUNDS: usize = 30;
/// Per peer acquisition (`acquire <ms>`): a deadlocked peer reports
/// `timeout` after it.
const PEER_ACQUIRE: Duration = Duration::from_secs(3);
const CLIENTS: usize = 3;
/// The counter is set this many creates before its end.
const BEFORE_END: i32 = 3;

fn client(server: &ZkHarness) -> Client {
    Client::connect(&server.connect_string(), SESSION).expect("connect to the harness server")
}

// ---- the peers at the end, measured ---------------------------------------

/// What one peer's acquisition came to.
#[derive(Debug)]
enum PeerOutcome {
    /// `[acquired, released]` in the peer's unix millis, and the node.
    Held(u64, u64, String),
    Timeout,
    Error(String),
}

/// Three peers of `kind` (`lock_kind` as the peer program names it) on
/// `path`, whose counter is set three creates before the end; `ROUNDS`
/// acquisitions each with a bounded wait. Returns every outcome per peer.
fn peers_at_the_end(kind: PeerKind, lock_kind: &str, path: &str) -> Vec<Vec<PeerOutcome>> {
    let server = ZkHarness::start(TICK);
    let admin = client(&server);
    admin.create("/end", b"", CreateMode::Persistent).unwrap();
    admin.create(path, b"", CreateMode::Persistent).unwrap();
    server.set_sequence_counter(path, i32::MAX - BEFORE_END);
    let cs = server.connect_string();
    let peers: Vec<Peer> = (0..CLIENTS)
        .map(|k| Peer::start(kind, &cs, path, lock_kind, &format!("{kind}-{k}")))
        .collect();
    let started = Instant::now();
    let threads: Vec<_> = peers
        .into_iter()
        .map(|mut peer| {
            thread::spawn(move || {
                let mut outcomes = Vec::new();
                for _ in 0..ROUNDS {
                    peer.send(&format!("acquire {}", PEER_ACQUIRE.as_millis()));
                    let line = peer.next_line(PEER_ACQUIRE + REPLY_TIMEOUT);
                    match line {
                        Some(l) if l.starts_with("acquired ") => {
                            // Some work under the lock, as zklock's contenders do.
                            thread::sleep(Duration::from_millis(5));
                            let released = peer.release();
                            outcomes.push(PeerOutcome::Held(
                                line_millis(&l),
                                released,
                                acquired_node(&l),
                            ));
                        }
                        Some(l) if l == "timeout" => outcomes.push(PeerOutcome::Timeout),
                        Some(l) => outcomes.push(PeerOutcome::Error(l)),
                        None => panic!("{kind}: no answer to acquire within the bound"),
                    }
                }
                peer.quit();
                outcomes
            })
        })
        .collect();
    let all: Vec<Vec<PeerOutcome>> = threads
        .into_iter()
        .map(|t| t.join().expect("a peer thread panicked"))
        .collect();
    eprintln!("{kind} {lock_kind}: {:?} for all rounds", started.elapsed());
    all
}

/// How many pairs of holds by different peers overlap in time (the peers'
/// own stamps: taken right after acquiring and right before releasing).
fn overlapping_pairs(all: &[Vec<PeerOutcome>]) -> usize {
    let spans: Vec<(usize, u64, u64)> = all
        .iter()
        .enumerate()
        .flat_map(|(p, v)| {
            v.iter().filter_map(move |o| match o {
                PeerOutcome::Held(a, r, _) => Some((p, *a, *r)),
                _ => None,
            })
        })
        .collect();
    let mut n = 0;
    for (i, x) in spans.iter().enumerate() {
        for y in &spans[i + 1..] {
            if x.0 != y.0 && x.1 < y.2 && y.1 < x.2 {
                n += 1;
            }
        }
    }
    n
}

/// Prints the measurement and returns (held, held past the end, timeouts,
/// errors, overlapping pairs).
fn summarize(what: &str, all: &[Vec<PeerOutcome>]) -> (usize, usize, usize, usize, usize) {
    let flat: Vec<&PeerOutcome> = all.iter().flatten().collect();
    let held = flat
        .iter()
        .filter(|o| matches!(o, PeerOutcome::Held(..)))
        .count();
    let past: Vec<&str> = flat
        .iter()
        .filter_map(|o| match o {
            PeerOutcome::Held(_, _, node) if past_the_end(sequence_of(node)) => Some(node.as_str()),
            _ => None,
        })
        .collect();
    let timeouts = flat
        .iter()
        .filter(|o| matches!(o, PeerOutcome::Timeout))
        .count();
    let errors: Vec<&str> = flat
        .iter()
        .filter_map(|o| match o {
            PeerOutcome::Error(e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    let overlaps = overlapping_pairs(all);
    eprintln!(
        "{what}: {held} held ({} on nodes past the end), {timeouts} timeouts, {} errors \
         (first: {:?}), {overlaps} overlapping pairs of holds",
        past.len(),
        errors.len(),
        errors.first()
    );
    (held, past.len(), timeouts, errors.len(), overlaps)
}

/// Curator's InterProcessMutex at the end: measured, not fixed. What the
/// test pins down is that it does not fail closed (it holds on nodes past
/// the end) — the fact docs/SEQUENCE_END.md reports beside ours.
#[test]
fn curator_mutex_at_the_counter_end_measured() {
    let all = peers_at_the_end(PeerKind::Curator, "mutex", "/end/curator");
    let (held, past, timeouts, errors, _) = summarize("Curator InterProcessMutex", &all);
    assert_eq!(held + timeouts + errors, CLIENTS * ROUNDS);
    assert!(past > 0, "Curator held no node past the end");
}

/// kazoo's Lock at the end, measured the same way.
#[test]
fn kazoo_lock_at_the_counter_end_measured() {
    let all = peers_at_the_end(PeerKind::Kazoo, "mutex", "/end/kazoo");
    let (held, past, timeouts, errors, _) = summarize("kazoo Lock", &all);
    assert_eq!(held + timeouts + errors, CLIENTS * ROUNDS);
    assert!(past > 0, "kazoo held no node past the end");
}
