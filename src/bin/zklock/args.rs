//! Hand-written argument parsing (no clap) and the help texts.
//!
//! Options may come before or after the subcommand name and in any order
//! before `--`; long options take `--name VALUE` or `--name=VALUE`, short ones
//! `-w 5` or `-w5`, and flags can be bundled (`-ns`).

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

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

/// Options every subcommand accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct Global {
    pub connect: String,
    pub session_timeout: Duration,
    pub verbose: u8,
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
    pub command: Vec<OsString>,
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
    /// Print this text to stdout and exit 0.
    Help(&'static str),
    Version,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub global: Global,
    pub command: Command,
}

/// One option a subcommand understands.
struct Spec {
    short: Option<char>,
    long: &'static str,
    takes_value: bool,
}

const fn flag(short: Option<char>, long: &'static str) -> Spec {
    Spec {
        short,
        long,
        takes_value: false,
    }
}

const fn valued(short: Option<char>, long: &'static str) -> Spec {
    Spec {
        short,
        long,
        takes_value: true,
    }
}

const GLOBAL_SPECS: &[Spec] = &[
    valued(Some('c'), "connect"),
    valued(None, "session-timeout"),
    flag(Some('v'), "verbose"),
    flag(Some('h'), "help"),
    flag(None, "version"),
];
const EXEC_SPECS: &[Spec] = &[
    valued(Some('w'), "wait"),
    flag(Some('n'), "nonblock"),
    flag(Some('s'), "shared"),
    valued(Some('E'), "conflict-exit-code"),
    valued(None, "data"),
    valued(Some('k'), "kill-after"),
];
const LEADER_SPECS: &[Spec] = &[
    valued(Some('w'), "wait"),
    flag(Some('n'), "nonblock"),
    valued(Some('E'), "conflict-exit-code"),
    valued(None, "id"),
    valued(Some('k'), "kill-after"),
];
const STATUS_SPECS: &[Spec] = &[flag(None, "json")];

/// Options and positionals of one command line, before interpretation.
#[derive(Default)]
struct Raw {
    /// (long name, value) in order of appearance.
    options: Vec<(&'static str, Option<String>)>,
    positionals: Vec<String>,
    /// Everything after `--`, untouched.
    rest: Option<Vec<OsString>>,
}

impl Raw {
    fn has(&self, long: &str) -> bool {
        self.options.iter().any(|(l, _)| *l == long)
    }

    fn count(&self, long: &str) -> usize {
        self.options.iter().filter(|(l, _)| *l == long).count()
    }

    /// The last value given for `long`.
    fn value(&self, long: &str) -> Option<&str> {
        self.options
            .iter()
            .rev()
            .find(|(l, _)| *l == long)
            .and_then(|(_, v)| v.as_deref())
    }
}

fn find<'a>(specs: &[&'a [Spec]], pred: impl Fn(&Spec) -> bool) -> Option<&'a Spec> {
    specs.iter().flat_map(|s| s.iter()).find(|s| pred(s))
}

/// Splits `args` into options (checked against `specs`), positionals and the
/// part after `--`.
fn tokenize(
    args: Vec<OsString>,
    specs: &[&[Spec]],
    command: Option<&'static str>,
    stop_at_first_positional: bool,
) -> Result<(Raw, Vec<OsString>), UsageError> {
    let mut raw = Raw::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str() else {
            return usage(command, format!("argument {arg:?} is not valid UTF-8"));
        };
        if text == "--" {
            raw.rest = Some(it.collect());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let Some(spec) = find(specs, |s| s.long == name) else {
                return usage(command, format!("unknown option '--{name}'"));
            };
            let value = if spec.takes_value {
                match inline {
                    Some(v) => Some(v),
                    None => match it.next() {
                        Some(v) => Some(v.into_string().map_err(|v| UsageError {
                            message: format!("value {v:?} of --{name} is not valid UTF-8"),
                            command,
                        })?),
                        None => return usage(command, format!("option '--{name}' needs a value")),
                    },
                }
            } else if inline.is_some() {
                return usage(command, format!("option '--{name}' takes no value"));
            } else {
                None
            };
            raw.options.push((spec.long, value));
        } else if text.len() > 1 && text.starts_with('-') {
            let chars: Vec<char> = text[1..].chars().collect();
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                let Some(spec) = find(specs, |s| s.short == Some(c)) else {
                    return usage(command, format!("unknown option '-{c}'"));
                };
                if spec.takes_value {
                    let attached: String = chars[i + 1..].iter().collect();
                    let value = if !attached.is_empty() {
                        attached
                    } else {
                        match it.next() {
                            Some(v) => v.into_string().map_err(|v| UsageError {
                                message: format!("value {v:?} of -{c} is not valid UTF-8"),
                                command,
                            })?,
                            None => return usage(command, format!("option '-{c}' needs a value")),
                        }
                    };
                    raw.options.push((spec.long, Some(value)));
                    break;
                }
                raw.options.push((spec.long, None));
                i += 1;
            }
        } else {
            raw.positionals.push(text.to_owned());
            if stop_at_first_positional {
                return Ok((raw, it.collect()));
            }
        }
    }
    Ok((raw, Vec::new()))
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

