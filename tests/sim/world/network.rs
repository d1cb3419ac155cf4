//! The network between the clients and the server: bytes in flight in
//! both directions, delivered when their latency has passed.

use super::*;

impl World {
    /// Moves bytes that have arrived, in both directions.
    pub(super) fn move_bytes(&mut self, c: usize) -> Result<(), Violation> {
        let now = self.now;
        let Some(link) = self.clients[c].link.as_mut() else {
            return Ok(());
        };
        if link.stalled_until.is_some_and(|s| s > now) {
            return Ok(());
        }
        link.stalled_until = None;
        let conn = link.conn;
        let mut arrived = Vec::new();
        while link.up.front().is_some_and(|(at, _)| *at <= now) {
            arrived.push(link.up.pop_front().expect("present").1);
        }
        for bytes in arrived {
            self.server.receive(now, conn, &bytes);
        }
        self.move_bytes_down(c)
    }

    fn move_bytes_down(&mut self, c: usize) -> Result<(), Violation> {
        let now = self.now;
        loop {
            let Some(link) = self.clients[c].link.as_mut() else {
                return Ok(());
            };
            if link.down.front().is_none_or(|(at, _, _)| *at > now) {
                return Ok(());
            }
            let (_, written, bytes) = link.down.pop_front().expect("present");
            match bytes {
                Some(bytes) => {
                    self.clients[c].last_heard = now;
                    self.note_answers(c, &bytes);
                    self.clients[c].core.handle_input(now, &bytes);
                    self.after_core(c)?;
                    self.check_told_of_deletion(c, written)?;
                    self.latch_told_of_deletion(c, written)?;
                }
                None => {
                    self.clients[c].link = None;
                    self.clients[c].core.handle_disconnected(now);
                    self.clients[c].connect_at = now + Duration::from_millis(5);
                    self.after_core(c)?;
                    return Ok(());
                }
            }
        }
    }

    /// Puts what the server wrote on the wire.
    pub(super) fn server_output(&mut self) {
        let now = self.now;
        while let Some((conn, bytes)) = self.server.poll_output() {
            let at = now + self.latency_of(conn);
            self.writes += 1;
            let n = self.writes;
            if let Some(link) = self.link_mut(conn) {
                link.down.push_back((at, n, Some(bytes)));
            }
        }
        while let Some(conn) = self.server.poll_closed() {
            let at = now + self.latency_of(conn);
            self.writes += 1;
            let n = self.writes;
            if let Some(link) = self.link_mut(conn) {
                link.down.push_back((at, n, None));
            }
        }
    }

    /// The latency of the link of connection `conn` (any, if no client's).
    fn latency_of(&mut self, conn: ConnId) -> Duration {
        let c = self
            .clients
            .iter()
            .position(|c| c.link.as_ref().is_some_and(|l| l.conn == conn))
            .unwrap_or(0);
        self.latency(c)
    }

    fn link_mut(&mut self, conn: ConnId) -> Option<&mut Link> {
        self.clients
            .iter_mut()
            .filter_map(|c| c.link.as_mut())
            .find(|l| l.conn == conn)
    }
}
