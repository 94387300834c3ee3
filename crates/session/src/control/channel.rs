//! The control channel's two directions: requests of ours awaiting the program's
//! `control_response` ([`Channel`]), and the lines the program writes, sorted
//! ([`read_input`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use protocol::MessageParam;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};
use tokio::sync::{mpsc, oneshot};

/// Why a request of ours got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The program closed its side (stdin ended) before answering.
    #[error("the controlling program closed its input before answering")]
    Closed,
    /// The program answered with an error response (its `error`).
    #[error("the controlling program answered with an error: {0}")]
    Refused(String),
}

/// Writes one JSON line to the program (stdout); must write the whole line at once.
pub type Writer = Box<dyn Fn(&Value) + Send + Sync>;

/// Where the answer to a [`Channel::begin`] request comes: the program's `response`, or why
/// there is none (a dropped sender: the input ended).
pub type Answer = oneshot::Receiver<Result<Value, ControlError>>;

/// Our side of the control channel: the line writer, and our requests waiting for their
/// `control_response`.
pub struct Channel {
    write: Writer,
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, ControlError>>>>,
    next: AtomicU64,
    closed: AtomicBool,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Channel {
    /// A channel writing its lines with `write`.
    pub fn new(write: impl Fn(&Value) + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            write: Box::new(write),
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        })
    }

    /// Writes `line` to the program.
    pub fn send(&self, line: &Value) {
        (self.write)(line);
    }

    /// Sends `request` (`{"subtype": ..., ...}`) as a `control_request` and waits for the
    /// program's answer: its `response` object (`{}` when it gave none).
    ///
    /// Dropping the future withdraws the request: the program is sent a
    /// `control_cancel_request` for it.
    ///
    /// # Errors
    ///
    /// [`ControlError::Refused`] with the program's error, [`ControlError::Closed`] when its
    /// input ends first (or had ended).
    pub async fn request(&self, request: Value) -> Result<Value, ControlError> {
        let (id, receiver) = self.begin(&request)?;
        let mut withdraw = Withdraw {
            channel: self,
            id: Some(id),
        };
        let answer = receiver.await.unwrap_or(Err(ControlError::Closed));
        withdraw.id = None;
        answer
    }

    /// Sends `request` now (so requests begun in turn reach the program in that order) and
    /// returns its id and where its answer will come (an `Err` when the input ends first).
    /// Unlike [`Channel::request`], nothing withdraws it.
    ///
    /// # Errors
    ///
    /// [`ControlError::Closed`] when the program's input has ended.
    pub fn begin(&self, request: &Value) -> Result<(String, Answer), ControlError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ControlError::Closed);
        }
        let id = format!("agent-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (sender, receiver) = oneshot::channel();
        self.pending().insert(id.clone(), sender);
        // Closed between the check and the insert: `close` may have missed this one.
        if self.closed.load(Ordering::Acquire) {
            self.pending().remove(&id);
            return Err(ControlError::Closed);
        }
        self.send(&json!({"type": "control_request", "request_id": id, "request": request}));
        Ok((id, receiver))
    }

    /// Answers the program's request `id`: `Ok(response)` as a success, `Err(error)` as an
    /// error response.
    pub fn respond(&self, id: &str, answer: Result<Value, String>) {
        let response = match answer {
            Ok(response) => {
                json!({"subtype": "success", "request_id": id, "response": response})
            }
            Err(error) => json!({"subtype": "error", "request_id": id, "error": error}),
        };
        self.send(&json!({"type": "control_response", "response": response}));
    }

    /// Hands the program's `control_response` to the request it answers.
    ///
    /// # Errors
    ///
    /// What is wrong with it: no `request_id`, or one of no request waiting.
    fn resolve(&self, response: &Value) -> Result<(), String> {
        let Some(id) = response.get("request_id").and_then(Value::as_str) else {
            return Err("a control_response without response.request_id".into());
        };
        let Some(waiting) = self.pending().remove(id) else {
            return Err(format!(
                "a control_response to {id:?}, which is no request waiting for an answer"
            ));
        };
        let answer = match response.get("subtype").and_then(Value::as_str) {
            Some("error") => Err(ControlError::Refused(
                response
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("(no error given)")
                    .to_owned(),
            )),
            _ => Ok(response
                .get("response")
                .cloned()
                .unwrap_or_else(|| json!({}))),
        };
        let _ = waiting.send(answer);
        Ok(())
    }

    /// The program's input ended: every waiting request fails with
    /// [`ControlError::Closed`], and so does every later one.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for (_, waiting) in self.pending().drain() {
            let _ = waiting.send(Err(ControlError::Closed));
        }
    }

    /// Whether the program's input has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Result<Value, ControlError>>>>
    {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Withdraws a request whose future was dropped before its answer.
struct Withdraw<'a> {
    channel: &'a Channel,
    id: Option<String>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && self.channel.pending().remove(&id).is_some()
            && !self.channel.is_closed()
        {
            self.channel
                .send(&json!({"type": "control_cancel_request", "request_id": id}));
        }
    }
}

