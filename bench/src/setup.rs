//! Where things are and how to start each implementation's worker; the
//! versions of what is measured.

use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::peers;
use zklock_bench::BoxResult;

use crate::model::Impl;

/// Where things are and how to start each worker.
pub struct Setup {
    pub root: PathBuf,
    pub target: PathBuf,
    pub out_dir: PathBuf,
    pub curator_cp: String,
    pub python: String,
    pub jvm_opts: Vec<String>,
    pub zkrs_bin: PathBuf,
    /// zklock's worker: the package's other binary, next to this one.
    pub zklock_worker: PathBuf,
    /// The Curator jars (without the compiled worker's classes).
    pub jars: String,
    /// kazoo's version, as the test kit found (or installed) it.
    pub kazoo_version: String,
}

impl Setup {
    /// Finds the peers' pieces (compiling Curator's worker when its source
    /// is newer, installing kazoo when missing) and checks that the Rust
    /// workers were built (zookeeper-client-rs's only when `zkrs` runs).
    pub fn discover(
        root: PathBuf,
        target: PathBuf,
        out_dir: PathBuf,
        zkrs: bool,
    ) -> BoxResult<Setup> {
        let jars = peers::curator_classpath().to_string_lossy().into_owned();
        let classes = compile_curator(&root, &out_dir, &jars)?;
        let kazoo_version = peers::ensure_kazoo().to_owned();
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let setup = Setup {
            curator_cp: format!("{}:{jars}", classes.display()),
            python,
            jvm_opts: std::env::var("BENCH_JVM_OPTS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            zkrs_bin: target.join("release/zkrs-bench"),
            zklock_worker: std::env::current_exe()?.with_file_name("zklock-worker"),
            root,
            target,
            out_dir,
            jars,
            kazoo_version,
        };
        if !setup.zklock_worker.exists() {
            return Err(format!(
                "{} is missing: build it with scripts/bench.sh (cargo build --release --manifest-path bench/Cargo.toml --bins)",
                setup.zklock_worker.display()
            )
            .into());
        }
        if zkrs && !setup.zkrs_bin.exists() {
            return Err(format!(
                "{} is missing: build it with scripts/bench.sh (cargo build --release --manifest-path bench/zkrs/Cargo.toml)",
                setup.zkrs_bin.display()
            )
            .into());
        }
        Ok(setup)
    }

    /// The versions of the toolchain and of every peer (ZooKeeper's is read
    /// from the server later).
    pub fn versions(&self) -> Vec<(String, String)> {
        let zkrs_lock = self.root.join("bench/zkrs/Cargo.lock");
        vec![
            ("rustc".into(), first_line(Command::new("rustc").arg("-V"))),
            (
                "Java".into(),
                first_line(Command::new("java").arg("-version")),
            ),
            ("Curator".into(), curator_version(&self.jars)),
            (
                "kazoo".into(),
                format!(
                    "{} on {}",
                    self.kazoo_version,
                    first_line(Command::new(&self.python).arg("--version"))
                ),
            ),
            (
                "zookeeper-client".into(),
                format!(
                    "{} (tokio {})",
                    locked_version(&zkrs_lock, "zookeeper-client"),
                    locked_version(&zkrs_lock, "tokio")
                ),
            ),
        ]
    }

    pub fn command(&self, imp: Impl, args: &[String]) -> Command {
        let mut c = match imp {
            Impl::Zklock => Command::new(&self.zklock_worker),
            Impl::Zkrs => Command::new(&self.zkrs_bin),
            Impl::Curator => {
                let mut c = Command::new("java");
                c.args(&self.jvm_opts)
                    .arg("-cp")
                    .arg(&self.curator_cp)
                    .arg("CuratorBench");
                c
            }
            Impl::Kazoo => {
                let mut c = Command::new(&self.python);
                c.arg("-u").arg(self.root.join("bench/kazoo_bench.py"));
                c
            }
        };
        c.args(args);
        c
    }
}

pub fn first_line(cmd: &mut Command) -> String {
    cmd.output()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

/// Compiles `bench/CuratorBench.java` into `<out>/classes` unless the class
/// file is newer than the source.
fn compile_curator(root: &Path, out_dir: &Path, cp: &str) -> BoxResult<PathBuf> {
    let source = root.join("bench/CuratorBench.java");
    let classes = out_dir.join("classes");
    let class = classes.join("CuratorBench.class");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(src), Some(cls)) = (modified(&source), modified(&class)) {
        if cls >= src {
            return Ok(classes);
        }
    }
    std::fs::create_dir_all(&classes)?;
    let out = Command::new("javac")
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&classes)
        .arg("-cp")
        .arg(cp)
        .arg(&source)
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "javac failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(classes)
}

/// The version of `name` in a Cargo.lock.
fn locked_version(lock: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            if let Some(v) = lines
                .next()
                .and_then(|v| v.trim().strip_prefix("version = "))
            {
                return v.trim_matches('"').to_owned();
            }
        }
    }
    "?".into()
}

/// The Curator version, from the jar's file name next to the symlink.
fn curator_version(cp: &str) -> String {
    for entry in cp.split(':') {
        let p = Path::new(entry);
        if p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("curator-recipes"))
        {
            if let Some(dir) = p.parent() {
                if let Ok(rd) = std::fs::read_dir(dir) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if let Some(v) = n
                            .strip_prefix("curator-recipes-")
                            .and_then(|v| v.strip_suffix(".jar"))
                        {
                            return v.to_owned();
                        }
                    }
                }
            }
        }
    }
    "?".into()
}
