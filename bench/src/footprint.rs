//! zklock's footprint: binary sizes, runtime crates, threads and memory of a
//! minimal lock program. Binaries are built by scripts/bench.sh; this only
//! measures them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::bloat::{self, Bloat};
use crate::run::{Proc, Worker};
use crate::setup::Setup;

pub struct Footprint {
    /// Row key → value.
    pub values: Vec<(String, f64)>,
    /// Lines for the report's notes (what was measured, or why not).
    pub notes: Vec<(String, String)>,
    /// The minimal program's largest functions and crates, or why not.
    pub bloat: Result<Bloat, String>,
}

/// Size in KiB of `bin` once stripped (a stripped copy in `out`).
fn stripped_kib(bin: &Path, out: &Path, name: &str) -> Result<f64, String> {
    if !bin.exists() {
        return Err(format!("{} not built", bin.display()));
    }
    let copy = out.join(format!("{name}.stripped"));
    let status = Command::new("strip")
        .arg("-o")
        .arg(&copy)
        .arg(bin)
        .status()
        .map_err(|e| format!("strip: {e}"))?;
    if !status.success() {
        return Err(format!("strip {} failed", bin.display()));
    }
    let len = std::fs::metadata(&copy).map_err(|e| e.to_string())?.len();
    Ok(len as f64 / 1024.0)
}

/// Lines of `cargo tree -e <edges> -p zklock --prefix none`: (all distinct
/// lines, as `sort -u | wc -l` counts them; distinct crates).
fn runtime_crates(root: &Path, edges: &str) -> Result<(f64, f64), String> {
    let out = Command::new("cargo")
        .args(["tree", "-e", edges, "-p", "zklock", "--prefix", "none"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines.sort_unstable();
    lines.dedup();
    let all = lines.len() as f64;
    let mut crates: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    crates.sort_unstable();
    crates.dedup();
    Ok((all, crates.len() as f64))
}

/// Runs `bin` with `args` as a staged worker and reads `/proc` at each
/// stage it names, after a moment for its I/O thread to settle.
fn readings_at_stages(
    label: &str,
    bin: &Path,
    args: &[&str],
) -> Result<Vec<(String, Proc)>, String> {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    let w = Worker::start(label.into(), cmd, Duration::from_secs(60)).map_err(|e| e.to_string())?;
    let pid = w.pid();
    let mut readings = Vec::new();
    w.drive(|stage, _| {
        std::thread::sleep(Duration::from_millis(100));
        readings.push((stage.to_owned(), Proc::of(pid)));
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    Ok(readings)
}

fn at(readings: &[(String, Proc)], stage: &str) -> Proc {
    readings
        .iter()
        .find(|(s, _)| s == stage)
        .map_or_else(Proc::default, |(_, p)| *p)
}

/// Runs the minimal lock program with stages: threads and RSS once
/// connected and while holding the lock.
fn minimal_at_rest(bin: &Path, connect: &str) -> Result<(Proc, Proc), String> {
    let r = readings_at_stages("minimal", bin, &[connect, "/bench/minimal-lock", "stages"])?;
    Ok((at(&r, "connected"), at(&r, "locked")))
}

/// Runs the runtime skeleton with stages: its RSS once its I/O thread runs
/// with the connection open (to the first host of `connect`).
fn skeleton_at_rest(bin: &Path, connect: &str) -> Result<Proc, String> {
    let host = connect.split([',', '/']).next().unwrap_or(connect);
    let r = readings_at_stages("skeleton", bin, &[host, "stages"])?;
    Ok(at(&r, "connected"))
}

pub fn measure(setup: &Setup, connect: &str) -> Footprint {
    let mut fp = Footprint {
        values: Vec::new(),
        notes: Vec::new(),
        bloat: Err("not measured".into()),
    };
    let minimal_release = setup.target.join("release/zklock-minimal");
    let minimal_size = setup.target.join("release-size/zklock-minimal");
    let minimal_static = setup.target.join("static/zklock-minimal");
    let skeleton = setup.target.join("release/zklock-skeleton");
    let skeleton_size = setup.target.join("release-size/zklock-skeleton");
    let cli_member = setup.root.join("cli/Cargo.toml").exists();
    let cli: PathBuf = setup.target.join("release/zklock");
    let sizes = [
        ("minimal_kib", &minimal_release, "minimal-release"),
        ("minimal_size_kib", &minimal_size, "minimal-release-size"),
        (
            "minimal_static_kib",
            &minimal_static,
            "minimal-release-static",
        ),
        ("skeleton_kib", &skeleton, "skeleton-release"),
        ("skeleton_size_kib", &skeleton_size, "skeleton-release-size"),
        ("cli_kib", &cli, "zklock-cli"),
    ];
    for (key, bin, name) in sizes {
        match stripped_kib(bin, &setup.out_dir, name) {
            Ok(v) => fp.values.push((key.into(), v)),
            Err(e) => fp.notes.push((format!("footprint {key}"), e)),
        }
    }
    fp.notes.push((
        "CLI built from".into(),
        if cli_member {
            "`-p zklock-cli` (cli/)".into()
        } else {
            "the root package's `zklock` binary".into()
        },
    ));
    match runtime_crates(&setup.root, "normal") {
        Ok((lines, crates)) => {
            fp.values.push(("tree_lines".into(), lines));
            fp.values.push(("tree_crates".into(), crates));
        }
        Err(e) => fp.notes.push(("cargo tree".into(), e)),
    }
    // Without the proc-macro crates (thiserror's derive and what it
    // builds on): they run in the compiler, not in the program.
    match runtime_crates(&setup.root, "normal,no-proc-macro") {
        Ok((_, crates)) => fp.values.push(("tree_runtime_crates".into(), crates)),
        Err(e) => fp.notes.push(("cargo tree (no proc-macro)".into(), e)),
    }
    match minimal_at_rest(&minimal_release, connect) {
        Ok((connected, locked)) => {
            fp.values.push((
                "threads_per_client".into(),
                connected.threads.saturating_sub(1) as f64,
            ));
            fp.values.push((
                "threads_holding".into(),
                locked.threads.saturating_sub(1) as f64,
            ));
            fp.values
                .push(("rss_rest_kib".into(), connected.rss_kb as f64));
            fp.values
                .push(("rss_holding_kib".into(), locked.rss_kb as f64));
        }
        Err(e) => fp.notes.push(("minimal program run".into(), e)),
    }
    match minimal_at_rest(&minimal_static, connect) {
        Ok((connected, _)) => fp
            .values
            .push(("rss_static_rest_kib".into(), connected.rss_kb as f64)),
        Err(e) => fp
            .notes
            .push(("minimal program run, linked statically".into(), e)),
    }
    match skeleton_at_rest(&skeleton, connect) {
        Ok(connected) => fp
            .values
            .push(("skeleton_rss_rest_kib".into(), connected.rss_kb as f64)),
        Err(e) => fp.notes.push(("skeleton run".into(), e)),
    }
    // After the sizes: cargo-bloat reads the same unstripped binary.
    fp.bloat = bloat::measure(&setup.root, &setup.target);
    fp
}
