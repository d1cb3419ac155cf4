//! `zklock`: flock for a cluster. See `zklock --help`.
//!
//! One process: the pid the user starts holds the ZooKeeper session and is
//! CMD's parent. Layout: [`args`] parses the command line; [`hold`]
//! connects, takes the lock or leadership, runs CMD ([`command`]) and
//! watches for loss and for [`signals`] to pass on; [`release_helper`] frees
//! the lock should zklock be SIGKILLed; [`status`] prints a lock's queue.
//! The only `unsafe` is the `pre_exec` hook in [`command`].
#![deny(unsafe_code)]

mod args;
mod command;
mod hold;
mod release_helper;
mod seconds;
mod signals;
mod status;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use zklock::recipes::LockError;
use zklock::{Client, Error, ErrorCode};

/// sysexits-style exit codes.
pub mod exit {
    /// Bad arguments or a bad path (EX_USAGE).
    pub const USAGE: u8 = 64;
    /// An input file is missing or unreadable (EX_NOINPUT).
    pub const NOINPUT: u8 = 66;
    /// No ZooKeeper server reachable (EX_UNAVAILABLE).
    pub const UNAVAILABLE: u8 = 69;
    /// Internal error (EX_SOFTWARE).
    pub const SOFTWARE: u8 = 70;
    /// The lock was lost (EX_TEMPFAIL).
    pub const LOST: u8 = 75;
    /// Refused by an ACL (EX_NOPERM).
    pub const NOPERM: u8 = 77;
    /// CMD exists but could not be run.
    pub const CANNOT_RUN: u8 = 126;
    /// CMD was not found.
    pub const NOT_FOUND: u8 = 127;
}

/// A failure that ends zklock: the exit code and a one-line reason.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// Maps a client error to an exit code and reason; `doing` says what failed.
pub fn client_failure(e: &Error, doing: &str) -> Failure {
    let code = match e {
        Error::InvalidPath { .. }
        | Error::InvalidConnectString(_)
        | Error::InvalidSetting { .. } => exit::USAGE,
        // A host that does not resolve is as unreachable as one that does
        // not answer (a DNS outage, a typo alike): no session.
        Error::Resolve { .. }
        | Error::Timeout
        | Error::ConnectionLoss
        | Error::Closed
        | Error::Connect(_)
        | Error::NoSession(_) => exit::UNAVAILABLE,
        Error::SessionExpired => exit::LOST,
        Error::AuthFailed => exit::NOPERM,
        Error::Server {
            code: ErrorCode::NoAuth,
            ..
        } => exit::NOPERM,
        _ => exit::SOFTWARE,
    };
    Failure::new(code, format!("{doing}: {e}"))
}

pub fn lock_failure(e: &LockError, doing: &str) -> Failure {
    match e {
        LockError::Client(c) => client_failure(c, doing),
        LockError::SessionExpired => Failure::new(
            exit::LOST,
            format!("{doing}: the ZooKeeper session expired"),
        ),
        other => Failure::new(exit::SOFTWARE, format!("{doing}: {other}")),
    }
}

/// The variables zklock reads secrets from. They are removed from the
/// environment of every process zklock starts (CMD, the release helper):
/// what a command needs to know of ZooKeeper it gets in `ZKLOCK_NODE` and
/// `ZKLOCK_FENCING_TOKEN`, never the credentials.
pub const SECRET_VARS: [&str; 2] = ["ZKLOCK_SASL_PASSWORD", "ZKLOCK_DIGEST"];

/// The secrets a session needs, read once from their files or variables,
/// so that the release helper can be handed the very same ones. No `Debug`:
/// nothing prints them by accident.
#[derive(Clone, Default)]
pub struct Secrets {
    /// The SASL password of `Security::sasl_user`.
    pub sasl_password: Option<String>,
    /// `user:password` for digest auth.
    pub digest: Option<String>,
}

/// Every input file `security` names must be readable before anything
/// is sent: a missing one is the user's to fix (exit 66, naming it), not a
/// server that cannot be reached.
pub fn check_inputs(security: &args::Security) -> Result<(), Failure> {
    let client = security.tls_client.iter().flat_map(|(c, k)| [c, k]);
    let files = security
        .tls_ca
        .iter()
        .chain(client)
        .chain(&security.sasl_password_file)
        .chain(&security.digest_file);
    for file in files {
        if let Err(e) = std::fs::File::open(file) {
            return Err(Failure::new(
                exit::NOINPUT,
                format!("cannot read {}: {e}", file.display()),
            ));
        }
    }
    Ok(())
}

/// Reads the secrets `security` names (files, else [`SECRET_VARS`]).
pub fn secrets(security: &args::Security) -> Result<Secrets, Failure> {
    check_inputs(security)?;
    let sasl_password = match &security.sasl_user {
        Some(_) => Some(
            secret(
                security.sasl_password_file.as_deref(),
                "ZKLOCK_SASL_PASSWORD",
            )?
            .ok_or_else(|| {
                Failure::new(
                    exit::USAGE,
                    "--sasl-user needs a password: --sasl-password-file FILE or $ZKLOCK_SASL_PASSWORD",
                )
            })?,
        ),
        None => None,
    };
    Ok(Secrets {
        sasl_password,
        digest: digest_credentials(security)?,
    })
}

