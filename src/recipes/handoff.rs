//! The bookkeeping of BatchMutex's local hand-off, apart from threads,
//! condvars and the ZooKeeper lock, so that every interleaving of local
//! threads can be simulated (tests below) — the process's hold must never
//! stay with nobody using or waiting for it.

/// What a local thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// The process holds the ZooKeeper lock and nobody uses it: take it.
    Take,
    /// Nobody holds or is queueing for it: queue in ZooKeeper for the process.
    Acquire,
    /// Someone uses it, or queues for it: wait for a change.
    Wait,
}

/// Who uses, waits for and holds the process's ZooKeeper lock.
#[derive(Debug, Default)]
pub(crate) struct HandOff {
    /// The process holds the ZooKeeper lock.
    pub held: bool,
    /// A thread of this process is inside the lock.
    pub busy: bool,
    /// A thread is queueing in ZooKeeper for the process.
    pub acquiring: bool,
    /// Threads of this process waiting locally.
    pub waiting: usize,
    /// Threads that held it since the ZooKeeper lock was taken.
    pub batch: usize,
}

impl HandOff {
    /// A thread starts waiting.
    pub(crate) fn arrive(&mut self) {
        self.waiting += 1;
    }

    /// A waiting thread looks; `usable`: the held lock is not lost.
    pub(crate) fn turn(&mut self, usable: bool) -> Turn {
        if self.busy {
            return Turn::Wait;
        }
        if self.held && usable {
            self.busy = true;
            self.waiting -= 1;
            self.batch += 1;
            return Turn::Take;
        }
        // Lost while idle: it goes back, and the process queues again.
        self.held = false;
        if self.acquiring {
            return Turn::Wait;
        }
        self.acquiring = true;
        Turn::Acquire
    }

    /// The queueing thread is back, with the lock or without.
    pub(crate) fn acquired(&mut self, ok: bool) {
        self.acquiring = false;
        if ok {
            self.held = true;
            self.batch = 0;
        }
    }

    /// A waiting thread leaves without the lock (timeout, cancel, error).
    /// `true`: give the hold back, nobody is left to use it.
    pub(crate) fn leave(&mut self) -> bool {
        self.waiting -= 1;
        self.give_back_if_idle()
    }

    /// The thread inside leaves. `true`: give the hold back (nobody waits,
    /// or the batch is full), else it stays for a local waiter.
    pub(crate) fn exit(&mut self, max_batch: usize) -> bool {
        self.busy = false;
        if self.held && (self.waiting == 0 || self.batch >= max_batch) {
            self.held = false;
            return true;
        }
        false
    }

    fn give_back_if_idle(&mut self) -> bool {
        let idle = self.held && !self.busy && self.waiting == 0 && !self.acquiring;
        if idle {
            self.held = false;
        }
        idle
    }

    /// Nobody uses or awaits the hold, yet it is kept.
    #[cfg(test)]
    fn idle_hold(&self) -> bool {
        self.held && !self.busy && self.waiting == 0 && !self.acquiring
    }
}

#[cfg(test)]
mod tests {
    //! A deterministic simulation of local threads around the hand-off:
    //! each seed draws who arrives, waits, leaves (timeout or cancel),
    //! queues in ZooKeeper (and gets it or not) and exits, in every order.
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Actor {
        Idle,
        Waiting,
        Acquiring,
        Inside,
        Done,
    }

    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n.max(1)
        }
    }

    /// Runs one seed; `Err` says which invariant broke.
    fn run(seed: u64) -> Result<(), String> {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut h = HandOff::default();
        let max_batch = 1 + rng.below(3) as usize;
        let mut actors = vec![Actor::Idle; 2 + rng.below(4) as usize];
        for step in 0..400 {
            let i = rng.below(actors.len() as u64) as usize;
            match actors[i] {
                Actor::Idle => {
                    h.arrive();
                    actors[i] = Actor::Waiting;
                }
                Actor::Waiting => {
                    if rng.below(4) == 0 {
                        // Its deadline or cancel token: it leaves.
                        if h.leave() {
                            // The hold goes back to ZooKeeper.
                        }
                        actors[i] = Actor::Done;
                    } else {
                        actors[i] = match h.turn(rng.below(10) != 0) {
                            Turn::Take => Actor::Inside,
                            Turn::Acquire => Actor::Acquiring,
                            Turn::Wait => Actor::Waiting,
                        };
                    }
                }
                Actor::Acquiring => {
                    let ok = rng.below(5) != 0;
                    h.acquired(ok);
                    actors[i] = if ok {
                        Actor::Waiting
                    } else {
                        h.leave();
                        Actor::Done
                    };
                }
                Actor::Inside => {
                    h.exit(max_batch);
                    actors[i] = Actor::Done;
                }
                Actor::Done => {}
            }
            let inside = actors.iter().filter(|a| **a == Actor::Inside).count();
            if inside > 1 {
                return Err(format!("step {step}: {inside} threads inside"));
            }
            if h.idle_hold() {
                return Err(format!("step {step}: the hold is kept for nobody ({h:?})"));
            }
            if actors.iter().all(|a| *a == Actor::Done) {
                break;
            }
        }
        Ok(())
    }

    #[test]
    fn no_hold_is_kept_for_nobody_in_any_interleaving() {
        for seed in 1..=20_000 {
            if let Err(e) = run(seed) {
                panic!("seed {seed}: {e}");
            }
        }
    }
    // Issue 9's scenario 5, the old shape (a waiter that leaves keeps the
    // hold it was kept for), is `batch-leave-keeps-the-hold` in
    // scripts/inject-bugs.py: this simulation finds it.
}
