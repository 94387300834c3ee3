//! The provider's client as loop-core's model port, and as the compaction summarizer.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use context::{Summarizer, SummarizerError, SummaryFuture, SummaryRequest};
use futures_util::StreamExt as _;
use loop_core::{ApiFailure, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream};
use protocol::{CreateMessageRequest, SystemBlock, SystemPrompt};
use provider::{AnthropicClient, ErrorKind, ProviderError, ProviderEvent};
use tokio_util::sync::CancellationToken;

/// [`AnthropicClient`] behind loop-core's [`ModelClient`].
#[derive(Clone, Debug)]
pub struct ProviderModel {
    client: AnthropicClient,
    /// A fallback model served by another provider.
    fallback: Option<Fallback>,
    /// The models sent notes in place of images and documents.
    text_only: TextOnlyModels,
}

/// The models that take no images or documents: those the settings mark `"vision": false`,
/// and those whose server refused an image during this session. Their requests carry a note
/// where the history holds an image or a document (the history keeps them, for a model that
/// can see them). Shared by the session's turns and its subagents.
#[derive(Clone, Debug, Default)]
pub struct TextOnlyModels(Arc<Mutex<BTreeSet<String>>>);

impl TextOnlyModels {
    /// The models the settings mark as taking no images.
    pub fn new(configured: impl IntoIterator<Item = String>) -> Self {
        Self(Arc::new(Mutex::new(configured.into_iter().collect())))
    }

    /// Whether `model` is sent notes in place of images and documents.
    pub fn contains(&self, model: &str) -> bool {
        self.lock().contains(model)
    }

