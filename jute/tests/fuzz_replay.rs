//! The fuzz targets' stable twin: replays every committed seed in
//! `fuzz/seeds/<target>/` through the matching `zklock_jute::fuzz` entry point, then a
//! few thousand deterministic pseudo-random inputs per target (fresh bytes and
//! mutations of the seeds), so plain `cargo test` exercises what the fuzzer does.
//!
//! The seeds are derived from the real-server vectors in `golden.rs`;
//! `seeds_match_golden_vectors` checks they are in step, and
//! `JUTE_WRITE_SEEDS=1 cargo test -p zklock-jute --test fuzz_replay seeds_match` (re)writes them.
// The crate promises Rust 1.65 for the library; this test, never shipped,
// may use newer std APIs (is_some_and, is_ok_and: 1.70).
#![allow(clippy::incompatible_msrv)]

use std::collections::BTreeSet;
use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

use bytes::BytesMut;
use zklock_jute::{
    decode_reply, decode_request_header, decode_server_message, split_frame, ConnectRequest,
    ConnectResponse, Decode, OpCode, Request, Response, ServerMessage, WatcherEvent,
};

type Target = fn(&[u8]);

/// Every fuzz target, by the name of its `fuzz/fuzz_targets/<name>.rs` and seed dir.
const TARGETS: &[(&str, Target)] = &[
    ("frames", zklock_jute::fuzz::frames),
    ("server_message", zklock_jute::fuzz::server_message),
    ("reply_body", zklock_jute::fuzz::reply_body),
    ("watcher_event", zklock_jute::fuzz::watcher_event),
    ("connect_response", zklock_jute::fuzz::connect_response),
    ("request_round_trip", zklock_jute::fuzz::request_round_trip),
];

/// Server replies in `golden.rs` (frame bodies) and the op each answers.
const REPLIES: &[(&str, OpCode)] = &[
    ("CREATE2_SEQ_RESP", OpCode::Create2),
    ("GET_CHILDREN2_RESP", OpCode::GetChildren2),
    ("MULTI_OK_RESP", OpCode::Multi),
    ("MULTI_FAIL_RESP", OpCode::Multi),
    ("EXISTS_NONODE_RESP", OpCode::Exists),
    ("PING_RESP", OpCode::Ping),
];
/// Watch events in `golden.rs` (frame bodies).
const EVENTS: &[&str] = &["WATCH_EVENT"];
/// Request frames in `golden.rs` (with their length prefix).
const REQUESTS: &[&str] = &[
    "CREATE2_SEQ_REQ",
    "GET_CHILDREN2_REQ",
    "MULTI_OK_REQ",
    "PING_REQ",
];
/// The handshake: the request is framed, the response is a bare body.
const CONNECT_REQ: &str = "CONNECT_REQ";
const CONNECT_RESP: &str = "CONNECT_RESP";

/// xid + zxid + err.
const REPLY_HEADER_LEN: usize = 16;

fn seed_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Every `pub const NAME: &str = "hex";` in golden.rs, read from its source so
/// the vectors live in exactly one place.
fn golden_vectors() -> Vec<(String, Vec<u8>)> {
    let src = include_str!("golden.rs");
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("pub const ") {
        rest = &rest[at + "pub const ".len()..];
        let (name, tail) = rest.split_once(':').expect("const name");
        let (ty, tail) = tail.split_once('=').expect("const value");
        assert_eq!(ty.trim(), "&str", "golden const {name} is not a hex string");
        let (_, tail) = tail.split_once('"').expect("opening quote");
        let (hex, tail) = tail.split_once('"').expect("closing quote");
        out.push((name.trim().to_string(), unhex(hex)));
        rest = tail;
    }
    out
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn unframed<'a>(name: &str, frame: &'a [u8]) -> &'a [u8] {
    let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - 4, "{name}: length prefix");
    &frame[4..]
}

