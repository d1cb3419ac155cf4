//! Which TCP connections a process has open, from Linux's `/proc`: how a
//! test sees that ZooKeeper members talk to each other only through the
//! link proxies.

use std::collections::HashSet;
use std::fs;

/// `(local port, remote port)` of every established TCP connection (IPv4
/// or IPv6) whose socket process `pid` holds open.
pub fn established_ports(pid: u32) -> Vec<(u16, u16)> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let inodes: HashSet<String> = fds
        .flatten()
        .filter_map(|fd| {
            let link = fs::read_link(fd.path()).ok()?;
            let link = link.to_str()?;
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut found = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local remote st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(remote), Some(state), Some(inode)) =
                (fields.get(1), fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if *state != "01" || !inodes.contains(*inode) {
                continue;
            }
            if let (Some(l), Some(r)) = (port_of(local), port_of(remote)) {
                found.push((l, r));
            }
        }
    }
    found
}

/// The port of a `/proc/net/tcp` address, `HEXADDR:HEXPORT`.
fn port_of(addr: &str) -> Option<u16> {
    u16::from_str_radix(addr.rsplit_once(':')?.1, 16).ok()
}
