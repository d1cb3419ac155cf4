//! `zklock-minimal <connect> <lock path> [stages]`: takes the lock and
//! releases it. With `stages`, it prints `S connected` and `S locked` and
//! waits for a line on stdin after each, so that the bench can read its
//! threads and memory there.

use std::io::BufRead;
use std::time::Duration;

use zklock::recipes::Mutex;
use zklock::Client;

fn stage(on: bool, name: &str) {
    if on {
        println!("S {name}");
        let _ = std::io::stdin().lock().read_line(&mut String::new());
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(connect), Some(path)) = (args.next(), args.next()) else {
        return Err("usage: zklock-minimal <connect> <lock path> [stages]".into());
    };
    let stages = args.next().as_deref() == Some("stages");
    let client = Client::connect(&connect, Duration::from_secs(10))?;
    stage(stages, "connected");
    let guard = Mutex::new(&client, &path)?.lock()?;
    stage(stages, "locked");
    guard.unlock()?;
    client.close()?;
    if stages {
        // The bench's worker protocol ends with one JSON line.
        println!("{{}}");
    }
    Ok(())
}
