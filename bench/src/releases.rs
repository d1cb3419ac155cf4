//! RESULTS.md's section on zklock's ways to let a lock go: release by drop
//! (the main tables' zklock column), `unlock()` that waits for the delete's
//! reply, and `Mutex::requeue`, side by side with the best peer of the
//! same run.

use std::fmt::Write as _;

use crate::cells::fmt_num;
use crate::model::{Impl, Results};
use crate::runinfo::RunInfo;
use crate::sizes::Sizes;

/// The best peer on `key`: its value and name.
fn best_peer(r: &Results, key: &str, higher: bool) -> Option<(f64, Impl)> {
    Impl::ALL[1..]
        .iter()
        .map(|&i| (r.get(key, i), i))
        .filter(|(v, _)| v.is_finite())
        .reduce(|a, b| {
            let b_better = if higher { b.0 > a.0 } else { b.0 < a.0 };
            if b_better {
                b
            } else {
                a
            }
        })
}

pub fn release_section(r: &Results, s: &Sizes, info: &RunInfo) -> String {
    let z = Impl::Zklock;
    let mut md = String::new();
    let ran = |fs: &str, prefix: &str| {
        let dot = format!("{fs}/{prefix}.");
        r.values.keys().any(|k| k.starts_with(&dot))
    };
    if !info.fsync.iter().any(|&f| {
        ["unc.unlock", "cont.unlock", "unc.requeue", "cont.requeue"]
            .iter()
            .any(|p| ran(fs_of(f), p))
    }) {
        return md;
    }
    let _ = writeln!(md, "## zklock's release modes\n");
    let _ = writeln!(
        md,
        "Three ways for zklock to end a turn, each run back to back with the others on the same \
         server, in the same round, with the peers of the same run beside them:\n\n\
         - **release by drop** (`drop(guard)`, the main tables' zklock column): returns at once; \
         the delete goes to the I/O thread and reaches the server ahead of whatever the session \
         sends next, and nobody waits for its reply;\n\
         - **release that waits for the reply** (`guard.unlock()`): returns once the server has \
         answered the delete, as Curator's and kazoo's `release()` do (zookeeper-client-rs's \
         worker releases without waiting, as dropping its `LockClient` does: Caveats in \
         README.md);\n\
         - **requeue** (`Mutex::requeue(guard, None)`): the delete and the next create in one \
         `multi`, one commit where a release and a new acquisition take two; the next turn waits \
         on the `PendingLock` it returns. Its reply confirms the delete, so it waits for the \
         release as `unlock()` does. Uncontended, the lock stays held between cycles and a cycle \
         is one requeue and its grant. No peer has such a call: its ratio is to the best peer's \
         plain loop.\n"
    );
    // In words: the figures asked most often.
    let mut said = Vec::new();
    for &fsync in &info.fsync {
        let fs = fs_of(fsync);
        let g = |k: &str| r.get(&format!("{fs}/{k}"), z);
        let mut parts = Vec::new();
        let (drop_p50, unlock_p50) = (g("unc.p50_us"), g("unc.unlock.p50_us"));
        if drop_p50.is_finite() && unlock_p50.is_finite() {
            parts.push(format!(
                "uncontended p50 {} µs by drop, {} µs with `unlock()` ({:.2}×)",
                fmt_num(drop_p50),
                fmt_num(unlock_p50),
                unlock_p50 / drop_p50
            ));
        }
        let unc_rq = g("unc.requeue.p50_us");
        if let Some((best, who)) = best_peer(r, &format!("{fs}/unc.p50_us"), false) {
            if unc_rq.is_finite() {
                parts.push(format!(
                    "uncontended requeue p50 {} µs, {:.2}× the best peer's {} µs ({})",
                    fmt_num(unc_rq),
                    unc_rq / best,
                    fmt_num(best),
                    who.label()
                ));
            }
        }
        let (drop_ops, unlock_ops) = (g("cont.ops_per_s"), g("cont.unlock.ops_per_s"));
        if drop_ops.is_finite() && unlock_ops.is_finite() {
            parts.push(format!(
                "contended {} ops/s by drop, {} with `unlock()`",
                fmt_num(drop_ops),
                fmt_num(unlock_ops)
            ));
        }
        let rq = g("cont.requeue.ops_per_s");
        if let Some((best, who)) = best_peer(r, &format!("{fs}/cont.ops_per_s"), true) {
            if rq.is_finite() {
                parts.push(format!(
                    "requeue {} ops/s, {:.2}× the best peer's contended {} ops/s ({}), at {} \
                     commits per acquisition",
                    fmt_num(rq),
                    rq / best,
                    fmt_num(best),
                    who.label(),
                    fmt_num(g("cont.requeue.commits"))
                ));
            }
        }
        if !parts.is_empty() {
            said.push(format!("fsync {fs}: {}", parts.join("; ")));
        }
    }
    if !said.is_empty() {
        let _ = writeln!(
            md,
            "{}. Each cell is the median over {} round(s).\n",
            said.join(". "),
            s.rounds
        );
    }
    let _ = writeln!(
        md,
        "| measurement | release by drop | `guard.unlock()` (waits for the reply) | `Mutex::requeue` | best peer | by drop ÷ best peer | `unlock()` ÷ best peer | requeue ÷ best peer |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---|---:|---:|---:|");
    for &fsync in &info.fsync {
        let fs = fs_of(fsync);
        // (label, mode, field, higher is better, a count summed over rounds)
        let unc_label = format!("uncontended lock+unlock ×{}: p50 µs", s.cycles);
        let cont_label = format!(
            "{} sessions contended ×{} each: ops/s",
            s.sessions, s.contended_cycles
        );
        let lines: [(&str, &str, &str, bool, bool); 14] = [
            (&unc_label, "unc", "p50_us", false, false),
            ("uncontended: p99 µs", "unc", "p99_us", false, false),
            (
                "uncontended: client CPU µs per lock+unlock",
                "unc",
                "cpu_us",
                false,
                false,
            ),
            (
                "uncontended: server requests per lock+unlock",
                "unc",
                "requests",
                false,
                false,
            ),
            (
                "uncontended: server commits per lock+unlock",
                "unc",
                "commits",
                false,
                false,
            ),
            (
                "uncontended: times the session or a held guard went Suspended or Lost (must be 0)",
                "unc",
                "suspended_lost",
                false,
                true,
            ),
            (&cont_label, "cont", "ops_per_s", true, false),
            (
                "contended: handoff p50 µs",
                "cont",
                "handoff_p50_us",
                false,
                false,
            ),
            (
                "contended: handoff p99 µs",
                "cont",
                "handoff_p99_us",
                false,
                false,
            ),
            (
                "contended: client CPU µs per op",
                "cont",
                "cpu_us",
                false,
                false,
            ),
            (
                "contended: server requests per op",
                "cont",
                "requests",
                false,
                false,
            ),
            (
                "contended: server commits per acquisition",
                "cont",
                "commits",
                false,
                false,
            ),
            (
                "contended: overlapping holders seen (must be 0)",
                "cont",
                "overlaps",
                false,
                true,
            ),
            (
                "contended: times a session or a held guard went Suspended or Lost (must be 0)",
                "cont",
                "suspended_lost",
                false,
                true,
            ),
        ];
        for (label, mode, field, higher, sum) in lines {
            let key = |variant: &str| format!("{fs}/{mode}{variant}.{field}");
            let value = |variant: &str| {
                if sum {
                    r.sum(&key(variant), z)
                } else {
                    r.get(&key(variant), z)
                }
            };
            let vals = [value(""), value(".unlock"), value(".requeue")];
            let best = if sum {
                None
            } else {
                best_peer(r, &key(""), higher)
            };
            let show = |v: f64| {
                if v.is_finite() {
                    fmt_num(v)
                } else {
                    "–".into()
                }
            };
            let ratio = |v: f64| match best {
                Some((b, _)) if v.is_finite() && b != 0.0 => format!("{:.2}×", v / b),
                _ => "–".into(),
            };
            let best_cell = match best {
                Some((b, who)) => format!("{} ({})", fmt_num(b), who.label()),
                None => "–".into(),
            };
            let _ = writeln!(
                md,
                "| [fsync {fs}] {label} | {} | {} | {} | {best_cell} | {} | {} | {} |",
                show(vals[0]),
                show(vals[1]),
                show(vals[2]),
                ratio(vals[0]),
                ratio(vals[1]),
                ratio(vals[2]),
            );
        }
    }
    let _ = writeln!(md);
    md
}

fn fs_of(fsync: bool) -> &'static str {
    if fsync {
        "on"
    } else {
        "off"
    }
}
