//! The Curator peer: `CuratorPeer.java`, compiled once against Debian's
//! Curator jars, run on a small JVM.

use std::collections::hash_map::DefaultHasher;
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{CURATOR_JARS, DEFAULT_JAR_DIR, JVM_FLAGS};
use crate::scratch::{subsec_nanos, target_dir, testkit_dir};

/// `java ... CuratorPeer`, with the compiled peer, Curator and `extra_classpath`
/// on its classpath.
pub(super) fn command(jvm_args: &[String], extra_classpath: &[&str]) -> Command {
    let classes = curator_classes();
    let mut entries: Vec<PathBuf> = vec![classes.to_path_buf()];
    entries.extend(std::env::split_paths(curator_classpath()));
    entries.extend(extra_classpath.iter().map(PathBuf::from));
    let classpath = std::env::join_paths(entries).expect("classpath entries contain no separator");
    let mut cmd = Command::new("java");
    cmd.args(JVM_FLAGS)
        .args(jvm_args)
        .arg("-cp")
        .arg(classpath)
        .arg("CuratorPeer");
    cmd
}

/// Classpath for Curator: `CURATOR_CLASSPATH` if set (a directory holding
/// the [`CURATOR_JARS`], or else a verbatim classpath), otherwise the jars in
/// [`DEFAULT_JAR_DIR`]. Panics naming any jar that cannot be found.
pub fn curator_classpath() -> &'static OsString {
    static CP: OnceLock<Result<OsString, String>> = OnceLock::new();
    let result = CP.get_or_init(|| match std::env::var_os("CURATOR_CLASSPATH") {
        Some(value) if Path::new(&value).is_dir() => jars_in(Path::new(&value)),
        Some(value) => Ok(value),
        None => jars_in(Path::new(DEFAULT_JAR_DIR)),
    });
    match result {
        Ok(cp) => cp,
        Err(e) => panic!("{e}"),
    }
}

fn jars_in(dir: &Path) -> Result<OsString, String> {
    let mut jars = Vec::new();
    let mut missing = Vec::new();
    for base in CURATOR_JARS {
        match find_jar(dir, base) {
            Some(jar) => jars.push(jar),
            None => missing.push(*base),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "Curator peer: jars {missing:?} not found in {} (install Debian's \
             libcurator-recipes-java, libzookeeper-java, libslf4j-java, or point \
             CURATOR_CLASSPATH at a directory of jars or at a full classpath)",
            dir.display()
        ));
    }
    std::env::join_paths(jars).map_err(|e| format!("Curator peer: bad jar path: {e}"))
}

/// `<dir>/<base>.jar`, or else the last-sorted `<dir>/<base>-<digit>...jar`.
fn find_jar(dir: &Path, base: &str) -> Option<PathBuf> {
    let plain = dir.join(format!("{base}.jar"));
    if plain.is_file() {
        return Some(plain);
    }
    let prefix = format!("{base}-");
    let mut versioned: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|name| {
                name.ends_with(".jar")
                    && name
                        .strip_prefix(&prefix)
                        .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            })
        })
        .collect();
    versioned.sort();
    versioned.pop()
}

/// Compiles `testkit/peers/CuratorPeer.java` once per test binary into
/// `<target>/peers/curator-<source hash>/`, skipping javac when that
/// directory already exists. The directory is built under a temporary name
/// and renamed into place, so concurrent test processes never see a partial
/// build.
fn curator_classes() -> &'static Path {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(compile_curator_peer) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

fn compile_curator_peer() -> Result<PathBuf, String> {
    let source = testkit_dir().join("peers/CuratorPeer.java");
    let text = std::fs::read(&source)
        .map_err(|e| format!("Curator peer: cannot read {}: {e}", source.display()))?;
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    let root = target_dir().join("peers");
    let dir = root.join(format!("curator-{:016x}", hasher.finish()));
    if dir.join("CuratorPeer.class").is_file() {
        return Ok(dir);
    }

    let tmp = root.join(format!(
        ".tmp-curator-{}-{}",
        std::process::id(),
        subsec_nanos()
    ));
    std::fs::create_dir_all(&tmp)
        .map_err(|e| format!("Curator peer: cannot create {}: {e}", tmp.display()))?;
    let output = Command::new("javac")
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&tmp)
        .arg("-cp")
        .arg(curator_classpath())
        .arg(&source)
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(format!(
                "Curator peer: cannot run `javac` ({e}); a JDK (17+) is needed for Curator interop tests"
            ));
        }
    };
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(format!(
            "Curator peer: javac failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    if let Err(e) = std::fs::rename(&tmp, &dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another test process may have won the race; that is fine.
        if !dir.join("CuratorPeer.class").is_file() {
            return Err(format!(
                "Curator peer: cannot move classes to {}: {e}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}