/// One line of the program's input, sorted.
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming {
    /// A user message (`{"type": "user", "message": {...}}`).
    User(MessageParam),
    /// A request of the program: its `request_id` and its `request` object (with a
    /// string `subtype`).
    Request {
        /// The id its response must carry.
        id: String,
        /// The request.
        request: Value,
    },
    /// A line that is none of the above, with what is wrong and its line number.
    Invalid(String),
}

/// Reads the program's lines from `input` until it ends: `control_response`s go to the
/// requests they answer, `keep_alive` and `control_cancel_request` (we run none of its
/// requests long enough to cancel) are dropped, the rest is sent on the returned
/// receiver in order. When the input ends the channel is closed (waiting requests fail)
/// and the receiver ends.
pub fn read_input<R>(input: R, channel: Arc<Channel>) -> mpsc::UnboundedReceiver<Incoming>
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut input = input;
        let mut bytes = Vec::new();
        let mut number = 0usize;
        loop {
            bytes.clear();
            match input.read_until(b'\n', &mut bytes).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) => {
                    let _ = sender.send(Incoming::Invalid(format!(
                        "reading stdin after line {number}: {error}"
                    )));
                    break;
                }
            }
            number += 1;
            // A line that is not UTF-8 is one bad line, not the end of the input.
            let incoming = match std::str::from_utf8(&bytes) {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => sort(&channel, line.trim_end_matches(['\n', '\r']), number),
                Err(error) => Some(Incoming::Invalid(format!(
                    "stdin line {number}: not UTF-8 ({error})"
                ))),
            };
            if let Some(incoming) = incoming
                && sender.send(incoming).is_err()
            {
                break;
            }
        }
        channel.close();
    });
    receiver
}

/// What line `number` is; `None` when it was handled here.
fn sort(channel: &Channel, line: &str, number: usize) -> Option<Incoming> {
    let value: Value = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(error) => {
            return Some(Incoming::Invalid(format!(
                "stdin line {number}: not JSON ({error})"
            )));
        }
    };
    match value.get("type").and_then(Value::as_str) {
        Some("user") => Some(match user_message(&value) {
            Ok(message) => Incoming::User(message),
            Err(problem) => Incoming::Invalid(format!("stdin line {number}: {problem}")),
        }),
        Some("control_request") => {
            let id = value.get("request_id").and_then(Value::as_str);
            let request = value
                .get("request")
                .filter(|request| request.get("subtype").and_then(Value::as_str).is_some());
            match (id, request) {
                (Some(id), Some(request)) => Some(Incoming::Request {
                    id: id.to_owned(),
                    request: request.clone(),
                }),
                (Some(id), None) => {
                    channel.respond(id, Err("the request has no request.subtype".into()));
                    None
                }
                (None, _) => Some(Incoming::Invalid(format!(
                    "stdin line {number}: a control_request without a request_id"
                ))),
            }
        }
        Some("control_response") => {
            let response = value.get("response").unwrap_or(&Value::Null);
            channel
                .resolve(response)
                .err()
                .map(|problem| Incoming::Invalid(format!("stdin line {number}: {problem}")))
        }
        Some("keep_alive" | "control_cancel_request" | "update_environment_variables") => None,
        other => Some(Incoming::Invalid(format!(
            "stdin line {number}: \"type\" is {}, not user, control_request or control_response",
            other.map_or_else(|| "missing".to_owned(), |kind| format!("{kind:?}"))
        ))),
    }
}

