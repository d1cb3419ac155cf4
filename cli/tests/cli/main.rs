//! The `zklock` command line against a real ZooKeeper: exclusion, waiting
//! options, exit codes, environment, signals, SIGKILL, the release path
//! (no second command before the first has ended), lock loss, status
//! (with a kazoo holder in the queue), bad input, and the sequence
//! counter's end.
//!
//! Every wait between processes is a bounded poll for a condition (a line on
//! stdout, a queue length, a file); no sleep stands in for synchronisation.
//!
//! One test binary (`cargo test -p zklock-cli --test cli`), one module a
//! topic; what they share (running zklock, reading `/proc`, the JSON of
//! `status --json`) is in [`support`].

mod support;

mod bad_input;
mod exec;
mod lock_loss;
mod release_path;
mod security;
mod sequence_end;
mod signals;
mod subcommands;
