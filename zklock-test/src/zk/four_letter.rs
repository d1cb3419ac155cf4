//! ZooKeeper's four-letter words (`ruok`, `srvr`, `mntr`, ...): how the tests
//! learn that a server is up and which role it has, without a client.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends a four-letter word to `addr` and reads the answer to EOF.
pub fn try_four_letter(addr: SocketAddr, word: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// The value of the `Mode:` line of a `srvr`/`stat` answer.
pub(super) fn parse_mode(answer: &str) -> Option<String> {
    answer
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(|mode| mode.trim().to_string())
}