/// (target, file name, bytes) for every seed derived from golden.rs.
fn derived_seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let golden = golden_vectors();
    let get = |name: &str| -> &[u8] {
        &golden
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("golden.rs has no {name}"))
            .1
    };
    // A new golden vector must be sorted into one of the lists above.
    let known: BTreeSet<&str> = REPLIES
        .iter()
        .map(|(n, _)| *n)
        .chain(EVENTS.iter().copied())
        .chain(REQUESTS.iter().copied())
        .chain([CONNECT_REQ, CONNECT_RESP])
        .collect();
    let found: BTreeSet<&str> = golden.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(found, known, "golden.rs consts vs. the seed lists here");

    let file = |name: &str| format!("{}.bin", name.to_lowercase());
    let mut seeds = Vec::new();
    let mut stream = Vec::new();
    let server_bodies = REPLIES
        .iter()
        .map(|(n, _)| *n)
        .chain(EVENTS.iter().copied());
    for name in server_bodies {
        let body = get(name);
        seeds.push(("frames", file(name), framed(body)));
        seeds.push(("server_message", file(name), body.to_vec()));
        stream.extend_from_slice(&framed(body));
    }
    seeds.push(("frames", "all_server_frames.bin".into(), stream));
    for (name, op) in REPLIES {
        let pick = OpCode::ALL.iter().position(|o| o == op).unwrap() as u8;
        let mut seed = vec![pick];
        seed.extend_from_slice(&get(name)[REPLY_HEADER_LEN..]);
        seeds.push(("reply_body", file(name), seed));
    }
    for name in EVENTS {
        let body = get(name)[REPLY_HEADER_LEN..].to_vec();
        seeds.push(("watcher_event", file(name), body));
    }
    seeds.push((
        "connect_response",
        file(CONNECT_RESP),
        get(CONNECT_RESP).to_vec(),
    ));
    let connect_req = unframed(CONNECT_REQ, get(CONNECT_REQ)).to_vec();
    seeds.push(("connect_response", file(CONNECT_REQ), connect_req));
    for name in REQUESTS {
        let body = unframed(name, get(name)).to_vec();
        seeds.push(("request_round_trip", file(name), body));
    }
    seeds
}

#[test]
fn seeds_match_golden_vectors() {
    let write = std::env::var_os("JUTE_WRITE_SEEDS").is_some();
    for (target, name, bytes) in derived_seeds() {
        let path = seed_root().join(target).join(&name);
        if write {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, &bytes).unwrap();
            continue;
        }
        let on_disk = fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run JUTE_WRITE_SEEDS=1 cargo test -p zklock-jute --test fuzz_replay seeds_match",
                path.display()
            )
        });
        assert!(
            on_disk == bytes,
            "{} differs from golden.rs; run JUTE_WRITE_SEEDS=1 cargo test -p zklock-jute --test fuzz_replay seeds_match",
            path.display()
        );
    }
}

/// One target and its seed files as (file name, bytes), sorted by name.
struct TargetSeeds {
    target: &'static str,
    run: Target,
    files: Vec<(String, Vec<u8>)>,
}

/// Every seed file for each target. Fails when a target has no seed dir or an
/// empty one, or when a seed dir matches no target, so the replay never
/// passes vacuously.
fn load_seeds() -> Vec<TargetSeeds> {
    let root = seed_root();
    let dirs = fs::read_dir(&root).unwrap_or_else(|e| panic!("seed root {}: {e}", root.display()));
    for dir in dirs {
        let name = dir.unwrap().file_name().into_string().unwrap();
        // The session and lock_core targets drive the client's core; the
        // protocol crate and the simulation tests replay them.
        assert!(
            TARGETS.iter().any(|(t, _)| *t == name) || name == "session" || name == "lock_core",
            "fuzz/seeds/{name} matches no fuzz target"
        );
    }
    TARGETS
        .iter()
        .map(|&(target, run)| {
            let dir = root.join(target);
            let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("seed dir {}: {e}", dir.display()))
                .map(|entry| {
                    let path = entry.unwrap().path();
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    (name, fs::read(&path).unwrap())
                })
                .collect();
            files.sort();
            assert!(!files.is_empty(), "seed dir {} is empty", dir.display());
            TargetSeeds { target, run, files }
        })
        .collect()
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs one input; a panic is re-raised naming the target and the exact input.
fn run_one(target: &str, run: Target, what: &str, data: &[u8]) {
    if panic::catch_unwind(AssertUnwindSafe(|| run(data))).is_err() {
        panic!(
            "zklock_jute::fuzz::{target} panicked on {what}: {}",
            hex(data)
        );
    }
}

/// Whether `data` gets past decoding to the round-trip check in the target,
/// so the replay can tell exercised inputs from ones refused at the door.
fn reaches_round_trip(target: &str, data: &[u8]) -> bool {
    let server = |frame: &[u8]| match decode_server_message(frame) {
        Ok(ServerMessage::Reply { header, body }) => OpCode::ALL
            .iter()
            .any(|op| matches!(decode_reply(*op, &header, body), Ok(Ok(_)))),
        Ok(ServerMessage::WatchEvent { .. }) => true,
        Err(_) => false,
    };
    match target {
        "frames" => {
            let mut buf = BytesMut::from(data);
            matches!(split_frame(&mut buf, 4096), Ok(Some(frame)) if server(&frame))
        }
        "server_message" => server(data),
        "reply_body" => data.split_first().is_some_and(|(&pick, body)| {
            Response::decode(OpCode::ALL[pick as usize % OpCode::ALL.len()], body).is_ok()
        }),
        "watcher_event" => WatcherEvent::decode_exact(data).is_ok(),
        "connect_response" => {
            ConnectResponse::decode_exact(data).is_ok()
                || ConnectRequest::decode_exact(data).is_ok()
        }
        "request_round_trip" => decode_request_header(data)
            .is_ok_and(|(header, body)| Request::decode_body(header.op, body).is_ok()),
        other => panic!("no target {other}"),
    }
}

