//! The worker protocol's primitives, shared by every mode of
//! `zklock-worker` (zklock's and the raw floors'): the `name=value`
//! parameters, the `S <stage>` handshake with the orchestrator, and the
//! worker's clock. See bench/README.md, "The worker protocol".

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::time::Instant;

use crate::BoxResult;

/// The `name=value` parameters after the fixed arguments.
pub(crate) struct Params(BTreeMap<String, String>);

impl Params {
    pub(crate) fn parse(args: &[String]) -> BoxResult<Params> {
        let mut m = BTreeMap::new();
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("parameter {a:?} is not name=value"))?;
            m.insert(k.to_owned(), v.to_owned());
        }
        Ok(Params(m))
    }

    pub(crate) fn usize(&self, key: &str, default: usize) -> BoxResult<usize> {
        match self.0.get(key) {
            None => Ok(default),
            Some(v) => Ok(v.parse().map_err(|_| format!("{key}={v} is not a count"))?),
        }
    }

    /// The value given for `key`, if any.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub(crate) fn str<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.0.get(key).map_or(default, String::as_str)
    }
}

/// Prints `S <name>` and waits for the orchestrator's answer.
pub(crate) fn stage(name: &str) -> BoxResult<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "S {name}")?;
    out.flush()?;
    drop(out);
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        return Err("the orchestrator went away".into());
    }
    Ok(())
}

/// Nanoseconds since `t0`.
pub(crate) fn ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}
