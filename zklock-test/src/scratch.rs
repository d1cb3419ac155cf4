//! Where servers put their files: fresh directories under the system temp dir.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new, empty directory `zklock-<kind>-<pid>-<n>-<nanos>` under the temp
/// dir: unique across the tests of one process and across processes.
pub fn scratch_dir(kind: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "zklock-{kind}-{}-{n}-{}",
        std::process::id(),
        subsec_nanos()
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// The clock's nanoseconds within the second: tells apart the directories of
/// two runs whose process ids happen to be equal.
fn subsec_nanos() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}
