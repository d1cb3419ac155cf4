//! One direction of a proxied connection as a delay line: its reader puts
//! each chunk in as it arrives, stamped with the time it falls due (its
//! arrival plus the delay set then), and its writer takes the chunks out in
//! order as they fall due. Chunks on their way overlap, as on a long wire:
//! each waits out its own delay, never the rest of another one's.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use super::{lock, wait, wait_timeout};

/// The most bytes one line holds. A reader whose chunk does not fit waits
/// until the writer has let enough out (a chunk larger than the whole line
/// goes in alone), and reads nothing meanwhile, so the sender is held back
/// by TCP as by a full window. Only a stream faster than this many bytes
/// per delay meets the bound; its bytes then wait longer than the delay.
pub(super) const LINE_LIMIT: usize = 1 << 20;

/// What travels on a line.
pub(super) enum Item {
    Data(Vec<u8>),
    /// The sender's half-close, passed on as one.
    Eof,
    /// The server's reply to the request armed by `drop_reply_of_next`
    /// came: the connection closes when this falls due.
    Close,
}

impl Item {
    fn len(&self) -> usize {
        match self {
            Item::Data(bytes) => bytes.len(),
            Item::Eof | Item::Close => 0,
        }
    }
}

/// When an item may leave.
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    /// Its arrival plus the delay set at its arrival; none if that is past
    /// what `Instant` can tell (it waits until the delay is cleared).
    pub(super) due: Option<Instant>,
    /// How many times the delay had been cleared by its arrival: once it
    /// is cleared again, the item is due at once.
    pub(super) flushes: u64,
}

/// What the writer needs of the faults to let the head item go.
pub(super) struct View {
    pub(super) stalled: bool,
    pub(super) flushes: u64,
}

struct Entry {
    item: Item,
    stamp: Stamp,
}

#[derive(Default)]
struct State {
    entries: VecDeque<Entry>,
    bytes: usize,
}

pub(super) struct Line {
    state: Mutex<State>,
    /// The writer waits here: an item came, the faults changed, or the
    /// connection closed.
    ready: Condvar,
    /// The reader waits here for room: the writer took an item out, or the
    /// connection closed.
    room: Condvar,
}

impl Line {
    pub(super) fn new() -> Line {
        Line {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            room: Condvar::new(),
        }
    }

    /// Puts `item` at the end of the line, once there is room for it
    /// ([`LINE_LIMIT`]); false if `closed` says so first.
    pub(super) fn put(&self, item: Item, stamp: Stamp, closed: impl Fn() -> bool) -> bool {
        let len = item.len();
        let mut state = lock(&self.state);
        loop {
            if closed() {
                return false;
            }
            if state.bytes == 0 || state.bytes + len <= LINE_LIMIT {
                break;
            }
            state = wait(&self.room, state);
        }
        state.bytes += len;
        state.entries.push_back(Entry { item, stamp });
        drop(state);
        self.ready.notify_one();
        true
    }

    /// The item at the head of the line once it is due (or its delay was
    /// cleared since it came) and the line is not stalled, per `view`;
    /// none once `closed` says so.
    pub(super) fn take(&self, closed: impl Fn() -> bool, view: impl Fn() -> View) -> Option<Item> {
        let mut state = lock(&self.state);
        loop {
            if closed() {
                return None;
            }
            let Some(head) = state.entries.front() else {
                state = wait(&self.ready, state);
                continue;
            };
            let view = view();
            if view.stalled {
                state = wait(&self.ready, state);
                continue;
            }
            if head.stamp.flushes == view.flushes {
                let now = Instant::now();
                match head.stamp.due {
                    Some(due) if due <= now => {}
                    Some(due) => {
                        state = wait_timeout(&self.ready, state, due - now);
                        continue;
                    }
                    None => {
                        state = wait(&self.ready, state);
                        continue;
                    }
                }
            }
            let Entry { item, .. } = state.entries.pop_front().expect("the head just seen");
            state.bytes -= item.len();
            drop(state);
            self.room.notify_one();
            return Some(item);
        }
    }

