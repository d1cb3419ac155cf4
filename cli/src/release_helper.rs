//! The release helper: what frees the lock when zklock is SIGKILLed.
//!
//! A killed process cannot clean up after itself, and ZooKeeper keeps a
//! session (and its lock node) alive for the whole session timeout after its
//! connection closes. So zklock starts a second copy of itself,
//! `zklock --release-helper`, in a process group of its own (a terminal's
//! Ctrl-C and signals sent to zklock's group never reach it). zklock tells
//! it, over the helper's stdin, which node it holds for which session and
//! which process runs CMD; on a normal exit it says `done`.
//!
//! The helper blocks reading its stdin. End of input without `done` means
//! zklock died: the kernel has already sent CMD SIGTERM (`PR_SET_PDEATHSIG`);
//! the helper passes SIGTERM on to CMD's process group, waits for CMD to end
//! (SIGKILL after the grace period, and to what is left of its group), then
//! opens a session of its own and deletes the lock node if it still belongs
//! to zklock's session. The next waiter is woken by that delete.
//!
//! Nothing keeps zklock's session alive meanwhile: the server expires it,
//! and frees the lock, a session timeout after zklock last reached it, at
//! most a third of that timeout (its ping interval) before it died. So the
//! grace period is `--kill-after` or a third of the negotiated session
//! timeout, whichever is shorter: CMD has ended before the session can
//! expire.
//!
//! That session is made as zklock's was: the same TLS files and names and
//! the same SASL and digest credentials. They reach the helper over the same
//! pipe, first thing, hex-encoded one per line; never on its command line
//! (which `ps` shows) or in its environment (which its children would
//! inherit; zklock's secret variables are removed from it).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use crate::args::{Global, Security};
use crate::{secs, Secrets};
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal};

/// The hidden first argument that turns zklock into the helper.
pub const FLAG: &str = "--release-helper";

/// zklock's side: the helper's stdin.
pub struct ReleaseHelper {
    child: Child,
    stdin: ChildStdin,
}

