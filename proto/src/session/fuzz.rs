//! A driver for the session core that takes its script from raw bytes, for
//! cargo-fuzz and for the stable test suite. It checks the core's promises:
//! no panic on any input, every request answered exactly once, every watch
//! ended exactly once, nothing wanted after the end.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jute::{PathWatch, Request};

use super::{Session, SessionConfig, SessionEvent};

/// Runs one script. Panics only when the core breaks a promise.
pub fn run(data: &[u8]) {
    let start = Instant::now();
    let mut now = start;
    let mut s: Session<u32, u32> = Session::new(
        SessionConfig {
            session_timeout: Duration::from_millis(6000),
            connect_timeout: Duration::from_millis(2000),
            max_frame: 4096,
        },
        now,
    );
    let mut replies: HashMap<u32, usize> = HashMap::new();
    let mut watches: HashMap<u32, usize> = HashMap::new();
    // Persistent watchers: many events, but ended (abandoned) exactly once.
    let mut persistent: HashMap<u32, usize> = HashMap::new();
    let mut next = 0u32;
    let mut bytes = data.iter().copied();
    while let Some(op) = bytes.next() {
        match op % 8 {
            0 | 1 => {
                let len = usize::from(bytes.next().unwrap_or(0));
                let chunk: Vec<u8> = bytes.by_ref().take(len).collect();
                s.handle_input(now, &chunk);
            }
            2 => {
                next += 1;
                let watch = op & 0x10 != 0;
                let path = format!("/p{}", op >> 5);
                let req = match op >> 5 & 3 {
                    0 => Request::Exists(PathWatch { path, watch }),
                    1 => Request::GetData(PathWatch { path, watch }),
                    2 => Request::GetChildren2(PathWatch { path, watch }),
                    _ if op & 0x08 != 0 => Request::AddWatch(jute::AddWatchRequest {
                        path,
                        mode: jute::AddWatchMode::from(i32::from(op & 1)),
                    }),
                    _ => Request::Sync(path),
                };
                let has_watch = watch && !matches!(req, Request::Sync(_));
                replies.insert(next, 0);
                if has_watch && matches!(req, Request::AddWatch(_)) {
                    persistent.insert(next, 0);
                } else if has_watch {
                    watches.insert(next, 0);
                }
                s.submit(now, req, next, has_watch.then_some(next));
            }
            3 => now += Duration::from_millis(u64::from(bytes.next().unwrap_or(0)) * 40),
            4 => s.handle_disconnected(now),
            5 => s.handle_connected(now),
            6 => {
                let n = s.output().len();
                s.consume_output(usize::from(bytes.next().unwrap_or(0)).min(n));
            }
            _ => s.handle_timeout(now),
        }
        drain(&mut s, &mut replies, &mut watches, &mut persistent);
    }
    next += 1;
    replies.insert(next, 0);
    s.close(now, next);
    // Whatever state it was in, the end comes within a read timeout.
    s.handle_disconnected(now);
    s.handle_timeout(now + Duration::from_secs(10));
    drain(&mut s, &mut replies, &mut watches, &mut persistent);
    assert!(!s.wants_connection(), "a closed session wants a connection");
    for (id, n) in replies {
        assert_eq!(n, 1, "request {id} answered {n} times");
    }
    for (id, n) in watches {
        assert_eq!(n, 1, "watch {id} ended {n} times");
    }
    for (id, n) in persistent {
        assert_eq!(n, 1, "persistent watch {id} ended {n} times");
    }
}

fn drain(
    s: &mut Session<u32, u32>,
    replies: &mut HashMap<u32, usize>,
    watches: &mut HashMap<u32, usize>,
    persistent: &mut HashMap<u32, usize>,
) {
    while let Some(ev) = s.poll_event() {
        match ev {
            SessionEvent::Reply { handle, .. } => *replies.entry(handle).or_default() += 1,
            SessionEvent::Watch { watcher, .. } if persistent.contains_key(&watcher) => {}
            SessionEvent::WatchAbandoned { watcher, .. } if persistent.contains_key(&watcher) => {
                *persistent.entry(watcher).or_default() += 1
            }
            SessionEvent::Watch { watcher, .. } | SessionEvent::WatchAbandoned { watcher, .. } => {
                *watches.entry(watcher).or_default() += 1
            }
            SessionEvent::State(_) | SessionEvent::DropConnection(_) => {}
        }
    }
}
