//! The end of a script: every handle dropped, the network healed, and
//! the core given the time it needs; then nothing of ours may remain.
//! Then the client goes, and the core closes the session.

use std::time::Duration;

use super::Script;
use crate::world::checker::check_closed;

/// Steps the end may take to settle (each answers everything and moves
/// to the core's next deadline).
const SETTLE_STEPS: usize = 400;

impl Script {
    pub(super) fn settle(&mut self) {
        self.acquisitions.clear();
        self.stalled = false;
        for _ in 0..SETTLE_STEPS {
            self.connect();
            self.serve();
            self.step();
            if self.trace {
                eprintln!(
                    "{:>9.3} settle: {:?} linked={} attempts={} tree={:?}",
                    (self.now - self.start).as_secs_f64(),
                    self.core,
                    self.link.is_some(),
                    self.core.lock_attempts(),
                    self.server.paths()
                );
            }
            if self.core.lock_attempts() == 0 && self.link.as_ref().is_none_or(|l| l.up.is_empty())
            {
                break;
            }
            match self.core.poll_timeout() {
                Some(at) => self.now = self.now.max(at),
                None => self.now += Duration::from_millis(100),
            }
            // What the core wrote on its timers goes out at once: the
            // session does not expire while the core works through them.
            self.step();
            self.answer_all();
        }
        assert_eq!(
            self.core.lock_attempts(),
            0,
            "acquisitions still tracked after every handle was dropped on a healthy network"
        );
        let session = self.core.session_id();
        if self.server.session_alive(session) {
            let left = self.server.ephemerals_of(session);
            assert!(
                left.is_empty(),
                "nodes of session {session:#x} left after every handle was dropped: {left:?}"
            );
        }
        // The last client handle goes: the session closes.
        self.closing = true;
        self.mutexes.clear();
        self.client = None;
        for _ in 0..SETTLE_STEPS {
            if self.core.is_finished() {
                break;
            }
            self.connect();
            self.serve();
            self.step();
            if self.trace {
                eprintln!(
                    "{:>9.3} close: {:?} linked={}",
                    (self.now - self.start).as_secs_f64(),
                    self.core,
                    self.link.is_some()
                );
            }
            if let Some(at) = self.core.poll_timeout() {
                self.now = self.now.max(at);
            }
        }
        if let Err(what) = check_closed(&self.server, &self.core) {
            panic!("{what}");
        }
    }
}
