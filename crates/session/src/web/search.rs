//! WebSearch: one request to the session's model with the Messages API's server-side web
//! search tool (`web_search_20250305`, the version Claude Code 2.1.197 sends, available on
//! every Claude model and platform; on the Responses API the provider sends its own
//! `web_search` tool), at most [`MAX_USES`] searches, the domain lists as the model gave
//! them; hits outside `allowed_domains` or inside `blocked_domains` are dropped here too (the
//! Responses API takes no blocked list). The response's `server_tool_use`, `web_search_tool_result` and text
//! blocks become Claude Code's structured result `{query, results, durationSeconds,
//! searchCount}` (`results`: the model's text between searches, and each search's hits as
//! `{tool_use_id, content: [{title, url}]}`) and a text for the model, wrapped as untrusted.
//! The searches are billed by the API (`usage.server_tool_use.web_search_requests`) and
//! counted through the call's progress ([`super::usage_progress`]).

use std::sync::Arc;
use std::time::Instant;

use executor::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use protocol::ContentBlock;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Web, untrusted, usage_progress};

/// The most searches one WebSearch call may run (Claude Code's `max_uses`).
pub const MAX_USES: u32 = 8;

/// The server tool's type.
pub const TOOL_TYPE: &str = "web_search_20250305";

/// The instructions the search request goes under.
pub const SYSTEM: &str = "You run web searches for a coding agent. Search for what the query asks, then sum up what the results say that bears on it, briefly, naming the pages you draw on.";

/// `WebSearch`.
pub struct WebSearchTool {
    web: Arc<Web>,
    schema: Value,
}

impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchTool").finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct SearchInput {
    query: String,
    #[serde(default)]
    allowed_domains: Vec<String>,
    #[serde(default)]
    blocked_domains: Vec<String>,
}

