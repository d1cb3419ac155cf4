//! The `lock_core` fuzz driver (zklock_sim::script: one client's core
//! driven by a script of bytes against the model ZooKeeper, held to the
//! simulator's checker) on the committed seeds and on generated scripts,
//! on stable.

use std::time::Instant;

use zklock_sim::script::{run, run_counting, Reached};

/// Generated scripts per run.
const SCRIPTS: usize = 4000;

/// xorshift64: deterministic scripts from a seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A script that makes progress: mostly answers, acquisitions, releases
/// and time, with every fault among them.
fn script(rng: &mut Rng) -> Vec<u8> {
    // Ops by weight: start (0), drop (2), requeue (3), answer (4), refuse
    // (7), answer all (8), time (9), next deadline (10), drop connection
    // (11), connect (12), stall (13), third party (14), expire (15).
    const OPS: [u8; 32] = [
        0, 0, 0, 0, 2, 2, 3, 4, 4, 4, 4, 7, 8, 8, 8, 8, 8, 8, 9, 9, 10, 10, 11, 12, 12, 13, 14, 14,
        14, 14, 15, 8,
    ];
    let mut out = vec![rng.next() as u8];
    out.extend_from_slice(&[12, 0, 8, 0]);
    for _ in 0..rng.next() % 80 {
        let op = OPS[(rng.next() % OPS.len() as u64) as usize];
        let arg = rng.next() as u8;
        out.push(op);
        // Time passes mostly by less than the shortest session timeout
        // (the server expires a session silent longer on its own).
        out.push(if op == 9 && arg & 0x80 == 0 {
            arg >> 3
        } else {
            arg
        });
    }
    out
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Generated scripts; `ZKLOCK_FUZZ_SEED` picks another run of them.
#[test]
fn fuzz_lock_core_on_generated_scripts() {
    let seed: u64 = std::env::var("ZKLOCK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x2545_f491_4f6c_dd1d);
    // Every seed its own stream (xorshift needs a state that is not 0).
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let started = Instant::now();
    let mut all = Reached::default();
    for n in 0..SCRIPTS {
        let data = script(&mut rng);
        match std::panic::catch_unwind(|| run_counting(&data)) {
            Ok(r) => all.add(&r),
            Err(_) => panic!(
                "script #{n} of seed {seed} broke a promise; replay it with \
                 ZKLOCK_FUZZ_SEED={seed} cargo test --test simulation fuzz_lock_core_on_generated_scripts, \
                 or alone with ZKLOCK_FUZZ_SCRIPT={} ZKLOCK_FUZZ_TRACE=1 cargo test --test simulation \
                 fuzz_lock_core_replay_script -- --nocapture",
                hex(&data)
            ),
        }
    }
    eprintln!("{SCRIPTS} scripts in {:?}: {all:?}", started.elapsed());
    // The scripts reach what the checks are about, or they check little.
    for (what, n) in [
        ("grants", all.grants),
        (
            "grants past another process's contender",
            all.grants_past_foreign,
        ),
        ("suspended holders", all.suspended),
        ("lost holders", all.lost),
        ("sessions expired by the server", all.expiries),
        ("acquisitions that failed", all.failures),
    ] {
        assert!(n >= SCRIPTS / 100, "only {n} {what} in {SCRIPTS} scripts");
    }
}

/// The committed seeds of the `lock_core` fuzz target replay cleanly.
#[test]
fn fuzz_lock_core_seeds_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/lock_core");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/seeds/lock_core exists") {
        let path = entry.expect("seed entry").path();
        let data = std::fs::read(&path).expect("seed file");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!("seed {} broke a promise", path.display());
        }
        count += 1;
    }
    assert!(count > 0, "no lock_core seeds in {}", dir.display());
}

/// One script given in hex by `ZKLOCK_FUZZ_SCRIPT` (with
/// `ZKLOCK_FUZZ_TRACE=1` to see each step); nothing without it.
#[test]
fn fuzz_lock_core_replay_script() {
    let Ok(script) = std::env::var("ZKLOCK_FUZZ_SCRIPT") else {
        return;
    };
    let data: Vec<u8> = (0..script.len() / 2)
        .map(|i| u8::from_str_radix(&script[2 * i..2 * i + 2], 16).expect("hex"))
        .collect();
    run(&data);
}