    /// Wakes both ends, so that they look at the faults and the connection
    /// again; taking the lock first means neither can miss a change made
    /// just before (they look while holding it).
    pub(super) fn wake(&self) {
        drop(lock(&self.state));
        self.ready.notify_all();
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::Duration;

    use super::*;

    /// How long a test waits for what must come.
    const WAIT: Duration = Duration::from_secs(10);
    /// How long a test watches for what must not come (a correct line
    /// never fails it; a wrong one is seen nearly always).
    const QUIET: Duration = Duration::from_millis(200);

    fn now() -> Stamp {
        Stamp {
            due: Some(Instant::now()),
            flushes: 0,
        }
    }

    fn flowing() -> View {
        View {
            stalled: false,
            flushes: 0,
        }
    }

    fn data(item: Option<Item>) -> Vec<u8> {
        match item {
            Some(Item::Data(bytes)) => bytes,
            Some(Item::Eof) => panic!("Eof, not data"),
            Some(Item::Close) => panic!("Close, not data"),
            None => panic!("no item"),
        }
    }

    /// A put on a full line waits for the writer to make room: the line
    /// never holds more than [`LINE_LIMIT`] bytes, counted as data bytes
    /// (an end or a close takes none).
    #[test]
    fn a_full_line_holds_the_reader_back_until_the_writer_makes_room() {
        let line = Arc::new(Line::new());
        assert!(line.put(Item::Data(vec![1; LINE_LIMIT - 10]), now(), || false));
        assert!(line.put(Item::Eof, now(), || false));
        assert!(
            line.put(Item::Data(vec![2; 10]), now(), || false),
            "exactly full"
        );
        let (done, finished) = mpsc::channel();
        let putter = {
            let line = line.clone();
            thread::spawn(move || {
                let put = line.put(Item::Data(vec![3; 1]), now(), || false);
                done.send(put).expect("the test waits");
            })
        };
        assert!(
            finished.recv_timeout(QUIET).is_err(),
            "a byte went onto a full line"
        );
        assert_eq!(data(line.take(|| false, flowing)).len(), LINE_LIMIT - 10);
        assert_eq!(finished.recv_timeout(WAIT), Ok(true));
        putter.join().expect("the putter");
        assert!(matches!(line.take(|| false, flowing), Some(Item::Eof)));
        assert_eq!(data(line.take(|| false, flowing)), vec![2; 10]);
        assert_eq!(data(line.take(|| false, flowing)), vec![3]);
    }

    /// A chunk larger than the whole line goes onto an empty line alone.
    #[test]
    fn a_chunk_larger_than_the_line_goes_in_alone() {
        let line = Line::new();
        assert!(line.put(Item::Data(vec![0; LINE_LIMIT + 1]), now(), || false));
        assert_eq!(data(line.take(|| false, flowing)).len(), LINE_LIMIT + 1);
    }

    /// A closed connection ends a waiting put and a waiting take.
    #[test]
    fn a_closed_connection_ends_both_ends() {
        let line = Line::new();
        assert!(!line.put(Item::Data(vec![1]), now(), || true));
        assert!(line.take(|| true, flowing).is_none());
    }

    /// An item leaves when it falls due, not before; a stalled line keeps
    /// it until the stall lifts; a cleared delay lets it go at once, even
    /// one that would never fall due.
    #[test]
    fn an_item_leaves_when_due_unless_stalled_or_at_once_when_flushed() {
        let line = Arc::new(Line::new());
        let delay = Duration::from_millis(150);
        let put_at = Instant::now();
        let due = Stamp {
            due: Some(put_at + delay),
            flushes: 0,
        };
        assert!(line.put(Item::Data(vec![1]), due, || false));
        assert_eq!(data(line.take(|| false, flowing)), vec![1]);
        assert!(put_at.elapsed() >= delay, "left before it fell due");

        let stalled = Arc::new(AtomicBool::new(true));
        let flushes = Arc::new(AtomicU64::new(0));
        let view = {
            let (stalled, flushes) = (stalled.clone(), flushes.clone());
            move || View {
                stalled: stalled.load(Ordering::SeqCst),
                flushes: flushes.load(Ordering::SeqCst),
            }
        };
        let (got, taken) = mpsc::channel();
        let taker = {
            let line = line.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    got.send(data(line.take(|| false, &view)))
                        .expect("the test waits");
                }
            })
        };
        assert!(line.put(Item::Data(vec![2]), now(), || false));
        assert!(taken.recv_timeout(QUIET).is_err(), "left a stalled line");
        stalled.store(false, Ordering::SeqCst);
        line.wake();
        assert_eq!(taken.recv_timeout(WAIT), Ok(vec![2]));

        let never = Stamp {
            due: None,
            flushes: 0,
        };
        assert!(line.put(Item::Data(vec![3]), never, || false));
        assert!(taken.recv_timeout(QUIET).is_err(), "left before its delay");
        flushes.store(1, Ordering::SeqCst);
        line.wake();
        assert_eq!(taken.recv_timeout(WAIT), Ok(vec![3]));
        taker.join().expect("the taker");
    }
}