impl ReleaseHelper {
    /// Starts the helper and hands it, over its stdin, how to connect as
    /// zklock does (`global.security` and `secrets`). It connects only if
    /// it has to act.
    pub fn start(
        global: &Global,
        secrets: &Secrets,
        kill_after: Duration,
    ) -> std::io::Result<ReleaseHelper> {
        let exe = std::env::current_exe()?;
        let mut command = std::process::Command::new(exe);
        for k in crate::SECRET_VARS {
            command.env_remove(k);
        }
        let mut child = command
            .arg0("zklock")
            .arg(FLAG)
            .arg(&global.connect)
            .arg(crate::seconds::decimal(global.session_timeout))
            .arg(crate::seconds::decimal(kill_after))
            .arg(global.verbose.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no pipe to the release helper"))?;
        let mut helper = ReleaseHelper { child, stdin };
        for line in security_lines(&global.security, secrets) {
            helper.say(&line);
        }
        Ok(helper)
    }

    fn say(&mut self, line: &str) {
        // One short write: the helper sees whole lines.
        if let Err(e) = self.stdin.write_all(format!("{line}\n").as_bytes()) {
            log::warn!("release helper: {e}; a SIGKILL would leave the lock held until the session times out");
        }
    }

    /// The lock node that session `session_id`, of the negotiated
    /// `timeout`, holds.
    pub fn holding(&mut self, session_id: i64, timeout: Duration, node: &str) {
        self.say(&format!("timeout {}", timeout.as_millis()));
        self.say(&format!("hold {session_id} {node}"));
    }

    /// CMD's pid; `own_group` when CMD leads a process group of its own.
    pub fn running(&mut self, pid: Pid, own_group: bool) {
        self.say(&format!(
            "cmd {} {}",
            pid.as_raw_nonzero(),
            u8::from(own_group)
        ));
    }

    /// zklock is done and has cleaned up: the helper exits without acting.
    pub fn finish(mut self) {
        self.say("done");
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// The lines that tell the helper how zklock connects: a keyword and a
/// hex-encoded value (a path or secret may hold any byte but a newline
/// would end the line).
fn security_lines(security: &Security, secrets: &Secrets) -> Vec<String> {
    let mut lines = Vec::new();
    let mut put = |key: &str, value: &[u8]| lines.push(format!("{key} {}", hex(value)));
    if let Some(ca) = &security.tls_ca {
        put("tls-ca", ca.as_os_str().as_bytes());
    }
    if let Some((cert, key)) = &security.tls_client {
        put("tls-cert", cert.as_os_str().as_bytes());
        put("tls-key", key.as_os_str().as_bytes());
    }
    if let Some(name) = &security.tls_server_name {
        put("tls-server-name", name.as_bytes());
    }
    if let Some(user) = &security.sasl_user {
        put("sasl-user", user.as_bytes());
    }
    if let Some(password) = &secrets.sasl_password {
        put("sasl-password", password.as_bytes());
    }
    if let Some(digest) = &secrets.digest {
        put("digest", digest.as_bytes());
    }
    lines
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What the helper was told.
#[derive(Default)]
struct Told {
    hold: Option<(i64, String)>,
    /// The negotiated session timeout.
    timeout: Option<Duration>,
    cmd: Option<(Pid, bool, Option<OwnedFd>)>,
    done: bool,
    security: Security,
    secrets: Secrets,
}

impl Told {
    /// Takes a `keyword hex` line of [`security_lines`]; false if it is not one.
    fn security(&mut self, key: &str, value: &str) -> bool {
        let Some(bytes) = unhex(value) else {
            return false;
        };
        let text = || String::from_utf8(bytes.clone()).ok();
        let path = || std::path::PathBuf::from(std::ffi::OsString::from_vec(bytes.clone()));
        match key {
            "tls-ca" => self.security.tls_ca = Some(path()),
            "tls-cert" => {
                let key = self.security.tls_client.take().map(|(_, k)| k);
                self.security.tls_client = Some((path(), key.unwrap_or_default()));
            }
            "tls-key" => {
                let cert = self.security.tls_client.take().map(|(c, _)| c);
                self.security.tls_client = Some((cert.unwrap_or_default(), path()));
            }
            "tls-server-name" => self.security.tls_server_name = text(),
            "sasl-user" => self.security.sasl_user = text(),
            "sasl-password" => self.secrets.sasl_password = text(),
            "digest" => self.secrets.digest = text(),
            _ => return false,
        }
        true
    }
}

fn parse_secs(text: Option<&String>) -> Duration {
    text.and_then(|t| crate::seconds::parse(t))
        .unwrap_or(Duration::from_secs(10))
}

/// The helper process: `args` are what [`ReleaseHelper::start`] passed.
pub fn run(args: &[String]) -> u8 {
    let connect = args.first().cloned().unwrap_or_default();
    let session_timeout = parse_secs(args.get(1));
    let kill_after = parse_secs(args.get(2));
    let verbose = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(0);
    crate::init_logging(verbose);

    let mut told = Told::default();
    for line in BufReader::new(std::io::stdin().lock()).lines() {
        let Ok(line) = line else { break };
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some(key), Some(value), None) if told.security(key, value) => {}
            (Some("timeout"), Some(ms), None) => {
                told.timeout = ms.parse().ok().map(Duration::from_millis);
            }
            (Some("hold"), Some(session), Some(node)) => {
                if let Ok(session) = session.parse() {
                    told.hold = Some((session, node.to_owned()));
                }
            }
            (Some("cmd"), Some(pid), Some(group)) => {
                let Some(pid) = pid.parse().ok().and_then(Pid::from_raw) else {
                    continue;
                };
                // A pidfd names this very process, whatever reuses the pid later.
                let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok();
                told.cmd = Some((pid, group == "1", pidfd));
            }
            (Some("done"), _, _) => told.done = true,
            // Not the line itself: it may be a secret that failed to parse.
            _ => log::warn!("release helper: an unknown line from zklock"),
        }
    }
    if told.done {
        return 0;
    }
    log::warn!("zklock died: stopping CMD and freeing its lock");
    if let Some((pid, own_group, pidfd)) = &told.cmd {
        let grace = kill_after.min(told.timeout.unwrap_or(session_timeout) / 3);
        stop_orphaned(*pid, *own_group, pidfd.as_ref(), grace);
    }
    if let Some((session, node)) = &told.hold {
        let global = Global {
            connect,
            session_timeout,
            verbose,
            security: std::mem::take(&mut told.security),
        };
        delete_node(&global, &told.secrets, *session, node);
    }
    0
}

/// Stops CMD, which is no longer our sibling's child but nobody's.
fn stop_orphaned(pid: Pid, own_group: bool, pidfd: Option<&OwnedFd>, grace: Duration) {
    let Some(pidfd) = pidfd else {
        // CMD had already ended when the helper heard of it.
        return;
    };
    if own_group {
        let _ = rustix::process::kill_process_group(pid, Signal::TERM);
    }
    if !wait_exit(pidfd, grace) {
        log::warn!("CMD still running {} after SIGTERM: SIGKILL", secs(grace));
        let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
        wait_exit(pidfd, Duration::from_secs(5));
    }
    if own_group {
        // Whatever CMD left behind must not run on once the lock is free.
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
}

/// Waits at most `limit` for the process behind `pidfd` to exit.
fn wait_exit(pidfd: &OwnedFd, limit: Duration) -> bool {
    // Capped (about 31 years) so that the deadline cannot overflow.
    let deadline = Instant::now() + limit.min(Duration::from_secs(1_000_000_000));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = rustix::event::Timespec::try_from(left).ok();
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(n) if n > 0 => return true,
            Ok(_) => return false,
            Err(rustix::io::Errno::INTR) if !left.is_zero() => {}
            Err(_) => return false,
        }
    }
}

/// Deletes `node` if `session` still owns it: the dead zklock's lock.
/// Connects as zklock did (TLS, SASL, digest).
fn delete_node(global: &Global, secrets: &Secrets, session: i64, node: &str) {
    let client = match crate::connect_with(global, secrets) {
        Ok(c) => c,
        Err(f) => {
            crate::complain(&format!(
                "release helper: {}; {node} is freed when the session times out",
                f.message
            ));
            return;
        }
    };
    match client.exists(node) {
        Ok(Some(stat)) if stat.ephemeral_owner == session => {
            match client.delete(node, Some(stat.version)) {
                Ok(()) => log::info!("release helper: deleted {node}"),
                Err(e) => log::warn!("release helper: deleting {node}: {e}"),
            }
        }
        Ok(_) => log::info!("release helper: {node} is already gone"),
        Err(e) => log::warn!("release helper: looking at {node}: {e}"),
    }
    let _ = client.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_settings_cross_the_pipe_intact() {
        let security = Security {
            tls_ca: Some("/etc/zk/ca with space.pem".into()),
            tls_client: Some(("/c.pem".into(), "/k.pem".into())),
            tls_server_name: Some("zk.example".into()),
            sasl_user: Some("alice".into()),
            sasl_password_file: None,
            digest_file: None,
        };
        let secrets = Secrets {
            sasl_password: Some("pa ss\nword".into()),
            digest: Some("carol:pw".into()),
        };
        let mut told = Told::default();
        for line in security_lines(&security, &secrets) {
            assert!(!line.contains("pa ss") && !line.contains('\n'), "{line}");
            let (key, value) = line.split_once(' ').unwrap();
            assert!(told.security(key, value), "{line}");
        }
        assert_eq!(told.security, security);
        assert_eq!(told.secrets.sasl_password, secrets.sasl_password);
        assert_eq!(told.secrets.digest, secrets.digest);
        assert!(!told.security("tls-ca", "zz"));
        assert!(!told.security("hold", "00"));
    }
}
