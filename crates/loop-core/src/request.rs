//! The request the loop sends, borrowed from the loop's state: no copy of the history.
//!
//! The user context goes in as the first text block of the first user message, wrapped in
//! `<system-reminder>`, so the system prompt stays byte-stable for prompt caching. Cache
//! breakpoints: the last system block and, by default, the last block of the last user
//! message (the moving breakpoint); none on tools (API-NOTES: tools precede the system prompt
//! in the cached prefix). A caller that plans its breakpoints (to keep a prefix readable
//! across a rewrite, or a fork's prefix on the previous request's entry) names them in
//! [`ModelRequest::breakpoints`].

use protocol::{
    CacheControl, ContentBlock, CreateMessageRequest, MessageParam, Role, SystemBlock,
    SystemPrompt, ThinkingConfig, ToolDefinition,
};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// A Messages API request whose history is borrowed. Serializes to the exact JSON body of
/// `POST /v1/messages` (with `"stream": true`); [`ModelRequest::to_owned_request`] builds the
/// same request as an owned [`CreateMessageRequest`].
#[derive(Clone, Copy, Debug)]
pub struct ModelRequest<'a> {
    /// The model id.
    pub model: &'a str,
    /// The output cap in tokens.
    pub max_tokens: u32,
    /// System prompt blocks, cache breakpoint on the last already set.
    pub system: &'a [SystemBlock],
    /// Tool declarations.
    pub tools: &'a [ToolDefinition],
    /// The history.
    pub messages: &'a [MessageParam],
    /// Text put first in the first user message, inside `<system-reminder>`.
    pub user_context: Option<&'a str>,
    /// Extended thinking (fitted to `max_tokens`: [`ThinkingConfig::fit`]).
    pub thinking: Option<ThinkingConfig>,
    /// `output_config.effort`.
    pub effort: Option<protocol::Effort>,
    /// The message breakpoints, as `(message, block)` indexes into `messages` (the user
    /// context's block not counted); `None`: the moving breakpoint alone. Positions that do
    /// not exist, or whose block cannot carry `cache_control` (thinking), are skipped; at
    /// most [`MAX_MESSAGE_BREAKPOINTS`] are used, the last ones.
    pub breakpoints: Option<&'a [BlockAt]>,
}

/// A content block's place in a history: `(message index, block index)`.
pub type BlockAt = (usize, usize);

/// Message breakpoints a request may carry: the API allows four `cache_control` markers per
/// request, and the system prompt's last block takes one (API-NOTES).
pub const MAX_MESSAGE_BREAKPOINTS: usize = 3;

/// The moving breakpoint of `messages`: the last block of the last user message.
pub fn moving_breakpoint(messages: &[MessageParam]) -> Option<BlockAt> {
    let (index, message) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, message)| message.role == Role::User)?;
    Some((index, message.content.len().checked_sub(1)?))
}

impl ModelRequest<'_> {
    /// The positions that get a cache breakpoint, in order, at most
    /// [`MAX_MESSAGE_BREAKPOINTS`].
    fn cache_positions(&self) -> Vec<BlockAt> {
        let Some(planned) = self.breakpoints else {
            return moving_breakpoint(self.messages).into_iter().collect();
        };
        let mut positions: Vec<BlockAt> = planned
            .iter()
            .copied()
            .filter(|&(message, block)| {
                self.messages
                    .get(message)
                    .and_then(|message| message.content.get(block))
                    .is_some_and(ContentBlock::can_carry_cache_control)
            })
            .collect();
        positions.sort_unstable();
        positions.dedup();
        let excess = positions.len().saturating_sub(MAX_MESSAGE_BREAKPOINTS);
        positions.drain(..excess);
        positions
    }

    fn first_user(&self) -> Option<usize> {
        self.messages
            .iter()
            .position(|message| message.role == Role::User)
    }

    fn reminder(&self) -> Option<ContentBlock> {
        self.user_context.map(|context| {
            ContentBlock::text(format!("<system-reminder>\n{context}\n</system-reminder>"))
        })
    }

    /// The same request as an owned value (copies the history).
    pub fn to_owned_request(&self) -> CreateMessageRequest {
        let mut messages = self.messages.to_vec();
        for (message, block) in self.cache_positions() {
            messages[message].content[block].set_cache_control(Some(CacheControl::ephemeral()));
        }
        if let (Some(first), Some(reminder)) = (self.first_user(), self.reminder()) {
            messages[first].content.insert(0, reminder);
        }
        let mut request = CreateMessageRequest::new(self.model, self.max_tokens, messages);
        if !self.system.is_empty() {
            request.system = Some(SystemPrompt::Blocks(self.system.to_vec()));
        }
        request.tools = self.tools.to_vec();
        request.thinking = self.thinking;
        request.output_config = self.effort.map(|effort| protocol::OutputConfig {
            effort: Some(effort),
            ..protocol::OutputConfig::default()
        });
        request.stream = Some(true);
        request
    }
}

