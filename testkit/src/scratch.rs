//! The cargo target directory, for what is worth keeping between runs
//! (compiled peers, certificates), and where the kit's own sources are.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The cargo target directory the running binary was built in (the nearest
/// ancestor holding cargo's `CACHEDIR.TAG`, so that `CARGO_TARGET_DIR` is
/// honoured), else the workspace's `target/`. Compiled peers and certificates
/// live there: `cargo clean` removes them, a new run reuses them.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .find(|dir| dir.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| workspace_dir().join("target"))
}

/// The repository root (this crate's parent directory).
pub(crate) fn workspace_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ has a parent directory")
}

/// This crate's directory, where the peers' sources are; right from any cwd.
pub(crate) fn testkit_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The clock's nanoseconds within the second: tells apart the temporary
/// builds of two processes whose ids happen to be equal.
pub(crate) fn subsec_nanos() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}
