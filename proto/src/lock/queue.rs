//! The queue of contenders under a lock path: which children count, in what
//! order, and who they belong to. Shared by every recipe.

use std::cmp::Ordering;

/// Markers that end the name prefix, before the sequence ZooKeeper appends.
/// Curator writes `-lock-` (mutex), `__READ__`/`__WRIT__` (read/write lock),
/// `-lease-` (semaphore) and `-latch-` (leader latch); kazoo `__lock__` and
/// `__rlock__`.
const MARKERS: &[(&str, NodeKind)] = &[
    ("__READ__", NodeKind::Read),
    ("__WRIT__", NodeKind::Write),
    ("__rlock__", NodeKind::Read),
    ("__lock__", NodeKind::Exclusive),
    ("-lock-", NodeKind::Exclusive),
    ("-lease-", NodeKind::Lease),
    ("-latch-", NodeKind::Exclusive),
];

/// What a contender asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// Mutex, write lock or election candidate.
    Exclusive,
    /// A read-lock node (`__READ__`, kazoo `__rlock__`).
    Read,
    /// A write-lock node (`__WRIT__`).
    Write,
    /// A semaphore lease (`-lease-`).
    Lease,
}

impl NodeKind {
    /// Whether a holder of this kind excludes a reader.
    pub fn blocks_readers(self) -> bool {
        !matches!(self, NodeKind::Read)
    }
}

/// Who created a node, judged from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeOrigin {
    /// Curator's protected naming (`_c_<uuid>-`), which zklock uses too.
    Protected,
    /// kazoo's `<uuid32>__lock__` naming.
    Kazoo,
    /// Anything else that ends in a sequence.
    Other,
}

/// One child of a lock path that takes part in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    /// Child name (not the full path).
    pub name: String,
    /// The sequence ZooKeeper appended: the parent's counter, which sticks
    /// at 2^31 − 1 (see [`past_the_end`]).
    pub sequence: i32,
    /// What the node asks for, from its name.
    pub kind: NodeKind,
    /// Who named it.
    pub origin: NodeOrigin,
}

impl Contender {
    /// Parses a child name; `None` for children that are not contenders.
    pub fn parse(name: &str) -> Option<Contender> {
        let (sequence, kind) = Contender::classify(name)?;
        let origin = if name.starts_with("_c_") {
            NodeOrigin::Protected
        } else if name.contains("__lock__") || name.contains("__rlock__") {
            NodeOrigin::Kazoo
        } else {
            NodeOrigin::Other
        };
        Some(Contender {
            name: name.to_owned(),
            sequence,
            kind,
            origin,
        })
    }

    /// A contender's sequence and kind, without copying its name. The
    /// sequence is the last 10 characters (11 for `-2147483648`); the
    /// marker, when there is one, ends right before it.
    pub(crate) fn classify(name: &str) -> Option<(i32, NodeKind)> {
        if name.starts_with(TENURE_MARK) {
            // A uuid may end in ten digits: never read one as a sequence.
            return None;
        }
        for len in [10, 11] {
            let Some(split) = name.len().checked_sub(len) else {
                continue;
            };
            let (Some(head), Some(tail)) = (name.get(..split), name.get(split..)) else {
                continue;
            };
            let Some(sequence) = parse_sequence(tail) else {
                continue;
            };
            if let Some((_, kind)) = MARKERS.iter().find(|(m, _)| head.ends_with(m)) {
                return Some((sequence, *kind));
            }
        }
        // A marker anywhere else means a name that is not a contender;
        // no marker at all: a sequence at the end makes it an exclusive one.
        if MARKERS.iter().any(|(m, _)| name.contains(m)) {
            return None;
        }
        Some((
            parse_sequence(trailing_sequence(name)?)?,
            NodeKind::Exclusive,
        ))
    }

    /// The attempt id in a protected name (`_c_<uuid>-...`).
    pub fn protected_id(&self) -> Option<&str> {
        protected_id(&self.name)
    }
}

/// The UUID of a protected name, if the name is one.
pub fn protected_id(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("_c_")?;
    rest.get(..36).filter(|id| id.len() == 36)
}

/// ZooKeeper formats sequences with `%010d`: ten digits, or a minus sign and
/// nine or ten digits for a name computed past the counter's end.
fn parse_sequence(text: &str) -> Option<i32> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !(9..=10).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() == 9 && !text.starts_with('-') {
        return None;
    }
    text.parse().ok()
}

