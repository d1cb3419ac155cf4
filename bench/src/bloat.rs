//! What takes the room in the minimal lock program (bench/minimal, default
//! release profile), by `cargo bloat`: its largest functions and crates.
//! Optional: without cargo-bloat (`cargo install cargo-bloat`) the report
//! says so.

use std::path::Path;
use std::process::Command;

use zklock_bench::json::Json;

/// How many functions and crates are listed.
pub const TOP: usize = 10;

/// One line of a `cargo bloat` listing.
pub struct Item {
    /// The crate ("?" where cargo-bloat cannot tell).
    pub krate: String,
    /// The function's name, empty in the crates listing.
    pub name: String,
    pub bytes: f64,
}

/// The minimal program's largest functions and crates.
pub struct Bloat {
    /// The unstripped binary and its `.text` section, bytes.
    pub file_bytes: f64,
    pub text_bytes: f64,
    pub functions: Vec<Item>,
    pub crates: Vec<Item>,
    /// The command, for the report.
    pub command: String,
}

/// Runs `cargo bloat` on bench/minimal (release, in the target directory
/// `target`, where scripts/bench.sh built it) twice: functions, crates.
pub fn measure(root: &Path, target: &Path) -> Result<Bloat, String> {
    let manifest = root.join("bench/minimal/Cargo.toml");
    let run = |extra: &[&str]| -> Result<Json, String> {
        let out = Command::new("cargo")
            .env("CARGO_TARGET_DIR", target)
            .arg("bloat")
            .arg("--release")
            .arg("--manifest-path")
            .arg(&manifest)
            .args(["-n", &TOP.to_string(), "--message-format", "json"])
            .args(extra)
            .current_dir(root)
            .output()
            .map_err(|e| format!("cargo bloat: {e}"))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            return Err(format!(
                "cargo bloat failed ({}); install it with `cargo install cargo-bloat`",
                first.trim()
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .ok_or("cargo bloat printed no JSON")?;
        Json::parse(line).map_err(|e| format!("cargo bloat's JSON: {e}"))
    };
    let items = |j: &Json, list: &str| -> Vec<Item> {
        j.arr(list)
            .iter()
            .take(TOP)
            .map(|f| Item {
                krate: f
                    .str(if list == "crates" { "name" } else { "crate" })
                    .unwrap_or("?")
                    .to_owned(),
                name: if list == "crates" {
                    String::new()
                } else {
                    f.str("name").unwrap_or("?").to_owned()
                },
                bytes: f.num("size"),
            })
            .collect()
    };
    let functions = run(&[])?;
    let crates = run(&["--crates"])?;
    Ok(Bloat {
        file_bytes: functions.num("file-size"),
        text_bytes: functions.num("text-section-size"),
        functions: items(&functions, "functions"),
        crates: items(&crates, "crates"),
        command: format!(
            "cargo bloat --release --manifest-path bench/minimal/Cargo.toml -n {TOP} [--crates]"
        ),
    })
}

impl Bloat {
    /// The two listings as RESULTS.md shows them.
    pub fn markdown(&self) -> String {
        let kib = |b: f64| format!("{:.1}", b / 1024.0);
        let share = |b: f64| format!("{:.1} %", 100.0 * b / self.text_bytes);
        let mut md = format!(
            "### What takes the room in the minimal lock program (cargo-bloat)\n\n\
             `{}` on bench/minimal's default release build, before stripping: {} KiB in all, \
             {} KiB of `.text`. The {TOP} largest functions, then the {TOP} largest crates, \
             with their share of `.text` (std's `gimli`, `addr2line` and `miniz_oxide` \
             functions are its backtrace symbolizer, which a panic's backtrace uses):\n\n\
             | # | crate | function | KiB | of `.text` |\n|---:|---|---|---:|---:|\n",
            self.command,
            kib(self.file_bytes),
            kib(self.text_bytes)
        );
        for (i, f) in self.functions.iter().enumerate() {
            md.push_str(&format!(
                "| {} | {} | `{}` | {} | {} |\n",
                i + 1,
                f.krate,
                f.name.replace('|', "\\|"),
                kib(f.bytes),
                share(f.bytes)
            ));
        }
        md.push_str("\n| # | crate | KiB | of `.text` |\n|---:|---|---:|---:|\n");
        for (i, c) in self.crates.iter().enumerate() {
            md.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                i + 1,
                c.krate,
                kib(c.bytes),
                share(c.bytes)
            ));
        }
        md
    }
}
