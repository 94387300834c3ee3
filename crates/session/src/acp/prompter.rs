//! Questions about tool calls, asked of the editor (`session/request_permission`).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use executor::PermissionDecision;

use super::calls;
use super::observer::CatchUpCell;

/// The option ids offered: once, always (when [`tools::Always`] offers anything), reject.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT: &str = "reject_once";

/// Asks the editor about one session's calls. Made before the session opens (which needs
/// it); [`ClientPrompter::attach`] names the session once it has its id.
#[derive(Clone)]
pub(crate) struct ClientPrompter {
    cx: ConnectionTo<Client>,
    session_id: Arc<OnceLock<String>>,
    cwd: PathBuf,
    catch_up: CatchUpCell,
    /// Whether the session's files go through the editor: a question's diff is then made
    /// from the editor's text.
    editor_files: bool,
}

impl ClientPrompter {
    pub(crate) fn new(cx: ConnectionTo<Client>, cwd: PathBuf, editor_files: bool) -> Self {
        Self {
            cx,
            session_id: Arc::new(OnceLock::new()),
            cwd,
            catch_up: CatchUpCell::default(),
            editor_files,
        }
    }

    /// The change a Write or Edit would make to the file as the editor holds it (the
    /// gate's, from the disk, when the editor cannot say).
    async fn editor_change(
        &self,
        session_id: &str,
        request: &tools::PermissionRequest<'_>,
    ) -> Option<tools::ProposedChange> {
        let change = request.change.as_ref()?;
        if !self.editor_files {
            return Some(change.clone());
        }
        let read = acp::ReadTextFileRequest::new(session_id.to_owned(), change.path.clone());
        let before = match self.cx.send_request(read).block_task().await {
            Ok(answer) => Some(answer.content),
            Err(_) if change.before.is_none() => None,
            Err(_) => return Some(change.clone()),
        };
        calls::proposed(request.tool, request.input, &change.path, before)
            .or_else(|| Some(change.clone()))
    }

    /// The session's id, once it is open.
    pub(crate) fn session_cell(&self) -> Arc<OnceLock<String>> {
        Arc::clone(&self.session_id)
    }

    /// Where the session's turns let a question catch up ([`super::observer::Updates`]).
    pub(crate) fn catch_up(&self) -> CatchUpCell {
        Arc::clone(&self.catch_up)
    }

    /// Names the session the questions are about.
    pub(crate) fn attach(&self, session_id: &str) {
        let _ = self.session_id.set(session_id.to_owned());
    }
}

impl tools::Prompter for ClientPrompter {
    fn ask<'a>(&'a self, request: tools::PermissionRequest<'a>) -> executor::PermissionFuture<'a> {
        Box::pin(async move {
            // The editor knows the call it is asked about: the turn's earlier updates first.
            let sender = self
                .catch_up
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            crate::catch_up(sender).await;
            let Some(session_id) = self.session_id.get() else {
                return PermissionDecision::deny(
                    "nobody could be asked: the session is not open yet",
                );
            };
            let change = self.editor_change(session_id, &request).await;
            let fields = calls::question(request.tool, request.input, &self.cwd, change.as_ref());
            let mut options = vec![acp::PermissionOption::new(
                ALLOW_ONCE,
                "Allow",
                acp::PermissionOptionKind::AllowOnce,
            )];
            if let Some(always) = &request.always {
                options.push(acp::PermissionOption::new(
                    ALLOW_ALWAYS,
                    format!("Always allow {}", always.describe()),
                    acp::PermissionOptionKind::AllowAlways,
                ));
            }
            options.push(acp::PermissionOption::new(
                REJECT,
                "Reject",
                acp::PermissionOptionKind::RejectOnce,
            ));
            let question = acp::RequestPermissionRequest::new(
                session_id.clone(),
                acp::ToolCallUpdate::new(request.tool_use_id.to_owned(), fields),
                options,
            );
            let answer = match self.cx.send_request(question).block_task().await {
                Ok(answer) => answer,
                Err(error) => {
                    return PermissionDecision::deny(format!(
                        "the editor could not be asked ({error}); the call did not run"
                    ));
                }
            };
            decide(&answer.outcome, request.always.as_ref())
        })
    }
}

/// The decision the editor's answer means; "always" grants what [`tools::Always`] offered.
fn decide(
    outcome: &acp::RequestPermissionOutcome,
    always: Option<&tools::Always>,
) -> PermissionDecision {
    match outcome {
        acp::RequestPermissionOutcome::Selected(selected) => match selected.option_id.0.as_ref() {
            ALLOW_ONCE => PermissionDecision::allow(),
            ALLOW_ALWAYS if always.is_some() => {
                if let Some(always) = always {
                    always.grant();
                }
                PermissionDecision::allow()
            }
            REJECT => PermissionDecision::deny(
                "the user rejected this call in the editor; ask them how to proceed or try something else",
            ),
            other => PermissionDecision::deny(format!(
                "the editor answered with an option that was not offered ({other:?}); the call did not run"
            )),
        },
        // The prompt was cancelled (`session/cancel`): the turn is stopping.
        _ => PermissionDecision::deny(
            "The user cancelled the prompt: this call did not run. Wait for the user to say how to proceed.",
        ),
    }
}