/// For names with no known marker: the last ten characters.
fn trailing_sequence(name: &str) -> Option<&str> {
    name.get(name.len().checked_sub(10)?..)
}

/// A child of a lock path whose name starts with this is never a
/// contender. Lock-delay once kept its tenure marks there, under such
/// names; they now live beside the lock path (see [`tenure_path`]).
pub const TENURE_MARK: &str = "~tenure.";

/// Where lock-delay keeps the tenure marks of the lock path `lock_path`
/// (see `MutexOptions::lock_delay` in the recipes): a sibling of the lock
/// path, `<lock path>~tenure`, one child per holder named by its
/// attempt's uuid. Outside the lock path, so no peer that lists the lock
/// path's children (Curator's participant listings, its semaphore's lease
/// count, kazoo, `inspect`) sees them.
///
/// ```
/// assert_eq!(zklock_proto::lock::tenure_path("/app/lock"), "/app/lock~tenure");
/// ```
pub fn tenure_path(lock_path: &str) -> String {
    format!("{}~tenure", lock_path.trim_end_matches('/'))
}

/// Sequences past this one are near the end of the parent's counter: a
/// warning is logged, and a holder there watches the queue for nodes
/// past the end.
pub const SEQUENCE_WARNING: i32 = i32::MAX - 1_000_000;

/// Whether a sequence was issued at or past the end of its parent's
/// counter. ZooKeeper does not wrap the counter: DataTree.createNode
/// stores a parent's new cversion only if it is greater, so it sticks at
/// 2147483647 and later nodes share that suffix; a name computed while
/// another create is in flight comes out negative (PrepRequestProcessor
/// adds one to the in-flight record in 32-bit arithmetic). Such nodes
/// cannot be ordered among themselves, so no one may hold by them.
pub fn past_the_end(sequence: i32) -> bool {
    sequence == i32::MAX || sequence < 0
}

/// Orders sequences as the server issued them, as far as that can be
/// known: by value, except that negative ones, which only come out past
/// the counter's end, sort after every non-negative one. Among nodes
/// [`past_the_end`] the order means nothing; the lock machine fails
/// closed there rather than trust it.
///
/// ```
/// use std::cmp::Ordering;
/// use zklock_proto::lock::sequence_order;
/// assert_eq!(sequence_order(7, 3), Ordering::Greater);
/// assert_eq!(sequence_order(i32::MAX, i32::MIN), Ordering::Less);
/// assert_eq!(sequence_order(5, -5), Ordering::Less);
/// ```
pub fn sequence_order(a: i32, b: i32) -> Ordering {
    let key = |s: i32| (s < 0, s);
    key(a).cmp(&key(b))
}

/// The contenders among `children`, in queue order.
pub fn sorted_contenders<S: AsRef<str>>(children: impl IntoIterator<Item = S>) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .into_iter()
        .filter_map(|c| Contender::parse(c.as_ref()))
        .collect();
    sort_queue(&mut out);
    out
}

