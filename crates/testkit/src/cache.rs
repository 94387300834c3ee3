//! A simulation of the Messages API's prompt cache, so a scripted server reports the
//! `cache_read_input_tokens` / `cache_creation_input_tokens` / `input_tokens` split the API
//! would bill for a request.
//!
//! The model of the API's behaviour (Anthropic's prompt-caching documentation):
//!
//! - A request is a sequence of **blocks** in the order the API renders its prefix: each tool
//!   definition, each system block (a string system prompt is one block), then each content
//!   block of each message (a string content is one block). A block's identity is its JSON
//!   without `cache_control`, with its message's role; the model is part of every key.
//! - A block carrying `cache_control` is a **breakpoint**. The prefix up to and including a
//!   breakpoint is written to the cache as an entry, if it holds at least
//!   [`MIN_CACHEABLE_TOKENS`]; the entry lives for its TTL (`"ttl": "1h"`, else 5 minutes)
//!   from its last use.
//! - For each breakpoint the API looks for an entry at the breakpoint and then at up to
//!   [`LOOKBACK_BLOCKS`] earlier block boundaries; the longest prefix found over all the
//!   breakpoints is **read** (`cache_read_input_tokens`). What lies between it and the last
//!   breakpoint is **written** (`cache_creation_input_tokens`); what follows the last
//!   breakpoint is plain input (`input_tokens`).
//!
//! Tokens are estimated as bytes / 4: the split is made on the blocks' JSON, then scaled to
//! the whole body's size (as [`Script::usage_from_request`](crate::Script::usage_from_request)
//! counts), so the three figures add up to the request's size and the body's own keys are
//! shared out in proportion.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How many block boundaries before a breakpoint the API checks for an earlier entry (the
/// prompt-caching documentation: "about 20 blocks").
pub const LOOKBACK_BLOCKS: usize = 20;

/// The shortest prefix the API caches, in tokens (1,024 for the Sonnet and Opus models up to
/// 4.1, per the prompt-caching documentation; some models need more).
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// The default lifetime of an entry (`{"type": "ephemeral"}`), refreshed by each use.
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

/// The 1-hour lifetime (`{"type": "ephemeral", "ttl": "1h"}`).
pub const LONG_TTL: Duration = Duration::from_secs(60 * 60);

/// How a request's input tokens divide, as the API's `usage` reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Tokens after the last breakpoint (billed at the base input price).
    pub input_tokens: u64,
    /// Tokens written to the cache (billed at 1.25x for 5 minutes, 2x for 1 hour).
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the cache (billed at 0.1x).
    pub cache_read_input_tokens: u64,
}

impl CacheUsage {
    /// The usage as the API's JSON fields.
    pub fn to_json(self) -> Value {
        serde_json::json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        })
    }
}

/// The cache entries of one simulated API account: prefix key to (tokens, expiry).
#[derive(Clone, Debug, Default)]
pub struct PromptCache {
    entries: HashMap<u64, Entry>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    expires: Instant,
}

/// One rendered block: the key of the prefix ending with it, the tokens up to and including
/// it, and its breakpoint's TTL when it is one.
struct Block {
    key: u64,
    cumulative: u64,
    breakpoint: Option<Duration>,
}

