//! The rows of RESULTS.md's main tables, one list per server setting:
//! each row's label, which values it shows and which way is better.

use crate::model::{Impl, Results};
use crate::sizes::Sizes;

/// Which way is better for a row.
#[derive(Clone, Copy, PartialEq)]
pub enum Better {
    Lower,
    Higher,
    /// Shown, not ranked (e.g. counts that must be 0).
    Neither,
}

pub struct Row {
    pub label: String,
    /// Key of zklock's value and of the peers' values (they differ where
    /// zklock has two variants).
    pub zkey: String,
    pub pkey: String,
    pub better: Better,
}

fn row(label: String, key: &str, better: Better) -> Row {
    Row {
        label,
        zkey: key.to_owned(),
        pkey: key.to_owned(),
        better,
    }
}

/// One of zklock's ways to run a timed loop: the key prefix of its rows
/// and what its rows' labels say of it.
pub struct Variant {
    pub prefix: String,
    pub suffix: &'static str,
}

/// zklock's variants of the timed loop `mode` (`unc` or `cont`) that ran on
/// server setting `fs`: the default (the guard dropped) first, then
/// `unlock()` (waiting for the delete's reply), then `Mutex::requeue`.
/// Labelled only when there are several.
pub fn variants(r: &Results, fs: &str, mode: &str) -> Vec<Variant> {
    // Ran, or failed (then its rows say so).
    let ran = |prefix: &str| {
        let (p, dot) = (format!("{fs}/{prefix}"), format!("{fs}/{prefix}."));
        r.values.keys().any(|key| key.starts_with(&dot))
            || r.notes.keys().any(|(n, i)| *i == Impl::Zklock && *n == p)
    };
    let mut v = vec![Variant {
        prefix: mode.to_owned(),
        suffix: " [zklock: release by drop, no wait for the delete's reply]",
    }];
    let unlock = format!("{mode}.unlock");
    if ran(&unlock) {
        v.push(Variant {
            prefix: unlock,
            suffix: " [zklock: `guard.unlock()`, waits for the delete's reply]",
        });
    }
    let requeue = format!("{mode}.requeue");
    if ran(&requeue) {
        v.push(Variant {
            prefix: requeue,
            suffix: " [zklock: `Mutex::requeue`, release and queue again in one multi]",
        });
    }
    if v.len() == 1 {
        v[0].suffix = "";
    }
    v
}

