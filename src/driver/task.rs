//! The interface of a layer above that runs on the I/O thread: the task it
//! installs, the requests the task sends, and the way API threads reach it.

use std::any::Any;
use std::time::Instant;

use jute::{Request, Response};

use super::{Command, CommandSender, WatchOutcome};
use crate::session::{RequestError, SessionState};

/// A request an I/O task wants sent; its reply and watch come back to the
/// task under `token`.
pub(crate) struct TaskRequest {
    pub token: u64,
    pub request: Request,
    pub watch: bool,
}

/// A state machine of a layer above that runs on the I/O thread, fed in the
/// same loop turn as the session core: a session change reaches it before
/// any caller can act on it. It never blocks.
pub(crate) trait IoTask: Send {
    /// A message from an API thread (the task knows its type).
    fn handle_message(&mut self, now: Instant, message: Box<dyn Any + Send>);
    /// The reply to the request sent under `token`.
    fn handle_reply(&mut self, now: Instant, token: u64, result: Result<Response, RequestError>);
    /// The watch set under `token` fired, or never will.
    fn handle_watch(&mut self, now: Instant, token: u64, event: WatchOutcome);
    /// The session changed state.
    fn handle_session(&mut self, now: Instant, state: SessionState, session_id: i64);
    /// Time passed.
    fn handle_timeout(&mut self, now: Instant);
    /// The next request to send.
    fn poll_request(&mut self) -> Option<TaskRequest>;
    /// When `handle_timeout` is next due.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Whether the watch under `token` is still wanted (else it is not
    /// re-armed after a reconnect).
    fn wants_watch(&self, token: u64) -> bool;
}

/// Sends messages to the I/O task from API threads; does not keep the
/// session open.
#[derive(Clone, Debug)]
pub(crate) struct TaskSender(CommandSender);

impl TaskSender {
    pub(crate) fn new(sender: CommandSender) -> Self {
        TaskSender(sender)
    }

    /// `false` if the I/O thread is gone.
    pub(crate) fn send(&self, message: Box<dyn Any + Send>) -> bool {
        self.0.send(Command::TaskMessage(message))
    }
}
