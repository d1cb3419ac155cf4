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
        let addr = self.hosts[self.next];
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 2181 + i)))
            .collect()
    }

    /// Fails one whole round at `now` and returns the pause it set.
    fn fail_round(list: &mut HostList, n: usize, now: Instant) -> Duration {
        for i in 0..n {
            if i + 1 < n {
                let before = list.not_before;
                list.failed(now);
                assert_eq!(list.not_before, before, "no pause inside a round");
            } else {
                list.failed(now);
            }
        }
        list.not_before - now
    }

    /// GUARANTEES.md's pause after a round of failures: 50 ms doubling to
    /// 1 s, each with up to as much again of jitter, and back to 50 ms
    /// after a success; never a pause before every server failed once.
    #[test]
    fn the_pause_after_a_failed_round_is_50_ms_doubling_to_1_s_with_jitter() {
        for n in [1usize, 3] {
            let start = Instant::now();
            let mut list = HostList::new(hosts(n as u16), start);
            let mut now = start;
            let mut pauses = Vec::new();
            for _ in 0..8 {
                let pause = fail_round(&mut list, n, now);
                pauses.push(pause);
                now += pause;
            }
            let bases = [50u64, 100, 200, 400, 800, 1000, 1000, 1000];
            for (pause, base) in pauses.iter().zip(bases) {
                let base = Duration::from_millis(base);
                assert!(
                    *pause >= base && *pause <= base * 2,
                    "{n} servers: pauses {pauses:?}, one outside [{base:?}, {:?}]",
                    base * 2
                );
            }
            list.succeeded();
            let pause = fail_round(&mut list, n, now);
            assert!(
                pause >= Duration::from_millis(50) && pause <= Duration::from_millis(100),
                "after a success the pause starts again at 50 ms: {pause:?}"
            );
        }
    }

    /// Clients spread over the servers: each list is shuffled on its own,
    /// so every server comes first for some of them, and the pauses'
    /// jitter differs from round to round.
    #[test]
    fn lists_are_shuffled_apart_and_pauses_jittered() {
        let all = hosts(3);
        let mut firsts = std::collections::BTreeSet::new();
        let mut pauses = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let start = Instant::now();
            let mut list = HostList::new(all.clone(), start);
            firsts.insert(list.take());
            list.next = 0;
            pauses.insert(fail_round(&mut list, 3, start));
        }
        assert_eq!(firsts.len(), 3, "the same server first in every list");
        assert!(pauses.len() > 1, "no jitter: {pauses:?}");
    }

    /// Each server is tried once a round, every one of them.
    #[test]
    fn every_server_is_tried_once_a_round() {
        let all = hosts(5);
        let mut list = HostList::new(all.clone(), Instant::now());
        for _ in 0..3 {
            let mut round: Vec<SocketAddr> = (0..5).map(|_| list.take()).collect();
            round.sort();
            assert_eq!(round, all);
        }
    }
}