pub fn rows(s: &Sizes, r: &Results, fs: &str, full: bool) -> Vec<Row> {
    use Better::*;
    let k = |x: &str| format!("{fs}/{x}");
    let unc = variants(r, fs, "unc");
    let cont = variants(r, fs, "cont");
    // One row per zklock variant of `field` (the peers' values on each).
    let each = |vars: &[Variant], mode: &str, label: &str, field: &str, better| -> Vec<Row> {
        vars.iter()
            .map(|var| Row {
                label: format!("{label}{}", var.suffix),
                zkey: k(&format!("{}.{field}", var.prefix)),
                pkey: k(&format!("{mode}.{field}")),
                better,
            })
            .collect()
    };
    let mut v = Vec::new();
    v.extend(each(
        &unc,
        "unc",
        &format!("uncontended lock+unlock ×{}: p50 µs", s.cycles),
        "p50_us",
        Lower,
    ));
    v.extend([
        row(
            "uncontended: p50 µs of a raw client (codec only; create2+getChildren in one write, delete overlapped)".into(),
            &k("unc.floor_p50_us"),
            Lower,
        ),
        row(
            "uncontended: zklock's p50 ÷ that raw floor".into(),
            &k("unc.over_floor"),
            Neither,
        ),
        row(
            "uncontended: p50 µs of a raw client whose release waits (codec only; create2+getChildren in one write, then the delete, its reply awaited)".into(),
            &k("unc.unlock.floor_p50_us"),
            Lower,
        ),
        row(
            "uncontended: zklock's p50 with `guard.unlock()` ÷ that raw floor".into(),
            &k("unc.unlock.over_floor"),
            Neither,
        ),
    ]);
    v.extend(each(&unc, "unc", "uncontended: p99 µs", "p99_us", Lower));
    v.extend(each(
        &unc,
        "unc",
        "uncontended: client CPU µs per lock+unlock",
        "cpu_us",
        Lower,
    ));
    v.extend([
        row(
            "uncontended: client CPU µs per lock+unlock of the raw floor (no I/O thread: the caller's thread reads its socket; delete overlapped)".into(),
            &k("unc.floor_cpu_us"),
            Neither,
        ),
        row(
            "uncontended: raw floor's client CPU per lock+unlock ÷ best peer's (the least any client reaches here)".into(),
            &k("unc.floor_cpu_us_over_best"),
            Neither,
        ),
        row(
            "uncontended: client CPU µs per lock+unlock of the raw floor whose release waits".into(),
            &k("unc.unlock.floor_cpu_us"),
            Neither,
        ),
    ]);
    v.extend(each(
        &unc,
        "unc",
        "uncontended: server requests per lock+unlock",
        "requests",
        Lower,
    ));
    v.extend(each(
        &unc,
        "unc",
        "uncontended: server commits per lock+unlock (change of `srvr`'s Zxid ÷ cycles)",
        "commits",
        Lower,
    ));
    v.push(row(
        "uncontended: server commits per lock+unlock of the raw floor".into(),
        &k("unc.floor_commits"),
        Neither,
    ));
    v.extend(each(
        &cont,
        "cont",
        &format!(
            "{} sessions contended ×{} each: ops/s",
            s.sessions, s.contended_cycles
        ),
        "ops_per_s",
        Higher,
    ));
    v.extend(each(
        &cont,
        "cont",
        "contended: handoff p50 µs (release → next holder)",
        "handoff_p50_us",
        Lower,
    ));
    v.extend(each(
        &cont,
        "cont",
        "contended: handoff p99 µs",
        "handoff_p99_us",
        Lower,
    ));
    v.extend([
        row(
            "contended: ops/s of a raw client (codec only; Curator's protocol, a blocking socket per session)".into(),
            &k("cont.floor_ops_per_s"),
            Neither,
        ),
        row(
            "contended: zklock's ops/s ÷ that raw floor".into(),
            &k("cont.ops_over_floor"),
            Neither,
        ),
        row(
            "contended: raw floor's ops/s ÷ best peer's (the most any client reaches here)".into(),
            &k("cont.floor_ops_per_s_over_best"),
            Neither,
        ),
        row(
            "contended: handoff p50 µs of the raw floor".into(),
            &k("cont.floor_handoff_p50_us"),
            Neither,
        ),
        row(
            "contended: zklock's handoff p50 ÷ the raw floor's".into(),
            &k("cont.handoff_over_floor"),
            Neither,
        ),
        row(
            "contended: raw floor's handoff p50 ÷ best peer's (the least any client reaches here)".into(),
            &k("cont.floor_handoff_p50_us_over_best"),
            Neither,
        ),
    ]);
    v.extend(each(
        &cont,
        "cont",
        "contended: client CPU µs per op",
        "cpu_us",
        Lower,
    ));
    v.extend([
        row(
            "contended: client CPU µs per op of the raw floor (no I/O thread: each session's own thread reads its socket)".into(),
            &k("cont.floor_cpu_us"),
            Neither,
        ),
        row(
            "contended: raw floor's client CPU per op ÷ best peer's".into(),
            &k("cont.floor_cpu_us_over_best"),
            Neither,
        ),
    ]);
    v.extend(each(
        &cont,
        "cont",
        "contended: server requests per op",
        "requests",
        Lower,
    ));
    v.extend(each(
        &cont,
        "cont",
        "contended: server commits per acquisition (change of `srvr`'s Zxid ÷ acquisitions)",
        "commits",
        Lower,
    ));
    v.push(row(
        "contended: server commits per acquisition of the raw floor".into(),
        &k("cont.floor_commits"),
        Neither,
    ));
    v.extend(each(
        &cont,
        "cont",
        "contended: overlapping holders seen (must be 0)",
        "overlaps",
        Neither,
    ));
    v.push(row(
        "contended: overlapping holders seen in the raw floor (must be 0)".into(),
        &k("cont.floor_overlaps"),
        Neither,
    ));
    if !full {
        return v;
    }
    for (tag, (n, sessions)) in ["w1", "w2"].iter().zip(&s.waiters) {
        if *n == 0 {
            continue;
        }
        let nonblocking = r
            .values
            .keys()
            .any(|key| key.starts_with(&k(&format!("{tag}.nonblocking."))));
        let variants: &[(&str, &str)] = if nonblocking {
            &[
                ("blocking", "thread per waiter"),
                ("nonblocking", "non-blocking handles"),
            ]
        } else {
            &[("blocking", "thread per waiter")]
        };
        for (what, field, better) in [
            (
                "time to queue (every node and watch in place), s",
                "queue_s",
                Lower,
            ),
            ("passed through, s", "pass_s", Lower),
            ("peak RSS, MiB", "hwm_mib", Lower),
            ("peak RSS until all queued, MiB", "queued_hwm_mib", Lower),
            ("RSS once all queued, MiB", "queued_rss_mib", Lower),
            ("threads while queued", "threads", Lower),
            ("server requests per hand-off", "requests", Lower),
            ("notifications per hand-off", "notifications", Lower),
            ("server watches while queued", "server_watches", Lower),
        ] {
            for &(variant, vlabel) in variants {
                v.push(Row {
                    label: format!("{n} waiters / {sessions} sessions: {what} [zklock: {vlabel}]"),
                    zkey: k(&format!("{tag}.{variant}.{field}")),
                    pkey: k(&format!("{tag}.blocking.{field}")),
                    better,
                });
            }
        }
        // The raw floor runs after zklock's first waiters mode only.
        if *tag != "w1" {
            continue;
        }
        let w = format!("{n} waiters / {sessions} sessions");
        v.push(row(
            format!("{w}: passed through by a raw client (codec only; a blocking socket per session), s"),
            &k(&format!("{tag}.floor_pass_s")),
            Neither,
        ));
        for &(variant, vlabel) in variants {
            v.push(row(
                format!("{w}: zklock's pass-through [{vlabel}] ÷ that raw floor"),
                &k(&format!("{tag}.{variant}.over_floor")),
                Neither,
            ));
        }
        v.push(row(
            format!(
                "{w}: raw floor's pass-through ÷ best peer's (the least any client reaches here)"
            ),
            &k(&format!("{tag}.floor_pass_s_over_best")),
            Neither,
        ));
    }
    for (tag, (n, sessions)) in ["w1", "w2"].iter().zip(&s.waiters) {
        let nonblocking = r
            .values
            .keys()
            .any(|key| key.starts_with(&k(&format!("{tag}.nonblocking."))));
        if *n > 0 && !nonblocking {
            v.push(Row {
                label: format!("{n} waiters / {sessions} sessions [zklock: non-blocking handles]: not run, see the note below"),
                zkey: k(&format!("{tag}.nonblocking.pass_s")),
                pkey: String::new(),
                better: Neither,
            });
        }
    }
    if s.locks > 0 {
        let l = s.locks;
        v.extend([
            row(
                format!("{l} locks held by one session: time to take all, s"),
                &k("held.take_s"),
                Lower,
            ),
            row(
                format!("{l} locks: time to release all, s"),
                &k("held.release_s"),
                Lower,
            ),
            row(
                format!("{l} locks: RSS while held, MiB"),
                &k("held.rss_mib"),
                Lower,
            ),
            row(
                format!("{l} locks: threads while held"),
                &k("held.threads"),
                Lower,
            ),
            row(
                format!("{l} locks: server requests per lock taken"),
                &k("held.requests"),
                Lower,
            ),
            row(
                format!("{l} locks: client CPU µs per lock taken"),
                &k("held.cpu_us"),
                Lower,
            ),
        ]);
    }
    v.extend([
        row(
            "one client at rest: threads (whole process)".into(),
            &k("rest.threads"),
            Lower,
        ),
        row(
            "one client at rest: RSS, MiB".into(),
            &k("rest.rss_mib"),
            Lower,
        ),
    ]);
    v
}
