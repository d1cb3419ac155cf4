//! `zklock-skeleton <ip:port> [stages]`: zklock's runtime shape without
//! ZooKeeper. A caller thread hands commands to an I/O thread over a channel
//! and wakes its mio poll; the I/O thread writes and reads one TCP
//! connection and answers on per-call channels; a subscriber hears state
//! changes. The bench measures its size, and with `stages` its RSS once the
//! I/O thread runs with its connection open (it prints `S connected` and
//! waits for a line on stdin there): the least memory a program of this
//! shape takes before any line of zklock's.

use std::error::Error;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};

type Reply = Result<Vec<u8>, String>;

enum Command {
    Send(Vec<u8>, Sender<Reply>),
    Subscribe(Sender<State>),
    Close,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Connected,
    Closed,
}

const SOCKET: Token = Token(0);
const WAKE: Token = Token(1);

fn io_loop(mut poll: Poll, addr: SocketAddr, commands: Receiver<Command>) -> std::io::Result<()> {
    let mut socket = TcpStream::connect(addr)?;
    poll.registry()
        .register(&mut socket, SOCKET, Interest::READABLE | Interest::WRITABLE)?;
    let mut events = Events::with_capacity(64);
    let mut waiting: Vec<Sender<Reply>> = Vec::new();
    let mut subscribers: Vec<Sender<State>> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        poll.poll(&mut events, Some(Duration::from_secs(1)))?;
        while let Ok(command) = commands.try_recv() {
            match command {
                Command::Send(bytes, reply) => {
                    socket.write_all(&bytes)?;
                    waiting.push(reply);
                }
                Command::Subscribe(tx) => {
                    let _ = tx.send(State::Connected);
                    subscribers.push(tx);
                }
                Command::Close => {
                    for tx in &subscribers {
                        let _ = tx.send(State::Closed);
                    }
                    return Ok(());
                }
            }
        }
        if let Ok(n) = socket.read(&mut buf) {
            if let Some(reply) = waiting.pop() {
                let _ = reply.send(Ok(buf[..n].to_vec()));
            }
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .ok_or("usage: zklock-skeleton <ip:port> [stages]")?
        .parse()?;
    let stages = std::env::args().nth(2).as_deref() == Some("stages");
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKE)?);
    let (commands, inbox) = unbounded();
    let io = std::thread::spawn(move || io_loop(poll, addr, inbox));
    let send = |c: Command| -> Result<(), Box<dyn Error>> {
        commands.send(c).map_err(|_| "the I/O thread ended")?;
        waker.wake()?;
        Ok(())
    };
    let (states_tx, states) = unbounded();
    send(Command::Subscribe(states_tx))?;
    println!("{:?}", states.recv()?);
    if stages {
        println!("S connected");
        let _ = std::io::stdin().read_line(&mut String::new());
    }
    let (reply_tx, reply) = bounded(1);
    send(Command::Send(vec![0, 0, 0, 4, 0, 0, 0, 0], reply_tx))?;
    println!("{:?}", reply.recv_timeout(Duration::from_secs(5))?);
    // An outcome of another type, as a lock's is.
    let (outcome_tx, outcome) = bounded::<Result<u64, String>>(1);
    std::thread::spawn(move || outcome_tx.send(Ok(1)));
    println!(
        "{:?}",
        outcome.recv_deadline(Instant::now() + Duration::from_secs(1))?
    );
    send(Command::Close)?;
    io.join().map_err(|_| "the I/O thread panicked")??;
    if stages {
        // The bench's worker protocol ends with one JSON line.
        println!("{{}}");
    }
    Ok(())
}