fn global_from(
    raw: &Raw,
    base: Global,
    command: Option<&'static str>,
) -> Result<Global, UsageError> {
    let mut g = base;
    if let Some(c) = raw.value("connect") {
        if c.trim().is_empty() {
            return usage(command, "--connect wants host:port[,host:port...][/chroot]");
        }
        g.connect = c.to_owned();
    }
    if let Some(t) = raw.value("session-timeout") {
        g.session_timeout = seconds(command, "--session-timeout", t, false)?;
    }
    g.verbose = g.verbose.saturating_add(raw.count("verbose") as u8);
    Ok(g)
}

/// Parses the whole command line (without the program name). `connect_env`
/// is `$ZKLOCK_CONNECT`.
pub fn parse(args: Vec<OsString>, connect_env: Option<String>) -> Result<Parsed, UsageError> {
    let base = Global {
        connect: connect_env
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_CONNECT.to_owned()),
        session_timeout: Duration::from_secs(10),
        verbose: 0,
    };
    let (raw, rest) = tokenize(args, &[GLOBAL_SPECS], None, true)?;
    let global = global_from(&raw, base, None)?;
    if raw.has("version") {
        return Ok(Parsed {
            global,
            command: Command::Version,
        });
    }
    let Some(name) = raw.positionals.first() else {
        if raw.has("help") {
            return Ok(Parsed {
                global,
                command: Command::Help(MAIN_HELP),
            });
        }
        if raw.rest.is_some() {
            return usage(None, "'--' must come after a subcommand and its lock path");
        }
        return usage(None, "missing subcommand: exec, status or leader");
    };
    let (command, specs, help): (&'static str, &[Spec], &'static str) = match name.as_str() {
        "exec" => ("exec", EXEC_SPECS, EXEC_HELP),
        "leader" => ("leader", LEADER_SPECS, LEADER_HELP),
        "status" => ("status", STATUS_SPECS, STATUS_HELP),
        "help" => {
            let text = match rest.first().and_then(|s| s.to_str()) {
                None => MAIN_HELP,
                Some("exec") => EXEC_HELP,
                Some("leader") => LEADER_HELP,
                Some("status") => STATUS_HELP,
                Some(other) => {
                    return usage(None, format!("no help for unknown subcommand {other:?}"))
                }
            };
            return Ok(Parsed {
                global,
                command: Command::Help(text),
            });
        }
        other => {
            return usage(
                None,
                format!("unknown subcommand {other:?}; expected exec, status or leader"),
            )
        }
    };
    if raw.has("help") {
        return Ok(Parsed {
            global,
            command: Command::Help(help),
        });
    }
    let cmd = Some(command);
    let (sub, _) = tokenize(rest, &[GLOBAL_SPECS, specs], cmd, false)?;
    let global = global_from(&sub, global, cmd)?;
    if sub.has("help") {
        return Ok(Parsed {
            global,
            command: Command::Help(help),
        });
    }
    if sub.has("version") {
        return Ok(Parsed {
            global,
            command: Command::Version,
        });
    }
    let mut positionals = sub.positionals.iter();
    let what = if command == "leader" {
        "ELECTION_PATH"
    } else {
        "LOCK_PATH"
    };
    let Some(path) = positionals.next().cloned() else {
        return usage(cmd, format!("missing {what}"));
    };
    if let Some(extra) = positionals.next() {
        return usage(
            cmd,
            if command == "status" {
                format!("unexpected argument {extra:?}")
            } else {
                format!("unexpected argument {extra:?}; put '--' before the command")
            },
        );
    }
    if command == "status" {
        if sub.rest.is_some() {
            return usage(cmd, "status takes no command");
        }
        return Ok(Parsed {
            global,
            command: Command::Status(Status {
                path,
                json: sub.has("json"),
            }),
        });
    }

    let Some(command_line) = sub.rest.clone() else {
        return usage(cmd, "missing '--' and the command to run");
    };
    if command_line.is_empty() {
        return usage(cmd, "missing the command after '--'");
    }
    let mut wait = match sub.value("wait") {
        Some(w) => Some(seconds(cmd, "--wait", w, true)?),
        None => None,
    };
    if sub.has("nonblock") {
        if wait.is_some() {
            return usage(cmd, "--nonblock and --wait exclude each other");
        }
        wait = Some(Duration::ZERO);
    }
    let conflict_exit_code = match sub.value("conflict-exit-code") {
        None => 1,
        Some(t) => match t.trim().parse::<u8>() {
            Ok(c) => c,
            Err(_) => return usage(cmd, format!("--conflict-exit-code wants 0..255, not {t:?}")),
        },
    };
    let kill_after = match sub.value("kill-after") {
        Some(k) => seconds(cmd, "--kill-after", k, true)?,
        None => DEFAULT_KILL_AFTER,
    };
    let kind = if command == "leader" {
        match sub.value("id") {
            Some(id) if !id.is_empty() => HoldKind::Leader { id: id.to_owned() },
            _ => return usage(cmd, "missing --id TEXT (how this candidate names itself)"),
        }
    } else if sub.has("shared") {
        HoldKind::Shared
    } else {
        HoldKind::Exclusive
    };
    Ok(Parsed {
        global,
        command: Command::Hold(Hold {
            kind,
            path,
            wait,
            conflict_exit_code,
            data: sub.value("data").map(str::to_owned),
            kill_after,
            command: command_line,
        }),
    })
}

