//! `zklock status`: a lock's holders and waiters, as a table or as JSON.

use std::fmt::Write as _;

use serde::Serialize;
use zklock::recipes::{inspect, NodeKind, NodeOrigin, QueueEntry};

use crate::args::{Global, Status};
use crate::{check_path, client_failure, connect, lock_failure, Failure};

/// Whether each entry holds: a read node holds when no non-read node is
/// ahead of it; anything else only when first. Semaphore leases cannot be
/// judged without the semaphore's size.
fn roles(queue: &[QueueEntry]) -> Vec<&'static str> {
    let mut exclusive_ahead = false;
    queue
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let role = match e.kind {
                NodeKind::Lease => "lease",
                NodeKind::Read if !exclusive_ahead => "holder",
                NodeKind::Read => "waiting",
                _ if i == 0 => "holder",
                _ => "waiting",
            };
            if e.kind != NodeKind::Read {
                exclusive_ahead = true;
            }
            role
        })
        .collect()
}

fn kind_name(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Exclusive => "exclusive",
        NodeKind::Read => "read",
        NodeKind::Write => "write",
        NodeKind::Lease => "lease",
    }
}

fn origin_name(o: NodeOrigin) -> &'static str {
    match o {
        NodeOrigin::Protected => "protected",
        NodeOrigin::Kazoo => "kazoo",
        NodeOrigin::Other => "other",
    }
}

fn session_hex(s: i64) -> String {
    format!("{:#x}", s as u64)
}

fn node_path(path: &str, name: &str) -> String {
    if path == "/" {
        format!("/{name}")
    } else {
        format!("{path}/{name}")
    }
}

/// Data for the table: quoted and escaped text, or hex if not UTF-8.
fn data_text(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(s) => format!("{s:?}"),
        Err(_) => format!("0x{}", hex(data)),
    }
}

/// One contender in `status --json`.
#[derive(Serialize)]
struct JsonEntry<'a> {
    position: usize,
    role: &'static str,
    node: &'a str,
    node_path: String,
    sequence: i32,
    kind: &'static str,
    origin: &'static str,
    owner_session: String,
    czxid: i64,
    /// The data as text (invalid UTF-8 replaced); see `data_hex`.
    data: String,
    /// The exact bytes, only when they are not UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    data_hex: Option<String>,
}

/// `status --json`.
#[derive(Serialize)]
struct JsonStatus<'a> {
    path: &'a str,
    holders: usize,
    waiting: usize,
    queue: Vec<JsonEntry<'a>>,
}

fn hex(data: &[u8]) -> String {
    data.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn json(path: &str, queue: &[QueueEntry]) -> String {
    let roles = roles(queue);
    let status = JsonStatus {
        path,
        holders: roles.iter().filter(|r| **r == "holder").count(),
        waiting: roles.iter().filter(|r| **r == "waiting").count(),
        queue: queue
            .iter()
            .zip(&roles)
            .enumerate()
            .map(|(position, (e, role))| JsonEntry {
                position,
                role,
                node: &e.name,
                node_path: node_path(path, &e.name),
                sequence: e.sequence,
                kind: kind_name(e.kind),
                origin: origin_name(e.origin),
                owner_session: session_hex(e.owner_session),
                czxid: e.czxid,
                data: String::from_utf8_lossy(&e.data).into_owned(),
                data_hex: std::str::from_utf8(&e.data).is_err().then(|| hex(&e.data)),
            })
            .collect(),
    };
    // Serializing plain strings and numbers cannot fail.
    let mut out = serde_json::to_string(&status).unwrap_or_default();
    out.push('\n');
    out
}

fn table(path: &str, queue: &[QueueEntry]) -> String {
    let roles = roles(queue);
    if queue.is_empty() {
        return format!("{path}: free (no holder, nobody waiting)\n");
    }
    let holders = roles.iter().filter(|r| **r == "holder").count();
    let waiting = roles.iter().filter(|r| **r == "waiting").count();
    let mut out = format!("{path}: {holders} holding, {waiting} waiting\n");
    let header = [
        "#", "ROLE", "SEQUENCE", "KIND", "ORIGIN", "OWNER", "CZXID", "DATA", "NODE",
    ];
    let rows: Vec<[String; 9]> = queue
        .iter()
        .zip(&roles)
        .enumerate()
        .map(|(i, (e, role))| {
            [
                i.to_string(),
                role.to_string(),
                format!("{:010}", e.sequence),
                kind_name(e.kind).to_owned(),
                origin_name(e.origin).to_owned(),
                session_hex(e.owner_session),
                e.czxid.to_string(),
                data_text(&e.data),
                e.name.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(cell);
            } else {
                let _ = write!(l, "{cell:<w$}  ");
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&cells);
    }
    if queue.iter().any(|e| e.origin == NodeOrigin::Protected) {
        out.push_str("(origin 'protected': zklock or Apache Curator, which name nodes alike)\n");
    }
    out
}

pub fn run(global: &Global, s: &Status) -> Result<u8, Failure> {
    check_path(&s.path, "status")?;
    let client = connect(global)?;
    let queue = inspect(&client, &s.path)
        .map_err(|e| client_failure(&e, &format!("status: reading {}", s.path)))?;
    let _ = client.close();
    let text = if s.json {
        json(&s.path, &queue)
    } else {
        table(&s.path, &queue)
    };
    print!("{text}");
    Ok(0)
}

/// `zklock revoke`: asks the holder of `path` to let go (exit 1 if nobody
/// holds it).
pub fn revoke(global: &Global, path: &str) -> Result<u8, Failure> {
    check_path(path, "revoke")?;
    let client = connect(global)?;
    let asked = zklock::recipes::revoke_holder(&client, path)
        .map_err(|e| lock_failure(&e, &format!("revoke: asking the holder of {path}")))?;
    let _ = client.close();
    match asked {
        Some(node) => {
            // Nothing in the node says whether its holder listens (Curator's
            // protocol keeps that in the holder's watch): say both outcomes.
            println!(
                "asked the holder of {path} to let go: {node} (only a revocable holder \
                 lets go, e.g. `zklock exec --revocable`; any other ignores this and keeps the lock)"
            );
            Ok(0)
        }
        None => {
            println!("nobody holds {path}");
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: NodeKind) -> QueueEntry {
        QueueEntry {
            name: name.into(),
            sequence: 1,
            kind,
            origin: NodeOrigin::Protected,
            owner_session: 0x1234,
            data: b"x\"y\n".to_vec(),
            czxid: 42,
        }
    }

    #[test]
    fn readers_share_until_a_writer() {
        let q = [
            entry("a", NodeKind::Read),
            entry("b", NodeKind::Read),
            entry("c", NodeKind::Write),
            entry("d", NodeKind::Read),
        ];
        assert_eq!(roles(&q), ["holder", "holder", "waiting", "waiting"]);
        let q = [entry("a", NodeKind::Exclusive), entry("b", NodeKind::Read)];
        assert_eq!(roles(&q), ["holder", "waiting"]);
    }

    #[test]
    fn json_escapes() {
        let j = json("/p", &[entry("n", NodeKind::Exclusive)]);
        assert!(j.contains("\"data\":\"x\\\"y\\n\""), "{j}");
        assert!(j.contains("\"owner_session\":\"0x1234\""), "{j}");
    }
}
