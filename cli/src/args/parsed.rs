//! What a command line asks for, once parsed: the global options, and the
//! subcommand to run with its own.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Options every subcommand accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    pub connect: String,
    pub session_timeout: Duration,
    pub verbose: u8,
    pub security: Security,
}

/// How to reach a secured ensemble. Secrets never come from the command
/// line (where `ps` shows them): only file names do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Security {
    /// PEM file of the CA that signed the servers' certificates: use TLS.
    pub tls_ca: Option<PathBuf>,
    /// PEM certificate and key for mutual TLS.
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// The name the servers' certificates must carry, if not the host's.
    pub tls_server_name: Option<String>,
    /// SASL DIGEST-MD5 user; the password is read from
    /// `sasl_password_file`, else `$ZKLOCK_SASL_PASSWORD`.
    pub sasl_user: Option<String>,
    pub sasl_password_file: Option<PathBuf>,
    /// A file holding `user:password` for digest auth (else
    /// `$ZKLOCK_DIGEST`, when set).
    pub digest_file: Option<PathBuf>,
}

/// What `exec` and `leader` hold while CMD runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldKind {
    /// `exec`: the exclusive lock (a mutex node).
    Exclusive,
    /// `exec -s`: the read side of the read/write lock.
    Shared,
    /// `leader --id`: leadership of an election.
    Leader { id: String },
}

/// `exec` and `leader`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub kind: HoldKind,
    pub path: String,
    /// `None`: wait forever; `Some(0)`: `-n`.
    pub wait: Option<Duration>,
    pub conflict_exit_code: u8,
    pub data: Option<String>,
    pub kill_after: Duration,
    /// `--max-hold`: the lock (or leadership) is let go this long after
    /// the grant, and CMD stopped as on any loss.
    pub max_hold: Option<Duration>,
    /// `--revocable`: a revocation request sends CMD SIGTERM.
    pub revocable: bool,
    /// `--acl`: of the lock node and of the lock path, when zklock creates
    /// it (the folders above take `hold::folder_acl`).
    pub acl: NodeAcl,
    pub command: Vec<OsString>,
}

/// The ACL of what `exec` and `leader` create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NodeAcl {
    /// Creator-only when the session authenticates (SASL or digest), else
    /// open.
    #[default]
    Default,
    /// `creator`: only the identities this session authenticated as.
    Creator,
    /// `open`: anyone may do anything.
    Open,
    /// `scheme:id:perms,...` (`world:r` for `world:anyone:r`).
    List(Vec<zklock::Acl>),
}

impl Hold {
    pub fn subcommand(&self) -> &'static str {
        match self.kind {
            HoldKind::Leader { .. } => "leader",
            _ => "exec",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub path: String,
    pub json: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Hold(Hold),
    Status(Status),
    /// Ask the holder of this lock path to let go.
    Revoke(String),
    /// Print this text to stdout and exit 0.
    Help(&'static str),
    Version,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub global: Global,
    pub command: Command,
}