/// The user message of a stream-json input line (Claude Code's `SDKUserMessage`:
/// `{"type":"user","message":{"role":"user","content": TEXT or [BLOCKS]}}`).
///
/// # Errors
///
/// What is wrong with it, naming the field.
pub fn user_message(value: &Value) -> Result<MessageParam, String> {
    let message = &value["message"];
    if message["role"] != "user" {
        return Err("message.role must be \"user\"".into());
    }
    match &message["content"] {
        Value::String(text) if !text.trim().is_empty() => Ok(MessageParam::user_text(text.clone())),
        Value::Array(_) => {
            let parsed: MessageParam = serde_json::from_value(message.clone())
                .map_err(|error| format!("message.content: {error}"))?;
            if parsed.content.is_empty() {
                return Err("message.content is empty".into());
            }
            Ok(parsed)
        }
        _ => Err("message.content must be a non-empty string or a list of content blocks".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collecting() -> (Arc<Channel>, Arc<Mutex<Vec<Value>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&lines);
        (
            Channel::new(move |line| kept.lock().unwrap().push(line.clone())),
            lines,
        )
    }

    #[tokio::test]
    async fn a_request_gets_the_answer_that_names_it_and_a_closed_input_fails_the_rest() {
        let (channel, lines) = collecting();
        let asking = Arc::clone(&channel);
        let first = tokio::spawn(async move {
            asking
                .request(json!({"subtype": "can_use_tool", "tool_name": "Bash"}))
                .await
        });
        while lines.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let sent = lines.lock().unwrap()[0].clone();
        assert_eq!(sent["type"], "control_request");
        assert_eq!(sent["request"]["tool_name"], "Bash");
        let id = sent["request_id"].as_str().unwrap().to_owned();
        // An answer to no request is a problem, and leaves the waiting one waiting.
        let stray = sort(
            &channel,
            r#"{"type":"control_response","response":{"subtype":"success","request_id":"nope"}}"#,
            3,
        );
        assert!(
            matches!(&stray, Some(Incoming::Invalid(problem)) if problem.contains("\"nope\"")),
            "{stray:?}"
        );
        let line = json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {"behavior": "allow"}}});
        assert!(sort(&channel, &line.to_string(), 4).is_none());
        assert_eq!(first.await.unwrap(), Ok(json!({"behavior": "allow"})));

        let asking = Arc::clone(&channel);
        let second = tokio::spawn(async move { asking.request(json!({"subtype": "x"})).await });
        while lines.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        channel.close();
        assert_eq!(second.await.unwrap(), Err(ControlError::Closed));
        assert_eq!(
            channel.request(json!({"subtype": "x"})).await,
            Err(ControlError::Closed)
        );
    }

    #[tokio::test]
    async fn an_error_response_refuses_and_a_dropped_request_is_withdrawn() {
        let (channel, lines) = collecting();
        let asking = Arc::clone(&channel);
        let refused = tokio::spawn(async move { asking.request(json!({"subtype": "x"})).await });
        while lines.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        let id = lines.lock().unwrap()[0]["request_id"].clone();
        let line = json!({"type": "control_response", "response": {"subtype": "error", "request_id": id, "error": "no such hook"}});
        assert!(sort(&channel, &line.to_string(), 1).is_none());
        assert_eq!(
            refused.await.unwrap(),
            Err(ControlError::Refused("no such hook".into()))
        );

        let asking = Arc::clone(&channel);
        let dropped = tokio::spawn(async move { asking.request(json!({"subtype": "y"})).await });
        while lines.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        dropped.abort();
        let _ = dropped.await;
        let withdrawn = lines.lock().unwrap()[2].clone();
        assert_eq!(withdrawn["type"], "control_cancel_request");
        assert_eq!(
            withdrawn["request_id"],
            lines.lock().unwrap()[1]["request_id"]
        );
    }

    #[test]
    fn lines_are_sorted_and_bad_ones_named() {
        let (channel, lines) = collecting();
        let user = sort(
            &channel,
            r#"{"type":"user","message":{"role":"user","content":"hi"}}"#,
            1,
        );
        assert!(matches!(user, Some(Incoming::User(_))));
        let request = sort(
            &channel,
            r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#,
            2,
        );
        assert!(
            matches!(&request, Some(Incoming::Request { id, request }) if id == "r1" && request["subtype"] == "interrupt")
        );
        for (line, expected) in [
            ("{not json", "stdin line 3: not JSON"),
            (r#"{"type":"assistant"}"#, "\"assistant\", not user"),
            (
                r#"{"type":"user","message":{"role":"user","content":""}}"#,
                "message.content must be",
            ),
            (
                r#"{"type":"control_request","request":{"subtype":"interrupt"}}"#,
                "without a request_id",
            ),
        ] {
            match sort(&channel, line, 3) {
                Some(Incoming::Invalid(problem)) => {
                    assert!(problem.contains(expected), "{problem}");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
        // A request with an id but no subtype is answered with an error at once.
        assert!(
            sort(
                &channel,
                r#"{"type":"control_request","request_id":"r2","request":{}}"#,
                4
            )
            .is_none()
        );
        let answer = lines.lock().unwrap()[0].clone();
        assert_eq!(answer["response"]["subtype"], "error");
        assert_eq!(answer["response"]["request_id"], "r2");
        assert!(sort(&channel, r#"{"type":"keep_alive"}"#, 5).is_none());
    }
}
