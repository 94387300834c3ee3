//! History builders and fakes shared by the context tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use context::{ResultStore, Summarizer, SummaryFuture, SummaryRequest, TokenEstimator, Tokens};
use protocol::{ContentBlock, MessageParam, Role, ToolResultBlock, ToolUseBlock, ToolUseId};
use serde_json::json;

pub fn user(text: &str) -> MessageParam {
    MessageParam::user_text(text)
}

pub fn assistant(text: &str) -> MessageParam {
    MessageParam {
        role: Role::Assistant,
        content: vec![ContentBlock::text(text)],
    }
}

pub fn tool_use(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        cache_control: None,
        extra: Default::default(),
    })
}

pub fn calls(ids: &[&str]) -> MessageParam {
    MessageParam {
        role: Role::Assistant,
        content: ids
            .iter()
            .map(|id| tool_use(id, "Read", json!({"file_path": format!("src/{id}.rs")})))
            .collect(),
    }
}

pub fn results(ids: &[&str], text: &str) -> MessageParam {
    MessageParam {
        role: Role::User,
        content: ids
            .iter()
            .map(|id| ContentBlock::ToolResult(ToolResultBlock::text((*id).into(), text, false)))
            .collect(),
    }
}

/// A summarizer that answers `summary`, refuses requests above `limit` estimated tokens, and
/// counts its calls.
pub struct FakeSummarizer {
    pub summary: String,
    pub limit: Tokens,
    pub calls: AtomicUsize,
    pub requests: Mutex<Vec<SummaryRequest>>,
    pub estimator: context::BytesEstimator,
}

impl FakeSummarizer {
    pub fn new(summary: String, limit: Tokens) -> Self {
        Self {
            summary,
            limit,
            calls: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            estimator: context::BytesEstimator::default(),
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Summarizer for FakeSummarizer {
    fn summarize(&self, request: SummaryRequest) -> SummaryFuture<'_> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let size = self.estimator.text(&request.system)
            + self.estimator.messages(&request.messages)
            + request.max_output;
        context::validate_pairing(&request.messages).unwrap();
        self.requests.lock().unwrap().push(request);
        let answer = if size > self.limit {
            Err(context::SummarizerError::PromptTooLong(format!(
                "{size} > {}",
                self.limit
            )))
        } else {
            Ok(self.summary.clone())
        };
        Box::pin(std::future::ready(answer))
    }
}

#[derive(Default)]
pub struct MemoryStore {
    pub files: Vec<(String, String)>,
}

impl ResultStore for MemoryStore {
    fn persist(&mut self, id: &ToolUseId, text: &str) -> Result<String, String> {
        let path = format!("/s/tool-results/{id}.txt");
        self.files.push((path.clone(), text.to_owned()));
        Ok(path)
    }
}
