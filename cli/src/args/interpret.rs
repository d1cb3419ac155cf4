//! What the options given mean: the global options (connect string,
//! session timeout, TLS, SASL and digest files) checked and gathered, a
//! subcommand's options and positionals turned into what to do, and `--acl`
//! specs read into node ACLs.

use std::path::PathBuf;
use std::time::Duration;

use super::{
    usage, Command, Given, Global, Hold, HoldKind, NodeAcl, Security, Status, Sub, UsageError,
    DEFAULT_CONNECT, DEFAULT_KILL_AFTER,
};

fn seconds(
    command: Option<&'static str>,
    option: &str,
    text: &str,
    allow_zero: bool,
) -> Result<Duration, UsageError> {
    match crate::seconds::parse(text.trim()) {
        Some(d) if allow_zero || !d.is_zero() => Ok(d),
        _ => usage(
            command,
            format!(
                "{option} wants a number of seconds{}, not {text:?}",
                if allow_zero { "" } else { " above 0" }
            ),
        ),
    }
}

pub(super) fn global_from(
    given: &Given,
    connect_env: Option<String>,
) -> Result<Global, UsageError> {
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

/// Turns a subcommand's options and positionals into what to do.
pub(super) fn interpret(sub: Sub, given: Given) -> Result<Command, UsageError> {
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
    let max_hold = match &given.max_hold {
        Some(m) => Some(seconds(cmd, "--max-hold", m, false)?),
        None => None,
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
        max_hold,
        revocable: given.revocable,
        acl,
        command: command_line,
    }))
}

/// `creator`, `open`, or `scheme:id:perms,...` with perms from `cdrwa`
/// (`world:PERMS` is `world:anyone:PERMS`; a digest id keeps its colon).
pub(super) fn node_acl(text: &str) -> Result<NodeAcl, String> {
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