#[test]
fn seeds_replay_cleanly() {
    let mut count = 0;
    for TargetSeeds { target, run, files } in load_seeds() {
        let mut reached = 0;
        for (name, data) in &files {
            run_one(target, run, &format!("seed {name}"), data);
            reached += usize::from(reaches_round_trip(target, data));
            count += 1;
        }
        assert!(reached > 0, "no {target} seed gets past decoding");
    }
    assert!(count >= TARGETS.len(), "replayed only {count} seeds");
}

/// xorshift64*: small, deterministic, good enough to steer mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Values that tend to sit on decoder boundaries: lengths of -1, 0, small,
/// huge, and the signed extremes.
const INTERESTING: &[i32] = &[
    -1,
    -2,
    0,
    1,
    2,
    4,
    8,
    16,
    0x7f,
    0xff,
    0xffff,
    i32::MAX,
    i32::MIN,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[&[u8]]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(8) {
            // Flip one bit.
            0 if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            // Set one byte to a random value.
            1 if len > 0 => {
                let at = rng.below(len);
                input[at] = rng.next() as u8;
            }
            // Overwrite 4 bytes with a boundary i32 (lengths, counts, codes).
            2 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                input[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            // Truncate.
            3 => input.truncate(rng.below(len + 1)),
            // Splice: our head, another input's tail.
            4 => {
                let other = pool[rng.below(pool.len())];
                input.truncate(rng.below(len + 1));
                input.extend_from_slice(&other[rng.below(other.len() + 1)..]);
            }
            // Insert random bytes.
            5 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let fresh = rng.bytes(n);
                input.splice(at..at, fresh);
            }
            // Delete a range.
            6 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(8)).min(len);
                input.drain(at..end);
            }
            // Duplicate a range in place (repeated records, longer lists).
            _ if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(32)).min(len);
                let copy = input[at..end].to_vec();
                input.splice(end..end, copy);
            }
            _ => input.push(rng.next() as u8),
        }
    }
}

/// Inputs per target; keeps the whole test well under a few seconds in debug.
const RANDOM_INPUTS: usize = 5000;

/// Prints, when the test fails, the command that draws the same inputs.
struct Replay(u64);

impl Drop for Replay {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "replay: JUTE_SEED={} cargo test -p zklock-jute --test fuzz_replay random_and_mutated",
                self.0
            );
        }
    }
}

/// Draws from `JUTE_SEED` if set, else from a fixed seed (every plain run
/// draws the same inputs).
#[test]
fn random_and_mutated_inputs_never_panic() {
    let seeds = load_seeds();
    let pool: Vec<&[u8]> = seeds
        .iter()
        .flat_map(|s| s.files.iter().map(|(_, d)| d.as_slice()))
        .collect();
    let base = match std::env::var("JUTE_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("JUTE_SEED={s:?} is not a number")),
        Err(_) => 0x9e37_79b9_7f4a_7c15,
    };
    let _replay = Replay(base);
    for (i, TargetSeeds { target, run, files }) in seeds.iter().enumerate() {
        let mut rng = Rng((base ^ (i as u64 + 1).wrapping_mul(0x1234_5678_9abc)).max(1));
        let mut reached = 0;
        for n in 0..RANDOM_INPUTS {
            let data = if n % 4 == 0 {
                // Fresh bytes, mostly short, sometimes long.
                let len = if rng.below(8) == 0 {
                    rng.below(600)
                } else {
                    rng.below(48)
                };
                rng.bytes(len)
            } else {
                let mut data = files[rng.below(files.len())].1.clone();
                mutate(&mut rng, &mut data, &pool);
                data
            };
            run_one(target, *run, &format!("random input #{n}"), &data);
            reached += usize::from(reaches_round_trip(target, &data));
        }
        eprintln!("{target}: {reached}/{RANDOM_INPUTS} random inputs reached the round trip");
        // The mutations must keep a fair share decodable, or this only tests refusals.
        assert!(
            reached * 50 >= RANDOM_INPUTS,
            "{target}: only {reached}/{RANDOM_INPUTS} inputs got past decoding"
        );
    }
}