    /// `model` takes no images from now on.
    pub fn insert(&self, model: &str) {
        self.lock().insert(model.to_owned());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A panic while the set was held leaves a set of strings, still whole.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What stands for an image in a request to a model that takes none.
const IMAGE_NOTE: &str = "[An image was attached here but not sent: this model takes no images. Say so if you need what it shows.]";

/// What stands for a document in a request to a model that takes none.
const DOCUMENT_NOTE: &str = "[A document was attached here but not sent: this model takes no documents. Extract its text with a command (such as `pdftotext`) if you need it, or ask the user.]";

/// Whether `request` holds an image or a document anywhere (tool results included).
fn has_media(request: &ModelRequest<'_>) -> bool {
    fn media(block: &protocol::ContentBlock) -> bool {
        match block {
            protocol::ContentBlock::Image(_) | protocol::ContentBlock::Document(_) => true,
            protocol::ContentBlock::ToolResult(result) => match &result.content {
                protocol::ToolResultContent::Blocks(blocks) => blocks.iter().any(media),
                protocol::ToolResultContent::Text(_) => false,
            },
            _ => false,
        }
    }
    request
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .any(media)
}

/// `body` (a Messages API request) with a text note in place of each image and document
/// block, in messages and in tool results.
fn without_media(body: &[u8]) -> Option<Vec<u8>> {
    fn replace(blocks: &mut [serde_json::Value]) {
        for block in blocks {
            let note = match block.get("type").and_then(serde_json::Value::as_str) {
                Some("image") => IMAGE_NOTE,
                Some("document") => DOCUMENT_NOTE,
                Some("tool_result") => {
                    if let Some(content) = block.get_mut("content").and_then(|c| c.as_array_mut()) {
                        replace(content);
                    }
                    continue;
                }
                _ => continue,
            };
            *block = serde_json::json!({"type": "text", "text": note});
        }
    }
    let mut request: serde_json::Value = serde_json::from_slice(body).ok()?;
    for message in request.get_mut("messages")?.as_array_mut()? {
        if let Some(content) = message.get_mut("content").and_then(|c| c.as_array_mut()) {
            replace(content);
        }
    }
    serde_json::to_vec(&request).ok()
}

/// A `--fallback-model` of another provider.
#[derive(Clone, Debug)]
pub struct Fallback {
    /// Its model id.
    pub model: String,
    /// Its client.
    pub client: AnthropicClient,
}

impl ProviderModel {
    /// Wraps `client`; requests for `fallback`'s model go to its client instead, without
    /// the thinking blocks the first provider wrote (another provider cannot check their
    /// signatures, or has none to check).
    pub fn with_fallback(client: AnthropicClient, fallback: Option<Fallback>) -> Self {
        Self {
            client,
            fallback,
            text_only: TextOnlyModels::default(),
        }
    }

    /// Sends `text_only`'s models notes in place of images and documents, and adds a model
    /// whose server refuses an image (the request is then sent again with notes, once).
    pub fn with_text_only(mut self, text_only: TextOnlyModels) -> Self {
        self.text_only = text_only;
        self
    }
}

/// `body` (a Messages API request) without thinking and redacted_thinking blocks, for a
/// fallback model of another provider (the loop sizes its `max_tokens`:
/// `LoopConfig::fallback_output_cap`).
fn without_thinking(body: &[u8]) -> Option<Vec<u8>> {
    let mut request: serde_json::Value = serde_json::from_slice(body).ok()?;
    for message in request.get_mut("messages")?.as_array_mut()? {
        if let Some(content) = message.get_mut("content").and_then(|c| c.as_array_mut()) {
            content.retain(|block| {
                !matches!(
                    block.get("type").and_then(serde_json::Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            });
        }
    }
    serde_json::to_vec(&request).ok()
}

/// `body` without the thinking blocks the Messages API did not write: an empty signature
/// (Chat Completions' reasoning) or one holding a space (the Responses API's `"<id>
/// <encrypted>"`). A session resumed on Anthropic after another provider would be refused
/// for them, and another vendor's encrypted reasoning must not be sent to Anthropic.
fn without_foreign_thinking(body: &[u8]) -> Option<Vec<u8>> {
    let mut request: serde_json::Value = serde_json::from_slice(body).ok()?;
    for message in request.get_mut("messages")?.as_array_mut()? {
        if let Some(content) = message.get_mut("content").and_then(|c| c.as_array_mut()) {
            content.retain(|block| {
                let signature = block.get("signature").and_then(serde_json::Value::as_str);
                !(block.get("type").and_then(serde_json::Value::as_str) == Some("thinking")
                    && signature.is_none_or(is_foreign_signature))
            });
        }
    }
    serde_json::to_vec(&request).ok()
}

/// Whether a thinking block's signature is not one the Messages API wrote (see
/// [`without_foreign_thinking`]).
fn is_foreign_signature(signature: &str) -> bool {
    signature.is_empty() || signature.contains(' ')
}

/// The loop's view of a provider error: by its kind only.
fn model_error(error: ProviderError) -> ModelError {
    let detail = error.to_string();
    let failure = || ApiFailure {
        status: error.status,
        request_id: error.request_id.clone(),
        message: error.message.clone(),
    };
    match error.kind {
        ErrorKind::PromptTooLong => ModelError::PromptTooLong(failure()),
        ErrorKind::Overloaded | ErrorKind::SwitchToFallback => ModelError::Overloaded(failure()),
        ErrorKind::ImageRejected => ModelError::Image(failure()),
        ErrorKind::Connect
        | ErrorKind::Tls
        | ErrorKind::ResponseTimeout
        | ErrorKind::ResponseTooLarge
        | ErrorKind::StreamIdle
        | ErrorKind::StreamBroken
        | ErrorKind::Cancelled => ModelError::Transport(detail),
        ErrorKind::Replay | ErrorKind::Config => ModelError::Client(detail),
        ErrorKind::RateLimited
        | ErrorKind::Server
        | ErrorKind::InvalidRequest
        | ErrorKind::Authentication
        | ErrorKind::Permission
        | ErrorKind::NotFound
        | ErrorKind::RequestTooLarge
        | ErrorKind::Http
        | ErrorKind::NotEventStream
        | ErrorKind::Parse => ModelError::Api(failure()),
    }
}

/// The summarizer's view of a provider error: by its kind only.
fn summarizer_error(error: ProviderError) -> SummarizerError {
    let detail = error.to_string();
    match error.kind {
        ErrorKind::PromptTooLong => SummarizerError::PromptTooLong(detail),
        ErrorKind::Connect
        | ErrorKind::Tls
        | ErrorKind::RateLimited
        | ErrorKind::Overloaded
        | ErrorKind::SwitchToFallback
        | ErrorKind::Server
        | ErrorKind::ResponseTimeout
        | ErrorKind::StreamIdle
        | ErrorKind::StreamBroken
        | ErrorKind::Cancelled => SummarizerError::Unavailable(detail),
        ErrorKind::Replay | ErrorKind::Config => SummarizerError::Client(detail),
        ErrorKind::ImageRejected
        | ErrorKind::InvalidRequest
        | ErrorKind::Authentication
        | ErrorKind::Permission
        | ErrorKind::NotFound
        | ErrorKind::RequestTooLarge
        | ErrorKind::Http
        | ErrorKind::NotEventStream
        | ErrorKind::ResponseTooLarge
        | ErrorKind::Parse => SummarizerError::Refused(detail),
    }
}

fn model_event(event: ProviderEvent) -> Option<ModelEvent> {
    Some(match event {
        ProviderEvent::Stream(event) => ModelEvent::Stream(event),
        ProviderEvent::Block(block) => ModelEvent::BlockComplete(block),
        ProviderEvent::Retry {
            attempt,
            delay,
            reason,
            ..
        } => ModelEvent::Retry {
            attempt,
            delay,
            reason,
        },
        ProviderEvent::Restart {
            reason,
            non_streaming,
        } => ModelEvent::Restart {
            reason,
            non_streaming,
        },
        ProviderEvent::Idle { silent_for } => ModelEvent::Idle { silent_for },
        ProviderEvent::Done {
            message,
            block_status,
            ..
        } => ModelEvent::Done {
            message,
            block_status,
        },
    })
}

impl ModelClient for ProviderModel {
    /// Only the Messages API's tool_use blocks are final at their `content_block_stop`: a
    /// Chat Completions or Responses stream can end `content_filter` after whole calls.
    fn tool_use_final_at_block_stop(&self) -> bool {
        let messages = |client: &AnthropicClient| client.config().api == provider::Api::Messages;
        messages(&self.client) && self.fallback.as_ref().is_none_or(|f| messages(&f.client))
    }

    fn stream(&self, request: &ModelRequest<'_>, cancel: CancellationToken) -> ModelStream {
        let body = match serde_json::to_vec(request) {
            Ok(body) => Bytes::from(body),
            Err(error) => {
                let error = ModelError::Transport(format!("serializing the request: {error}"));
                return Box::pin(futures_util::stream::iter([Err(error)]));
            }
        };
        let client = match &self.fallback {
            Some(fallback) if fallback.model == request.model => {
                let body = without_thinking(&body).map_or(body, Bytes::from);
                return forward(fallback.client.stream(body, cancel));
            }
            _ => &self.client,
        };
        let foreign = client.config().api == provider::Api::Messages
            && request
                .messages
                .iter()
                .flat_map(|message| &message.content)
                .any(|block| {
                    matches!(block, protocol::ContentBlock::Thinking(thinking)
                        if is_foreign_signature(&thinking.signature))
                });
        let body = if foreign {
            without_foreign_thinking(&body).map_or(body, Bytes::from)
        } else {
            body
        };
        if !has_media(request) {
            return forward(client.stream(body, cancel));
        }
        if self.text_only.contains(request.model) {
            let body = without_media(&body).map_or(body, Bytes::from);
            return forward(client.stream(body, cancel));
        }
        // The first answer tells whether the server takes images: a refusal (before any
        // event) makes the model text-only and sends the request again with notes.
        let first_try = client.stream(body.clone(), cancel.clone());
        let (client, text_only, model) = (
            client.clone(),
            self.text_only.clone(),
            request.model.to_owned(),
        );
        Box::pin(
            futures_util::stream::once(async move {
                let mut first_try = first_try;
                match first_try.next().await {
                    Some(Err(error)) if error.kind == ErrorKind::ImageRejected => {
                        text_only.insert(&model);
                        let notice = ModelEvent::Retry {
                            attempt: 1,
                            delay: std::time::Duration::ZERO,
                            reason: format!(
                                "the server refused an image ({}); {model} is sent notes in place of images and documents from now on",
                                error.message
                            ),
                        };
                        let body = without_media(&body).map_or(body, Bytes::from);
                        Box::pin(
                            futures_util::stream::iter([Ok(notice)])
                                .chain(forward(client.stream(body, cancel))),
                        ) as ModelStream
                    }
                    // Not a refusal: the first answer, then the rest, as usual.
                    first => forward(Box::pin(futures_util::stream::iter(first).chain(first_try))),
                }
            })
            .flatten(),
        )
    }
}

/// The provider's events as the loop's.
fn forward(stream: provider::ProviderStream) -> ModelStream {
    Box::pin(stream.filter_map(|item| async move {
        match item {
            Ok(event) => model_event(event).map(Ok),
            Err(error) => Some(Err(model_error(error))),
        }
    }))
}

/// What `prompt` hooks ask: one streamed request through the session's client, to the
/// hook's model (an alias such as `haiku` resolved as `--model` resolves it) or the
/// session's small fast model.
#[derive(Clone)]
pub struct ProviderHookModel {
    client: AnthropicClient,
    fast: String,
    resolve: Arc<dyn Fn(&str) -> String + Send + Sync>,
}

impl std::fmt::Debug for ProviderHookModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderHookModel")
            .field("fast", &self.fast)
            .finish_non_exhaustive()
    }
}

impl ProviderHookModel {
    /// Requests through `client`; `fast` for hooks that name no model; `resolve` turns a
    /// hook's model name into the id sent.
    pub fn new(
        client: AnthropicClient,
        fast: String,
        resolve: Arc<dyn Fn(&str) -> String + Send + Sync>,
    ) -> Self {
        Self {
            client,
            fast,
            resolve,
        }
    }
}

impl crate::hooks::prompt::HookModel for ProviderHookModel {
    fn ask<'a>(
        &'a self,
        model: Option<&'a str>,
        system: &'a str,
        prompt: String,
    ) -> crate::hooks::prompt::HookModelFuture<'a> {
        Box::pin(async move {
            let model = model.map_or_else(|| self.fast.clone(), |name| (self.resolve)(name));
            let mut body = CreateMessageRequest::new(
                model,
                1024,
                vec![protocol::MessageParam::user_text(prompt)],
            );
            body.system = Some(SystemPrompt::Blocks(vec![SystemBlock::new(
                system.to_owned(),
                None,
            )]));
            body.stream = Some(true);
            let bytes = serde_json::to_vec(&body).map_err(|error| error.to_string())?;
            let mut stream = self
                .client
                .stream(Bytes::from(bytes), CancellationToken::new());
            while let Some(item) = stream.next().await {
                if let ProviderEvent::Done { message, .. } =
                    item.map_err(|error| error.to_string())?
                {
                    return Ok(message.text());
                }
            }
            Err("the model gave no answer".to_owned())
        })
    }
}

