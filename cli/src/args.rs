//! The command line, parsed with lexopt, and the help texts.
//!
//! Options may come before or after the subcommand name and in any order
//! before `--`; long options take `--name VALUE` or `--name=VALUE`, short ones
//! `-w 5` or `-w5`, and flags can be bundled (`-ns`). Everything after the
//! first `--` that is not an option's value is the command, untouched.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use lexopt::prelude::*;
use lexopt::Arg;

mod help;
mod parsed;
use help::{EXEC_HELP, LEADER_HELP, MAIN_HELP, REVOKE_HELP, STATUS_HELP};
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

fn seconds(
    command: Option<&'static str>,
    option: &str,
    text: &str,
    allow_zero: bool,
) -> Result<Duration, UsageError> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (s > 0.0 || (allow_zero && s == 0.0)) && s < 1e9 => {
            Ok(Duration::from_secs_f64(s))
        }
        _ => usage(
            command,
            format!(
                "{option} wants a number of seconds{}, not {text:?}",
                if allow_zero { "" } else { " above 0" }
            ),
        ),
    }
}

fn global_from(given: &Given, connect_env: Option<String>) -> Result<Global, UsageError> {
    let command = None;
    let connect = match &given.connect {
        Some(c) if c.trim().is_empty() => {
            return usage(command, "--connect wants host:port[,host:port...][/chroot]")
        }
        Some(c) => c.clone(),
        None => connect_env
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_CONNECT.to_owned()),
    };
    let session_timeout = match &given.session_timeout {
        Some(t) => seconds(command, "--session-timeout", t, false)?,
        None => Duration::from_secs(10),
    };
    let tls_client = match (&given.tls_cert, &given.tls_key) {
        (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
        (None, None) => None,
        _ => return usage(command, "--tls-cert and --tls-key go together"),
    };
    let tls_ca = given.tls_ca.as_ref().map(PathBuf::from);
    if tls_ca.is_none() && (tls_client.is_some() || given.tls_server_name.is_some()) {
        return usage(
            command,
            "--tls-cert, --tls-key and --tls-server-name need --tls-ca",
        );
    }
    if given.sasl_password_file.is_some() && given.sasl_user.is_none() {
        return usage(command, "--sasl-password-file needs --sasl-user");
    }
    Ok(Global {
        connect,
        session_timeout,
        verbose: given.verbose,
        security: Security {
            tls_ca,
            tls_client,
            tls_server_name: given.tls_server_name.clone(),
            sasl_user: given.sasl_user.clone(),
            sasl_password_file: given.sasl_password_file.as_ref().map(PathBuf::from),
            digest_file: given.digest_file.as_ref().map(PathBuf::from),
        },
    })
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

/// Turns a subcommand's options and positionals into what to do.
fn interpret(sub: Sub, given: Given) -> Result<Command, UsageError> {
    let cmd = Some(sub.name());
    let mut positionals = given.positionals.into_iter();
    let what = if sub == Sub::Leader {
        "ELECTION_PATH"
    } else {
        "LOCK_PATH"
    };
    let Some(path) = positionals.next() else {
        return usage(cmd, format!("missing {what}"));
    };
    if let Some(extra) = positionals.next() {
        return usage(
            cmd,
            if matches!(sub, Sub::Status | Sub::Revoke) {
                format!("unexpected argument {extra:?}")
            } else {
                format!("unexpected argument {extra:?}; put '--' before the command")
            },
        );
    }
    if sub == Sub::Revoke {
        if given.rest.is_some() {
            return usage(cmd, "revoke takes no command");
        }
        return Ok(Command::Revoke(path));
    }
    if sub == Sub::Status {
        if given.rest.is_some() {
            return usage(cmd, "status takes no command");
        }
        return Ok(Command::Status(Status {
            path,
            json: given.json,
        }));
    }

    let Some(command_line) = given.rest else {
        return usage(cmd, "missing '--' and the command to run");
    };
    if command_line.is_empty() {
        return usage(cmd, "missing the command after '--'");
    }
    let mut wait = match &given.wait {
        Some(w) => Some(seconds(cmd, "--wait", w, true)?),
        None => None,
    };
    if given.nonblock {
        if wait.is_some() {
            return usage(cmd, "--nonblock and --wait exclude each other");
        }
        wait = Some(Duration::ZERO);
    }
    let conflict_exit_code = match &given.conflict_exit_code {
        None => 1,
        Some(t) => match t.trim().parse::<u8>() {
            Ok(c) => c,
            Err(_) => return usage(cmd, format!("--conflict-exit-code wants 0..255, not {t:?}")),
        },
    };
    let kill_after = match &given.kill_after {
        Some(k) => seconds(cmd, "--kill-after", k, true)?,
        None => DEFAULT_KILL_AFTER,
    };
    let kind = if sub == Sub::Leader {
        match given.id {
            Some(id) if !id.is_empty() => HoldKind::Leader { id },
            _ => return usage(cmd, "missing --id TEXT (how this candidate names itself)"),
        }
    } else if given.shared {
        HoldKind::Shared
    } else {
        HoldKind::Exclusive
    };
    let acl = match &given.acl {
        None => NodeAcl::Default,
        Some(text) => node_acl(text).or_else(|e| usage(cmd, e))?,
    };
    Ok(Command::Hold(Hold {
        kind,
        path,
        wait,
        conflict_exit_code,
        data: given.data,
        kill_after,
        revocable: given.revocable,
        acl,
        command: command_line,
    }))
}

/// `creator`, `open`, or `scheme:id:perms,...` with perms from `cdrwa`
/// (`world:PERMS` is `world:anyone:PERMS`; a digest id keeps its colon).
fn node_acl(text: &str) -> Result<NodeAcl, String> {
    match text.trim() {
        "creator" => return Ok(NodeAcl::Creator),
        "open" => return Ok(NodeAcl::Open),
        _ => {}
    }
    let bad = |entry: &str, why: &str| {
        format!("--acl: bad entry {entry:?} ({why}); want creator, open, or scheme:id:perms[,...] with perms from cdrwa")
    };
    let mut acl = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let (head, perms) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(entry, "no perms"))?;
        let (scheme, id) = match head.split_once(':') {
            Some((scheme, id)) => (scheme, id),
            None if head == "world" => ("world", "anyone"),
            None => return Err(bad(entry, "no id")),
        };
        if scheme.is_empty() || id.is_empty() {
            return Err(bad(entry, "empty scheme or id"));
        }
        let mut bits = 0;
        for p in perms.chars() {
            bits |= match p {
                'c' => zklock::perms::CREATE,
                'd' => zklock::perms::DELETE,
                'r' => zklock::perms::READ,
                'w' => zklock::perms::WRITE,
                'a' => zklock::perms::ADMIN,
                _ => return Err(bad(entry, "perms are letters of cdrwa")),
            };
        }
        if bits == 0 {
            return Err(bad(entry, "no perms"));
        }
        acl.push(zklock::Acl {
            perms: bits,
            id: zklock::Id {
                scheme: scheme.to_owned(),
                id: id.to_owned(),
            },
        });
    }
    Ok(NodeAcl::List(acl))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn parse_ok(v: &[&str]) -> Parsed {
        parse(os(v), None).unwrap_or_else(|e| panic!("{v:?}: {e}"))
    }

    #[test]
    fn acl_specs() {
        use zklock::perms::{ADMIN, ALL, CREATE, DELETE, READ, WRITE};
        assert_eq!(node_acl("creator"), Ok(NodeAcl::Creator));
        assert_eq!(node_acl("open"), Ok(NodeAcl::Open));
        let Ok(NodeAcl::List(acl)) = node_acl("world:r, sasl:alice:cdrwa,digest:bob:SGVsbG8=:rw")
        else {
            panic!("a list")
        };
        let ids: Vec<_> = acl
            .iter()
            .map(|a| (a.id.scheme.as_str(), a.id.id.as_str(), a.perms))
            .collect();
        assert_eq!(
            ids,
            [
                ("world", "anyone", READ),
                ("sasl", "alice", ALL),
                ("digest", "bob:SGVsbG8=", READ | WRITE)
            ]
        );
        assert_eq!(CREATE | DELETE | ADMIN | READ | WRITE, ALL);
        for bad in [
            "",
            "world",
            "sasl:alice",
            "sasl::r",
            ":x:r",
            "sasl:alice:rx",
            "world:",
        ] {
            assert!(node_acl(bad).is_err(), "{bad:?}");
        }
        let p = parse_ok(&["exec", "--acl", "creator", "/l", "--", "true"]);
        assert!(matches!(
            p.command,
            Command::Hold(Hold {
                acl: NodeAcl::Creator,
                ..
            })
        ));
    }

    #[test]
    fn exec_with_options_before_and_after_the_subcommand() {
        let p = parse_ok(&[
            "-c", "h:1", "exec", "-w5", "-s", "--data=x", "/l", "-v", "--", "cmd", "-n",
        ]);
        assert_eq!(p.global.connect, "h:1");
        assert_eq!(p.global.verbose, 1);
        let Command::Hold(h) = p.command else {
            panic!()
        };
        assert_eq!(h.kind, HoldKind::Shared);
        assert_eq!(h.wait, Some(Duration::from_secs(5)));
        assert_eq!(h.data.as_deref(), Some("x"));
        assert_eq!(h.command, os(&["cmd", "-n"]));
    }

    #[test]
    fn bundled_flags_and_exit_code() {
        let Command::Hold(h) = parse_ok(&["exec", "-nsE", "7", "/l", "--", "true"]).command else {
            panic!()
        };
        assert_eq!(h.wait, Some(Duration::ZERO));
        assert_eq!(h.conflict_exit_code, 7);
        assert_eq!(h.kind, HoldKind::Shared);
    }

    #[test]
    fn errors() {
        for bad in [
            &["exec", "/l", "true"][..],
            &["exec", "/l"],
            &["exec", "/l", "--"],
            &["exec", "--", "true"],
            &["exec", "-w", "soon", "/l", "--", "true"],
            &["exec", "-n", "-w", "1", "/l", "--", "true"],
            &["exec", "-E", "300", "/l", "--", "true"],
            &["exec", "--bogus", "/l", "--", "true"],
            &["leader", "/e", "--", "true"],
            &["status"],
            &["status", "/a", "/b"],
            &["frobnicate"],
            &[],
            &["--session-timeout", "0", "status", "/x"],
        ] {
            let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
            assert!(!e.to_string().contains('\n'), "{e}");
        }
    }

    #[test]
    fn help_everywhere() {
        assert_eq!(parse_ok(&["--help"]).command, Command::Help(MAIN_HELP));
        assert_eq!(
            parse_ok(&["exec", "--help"]).command,
            Command::Help(EXEC_HELP)
        );
        assert_eq!(
            parse_ok(&["-h", "status"]).command,
            Command::Help(STATUS_HELP)
        );
        assert_eq!(
            parse_ok(&["help", "leader"]).command,
            Command::Help(LEADER_HELP)
        );
    }

    #[test]
    fn values_attached_separate_and_after_equals() {
        let Command::Hold(h) = parse_ok(&[
            "exec",
            "--wait=2.5",
            "-k0",
            "--data",
            "--",
            "/l",
            "--",
            "cmd",
            "--",
            "x",
        ])
        .command
        else {
            panic!()
        };
        assert_eq!(h.wait, Some(Duration::from_millis(2500)));
        assert_eq!(h.kill_after, Duration::ZERO);
        assert_eq!(
            h.data.as_deref(),
            Some("--"),
            "an option's value may be '--'"
        );
        assert_eq!(h.command, os(&["cmd", "--", "x"]));
    }

    #[test]
    fn options_of_another_subcommand_are_refused() {
        for bad in [
            &["status", "-s", "/l"][..],
            &["leader", "--data", "x", "--id", "a", "/e", "--", "true"],
            &["exec", "--id", "a", "/l", "--", "true"],
            &["-w", "1", "exec", "/l", "--", "true"],
            &["exec", "--json=1", "/l", "--", "true"],
            &["status", "--json=1", "/l"],
        ] {
            let e = parse(os(bad), None).expect_err(&format!("{bad:?} should fail"));
            assert!(e.to_string().contains("see 'zklock"), "{e}");
        }
        assert_eq!(parse_ok(&["--version"]).command, Command::Version);
        assert_eq!(parse_ok(&["status", "--version"]).command, Command::Version);
    }

    #[test]
    fn connect_from_environment() {
        let p = parse(os(&["status", "/x"]), Some("e:9".into())).unwrap();
        assert_eq!(p.global.connect, "e:9");
        let p = parse(os(&["status", "/x"]), None).unwrap();
        assert_eq!(p.global.connect, DEFAULT_CONNECT);
    }
}
