//! What the report says about a run besides the numbers: the command, the
//! code measured, the load, the versions.

use std::path::Path;
use std::process::Command;

use crate::bloat::Bloat;

/// What the report says about the run besides the numbers.
pub struct RunInfo {
    pub versions: Vec<(String, String)>,
    pub started: String,
    pub load_before: String,
    pub load_after: String,
    pub total_s: f64,
    pub fsync: Vec<bool>,
    /// Footprint notes: what was built from where, what could not be measured.
    pub notes: Vec<(String, String)>,
    /// The command as run: the `BENCH_*` settings and `ZKLOCK_CONNECT`
    /// given, then `./scripts/bench.sh`.
    pub command: String,
    /// The code measured: the commit, and what was uncommitted.
    pub code: String,
    /// `ZKLOCK_CONNECT`'s server, when the bench did not start its own.
    pub external: Option<String>,
    /// cargo-bloat's listings of the minimal program (with the footprint),
    /// or why they are missing.
    pub bloat: Option<Result<Bloat, String>>,
}

/// The environment settings of this run, as a command line.
pub fn command_line() -> String {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| (k.starts_with("BENCH_") && k != "BENCH_NOTE") || k == "ZKLOCK_CONNECT")
        .collect();
    vars.sort();
    let mut cmd: Vec<String> = vars
        .into_iter()
        .map(|(k, v)| {
            if v.chars()
                .all(|c| c.is_ascii_alphanumeric() || ",.:/_-=".contains(c))
            {
                format!("{k}={v}")
            } else {
                format!("{k}='{v}'")
            }
        })
        .collect();
    cmd.push("./scripts/bench.sh".into());
    cmd.join(" ")
}

/// zklock's git revision in `root`: the short commit, `-dirty` when
/// tracked files had uncommitted changes.
pub fn git_rev(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        None => "not a git checkout".into(),
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{head}-dirty"),
            _ => head,
        },
    }
}

/// The commit checked out in `root` and what was uncommitted, from git.
pub fn code_revision(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "not a git checkout".into();
    };
    let changed: Vec<String> = git(&["status", "--porcelain", "--untracked-files=no"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.get(3..))
        .map(str::to_owned)
        .collect();
    let head = head.trim();
    match changed.len() {
        0 => format!("commit {head}, nothing uncommitted"),
        n if n <= 12 => format!(
            "commit {head} with uncommitted changes to {}",
            changed
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        n => format!("commit {head} with uncommitted changes to {n} files"),
    }
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
