//! The kazoo peer: `kazoo_peer.py` on the `python3` that has kazoo.

use std::ffi::OsString;
use std::process::Command;
use std::sync::OnceLock;

use crate::scratch::testkit_dir;

/// `$PYTHON`, else `python3`.
fn python() -> OsString {
    std::env::var_os("PYTHON").unwrap_or_else(|| OsString::from("python3"))
}

/// `python3 -u kazoo_peer.py`, once kazoo is known to import.
pub(super) fn command() -> Command {
    ensure_kazoo();
    let mut cmd = Command::new(python());
    cmd.arg("-u").arg(testkit_dir().join("peers/kazoo_peer.py"));
    cmd
}

/// Panics with install instructions unless `import kazoo` works (checked
/// once per test binary). Returns kazoo's version.
pub fn ensure_kazoo() -> &'static str {
    static CHECK: OnceLock<Result<String, String>> = OnceLock::new();
    let result = CHECK.get_or_init(|| {
        let py = python();
        let output = Command::new(&py)
            .args([
                "-c",
                "import kazoo, kazoo.version; print(kazoo.version.__version__)",
            ])
            .output()
            .map_err(|e| {
                format!("kazoo peer: cannot run {py:?} ({e}); set PYTHON to a python3 with kazoo")
            })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
        } else {
            Err(format!(
                "kazoo peer: `import kazoo` failed for {py:?}; install it with \
                 `{} -m pip install kazoo` (or set PYTHON to an interpreter that has it):\n{}",
                py.to_string_lossy(),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    });
    match result {
        Ok(version) => version,
        Err(e) => panic!("{e}"),
    }
}
