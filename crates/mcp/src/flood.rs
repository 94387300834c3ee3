//! A bound on what a server can make the client hold: [`Bounded`] wraps a server's transport
//! and decides, message by message, what reaches rmcp's client loop.
//!
//! rmcp starts a task for every request and every notification a server sends and keeps
//! each request's state until its answer is written; a server that sends faster than it
//! reads the answers (or never reads them) would grow the client's memory without bound.
//! So:
//!
//! - at most [`MAX_SERVER_REQUESTS`] of a server's requests (`ping`, `roots/list`,
//!   `sampling/createMessage`, ...) are handled at once, counted until their answer is
//!   written; one more is answered at once with a JSON-RPC error (code
//!   [`BUSY_ERROR_CODE`]) instead of being handled;
//! - while that refusal cannot be written (the server does not read), nothing more is read
//!   from the server: the flood waits in the operating system's pipe or socket buffer, not
//!   in the client's memory;
//! - notifications the client does not act on (`notifications/message`, progress,
//!   resource and prompt changes, ...) are dropped as they arrive;
//!   `notifications/tools/list_changed` is passed on only when the previous one has been
//!   taken up (a burst is folded into one listing, as the client's tool-list watcher does
//!   anyway), and `notifications/cancelled` only for a request being handled.
//!
//! Answers to the client's own requests always pass: rmcp holds state only for requests it
//! sent.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::future::BoxFuture;
use rmcp::model::{ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// The most requests of one server handled at once (received, answer not yet written).
pub const MAX_SERVER_REQUESTS: usize = 16;

/// The JSON-RPC error code of a request refused because [`MAX_SERVER_REQUESTS`] are being
/// handled (in the range JSON-RPC leaves to implementations).
pub const BUSY_ERROR_CODE: i32 = -32_000;

/// What a [`Bounded`] transport refused or dropped, for logs and tests.
#[derive(Debug, Default)]
pub struct FloodStats {
    /// Requests answered with the busy error.
    pub refused: AtomicU64,
    /// Notifications dropped (not acted on, or folded into an earlier one).
    pub dropped: AtomicU64,
    /// The most requests that were handled at once.
    pub most_in_flight: AtomicU64,
}

/// A server's transport with the bounds of this module.
pub struct Bounded<T> {
    inner: T,
    /// The server's name, for logs.
    server: String,
    /// The server's requests being handled, by id (never more than
    /// [`MAX_SERVER_REQUESTS`]).
    in_flight: Arc<Mutex<HashSet<RequestId>>>,
    /// A refusal being written; nothing is read until it is out.
    refusal: Option<BoxFuture<'static, ()>>,
    /// A `notifications/tools/list_changed` was passed on and its handler has not yet
    /// taken it up (it clears this).
    list_changed_pending: Arc<AtomicBool>,
    stats: Arc<FloodStats>,
    /// Whether the first refusal or drop was logged (once per connection).
    warned: bool,
}

impl<T> std::fmt::Debug for Bounded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bounded")
            .field("server", &self.server)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// What becomes of one message from the server.
enum Admission {
    /// Passed on to the client loop.
    Pass,
    /// A request refused with the busy error.
    Refuse(RequestId),
    /// Dropped.
    Drop,
}

impl<T> Bounded<T> {
    /// `inner`, bounded. `list_changed_pending` is shared with the handler of
    /// `notifications/tools/list_changed`, which clears it when it takes one up.
    pub fn new(
        inner: T,
        server: impl Into<String>,
        list_changed_pending: Arc<AtomicBool>,
        stats: Arc<FloodStats>,
    ) -> Self {
        Self {
            inner,
            server: server.into(),
            in_flight: Arc::default(),
            refusal: None,
            list_changed_pending,
            stats,
            warned: false,
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&mut self, message: &RxJsonRpcMessage<RoleClient>) -> Admission {
        match message {
            JsonRpcMessage::Request(request) => {
                let mut in_flight = self.in_flight();
                // A repeated id is refused too: its answer would end the first one's count.
                if in_flight.len() >= MAX_SERVER_REQUESTS || in_flight.contains(&request.id) {
                    drop(in_flight);
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    self.warn_once("refusing its requests beyond the limit");
                    return Admission::Refuse(request.id.clone());
                }
                in_flight.insert(request.id.clone());
                let count = u64::try_from(in_flight.len()).unwrap_or(u64::MAX);
                drop(in_flight);
                self.stats
                    .most_in_flight
                    .fetch_max(count, Ordering::Relaxed);
                Admission::Pass
            }
            JsonRpcMessage::Notification(notification) => {
                let pass = match &notification.notification {
                    ServerNotification::CancelledNotification(cancelled) => cancelled
                        .params
                        .request_id
                        .as_ref()
                        .is_some_and(|id| self.in_flight().remove(id)),
                    ServerNotification::ToolListChangedNotification(_) => {
                        !self.list_changed_pending.swap(true, Ordering::SeqCst)
                    }
                    _ => false,
                };
                if pass {
                    Admission::Pass
                } else {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    Admission::Drop
                }
            }
            // Answers to the client's own requests.
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => Admission::Pass,
        }
    }

    fn warn_once(&mut self, what: &str) {
        if !self.warned {
            self.warned = true;
            tracing::warn!(
                server = %self.server,
                limit = MAX_SERVER_REQUESTS,
                "an MCP server sends requests faster than they are answered: {what}"
            );
        }
    }
}

impl<T> Transport<RoleClient> for Bounded<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // The answer to one of the server's requests ends its count once it is written.
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => error.id.clone(),
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        let write = self.inner.send(item);
        let in_flight = Arc::clone(&self.in_flight);
        async move {
            let written = write.await;
            if let Some(id) = answered {
                in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
            }
            written
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // Cancel-safe: the refusal stays here, half written, if this call is dropped.
            if let Some(refusal) = self.refusal.as_mut() {
                refusal.await;
                self.refusal = None;
            }
            let message = self.inner.receive().await?;
            match self.admit(&message) {
                Admission::Pass => return Some(message),
                Admission::Drop => {}
                Admission::Refuse(id) => {
                    let error = ErrorData::new(
                        ErrorCode(BUSY_ERROR_CODE),
                        format!(
                            "the client is busy: {MAX_SERVER_REQUESTS} requests of this server are being handled"
                        ),
                        None,
                    );
                    let write = self.inner.send(JsonRpcMessage::error(error, Some(id)));
                    let server = self.server.clone();
                    self.refusal = Some(Box::pin(async move {
                        if let Err(error) = write.await {
                            tracing::debug!(%server, %error, "refusing an MCP server's request failed");
                        }
                    }));
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(value: serde_json::Value) -> RxJsonRpcMessage<RoleClient> {
        serde_json::from_value(value).unwrap_or_else(|error| panic!("{error}"))
    }

    fn passes(bounded: &mut Bounded<()>, value: serde_json::Value) -> bool {
        matches!(bounded.admit(&message(value)), Admission::Pass)
    }

    #[test]
    fn requests_beyond_the_limit_and_repeated_ids_are_refused() {
        let mut bounded = Bounded::new((), "s", Arc::default(), Arc::default());
        for id in 0..MAX_SERVER_REQUESTS {
            assert!(passes(
                &mut bounded,
                json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
            ));
        }
        let over = json!({"jsonrpc": "2.0", "id": "over", "method": "ping"});
        assert!(matches!(
            bounded.admit(&message(over.clone())),
            Admission::Refuse(RequestId::String(id)) if &*id == "over"
        ));
        // A cancelled request no longer counts; its cancellation passes, once.
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}});
        assert!(passes(&mut bounded, cancel.clone()));
        assert!(!passes(&mut bounded, cancel));
        assert!(passes(&mut bounded, over.clone()));
        // The same id again while it is handled.
        assert!(matches!(
            bounded.admit(&message(over)),
            Admission::Refuse(_)
        ));
        assert_eq!(bounded.stats.refused.load(Ordering::SeqCst), 2);
        assert_eq!(
            bounded.stats.most_in_flight.load(Ordering::SeqCst),
            MAX_SERVER_REQUESTS as u64
        );
        // Answers to the client's own requests always pass.
        assert!(passes(
            &mut bounded,
            json!({"jsonrpc": "2.0", "id": 99, "result": {}})
        ));
    }

    #[test]
    fn list_changes_are_folded_until_taken_up_and_other_notifications_dropped() {
        let pending = Arc::new(AtomicBool::new(false));
        let mut bounded = Bounded::new((), "s", Arc::clone(&pending), Arc::default());
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        assert!(passes(&mut bounded, changed.clone()));
        assert!(!passes(&mut bounded, changed.clone()));
        // The handler took it up: the next one passes.
        pending.store(false, Ordering::SeqCst);
        assert!(passes(&mut bounded, changed));
        assert!(!passes(
            &mut bounded,
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
        ));
        assert_eq!(bounded.stats.dropped.load(Ordering::SeqCst), 2);
    }
}