/// What the web tools ask ([`crate::web::WebModel`]): page answers from the session's small
/// fast model, searches from its model with the API's web search tool, each one streamed
/// request through the session's client.
#[derive(Clone)]
pub struct ProviderWebModel {
    client: AnthropicClient,
    fast: String,
    model: String,
}

impl std::fmt::Debug for ProviderWebModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderWebModel")
            .field("fast", &self.fast)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl ProviderWebModel {
    /// Requests through `client`: answers by `fast`, searches by `model`.
    pub fn new(client: AnthropicClient, fast: String, model: String) -> Self {
        Self {
            client,
            fast,
            model,
        }
    }

    /// Sends `body` and returns the final message's model, content and usage.
    async fn send(&self, body: serde_json::Value) -> Result<crate::web::ModelAnswer, String> {
        let asked = body["model"].as_str().unwrap_or_default().to_owned();
        let bytes = serde_json::to_vec(&body).map_err(|error| error.to_string())?;
        let mut stream = self
            .client
            .stream(Bytes::from(bytes), CancellationToken::new());
        while let Some(item) = stream.next().await {
            if let ProviderEvent::Done { message, .. } = item.map_err(|error| error.to_string())? {
                return Ok(crate::web::ModelAnswer {
                    model: message.model,
                    asked,
                    content: message.content,
                    usage: message.usage,
                });
            }
        }
        Err("the model gave no answer".to_owned())
    }

    fn body(model: &str, max_tokens: u32, system: &str, prompt: String) -> serde_json::Value {
        let mut body = CreateMessageRequest::new(
            model.to_owned(),
            max_tokens,
            vec![protocol::MessageParam::user_text(prompt)],
        );
        body.system = Some(SystemPrompt::Blocks(vec![SystemBlock::new(
            system.to_owned(),
            None,
        )]));
        body.stream = Some(true);
        serde_json::to_value(&body).unwrap_or_default()
    }
}