impl Serialize for ModelRequest<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Same field order as `CreateMessageRequest`'s derived serialization.
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("max_tokens", &self.max_tokens)?;
        map.serialize_entry("messages", &Messages { request: self })?;
        if !self.system.is_empty() {
            map.serialize_entry("system", self.system)?;
        }
        if !self.tools.is_empty() {
            map.serialize_entry("tools", self.tools)?;
        }
        if let Some(thinking) = &self.thinking {
            map.serialize_entry("thinking", thinking)?;
        }
        if let Some(effort) = self.effort {
            map.serialize_entry("output_config", &serde_json::json!({"effort": effort}))?;
        }
        map.serialize_entry("stream", &true)?;
        map.end()
    }
}

struct Messages<'r, 'a> {
    request: &'r ModelRequest<'a>,
}

impl Serialize for Messages<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let request = self.request;
        let cache = request.cache_positions();
        let first = request.first_user();
        let reminder = request.reminder();
        let mut seq = serializer.serialize_seq(Some(request.messages.len()))?;
        for (index, message) in request.messages.iter().enumerate() {
            let prepend = if Some(index) == first {
                reminder.as_ref()
            } else {
                None
            };
            let start = cache.partition_point(|(at, _)| *at < index);
            let end = cache.partition_point(|(at, _)| *at <= index);
            let cached = &cache[start..end];
            if prepend.is_none() && cached.is_empty() {
                seq.serialize_element(message)?;
            } else {
                seq.serialize_element(&Message {
                    message,
                    prepend,
                    cached,
                })?;
            }
        }
        seq.end()
    }
}

struct Message<'m> {
    message: &'m MessageParam,
    prepend: Option<&'m ContentBlock>,
    /// The blocks that carry a breakpoint, as `(message, block)`, all of this message.
    cached: &'m [BlockAt],
}

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", &self.message.role)?;
        map.serialize_entry("content", &Content { inner: self })?;
        map.end()
    }
}

struct Content<'r, 'm> {
    inner: &'r Message<'m>,
}

impl Serialize for Content<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let blocks = &self.inner.message.content;
        let mut seq = serializer.serialize_seq(Some(
            blocks.len() + usize::from(self.inner.prepend.is_some()),
        ))?;
        if let Some(prepend) = self.inner.prepend {
            seq.serialize_element(prepend)?;
        }
        for (index, block) in blocks.iter().enumerate() {
            if self.inner.cached.iter().any(|&(_, at)| at == index) {
                // One block is copied to carry the breakpoint.
                let mut block = block.clone();
                block.set_cache_control(Some(CacheControl::ephemeral()));
                seq.serialize_element(&block)?;
            } else {
                seq.serialize_element(block)?;
            }
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use protocol::{MessageParam, SystemBlock};

    use super::*;

    #[test]
    fn borrowed_and_owned_serialize_the_same() {
        let messages = vec![
            MessageParam::user_text("task"),
            MessageParam {
                role: Role::Assistant,
                content: vec![ContentBlock::text("ok")],
            },
            MessageParam::user_text("next"),
        ];
        let system = vec![SystemBlock::new("static", Some(CacheControl::ephemeral()))];
        let request = ModelRequest {
            model: "claude-opus-4-8",
            max_tokens: 64_000,
            system: &system,
            tools: &[],
            messages: &messages,
            user_context: Some("cwd: /w"),
            thinking: Some(ThinkingConfig::Adaptive),
            effort: Some(protocol::Effort::High),
            breakpoints: None,
        };
        let borrowed = serde_json::to_string(&request).unwrap();
        let owned = serde_json::to_string(&request.to_owned_request()).unwrap();
        assert_eq!(borrowed, owned);
        assert!(borrowed.contains(r#"{"role":"user","content":[{"type":"text","text":"<system-reminder>\ncwd: /w\n</system-reminder>"},{"type":"text","text":"task"}]}"#));
        assert!(
            borrowed
                .contains(r#"{"type":"text","text":"next","cache_control":{"type":"ephemeral"}}"#)
        );
        // The history itself is untouched.
        assert_eq!(messages[0].content.len(), 1);
    }
}