/// Queue order, in one function whatever the type of the names listed (one
/// copy of the sort's code).
fn sort_queue(contenders: &mut [Contender]) {
    contenders
        .sort_by(|a, b| sequence_order(a.sequence, b.sequence).then_with(|| a.name.cmp(&b.name)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenure_marks_are_never_contenders() {
        // A uuid whose last group is all digits ends in ten of them.
        let mark = format!("{TENURE_MARK}00000000-0000-4000-8000-000000000001");
        assert_eq!(Contender::classify(&mark), None);
        assert!(sorted_contenders([mark.as_str()]).is_empty());
    }

    #[test]
    fn parses_curator_kazoo_and_ours() {
        let c =
            Contender::parse("_c_30882986-f025-4c10-8e1a-b4b1a5c7af17-lock-0000000007").unwrap();
        assert_eq!(
            (c.sequence, c.kind, c.origin),
            (7, NodeKind::Exclusive, NodeOrigin::Protected)
        );
        assert_eq!(
            c.protected_id(),
            Some("30882986-f025-4c10-8e1a-b4b1a5c7af17")
        );
        let k = Contender::parse("e89f55c3a8054f449cda380ea8b750c9__lock__0000000012").unwrap();
        assert_eq!((k.sequence, k.origin), (12, NodeOrigin::Kazoo));
        let r =
            Contender::parse("_c_30882986-f025-4c10-8e1a-b4b1a5c7af17-__READ__0000000003").unwrap();
        assert_eq!(r.kind, NodeKind::Read);
        let w =
            Contender::parse("_c_30882986-f025-4c10-8e1a-b4b1a5c7af17-__WRIT__0000000004").unwrap();
        assert_eq!(w.kind, NodeKind::Write);
        assert!(Contender::parse("leases").is_none());
        assert!(Contender::parse("locks").is_none());
        assert!(Contender::parse("x-lock-12").is_none());
    }

    /// A sequential node with none of the known markers (the ZooKeeper
    /// recipe's `n_`, or any other library's) still takes its place in the
    /// queue, as an exclusive contender: its suffix is the sequence. Kills
    /// trailing_sequence faked (queue.rs:144), which left such nodes out of
    /// the queue and let us hold beside them.
    #[test]
    fn a_sequential_name_without_a_marker_is_an_exclusive_contender() {
        let c = Contender::parse("n_0000000012").unwrap();
        assert_eq!(
            (c.sequence, c.kind, c.origin),
            (12, NodeKind::Exclusive, NodeOrigin::Other)
        );
        let queue = sorted_contenders(["_c_a-lock-0000000013", "n_0000000012"]);
        let names: Vec<&str> = queue.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["n_0000000012", "_c_a-lock-0000000013"]);
    }

    /// ZooKeeper's suffix is `%010d`: ten digits, or a minus sign and up to
    /// ten. Eleven digits after a marker are no sequence of its, and the
    /// node is no contender. Kills parse_sequence's length-or-digits test
    /// made length-and-digits (queue.rs:133), which read such a name as
    /// sequence 7.
    #[test]
    fn eleven_digits_are_no_sequence() {
        assert_eq!(Contender::parse("_c_a-lock-00000000007"), None);
        assert_eq!(Contender::parse("x__lock__00000000007"), None);
        assert!(sorted_contenders(["_c_a-lock-00000000007"]).is_empty());
    }

    #[test]
    fn negative_sequences_after_the_wrap() {
        assert_eq!(
            Contender::parse("_c_a-lock--000000001").unwrap().sequence,
            -1
        );
        assert_eq!(
            Contender::parse("_c_a-lock--2147483648").unwrap().sequence,
            i32::MIN
        );
        assert_eq!(
            Contender::parse("x__lock__-1000000000").unwrap().sequence,
            -1_000_000_000
        );
        assert_eq!(
            Contender::parse("_c_a-lock-2147483647").unwrap().sequence,
            i32::MAX
        );
    }

    #[test]
    fn ordering_past_the_end() {
        assert_eq!(sequence_order(1, 2), Ordering::Less);
        assert_eq!(sequence_order(i32::MAX, i32::MIN), Ordering::Less);
        assert_eq!(sequence_order(i32::MAX - 1, -5), Ordering::Less);
        assert_eq!(sequence_order(-5, i32::MAX), Ordering::Greater);
        assert_eq!(sequence_order(3, 3), Ordering::Equal);
        assert_eq!(sequence_order(-5, 3), Ordering::Greater);
        assert!(past_the_end(i32::MAX) && past_the_end(-1) && past_the_end(i32::MIN));
        assert!(!past_the_end(i32::MAX - 1) && !past_the_end(0));
        let names: Vec<String> = [
            "_c_b-lock--2147483647",
            "_c_a-lock-2147483646",
            "_c_c-lock-2147483647",
            "_c_d-lock--2147483648",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let order: Vec<i32> = sorted_contenders(&names)
            .iter()
            .map(|c| c.sequence)
            .collect();
        assert_eq!(order, vec![2147483646, 2147483647, i32::MIN, -2147483647]);
        // Sorting the suffix as text (as Curator does) would put the
        // negative ones first: a late node ahead of a holder.
        let mut by_text: Vec<&str> = names
            .iter()
            .map(|n| &n[n.find("lock-").unwrap() + 5..])
            .collect();
        by_text.sort();
        assert!(by_text[0].starts_with('-'));
    }

    #[test]
    fn mixed_queue_sorts_by_sequence_not_name() {
        let names: Vec<String> = [
            "zzz__lock__0000000002",
            "_c_11111111-1111-1111-1111-111111111111-lock-0000000003",
            "aaa-lock-0000000001",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let seqs: Vec<i32> = sorted_contenders(&names)
            .iter()
            .map(|c| c.sequence)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }
}
