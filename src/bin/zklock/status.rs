//! `zklock status`: a lock's holders and waiters, as a table or as JSON.

use std::fmt::Write as _;

use zklock::recipes::{inspect, NodeKind, NodeOrigin, QueueEntry};

use crate::args::{Global, Status};
use crate::{check_path, client_failure, connect, Failure};

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
        Err(_) => data.iter().fold("0x".to_owned(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        }),
    }
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json(path: &str, queue: &[QueueEntry]) -> String {
    let roles = roles(queue);
    let holders = roles.iter().filter(|r| **r == "holder").count();
    let waiting = roles.iter().filter(|r| **r == "waiting").count();
    let mut out = format!(
        "{{\"path\":{},\"holders\":{holders},\"waiting\":{waiting},\"queue\":[",
        json_string(path)
    );
    for (i, (e, role)) in queue.iter().zip(&roles).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"position\":{i},\"role\":\"{role}\",\"node\":{},\"node_path\":{},\"sequence\":{},\
             \"kind\":\"{}\",\"origin\":\"{}\",\"owner_session\":\"{}\",\"czxid\":{},\"data\":{}",
            json_string(&e.name),
            json_string(&node_path(path, &e.name)),
            e.sequence,
            kind_name(e.kind),
            origin_name(e.origin),
            session_hex(e.owner_session),
            e.czxid,
            json_string(&String::from_utf8_lossy(&e.data)),
        );
        if std::str::from_utf8(&e.data).is_err() {
            let hex = e.data.iter().fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            });
            let _ = write!(out, ",\"data_hex\":\"{hex}\"");
        }
        out.push('}');
    }
    out.push_str("]}\n");
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
        assert_eq!(json_string("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
        let j = json("/p", &[entry("n", NodeKind::Exclusive)]);
        assert!(j.contains("\"data\":\"x\\\"y\\n\""), "{j}");
        assert!(j.contains("\"owner_session\":\"0x1234\""), "{j}");
    }
}