impl crate::web::WebModel for ProviderWebModel {
    fn answer<'a>(&'a self, system: &'a str, prompt: String) -> crate::web::AnswerFuture<'a> {
        Box::pin(self.send(Self::body(&self.fast, 4096, system, prompt)))
    }

    fn search<'a>(
        &'a self,
        query: &'a str,
        allowed: &'a [String],
        blocked: &'a [String],
    ) -> crate::web::AnswerFuture<'a> {
        let mut body = Self::body(
            &self.model,
            4096,
            crate::web::search::SYSTEM,
            format!("Search the web for: {query}"),
        );
        let mut tool = serde_json::json!({
            "type": crate::web::search::TOOL_TYPE,
            "name": "web_search",
            "max_uses": crate::web::search::MAX_USES,
        });
        if !allowed.is_empty() {
            tool["allowed_domains"] = serde_json::json!(allowed);
        }
        if !blocked.is_empty() {
            tool["blocked_domains"] = serde_json::json!(blocked);
        }
        body["tools"] = serde_json::json!([tool]);
        // The search runs first: the model is made to call it.
        body["tool_choice"] = serde_json::json!({"type": "tool", "name": "web_search"});
        Box::pin(self.send(body))
    }
}

/// The compaction summarizer: one model call with the summary request.
#[derive(Clone, Debug)]
pub struct ProviderSummarizer {
    client: AnthropicClient,
    model: String,
    focus: Option<String>,
}