/// Connects, waiting at most the session timeout for a server.
pub fn connect(global: &args::Global) -> Result<Client, Failure> {
    connect_with(global, &secrets(&global.security)?)
}

/// [`connect`] with the secrets already read.
pub fn connect_with(global: &args::Global, secrets: &Secrets) -> Result<Client, Failure> {
    log::debug!(
        "connecting to {} (session timeout {:?})",
        global.connect,
        global.session_timeout
    );
    // One run, one session: an expiry ends the run (exit 75) as documented.
    let builder = Client::builder(&global.connect)
        .session_timeout(global.session_timeout)
        .new_session_after_expiry(false);
    let builder = secured(builder, &global.security, secrets)?;
    let client = builder.connect().map_err(|e| match e {
        // The library's words: the servers, the time spent, the last failure.
        Error::NoSession(_) => Failure::new(exit::UNAVAILABLE, e.to_string()),
        other => client_failure(&other, &connecting(&global.connect, &other)),
    })?;
    if let Some(digest) = &secrets.digest {
        client
            .add_auth("digest", digest.as_bytes())
            .map_err(|e| client_failure(&e, "adding digest credentials"))?;
    }
    log::info!(
        "connected to {}: session {:#x}, timeout {:?}",
        global.connect,
        client.session_id(),
        client.negotiated_timeout()
    );
    Ok(client)
}

/// "connecting to HOSTS", unless the error names the server itself: each
/// message names the address once.
fn connecting(connect: &str, e: &Error) -> String {
    let text = e.to_string();
    let hosts = connect.split('/').next().unwrap_or(connect);
    if hosts
        .split(',')
        .any(|h| !h.is_empty() && text.contains(h.trim()))
    {
        "connecting".to_owned()
    } else {
        format!("connecting to {connect}")
    }
}

/// A secret from a file (trailing newline dropped), else from `env`.
fn secret(file: Option<&Path>, env: &str) -> Result<Option<String>, Failure> {
    match file {
        Some(path) => std::fs::read_to_string(path)
            .map(|s| Some(s.trim_end_matches(['\r', '\n']).to_owned()))
            .map_err(|e| {
                Failure::new(
                    exit::NOINPUT,
                    format!("cannot read {}: {e}", path.display()),
                )
            }),
        None => Ok(std::env::var(env).ok().filter(|v| !v.is_empty())),
    }
}

/// TLS and SASL as the flags ask.
fn secured(
    builder: zklock::ClientBuilder,
    security: &args::Security,
    secrets: &Secrets,
) -> Result<zklock::ClientBuilder, Failure> {
    let mut builder = builder;
    if let Some(ca) = &security.tls_ca {
        builder = with_tls(builder, ca, security)?;
    }
    if let Some(user) = &security.sasl_user {
        let password = secrets.sasl_password.as_deref().ok_or_else(|| {
            Failure::new(
                exit::USAGE,
                "--sasl-user needs a password: --sasl-password-file FILE or $ZKLOCK_SASL_PASSWORD",
            )
        })?;
        builder = builder.sasl(zklock::SaslConfig::digest_md5(user, password));
    }
    Ok(builder)
}

#[cfg(feature = "tls")]
fn with_tls(
    builder: zklock::ClientBuilder,
    ca: &Path,
    security: &args::Security,
) -> Result<zklock::ClientBuilder, Failure> {
    let mut options = zklock::TlsOptions::new(ca);
    if let Some((cert, key)) = &security.tls_client {
        options = options.client_cert(cert, key);
    }
    if let Some(name) = &security.tls_server_name {
        options = options.server_name(name);
    }
    Ok(builder.tls(options))
}

#[cfg(not(feature = "tls"))]
fn with_tls(
    _builder: zklock::ClientBuilder,
    _ca: &Path,
    _security: &args::Security,
) -> Result<zklock::ClientBuilder, Failure> {
    Err(Failure::new(
        exit::USAGE,
        "this zklock was built without TLS (cargo install zklock-cli --features tls)",
    ))
}

/// `user:password` for digest auth, from `--digest-file` or `$ZKLOCK_DIGEST`.
fn digest_credentials(security: &args::Security) -> Result<Option<String>, Failure> {
    secret(security.digest_file.as_deref(), "ZKLOCK_DIGEST")
}

/// `1.5s`, `10s`.
pub fn secs(d: Duration) -> String {
    format!("{}s", seconds::decimal(d))
}

