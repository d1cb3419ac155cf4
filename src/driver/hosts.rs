//! The order in which servers are tried, and the pause after a round of
//! failures.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The servers, shuffled once, tried in turn; a pause with jitter after a
/// whole round failed.
pub(super) struct HostList {
    hosts: Vec<SocketAddr>,
    next: usize,
    failures_in_round: usize,
    backoff: Duration,
    pub(super) not_before: Instant,
    rng: u64,
}

impl HostList {
    pub(super) fn new(mut hosts: Vec<SocketAddr>, now: Instant) -> Self {
        let mut rng = zklock_proto::random_seed() as u64 | 1;
        for i in (1..hosts.len()).rev() {
            let j = (xorshift(&mut rng) % (i as u64 + 1)) as usize;
            hosts.swap(i, j);
        }
        HostList {
            hosts,
            next: 0,
            failures_in_round: 0,
            backoff: Duration::from_millis(50),
            not_before: now,
            rng,
        }
    }

    pub(super) fn take(&mut self) -> SocketAddr {
        let addr = self.hosts[self.next % self.hosts.len()];
        self.next = (self.next + 1) % self.hosts.len();
        addr
    }

    pub(super) fn succeeded(&mut self) {
        self.failures_in_round = 0;
        self.backoff = Duration::from_millis(50);
    }

    pub(super) fn failed(&mut self, now: Instant) {
        self.failures_in_round += 1;
        if self.failures_in_round >= self.hosts.len() {
            self.failures_in_round = 0;
            let jitter = xorshift(&mut self.rng) % (self.backoff.as_millis() as u64 + 1);
            self.not_before = now + self.backoff + Duration::from_millis(jitter);
            self.backoff = (self.backoff * 2).min(Duration::from_secs(1));
        }
    }
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}
