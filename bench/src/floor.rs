//! The raw floors: clients of the codec alone (`jute` over the test kit's
//! blocking `RawClient`), no recipe, no I/O thread: the least each lock
//! protocol can cost on this server, whatever the client.
//!
//! * `floor` (here): one uncontended session. Each cycle writes the previous
//!   node's delete, the next create2 and the getChildren in one go and waits
//!   for the listing; with `release=unlock` it instead ends by deleting its
//!   node and waiting for that reply, as a release that waits does.
//! * `floor-contended` (src/floor/contended.rs): Curator's protocol, one
//!   thread and one socket per session, under the contended mode's harness.
//! * `floor-waiters` (src/floor/waiters.rs): the waiters mode's queue and
//!   pass-through, one thread and one socket per session.
//!
//! What they share, the pipelining session and the requests of Curator's
//! protocol, is in src/floor/raw.rs.

mod contended;
mod raw;
mod waiters;

use std::time::Instant;

use crate::json::ObjWriter;
use crate::stage::{stage, Params};
use crate::BoxResult;

pub use contended::Contender;
use raw::{create, created, delete, list, node_prefix, Session};
pub use waiters::waiters;

/// `floor <connect> <lock path> cycles=N [release=unlock]`: the latency of
/// each cycle.
pub fn uncontended(connect: &str, path: &str, p: &Params, out: &mut ObjWriter) -> BoxResult<()> {
    let cycles = p.usize("cycles", 1000)?;
    let warm = p.usize("warm", cycles / 2)?;
    let wait_release = match p.str("release", "drop") {
        "drop" => false,
        "unlock" => true,
        other => return Err(format!("floor: release={other} is not drop or unlock").into()),
    };
    let mut floor = Floor {
        session: Session::connect(connect)?,
        prefix: node_prefix(path, 0),
        parent: path.to_owned(),
        held: None,
        wait_release,
    };
    floor.cycle()?;
    stage("rest")?;
    for _ in 0..warm {
        floor.cycle()?;
    }
    stage("ready")?;
    let mut lat = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let t = Instant::now();
        floor.cycle()?;
        lat.push(t.elapsed().as_nanos() as u64);
    }
    stage("done")?;
    out.nums("latencies_ns", &lat);
    floor.session.close()
}

struct Floor {
    session: Session,
    prefix: String,
    parent: String,
    /// The node of the last cycle, deleted at the front of the next.
    held: Option<String>,
    /// Each cycle ends with its delete answered (nothing is held over).
    wait_release: bool,
}

impl Floor {
    fn cycle(&mut self) -> BoxResult<()> {
        let s = &mut self.session;
        if let Some(node) = self.held.take() {
            s.queue(&delete(node));
        }
        let create_xid = s.queue(&create(&self.prefix));
        let list_xid = s.queue(&list(&self.parent));
        s.flush()?;
        let node = created(s.ok(create_xid)?)?;
        s.ok(list_xid)?;
        if self.wait_release {
            let delete_xid = s.queue(&delete(node));
            s.flush()?;
            s.ok(delete_xid)?;
        } else {
            self.held = Some(node);
        }
        Ok(())
    }
}
