//! The command line, parsed with lexopt, and the help texts.
//!
//! Options may come before or after the subcommand name and in any order
//! before `--`; long options take `--name VALUE` or `--name=VALUE`, short ones
//! `-w 5` or `-w5`, and flags can be bundled (`-ns`). Everything after the
//! first `--` that is not an option's value is the command, untouched.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use lexopt::prelude::*;
use lexopt::Arg;

mod help;
mod interpret;
mod parsed;
#[cfg(test)]
mod tests;

use help::{EXEC_HELP, LEADER_HELP, MAIN_HELP, REVOKE_HELP, STATUS_HELP};
use interpret::{global_from, interpret};
pub use parsed::{Command, Global, Hold, HoldKind, NodeAcl, Parsed, Security, Status};

/// The address used when neither `-c` nor `$ZKLOCK_CONNECT` is given.
pub const DEFAULT_CONNECT: &str = "127.0.0.1:2181";
/// Grace period between SIGTERM and SIGKILL when the lock is lost.
pub const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(5);

/// A usage error: exit 64 with this one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    pub message: String,
    /// The subcommand whose help to point at, if known.
    pub command: Option<&'static str>,
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.command {
            Some(c) => write!(f, "{}: {} (see 'zklock {c} --help')", c, self.message),
            None => write!(f, "{} (see 'zklock --help')", self.message),
        }
    }
}

fn usage<T>(command: Option<&'static str>, message: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError {
        message: message.into(),
        command,
    })
}

/// The subcommands and their help texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sub {
    Exec,
    Leader,
    Status,
    Revoke,
}

impl Sub {
    fn from_name(name: &str) -> Option<Sub> {
        match name {
            "exec" => Some(Sub::Exec),
            "leader" => Some(Sub::Leader),
            "status" => Some(Sub::Status),
            "revoke" => Some(Sub::Revoke),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Sub::Exec => "exec",
            Sub::Leader => "leader",
            Sub::Status => "status",
            Sub::Revoke => "revoke",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Sub::Exec => EXEC_HELP,
            Sub::Leader => LEADER_HELP,
            Sub::Status => STATUS_HELP,
            Sub::Revoke => REVOKE_HELP,
        }
    }
}

/// Every option as given, before it is interpreted; the last value wins.
#[derive(Default)]
struct Given {
    connect: Option<String>,
    session_timeout: Option<String>,
    verbose: u8,
    help: bool,
    version: bool,
    wait: Option<String>,
    nonblock: bool,
    shared: bool,
    conflict_exit_code: Option<String>,
    data: Option<String>,
    id: Option<String>,
    kill_after: Option<String>,
    max_hold: Option<String>,
    json: bool,
    revocable: bool,
    acl: Option<String>,
    tls_ca: Option<String>,
    tls_cert: Option<String>,
    tls_key: Option<String>,
    tls_server_name: Option<String>,
    sasl_user: Option<String>,
    sasl_password_file: Option<String>,
    digest_file: Option<String>,
    positionals: Vec<String>,
    /// Everything after `--`.
    rest: Option<Vec<OsString>>,
}

/// `-w` or `--wait`, as the user would write it.
fn spelled(arg: &Arg<'_>) -> String {
    match arg {
        Short(c) => format!("-{c}"),
        Long(l) => format!("--{l}"),
        Value(v) => format!("{v:?}"),
    }
}

/// The option's value as UTF-8 text.
fn text_value(parser: &mut lexopt::Parser, option: &str) -> Result<String, String> {
    let value = parser
        .value()
        .map_err(|_| format!("option '{option}' needs a value"))?;
    value
        .into_string()
        .map_err(|v| format!("value {v:?} of {option} is not valid UTF-8"))
}

