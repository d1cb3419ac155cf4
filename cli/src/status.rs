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

    fn with(name: &str, kind: NodeKind, origin: NodeOrigin, data: &[u8]) -> QueueEntry {
        QueueEntry {
            origin,
            data: data.to_vec(),
            ..entry(name, kind)
        }
    }

    /// A semaphore's lease is shown as a lease, never as the holder, even
    /// first in the queue (a lease cannot be judged without the semaphore's
    /// size).
    /// Kills: roles, arm NodeKind::Lease deleted.
    #[test]
    fn a_lease_is_neither_holder_nor_waiter() {
        let q = [entry("a", NodeKind::Lease), entry("b", NodeKind::Lease)];
        assert_eq!(roles(&q), ["lease", "lease"]);
        let j = json("/p", &q);
        assert!(j.contains("\"holders\":0,\"waiting\":0"), "{j}");
    }

    /// `status --json` counts holders and waiters, and names each node's
    /// kind, origin and full path.
    /// Kills: json, the holders' and the waiters' == → !=; kind_name -> "" and
    /// -> "xyzzy"; origin_name -> "" and -> "xyzzy"; node_path -> String::new(),
    /// -> "xyzzy".into() and == → !=.
    #[test]
    fn json_counts_and_names_each_contender() {
        let q = [
            with("r1", NodeKind::Read, NodeOrigin::Protected, b"x"),
            with("w2", NodeKind::Write, NodeOrigin::Kazoo, b"x"),
            with("e3", NodeKind::Exclusive, NodeOrigin::Other, b"x"),
        ];
        let j = json("/locks/p", &q);
        assert!(j.contains("\"holders\":1,\"waiting\":2"), "{j}");
        for (name, kind, origin) in [
            ("r1", "read", "protected"),
            ("w2", "write", "kazoo"),
            ("e3", "exclusive", "other"),
        ] {
            let fields = format!(
                "\"node\":\"{name}\",\"node_path\":\"/locks/p/{name}\",\"sequence\":1,\"kind\":\"{kind}\",\"origin\":\"{origin}\""
            );
            assert!(j.contains(&fields), "{fields} in {j}");
        }
    }

    /// Data that is not UTF-8 is given exactly, in hex: in the table as
    /// `0x…`, in JSON as `data_hex` beside the text with the bad bytes
    /// replaced; UTF-8 data is quoted and escaped in the table and has no
    /// `data_hex`.
    /// Kills: data_text -> String::new() and -> "xyzzy".into(); hex -> String::new() and -> "xyzzy".into().
    #[test]
    fn data_that_is_not_utf8_is_shown_in_hex() {
        let q = [
            with("a", NodeKind::Read, NodeOrigin::Other, b"\xff\x00A"),
            with("b", NodeKind::Read, NodeOrigin::Other, b"hi \"you\""),
        ];
        let t = table("/p", &q);
        assert!(t.contains("  0xff0041  "), "{t}");
        assert!(t.contains("  \"hi \\\"you\\\"\"  "), "{t}");
        let j = json("/p", &q);
        assert!(
            j.contains("\"data\":\"\u{fffd}\\u0000A\",\"data_hex\":\"ff0041\"}"),
            "{j}"
        );
        assert_eq!(j.matches("data_hex").count(), 1, "{j}");
    }

    /// The table: a line that counts holders and waiters, a header, one row a
    /// contender with its columns lined up, the node's name last; the note on
    /// the 'protected' origin only when one is shown; a free lock in one line.
    /// Kills: table -> String::new() and -> "xyzzy".into(); table, the holders'
    /// and the waiters' == → !=; table `i + 1 == cells.len()` == → != and + → -;
    /// table `e.origin == NodeOrigin::Protected` == → !=.
    #[test]
    fn the_table_lines_up_its_columns() {
        let q = [
            with(
                "_c_1-lock-0000000001",
                NodeKind::Exclusive,
                NodeOrigin::Protected,
                b"h:1",
            ),
            with(
                "x__lock__0000000002",
                NodeKind::Exclusive,
                NodeOrigin::Kazoo,
                b"kz",
            ),
        ];
        let want = "\
/p: 1 holding, 1 waiting
#  ROLE     SEQUENCE    KIND       ORIGIN     OWNER   CZXID  DATA   NODE
0  holder   0000000001  exclusive  protected  0x1234  42     \"h:1\"  _c_1-lock-0000000001
1  waiting  0000000001  exclusive  kazoo      0x1234  42     \"kz\"   x__lock__0000000002
(origin 'protected': zklock or Apache Curator, which name nodes alike)
";
        assert_eq!(table("/p", &q), want);
        let kazoo = table("/p", &q[1..]);
        assert!(kazoo.starts_with("/p: 1 holding, 0 waiting\n"), "{kazoo}");
        assert!(!kazoo.contains("origin 'protected'"), "{kazoo}");
        assert_eq!(table("/p", &[]), "/p: free (no holder, nobody waiting)\n");
    }

    #[test]
    fn json_escapes() {
        let j = json("/p", &[entry("n", NodeKind::Exclusive)]);
        assert!(j.contains("\"data\":\"x\\\"y\\n\""), "{j}");
        assert!(j.contains("\"owner_session\":\"0x1234\""), "{j}");
    }
}