/// Checks a lock path before anything is sent.
pub fn check_path(path: &str, command: &str) -> Result<(), Failure> {
    zklock::validate_path(path, false).map_err(|e| match e {
        Error::InvalidPath { path, reason } => Failure::new(
            exit::USAGE,
            format!("{command}: bad path {path:?}: {reason}"),
        ),
        other => client_failure(&other, command),
    })?;
    if path == "/" {
        return Err(Failure::new(
            exit::USAGE,
            format!("{command}: the root path cannot be a lock; use e.g. /locks/NAME"),
        ));
    }
    Ok(())
}

/// Prints `zklock: <reason>` on stderr.
pub fn complain(message: &str) {
    let _ = writeln!(std::io::stderr(), "zklock: {message}");
}

/// `-v`: log records to stderr as `zklock[pid]: LEVEL target: message`.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let _ = writeln!(
                std::io::stderr(),
                "zklock[{}]: {} {}: {}",
                std::process::id(),
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

pub fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

fn main() -> ExitCode {
    let argv: Vec<_> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == release_helper::FLAG) {
        let rest: Vec<String> = argv[1..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return ExitCode::from(release_helper::run(&rest));
    }
    let parsed = match args::parse(argv, std::env::var("ZKLOCK_CONNECT").ok()) {
        Ok(p) => p,
        Err(e) => {
            complain(&e.to_string());
            return ExitCode::from(exit::USAGE);
        }
    };
    init_logging(parsed.global.verbose);
    let result = match parsed.command {
        args::Command::Help(text) => {
            print!("{text}");
            Ok(0)
        }
        args::Command::Version => {
            println!("zklock {}", env!("CARGO_PKG_VERSION"));
            Ok(0)
        }
        args::Command::Status(s) => status::run(&parsed.global, &s),
        args::Command::Revoke(path) => status::revoke(&parsed.global, &path),
        args::Command::Hold(h) => {
            check_path(&h.path, h.subcommand()).map(|()| hold::run(&parsed.global, &h))
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            complain(&f.message);
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each client error ends zklock with the exit code cli/README.md gives
    /// it: 64 for what the user wrote wrong, 69 for no session, 75 for an
    /// expired one, 77 for a refused login or ACL, 70 for any other refusal.
    /// Kills: client_failure, each arm deleted (InvalidPath |
    /// InvalidConnectString | InvalidSetting; Resolve | Timeout |
    /// ConnectionLoss | Closed | Connect | NoSession; SessionExpired;
    /// AuthFailed; Server { code: NoAuth }).
    #[test]
    fn client_errors_exit_with_their_documented_codes() {
        let server = |code| Error::Server {
            code,
            op: None,
            path: Some("/x".into()),
        };
        let resolve = Error::Resolve {
            host: "nosuch.invalid".into(),
            source: std::sync::Arc::new(std::io::Error::other("no such host")),
        };
        for (e, code) in [
            (Error::InvalidConnectString("::".into()), exit::USAGE),
            (
                Error::InvalidPath {
                    path: "x".into(),
                    reason: "must start with '/'",
                },
                exit::USAGE,
            ),
            (
                Error::InvalidSetting {
                    setting: "session timeout",
                    reason: "too long",
                },
                exit::USAGE,
            ),
            (resolve, exit::UNAVAILABLE),
            (Error::Timeout, exit::UNAVAILABLE),
            (Error::ConnectionLoss, exit::UNAVAILABLE),
            (Error::Closed, exit::UNAVAILABLE),
            (Error::SessionExpired, exit::LOST),
            (Error::AuthFailed, exit::NOPERM),
            (server(ErrorCode::NoAuth), exit::NOPERM),
            (server(ErrorCode::NoChildrenForEphemerals), exit::SOFTWARE),
        ] {
            let f = client_failure(&e, "status");
            assert_eq!(f.code, code, "{e:?}");
            assert_eq!(f.message, format!("status: {e}"));
        }
    }

    /// A failed connect names the address once: in zklock's words when the
    /// error does not name it, else only in the error's.
    /// Kills: connecting -> String::new() and -> "xyzzy".into(); connecting
    /// `!h.is_empty() && text.contains(..)` && → || and ! deleted.
    #[test]
    fn a_failed_connect_names_the_address_once() {
        let connect = "nosuch.invalid:2181,,/jobs";
        let resolve = Error::Resolve {
            host: "nosuch.invalid:2181".into(),
            source: std::sync::Arc::new(std::io::Error::other("no such host")),
        };
        for e in [resolve, Error::Timeout] {
            let f = client_failure(&e, &connecting(connect, &e));
            assert_eq!(
                f.message.matches("nosuch.invalid:2181").count(),
                1,
                "{}",
                f.message
            );
            assert!(f.message.starts_with("connecting"), "{}", f.message);
        }
    }

    /// The root cannot be a lock; any other valid path can.
    /// Kills: check_path `path == "/"` == → !=.
    #[test]
    fn the_root_is_no_lock_path() {
        let f = check_path("/", "exec").expect_err("the root");
        assert_eq!(f.code, exit::USAGE);
        assert!(
            f.message.starts_with("exec: the root path"),
            "{}",
            f.message
        );
        assert!(check_path("/locks/a", "exec").is_ok());
    }
}
