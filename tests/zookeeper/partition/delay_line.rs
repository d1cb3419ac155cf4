//! A slow but steady link: a TCP relay on 127.0.0.1 that hands every chunk
//! on a fixed delay after it arrived, each direction on its own, without
//! waiting for the chunks before it to leave.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};

use crossbeam_channel::unbounded;

use super::*;

/// The relay; dropping it shuts every connection down.
pub struct DelayLine {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    streams: Arc<StdMutex<Vec<TcpStream>>>,
}

impl DelayLine {
    /// Relays connections to `upstream`, each chunk `one_way` late in
    /// each direction.
    pub fn start(upstream: SocketAddr, one_way: Duration) -> DelayLine {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the delay line");
        let addr = listener.local_addr().expect("the delay line's address");
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(StdMutex::new(Vec::new()));
        {
            let (stop, streams) = (Arc::clone(&stop), Arc::clone(&streams));
            thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let mut kept = streams.lock().unwrap_or_else(|p| p.into_inner());
                    for s in [&client, &server] {
                        if let Ok(clone) = s.try_clone() {
                            kept.push(clone);
                        }
                    }
                    drop(kept);
                    relay(&client, &server, one_way);
                    relay(&server, &client, one_way);
                }
            });
        }
        DelayLine {
            addr,
            stop,
            streams,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect(self.addr);
        for s in self
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// One direction: a reader stamps each chunk with the moment it is due, a
/// writer hands it on then. An end of stream or an error is passed on the
/// same way, as a shutdown of the far side's writing half.
fn relay(from: &TcpStream, to: &TcpStream, delay: Duration) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (tx, rx) = unbounded::<(Instant, Option<Vec<u8>>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(n) if n > 0 => {
                    if tx
                        .send((Instant::now() + delay, Some(buf[..n].to_vec())))
                        .is_err()
                    {
                        return;
                    }
                }
                _ => {
                    let _ = tx.send((Instant::now() + delay, None));
                    return;
                }
            }
        }
    });
    thread::spawn(move || {
        while let Ok((due, chunk)) = rx.recv() {
            // The link's delay itself, not a wait for an event.
            thread::sleep(due.saturating_duration_since(Instant::now()));
            match chunk {
                Some(bytes) if to.write_all(&bytes).is_ok() => {}
                _ => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
            }
        }
    });
}
