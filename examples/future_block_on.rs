//! A lock awaited with no runtime at all: a twenty-line `block_on` that
//! parks the thread until the client's I/O thread wakes it.
//! `ZKLOCK_CONNECT` names the server (default 127.0.0.1:2181).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use zklock::recipes::Mutex;
use zklock::Client;

/// Runs `fut` to completion on this thread.
fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let connect = std::env::var("ZKLOCK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = block_on(
        Client::builder(&connect)
            .session_timeout(Duration::from_secs(10))
            .connect_async(),
    )?;
    let mutex = Mutex::new(&client, "/examples/block-on")?;
    let guard = block_on(mutex.start_lock(None))?;
    println!(
        "holding {} (token {})",
        guard.node_path(),
        guard.fencing_token()
    );
    block_on(guard.unlock_async())?;
    block_on(client.close_async());
    Ok(())
}