pub const MAIN_HELP: &str = "\
zklock: flock for a cluster. Distributed locks on Apache ZooKeeper.

Usage:
  zklock [GLOBAL OPTIONS] exec [-w SECS | -n] [-s] [-E CODE] [--data TEXT] LOCK_PATH -- CMD [ARGS...]
  zklock [GLOBAL OPTIONS] status [--json] LOCK_PATH
  zklock [GLOBAL OPTIONS] leader [-w SECS] --id TEXT ELECTION_PATH -- CMD [ARGS...]
  zklock help [exec|status|leader]

Global options (also accepted after the subcommand):
  -c, --connect HOSTS        host:port[,host:port...][/chroot]
                             (default: $ZKLOCK_CONNECT, else 127.0.0.1:2181)
      --session-timeout SECS ZooKeeper session timeout (default 10); also how
                             long to wait for a server at startup
  -v, --verbose              log to stderr (-vv, -vvv: more)
  -h, --help                 this help; 'zklock SUBCOMMAND --help' for each
      --version              print the version

Exit codes:
  CMD's status         exec/leader: CMD ran; 128+N if CMD died of signal N
  1 (or -E CODE)       the lock was not acquired within -w / at once with -n
  64                   bad arguments or a bad path
  69                   no ZooKeeper server reachable within the session timeout
  70                   internal error
  75                   the lock was lost (session expired, node deleted)
  77                   permission denied by the ZooKeeper ACL
  126, 127             CMD could not be run / was not found
  128+N                zklock was stopped by signal N before CMD started

Example:
  zklock -c zk1:2181,zk2:2181,zk3:2181 exec -w 60 /locks/nightly -- ./backup.sh
";

pub const EXEC_HELP: &str = "\
zklock exec: run a command while holding a lock.

Usage: zklock [GLOBAL OPTIONS] exec [OPTIONS] LOCK_PATH -- CMD [ARGS...]

Acquires the lock at LOCK_PATH (exclusive by default), runs CMD with the lock
held, releases it when CMD exits and exits with CMD's status. Waiters get the
lock in the order they asked for it.