impl ProviderSummarizer {
    /// Summaries by `model` through `client`.
    pub fn new(client: AnthropicClient, model: String) -> Self {
        Self {
            client,
            model,
            focus: None,
        }
    }

    /// The user's instructions for this summary (`/compact FOCUS`), added after the summary
    /// prompt.
    pub fn with_focus(mut self, focus: Option<String>) -> Self {
        self.focus = focus.filter(|focus| !focus.trim().is_empty());
        self
    }
}

impl Summarizer for ProviderSummarizer {
    fn summarize(&self, request: SummaryRequest) -> SummaryFuture<'_> {
        Box::pin(async move {
            let max_tokens = u32::try_from(request.max_output.0).unwrap_or(u32::MAX);
            let mut messages = request.messages;
            if let (Some(focus), Some(last)) = (&self.focus, messages.last_mut()) {
                last.content.push(protocol::ContentBlock::text(format!(
                    "Additional instructions from the user for this summary: {focus}"
                )));
            }
            let bytes = match &request.fork {
                // The main request's prefix, serialized by the loop's own request type so
                // its bytes are the main request's, with the previous main request's
                // breakpoints.
                Some(fork) => serde_json::to_vec(&loop_core::ModelRequest {
                    model: &fork.model,
                    max_tokens: fork.max_tokens,
                    system: &fork.system,
                    tools: &fork.tools,
                    messages: &messages,
                    user_context: fork.user_context.as_deref(),
                    thinking: fork.thinking,
                    effort: fork.effort,
                    breakpoints: (!fork.breakpoints.is_empty())
                        .then_some(fork.breakpoints.as_slice()),
                }),
                None => {
                    let mut body =
                        CreateMessageRequest::new(self.model.clone(), max_tokens, messages);
                    body.system = Some(SystemPrompt::Blocks(vec![SystemBlock::new(
                        request.system,
                        None,
                    )]));
                    body.stream = Some(true);
                    serde_json::to_vec(&body)
                }
            }
            .map_err(|error| SummarizerError::Client(error.to_string()))?;
            let mut stream = self
                .client
                .stream(Bytes::from(bytes), CancellationToken::new());
            while let Some(item) = stream.next().await {
                if let ProviderEvent::Done { message, .. } = item.map_err(summarizer_error)? {
                    return Ok(message.text());
                }
            }
            Err(SummarizerError::NoAnswer)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session resumed on Anthropic after Chat Completions or the Responses API: their
    /// thinking blocks (no signature, or `"<id> <encrypted>"`) are left out, Anthropic's kept.
    #[test]
    fn only_the_messages_apis_thinking_goes_to_anthropic() {
        let body = serde_json::json!({"model": "m", "messages": [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": "a", "signature": "EqQBCkYIBxgCKkB"},
            {"type": "thinking", "thinking": "b", "signature": "rs_1 gAAAA"},
            {"type": "thinking", "thinking": "c", "signature": ""},
            {"type": "text", "text": "t"},
        ]}]});
        let kept = without_foreign_thinking(body.to_string().as_bytes()).unwrap_or_default();
        let kept: serde_json::Value = serde_json::from_slice(&kept).unwrap_or_default();
        let texts: Vec<&str> = kept["messages"][0]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|block| block["thinking"].as_str().or(block["text"].as_str()))
            .collect();
        assert_eq!(texts, ["a", "t"]);
    }
}