/// Reads options (global ones, and `sub`'s when given) and positionals into
/// `given`. Without `sub`, stops after the first positional (the subcommand).
fn read(parser: &mut lexopt::Parser, sub: Option<Sub>, given: &mut Given) -> Result<(), String> {
    loop {
        if let Some(mut raw) = parser.try_raw_args() {
            if raw.peek().is_some_and(|a| a == "--") {
                raw.next();
                given.rest = Some(raw.collect());
                return Ok(());
            }
        }
        let Some(arg) = parser.next().map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let option = spelled(&arg);
        let in_hold = matches!(sub, Some(Sub::Exec | Sub::Leader));
        match arg {
            Short('c') | Long("connect") => given.connect = Some(text_value(parser, &option)?),
            Long("session-timeout") => given.session_timeout = Some(text_value(parser, &option)?),
            Short('v') | Long("verbose") => given.verbose = given.verbose.saturating_add(1),
            Long("tls-ca") => given.tls_ca = Some(text_value(parser, &option)?),
            Long("tls-cert") => given.tls_cert = Some(text_value(parser, &option)?),
            Long("tls-key") => given.tls_key = Some(text_value(parser, &option)?),
            Long("tls-server-name") => given.tls_server_name = Some(text_value(parser, &option)?),
            Long("sasl-user") => given.sasl_user = Some(text_value(parser, &option)?),
            Long("sasl-password-file") => {
                given.sasl_password_file = Some(text_value(parser, &option)?)
            }
            Long("digest-file") => given.digest_file = Some(text_value(parser, &option)?),
            Short('h') | Long("help") => given.help = true,
            Long("version") => given.version = true,
            Short('w') | Long("wait") if in_hold => given.wait = Some(text_value(parser, &option)?),
            Short('n') | Long("nonblock") if in_hold => given.nonblock = true,
            Short('E') | Long("conflict-exit-code") if in_hold => {
                given.conflict_exit_code = Some(text_value(parser, &option)?)
            }
            Short('k') | Long("kill-after") if in_hold => {
                given.kill_after = Some(text_value(parser, &option)?)
            }
            Long("max-hold") if in_hold => given.max_hold = Some(text_value(parser, &option)?),
            Short('s') | Long("shared") if sub == Some(Sub::Exec) => given.shared = true,
            Long("data") if sub == Some(Sub::Exec) => {
                given.data = Some(text_value(parser, &option)?)
            }
            Long("id") if sub == Some(Sub::Leader) => given.id = Some(text_value(parser, &option)?),
            Long("json") if sub == Some(Sub::Status) => given.json = true,
            Long("revocable") if sub == Some(Sub::Exec) => given.revocable = true,
            Long("acl") if in_hold => given.acl = Some(text_value(parser, &option)?),
            Value(v) => {
                let v = v
                    .into_string()
                    .map_err(|v| format!("argument {v:?} is not valid UTF-8"))?;
                given.positionals.push(v);
                if sub.is_none() {
                    return Ok(());
                }
            }
            _ => return Err(format!("unknown option '{option}'")),
        }
    }
}

/// Parses the whole command line (without the program name). `connect_env`
/// is `$ZKLOCK_CONNECT`.
pub fn parse(args: Vec<OsString>, connect_env: Option<String>) -> Result<Parsed, UsageError> {
    let mut parser = lexopt::Parser::from_args(args);
    let mut given = Given::default();
    read(&mut parser, None, &mut given).or_else(|m| usage(None, m))?;
    let name = given.positionals.pop();
    let reached_rest = given.rest.is_some();
    let sub = match name.as_deref() {
        None => None,
        Some("help") => {
            let topic = parser
                .next()
                .map_err(|e| UsageError {
                    message: e.to_string(),
                    command: None,
                })?
                .map(|a| match a {
                    Value(v) => v.to_string_lossy().into_owned(),
                    other => spelled(&other),
                });
            let text = match topic.as_deref() {
                None => MAIN_HELP,
                Some(t) => match Sub::from_name(t) {
                    Some(sub) => sub.help(),
                    None => return usage(None, format!("no help for unknown subcommand {t:?}")),
                },
            };
            let global = global_from(&given, connect_env)?;
            return Ok(Parsed {
                global,
                command: Command::Help(text),
            });
        }
        Some(other) => match Sub::from_name(other) {
            Some(sub) => Some(sub),
            None if given.version || given.help => None,
            None => {
                return usage(
                    None,
                    format!("unknown subcommand {other:?}; expected exec, status or leader"),
                )
            }
        },
    };
    if let Some(sub) = sub {
        if !given.help && !given.version {
            read(&mut parser, Some(sub), &mut given).or_else(|m| usage(Some(sub.name()), m))?;
        }
    }
    let global = global_from(&given, connect_env)?;
    let command = if given.version {
        Command::Version
    } else if given.help {
        Command::Help(sub.map_or(MAIN_HELP, Sub::help))
    } else if let Some(sub) = sub {
        interpret(sub, given)?
    } else if reached_rest {
        return usage(None, "'--' must come after a subcommand and its lock path");
    } else {
        return usage(None, "missing subcommand: exec, status or leader");
    };
    Ok(Parsed { global, command })
}