Options:
  -w, --wait SECS              give up after SECS (fractions allowed)
  -n, --nonblock               give up at once if the lock is held
  -s, --shared                 take the read side of the read/write lock:
                               shared with other -s holders, exclusive otherwise
  -E, --conflict-exit-code N   exit code when giving up (default 1)
      --data TEXT              stored in the lock node, shown by 'zklock status'
                               (default hostname:pid)
  -k, --kill-after SECS        when the lock is lost, SIGKILL CMD this long
                               after SIGTERM (default 5)

CMD's environment gets ZKLOCK_FENCING_TOKEN (a number that rises with every
new holder of any lock in the ensemble: pass it to what you protect and let
it refuse older tokens) and ZKLOCK_NODE (the path of our lock node).

If the lock is lost while CMD runs (session expired, node deleted), zklock
says so on stderr, sends CMD SIGTERM (SIGKILL after --kill-after) and exits
75. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to zklock are
passed on to CMD (a terminal's Ctrl-C reaches CMD directly, and only once),
and the lock is released when CMD ends. A signal while waiting gives up the
place in the queue (exit 128+N). If zklock is killed with SIGKILL, its helper
process stops CMD and ends the session, which frees the lock at once; if the
whole machine dies, the server frees it when the session times out.

Nodes are named like Apache Curator's (_c_<uuid>-lock-<seq>, and
_c_<uuid>-__READ__<seq> with -s), so Curator's InterProcessMutex and kazoo
locks (with extra_lock_patterns) on the same path queue with zklock.

Examples:
  zklock exec /locks/deploy -- ./deploy.sh --prod
  zklock exec -n -E 0 /locks/cron/cleanup -- ./cleanup.sh   # skip if running
  zklock exec -w 30 -s /locks/schema -- ./read-report.sh
";

pub const LEADER_HELP: &str = "\
zklock leader: run a command while this process is the elected leader.

Usage: zklock [GLOBAL OPTIONS] leader [OPTIONS] --id TEXT ELECTION_PATH -- CMD [ARGS...]

Campaigns at ELECTION_PATH under the name --id, runs CMD once elected and
steps down when CMD exits, exiting with CMD's status. Loss of leadership is
handled like a lost lock in 'zklock exec': CMD gets SIGTERM (SIGKILL after
--kill-after) and zklock exits 75.

Options:
      --id TEXT                this candidate's name (required), stored in
                               its node and shown by 'zklock status'
  -w, --wait SECS              give up campaigning after SECS
  -n, --nonblock               give up at once unless elected immediately
  -E, --conflict-exit-code N   exit code when giving up (default 1)
  -k, --kill-after SECS        SIGKILL delay after SIGTERM on loss (default 5)

CMD gets ZKLOCK_FENCING_TOKEN and ZKLOCK_NODE as with 'zklock exec'.

Example:
  zklock leader --id \"$(hostname)\" /election/scheduler -- ./scheduler --serve
";

pub const STATUS_HELP: &str = "\
zklock status: show who holds a lock and who waits for it.

Usage: zklock [GLOBAL OPTIONS] status [--json] LOCK_PATH

Lists the contenders at LOCK_PATH in queue order: holder(s) first, then
waiters. For each: role, node name, sequence, kind (exclusive, read, write,
lease), origin, owner session, czxid (the holder's fencing token) and data.

Origin is judged from the node name: 'protected' for the _c_<uuid>- naming
that zklock and Apache Curator share (they cannot be told apart by name),
'kazoo' for kazoo's <uuid>__lock__ naming, 'other' for anything else.

Options:
      --json    one JSON object: {\"path\", \"holders\", \"waiting\", \"queue\": [...]}

Examples:
  zklock status /locks/deploy
  zklock -c zk1:2181 status --json /locks/deploy | jq '.queue[0].data'
";

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
    fn connect_from_environment() {
        let p = parse(os(&["status", "/x"]), Some("e:9".into())).unwrap();
        assert_eq!(p.global.connect, "e:9");
        let p = parse(os(&["status", "/x"]), None).unwrap();
        assert_eq!(p.global.connect, DEFAULT_CONNECT);
    }
}
