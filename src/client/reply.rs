//! A request sent without waiting for its reply: for the recipes' polled
//! handles, which must not block the thread that polls them.

use std::sync::mpsc::TryRecvError;
use std::task::{Context, Poll, Waker};

use jute::{OpCode, Response};

use crate::error::{Error, Result};
use crate::oneshot;
use crate::session::RequestError;

/// The reply to come for one request, and what a refusal of it names.
pub(crate) struct PendingReply {
    pub(super) reply: oneshot::Receiver<std::result::Result<Response, RequestError>>,
    pub(super) op: OpCode,
    pub(super) path: Option<String>,
}

impl PendingReply {
    /// The reply if it has come; `Closed` if none can come any more. Else
    /// `task`, if any, is woken when it comes.
    pub(crate) fn take(&self, task: Option<&Waker>) -> Option<Result<Response>> {
        let reply = match task {
            Some(task) => match self.reply.poll_recv(&mut Context::from_waker(task)) {
                Poll::Ready(reply) => reply.ok(),
                Poll::Pending => return None,
            },
            None => match self.reply.try_recv() {
                Err(TryRecvError::Empty) => return None,
                reply => reply.ok(),
            },
        };
        Some(reply.map_or(Err(Error::Closed), |reply| self.answer(reply)))
    }

    /// A reply as the caller sees it: a refusal names the operation and
    /// path.
    pub(super) fn answer(
        &self,
        reply: std::result::Result<Response, RequestError>,
    ) -> Result<Response> {
        reply.map_err(|e| Error::from(e).at(self.op, self.path.clone()))
    }
}

impl std::fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingReply")
            .field("op", &self.op)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}
