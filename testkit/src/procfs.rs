//! What Linux's `/proc` says about processes and the client's I/O threads:
//! how a test sees that a killed command is gone, that a dropped client's
//! thread ended, or that a waiting one stays idle.

use std::collections::HashSet;
use std::fs;
use std::time::Duration;

/// The name zklock gives each client's I/O thread.
const IO_THREAD: &str = "zklock-io";

/// Ids of this process's threads named like a client's I/O thread.
pub fn io_thread_ids() -> HashSet<u32> {
    let Ok(dir) = fs::read_dir("/proc/self/task") else {
        return HashSet::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let tid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = fs::read_to_string(e.path().join("comm")).ok()?;
            (comm.trim() == IO_THREAD).then_some(tid)
        })
        .collect()
}

/// How many threads this process has now.
pub fn thread_count() -> usize {
    fs::read_dir("/proc/self/task").map_or(0, |d| d.flatten().count())
}

/// CPU time (user + system) a thread of this process has used; `None`
/// once it has ended.
pub fn thread_cpu(tid: u32) -> Option<Duration> {
    let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); `rest` starts at field 3.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // CLK_TCK is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

/// CPU time a thread of this process uses over the next `window` of wall
/// time; `None` if it ends meanwhile. The window is the measurement itself,
/// not a wait for anything.
pub fn thread_cpu_over(tid: u32, window: Duration) -> Option<Duration> {
    let before = thread_cpu(tid)?;
    std::thread::sleep(window);
    Some(thread_cpu(tid)?.saturating_sub(before))
}

/// A thread's scheduling state as stat(5) gives it (`R` running, `S`
/// asleep in a wait that a signal interrupts, ...); `None` once it has ended.
pub fn thread_state(tid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Context switches (voluntary and not) a thread of this process has made;
/// `None` once it has ended. A thread that waits blocks a few times; one
/// that polls in a loop is switched out again and again on a busy machine.
pub fn thread_switches(tid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let count = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].trim().parse().ok()
    };
    Some(count("voluntary_ctxt_switches:")? + count("nonvoluntary_ctxt_switches:")?)
}

/// The calling thread's id, as `/proc/self/task` names it.
pub fn current_thread_id() -> Option<u32> {
    let link = fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// Whether `pid` exists and is not a zombie (one that exited and awaits its
/// parent counts as gone).
pub fn process_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) state ...": comm may hold spaces, so look after the ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// This process's resident set size in bytes (`VmRSS`), for tests that
/// show memory stays bounded; `None` if `/proc` does not say.
pub fn rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