impl PromptCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bills `request` (a Messages API request body, `body_bytes` long) at `now`: reads what
    /// an earlier request cached, writes what its breakpoints add, and returns the split.
    pub fn bill(&mut self, request: &Value, body_bytes: usize, now: Instant) -> CacheUsage {
        self.entries.retain(|_, entry| entry.expires > now);
        let blocks = blocks(request);
        let total = body_bytes as u64 / 4;
        let breakpoints: Vec<usize> = (0..blocks.len())
            .filter(|&index| blocks[index].breakpoint.is_some())
            .collect();
        let mut read = 0;
        let mut hits = Vec::new();
        for &at in &breakpoints {
            let hit = (at.saturating_sub(LOOKBACK_BLOCKS)..=at)
                .rev()
                .find(|&index| self.entries.contains_key(&blocks[index].key));
            if let Some(index) = hit {
                read = read.max(blocks[index].cumulative);
                hits.push(index);
            }
        }
        let end = breakpoints
            .last()
            .map_or(0, |&last| blocks[last].cumulative);
        let written = if end >= MIN_CACHEABLE_TOKENS {
            end.saturating_sub(read)
        } else {
            0
        };
        for &index in &breakpoints {
            let block = &blocks[index];
            if block.cumulative >= MIN_CACHEABLE_TOKENS {
                let ttl = block.breakpoint.unwrap_or(DEFAULT_TTL);
                let entry = self
                    .entries
                    .entry(block.key)
                    .or_insert(Entry { expires: now });
                entry.expires = entry.expires.max(now + ttl);
            }
        }
        for index in hits {
            if let Some(entry) = self.entries.get_mut(&blocks[index].key) {
                entry.expires = entry.expires.max(now + DEFAULT_TTL);
            }
        }
        // The body's own JSON (keys, roles, the model, `stream`) is shared out in proportion,
        // so the three figures add up to the body's size.
        let rendered = blocks.last().map_or(0, |block| block.cumulative).max(1);
        let scale = |tokens: u64| tokens * total / rendered;
        let read = scale(read).min(total);
        let written = scale(written).min(total - read);
        CacheUsage {
            input_tokens: total - read - written,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
        }
    }

    /// Live entries (for tests).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The request's blocks in prefix order, with cumulative keys and tokens.
fn blocks(request: &Value) -> Vec<Block> {
    let mut hasher = DefaultHasher::new();
    request["model"]
        .as_str()
        .unwrap_or_default()
        .hash(&mut hasher);
    let mut cumulative = 0;
    let mut out = Vec::new();
    let mut push = |role: &str, block: &Value| {
        let identity = without_cache_control(block).to_string();
        role.hash(&mut hasher);
        identity.hash(&mut hasher);
        cumulative += identity.len() as u64 / 4;
        out.push(Block {
            key: hasher.finish(),
            cumulative,
            breakpoint: breakpoint(block),
        });
    };
    for tool in request["tools"].as_array().into_iter().flatten() {
        push("tool", tool);
    }
    match &request["system"] {
        Value::Array(blocks) => blocks.iter().for_each(|block| push("system", block)),
        Value::Null => {}
        text => push("system", text),
    }
    for message in request["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or_default();
        match &message["content"] {
            Value::Array(blocks) => blocks.iter().for_each(|block| push(role, block)),
            text => push(role, text),
        }
    }
    out
}

/// The TTL of a block's breakpoint, `None` when it has none.
fn breakpoint(block: &Value) -> Option<Duration> {
    let control = block.get("cache_control")?;
    if control.is_null() {
        return None;
    }
    Some(match control["ttl"].as_str() {
        Some("1h") => LONG_TTL,
        _ => DEFAULT_TTL,
    })
}

fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A text block of about `tokens` tokens.
    fn text(label: &str, tokens: usize, cached: bool) -> Value {
        let mut block =
            json!({"type": "text", "text": format!("{label}{}", "x".repeat(tokens * 4))});
        if cached {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
        block
    }

    /// Within 2 % (and 10 tokens) above `expected`: the blocks' JSON and the body's keys
    /// add a little to the text's tokens.
    fn near(tokens: u64, expected: u64) -> bool {
        (expected..=expected + 10 + expected / 50).contains(&tokens)
    }

    fn request(system: Value, messages: Vec<Value>) -> (Value, usize) {
        let body = json!({"model": "m", "system": [system], "messages": messages});
        let bytes = body.to_string().len();
        (body, bytes)
    }

    fn user(blocks: Vec<Value>) -> Value {
        json!({"role": "user", "content": blocks})
    }

    fn assistant(blocks: Vec<Value>) -> Value {
        json!({"role": "assistant", "content": blocks})
    }

    /// The moving breakpoint: the first request writes its prefix, the next reads it and
    /// writes only what it adds.
    #[test]
    fn a_growing_conversation_reads_its_previous_prefix() {
        let now = Instant::now();
        let mut cache = PromptCache::new();
        let system = text("s", 2000, true);
        let (first, bytes) = request(system.clone(), vec![user(vec![text("a", 500, true)])]);
        let usage = cache.bill(&first, bytes, now);
        assert_eq!(usage.cache_read_input_tokens, 0);
        assert!(near(usage.cache_creation_input_tokens, 2500), "{usage:?}");
        let (second, bytes) = request(
            system,
            vec![
                user(vec![text("a", 500, false)]),
                assistant(vec![text("b", 300, false)]),
                user(vec![text("c", 200, true)]),
            ],
        );
        let usage = cache.bill(&second, bytes, now);
        assert!(near(usage.cache_read_input_tokens, 2500), "{usage:?}");
        assert!(near(usage.cache_creation_input_tokens, 500), "{usage:?}");
        assert_eq!(
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens,
            bytes as u64 / 4
        );
    }

    /// A changed early block makes every later prefix new: only the system breakpoint's
    /// entry is read, the rest is written again.
    #[test]
    fn a_rewritten_block_rewrites_everything_after_it() {
        let now = Instant::now();
        let mut cache = PromptCache::new();
        let system = text("s", 2000, true);
        let (first, bytes) = request(
            system.clone(),
            vec![user(vec![text("a", 3000, false), text("b", 10, true)])],
        );
        cache.bill(&first, bytes, now);
        let (second, bytes) = request(
            system,
            vec![user(vec![text("A", 3000, false), text("b", 10, true)])],
        );
        let usage = cache.bill(&second, bytes, now);
        assert!(near(usage.cache_read_input_tokens, 2000), "{usage:?}");
        assert!(near(usage.cache_creation_input_tokens, 3010), "{usage:?}");
    }

    /// More than 20 blocks past the previous breakpoint, the last breakpoint cannot see its
    /// entry; a second breakpoint where the previous request wrote one can.
    #[test]
    fn the_lookback_is_twenty_blocks() {
        let now = Instant::now();
        let system = text("s", 2000, false);
        let head = vec![text("a", 2000, true)];
        let mut wide: Vec<Value> = vec![text("a", 2000, false)];
        wide.extend((0..24).map(|n| text(&format!("r{n}"), 10, false)));
        let last = wide.len() - 1;
        wide[last]["cache_control"] = json!({"type": "ephemeral"});
        for (anchored, expected_read) in [(false, 0), (true, 4000)] {
            let mut cache = PromptCache::new();
            let (first, bytes) = request(system.clone(), vec![user(head.clone())]);
            cache.bill(&first, bytes, now);
            let mut blocks = wide.clone();
            if anchored {
                blocks[0]["cache_control"] = json!({"type": "ephemeral"});
            }
            let (second, bytes) = request(system.clone(), vec![user(blocks)]);
            let usage = cache.bill(&second, bytes, now);
            assert!(
                near(usage.cache_read_input_tokens, expected_read),
                "anchored {anchored}: {usage:?}"
            );
        }
    }

    /// Entries expire after their TTL; a short prefix is never cached.
    #[test]
    fn entries_expire_and_short_prefixes_are_not_cached() {
        let now = Instant::now();
        let mut cache = PromptCache::new();
        let (short, bytes) = request(text("s", 100, true), vec![user(vec![text("a", 10, false)])]);
        assert_eq!(
            cache.bill(&short, bytes, now).cache_creation_input_tokens,
            0
        );
        assert!(cache.is_empty());
        let (body, bytes) = request(
            text("s", 2000, true),
            vec![user(vec![text("a", 10, false)])],
        );
        cache.bill(&body, bytes, now);
        let warm = cache.bill(&body, bytes, now + Duration::from_secs(299));
        assert!(warm.cache_read_input_tokens >= 2000, "{warm:?}");
        // The read at 299 s refreshed the entry until 599 s.
        let refreshed = cache.bill(&body, bytes, now + Duration::from_secs(590));
        assert!(refreshed.cache_read_input_tokens >= 2000, "{refreshed:?}");
        let cold = cache.bill(&body, bytes, now + Duration::from_secs(2000));
        assert_eq!(cold.cache_read_input_tokens, 0, "{cold:?}");
    }
}
