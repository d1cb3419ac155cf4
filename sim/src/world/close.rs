//! The very end, once `check_end` has passed: every application lets go
//! of its handles, its recipes and its client, on a healthy network (the
//! leader only, every byte delivered at once), and each core closes its
//! session; `check_closed` then reads what is left.

use zklock::testing::Core;

use super::*;

/// Rounds the close may take (each moves every byte, then time to the
/// next deadline).
const CLOSE_ROUNDS: usize = 2000;

/// Idle rounds to wait, in real time, for a thread of the world's that
/// still holds a client (a blocking call whose reply it is reading) to
/// let go of it, before virtual time moves on without it.
const THREAD_ROUNDS: usize = 2000;

/// A client whose application has let go of everything: its core, and
/// the connection it is on.
pub(super) struct Closing {
    pub(super) c: usize,
    pub(super) core: Core,
    pub(super) conn: Option<ConnId>,
}

impl World {
    /// Closes every client (see the module docs), and returns their cores
    /// once each has finished, or the rounds ran out.
    pub(super) fn close_all(&mut self) -> Vec<Closing> {
        // Nothing the world keeps may hold a handle: the calls' shared
        // guards, the probes' members.
        self.calls.clear();
        self.probes.clear();
        let clients = std::mem::take(&mut self.clients);
        let mut closing = Vec::new();
        for (c, client) in clients.into_iter().enumerate() {
            let SimClient {
                client,
                core,
                locks,
                set,
                latch,
                multi,
                multi_reversed,
                batch,
                attempts,
                link,
                ..
            } = client;
            // Handles first, then the recipes, then the client itself.
            drop(attempts);
            drop((set, latch, multi, multi_reversed, batch));
            drop(locks);
            drop(client);
            let mut closing_one = Closing {
                c,
                core,
                conn: None,
            };
            if let Some(mut link) = link {
                // What was in flight arrives (TCP delivers what was
                // written before a close).
                for (_, bytes) in link.up.drain(..) {
                    self.server.receive(self.now, link.conn, &bytes);
                }
                closing_one.conn = Some(link.conn);
                for (_, _, bytes) in link.down.drain(..) {
                    match bytes {
                        Some(bytes) => closing_one.core.handle_input(self.now, &bytes),
                        None => {
                            closing_one.conn = None;
                            closing_one.core.handle_disconnected(self.now);
                            break;
                        }
                    }
                }
            }
            closing.push(closing_one);
        }
        let mut idle = 0;
        for _ in 0..CLOSE_ROUNDS {
            let mut moved = false;
            for one in &mut closing {
                moved |= self.close_round(one);
            }
            self.server.handle_timeout(self.now);
            while let Some((conn, bytes)) = self.server.poll_output() {
                moved = true;
                if let Some(one) = closing.iter_mut().find(|o| o.conn == Some(conn)) {
                    one.core.handle_input(self.now, &bytes);
                }
            }
            while let Some(conn) = self.server.poll_closed() {
                moved = true;
                if let Some(one) = closing.iter_mut().find(|o| o.conn == Some(conn)) {
                    one.conn = None;
                    one.core.handle_disconnected(self.now);
                }
            }
            if closing.iter().all(|o| o.core.is_finished()) {
                break;
            }
            if moved || closing.iter().any(|o| o.core.has_commands()) {
                idle = 0;
                continue;
            }
            // A client still open is held by one of the world's threads:
            // it lets go once it has read its reply.
            let held = closing.iter().any(|o| !o.core.state().is_terminal());
            if held && idle < THREAD_ROUNDS {
                idle += 1;
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let next = closing
                .iter()
                .filter(|o| !o.core.is_finished())
                .filter_map(|o| o.core.poll_timeout())
                .chain(self.server.poll_timeout())
                .min();
            match next {
                Some(at) => self.now = self.now.max(at),
                None => self.now += Duration::from_millis(100),
            }
        }
        closing
    }

    /// One round of a closing client: its commands and timers, what it
    /// asks of its driver, a connection if it wants one, and what it
    /// wrote, delivered. `true` if anything moved.
    fn close_round(&mut self, one: &mut Closing) -> bool {
        let now = self.now;
        if one.core.is_finished() {
            return false;
        }
        one.core.turn(now);
        let mut moved = false;
        while let Some(event) = one.core.poll_event() {
            moved = true;
            if let CoreEvent::DropConnection(_) = event {
                if let Some(conn) = one.conn.take() {
                    self.server.disconnect(now, conn);
                }
            }
        }
        if one.conn.is_none() && one.core.wants_connection() {
            one.core.prepare_connection();
            one.conn = Some(self.server.connect(now));
            one.core.handle_connected(now);
            moved = true;
        }
        if let Some(conn) = one.conn {
            let out = one.core.output();
            if !out.is_empty() {
                let n = out.len();
                self.server.receive(now, conn, out);
                one.core.consume_output(n);
                moved = true;
            }
        }
        moved
    }
}