impl WebSearchTool {
    /// The tool, searching through `web`'s model.
    pub fn new(web: Arc<Web>) -> Self {
        Self {
            web,
            schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 2, "description": "The search query"},
                    "allowed_domains": {"type": "array", "items": {"type": "string"}, "description": "Only results from these domains"},
                    "blocked_domains": {"type": "array", "items": {"type": "string"}, "description": "No results from these domains"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }
}

/// One entry of the structured result's `results`.
#[derive(Clone, Debug, PartialEq)]
enum Found {
    /// The model's text.
    Text(String),
    /// One search's hits: its tool_use id, and `(title, url)` of each.
    Hits(String, Vec<(String, String)>),
    /// A search that failed, with the API's error code.
    Error(String),
}

/// What a search response holds, in order (Claude Code's reading): the text before each
/// search joined into one entry, each search result's hits, the text after the last; and
/// how many searches ran.
fn read_results(content: &[ContentBlock]) -> (Vec<Found>, u64) {
    let mut found = Vec::new();
    let mut text = String::new();
    let (mut searches, mut results) = (0u64, 0u64);
    let flush = |text: &mut String, found: &mut Vec<Found>| {
        let trimmed = text.trim();
        if !trimmed.is_empty() {
            found.push(Found::Text(trimmed.to_owned()));
        }
        text.clear();
    };
    for block in content {
        match block {
            ContentBlock::ServerToolUse(_) => {
                searches += 1;
                flush(&mut text, &mut found);
            }
            ContentBlock::Text(block) => text.push_str(&super::fetch::clean(block.text.clone())),
            other if other.block_type() == "web_search_tool_result" => {
                results += 1;
                flush(&mut text, &mut found);
                let json = serde_json::to_value(other).unwrap_or(Value::Null);
                let id = json["tool_use_id"].as_str().unwrap_or_default().to_owned();
                match json["content"].as_array() {
                    Some(hits) => found.push(Found::Hits(
                        id,
                        hits.iter()
                            .map(|hit| {
                                (
                                    super::fetch::clean(
                                        hit["title"].as_str().unwrap_or_default().to_owned(),
                                    ),
                                    hit["url"].as_str().unwrap_or_default().to_owned(),
                                )
                            })
                            .collect(),
                    )),
                    None => found.push(Found::Error(super::fetch::clean(
                        json["content"]["error_code"]
                            .as_str()
                            .unwrap_or("unknown")
                            .to_owned(),
                    ))),
                }
            }
            _ => {}
        }
    }
    flush(&mut text, &mut found);
    (found, searches.max(results))
}

/// Whether a hit at `url` is wanted: on one of `allowed` (a domain or its subdomains) when
/// that list is given, and on none of `blocked`.
fn wanted(url: &str, allowed: &[String], blocked: &[String]) -> bool {
    let Ok(url) = tools::web::FetchUrl::parse(url) else {
        return false;
    };
    let on = |domain: &String| {
        let domain = domain
            .trim()
            .trim_start_matches("*.")
            .trim_end_matches('.')
            .to_ascii_lowercase();
        url.host == domain
            || url
                .host
                .strip_suffix(&domain)
                .is_some_and(|rest| rest.ends_with('.'))
    };
    (allowed.is_empty() || allowed.iter().any(on)) && !blocked.iter().any(on)
}

/// The text the model gets: the query, then each entry (the model's words; the hits as
/// `- [title](url)` lines), and a reminder to cite the pages used.
fn result_text(query: &str, found: &[Found]) -> String {
    let mut body = String::new();
    for entry in found {
        match entry {
            Found::Text(text) => body.push_str(&format!("{text}\n\n")),
            Found::Hits(_, hits) if hits.is_empty() => body.push_str("No results.\n\n"),
            Found::Hits(_, hits) => {
                body.push_str("Results:\n");
                for (title, url) in hits {
                    let title = match super::fetch::clean(title.clone()) {
                        title if title.trim().is_empty() => url.clone(),
                        title => title,
                    };
                    body.push_str(&format!("- [{title}]({url})\n"));
                }
                body.push('\n');
            }
            Found::Error(code) => body.push_str(&format!("The search failed: {code}.\n\n")),
        }
    }
    format!(
        "{}\n\nWhen you use these results, cite the pages you use as Markdown links in your answer.",
        untrusted(
            &format!("Web search results for \"{query}\""),
            body.trim_end()
        )
    )
}

impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "WebSearch"
    }

    fn description(&self) -> &str {
        "Searches the web and returns the results (titles and links) with a short summary of what they say. Use it for what is newer than your knowledge or specific to a library, an error message or a release; then read a page in full with WebFetch. Restrict it with allowed_domains or keep sites out with blocked_domains (one of the two). Cite the pages you use as Markdown links. A call runs up to 8 searches and is billed per search."
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    /// It changes no file (the permission gate still asks).
    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn timeout(&self, _input: &Value) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(180))
    }

    fn call(&self, input: Value, context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            let input: SearchInput = serde_json::from_value(input).map_err(|error| {
                ToolError::InvalidInput(format!("invalid input for WebSearch: {error}"))
            })?;
            let query = super::fetch::clean(input.query.trim().to_owned());
            if query.chars().count() < 2 {
                return Err(ToolError::InvalidInput(
                    "the query must be at least 2 characters".to_owned(),
                ));
            }
            if !input.allowed_domains.is_empty() && !input.blocked_domains.is_empty() {
                return Err(ToolError::InvalidInput(
                    "give allowed_domains or blocked_domains, not both".to_owned(),
                ));
            }
            let Some(model) = self.web.model() else {
                return Err(ToolError::CouldNotRun(
                    "web search is not set up in this session".to_owned(),
                ));
            };
            let started = Instant::now();
            let answer = tokio::select! {
                answer = model.search(&query, &input.allowed_domains, &input.blocked_domains) => answer,
                () = context.cancel.cancelled() => {
                    return Err(ToolError::Killed("the search was interrupted".to_owned()));
                }
            };
            // A failed search is the call's answer: the calls beside it go on.
            let answer = match answer {
                Ok(answer) => answer,
                Err(error) => {
                    return Ok(ToolOutput::error(format!("the web search failed: {error}")));
                }
            };
            context.progress(usage_progress(&answer));
            let (mut found, searches) = read_results(&answer.content);
            for entry in &mut found {
                if let Found::Hits(_, hits) = entry {
                    hits.retain(|(_, url)| {
                        wanted(url, &input.allowed_domains, &input.blocked_domains)
                    });
                }
            }
            let results: Vec<Value> = found
                .iter()
                .map(|entry| match entry {
                    Found::Text(text) => json!(text),
                    Found::Hits(id, hits) => json!({
                        "tool_use_id": id,
                        "content": hits
                            .iter()
                            .map(|(title, url)| json!({"title": title, "url": url}))
                            .collect::<Vec<_>>(),
                    }),
                    Found::Error(code) => json!(format!("Web search error: {code}")),
                })
                .collect();
            Ok(
                ToolOutput::text(result_text(&query, &found)).with_structured(json!({
                    "query": query,
                    "results": results,
                    "durationSeconds": started.elapsed().as_secs_f64(),
                    "searchCount": searches,
                })),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn blocks(json: Value) -> Vec<ContentBlock> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn hits_are_held_to_the_domain_lists() {
        let allowed = ["docs.rs".to_owned()];
        let blocked = ["evil.net".to_owned()];
        assert!(wanted("https://docs.rs/serde", &allowed, &[]));
        assert!(wanted("https://www.docs.rs/serde", &allowed, &[]));
        assert!(!wanted("https://notdocs.rs/", &allowed, &[]));
        assert!(!wanted("https://docs.rs.evil.net/", &allowed, &[]));
        assert!(wanted("https://anything.org/", &[], &blocked));
        assert!(!wanted("https://a.evil.net/", &[], &blocked));
        assert!(!wanted("not a url", &[], &[]));
    }

    #[test]
    fn results_are_read_as_claude_code_reads_them() {
        let content = blocks(json!([
            {"type": "text", "text": "Let me search."},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                {"type": "web_search_result", "title": "Tokio", "url": "https://tokio.rs", "encrypted_content": "E", "page_age": null}
            ]},
            {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_search", "input": {"query": "q2"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_2", "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}},
            {"type": "text", "text": "Tokio is "},
            {"type": "text", "text": "an async runtime.", "citations": [{"type": "web_search_result_location", "url": "https://tokio.rs", "title": "Tokio", "cited_text": "x", "encrypted_index": "I"}]},
        ]));
        let (found, searches) = read_results(&content);
        assert_eq!(searches, 2);
        assert_eq!(
            found,
            [
                Found::Text("Let me search.".into()),
                Found::Hits(
                    "srvtoolu_1".into(),
                    vec![("Tokio".into(), "https://tokio.rs".into())]
                ),
                Found::Error("max_uses_exceeded".into()),
                Found::Text("Tokio is an async runtime.".into()),
            ]
        );
        let text = result_text("tokio", &found);
        assert!(text.contains("- [Tokio](https://tokio.rs)"), "{text}");
        assert!(
            text.contains("The search failed: max_uses_exceeded."),
            "{text}"
        );
        assert!(text.contains("untrusted data"), "{text}");
    }
}
