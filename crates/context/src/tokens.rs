//! Token counts and how to estimate them.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub};

use protocol::{ContentBlock, MessageParam, ToolResultContent, Usage};

/// A number of tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tokens(pub u64);

impl Tokens {
    /// Zero tokens.
    pub const ZERO: Self = Self(0);

    /// `self - other`, or zero when `other` is larger.
    pub fn saturating_sub(self, other: Self) -> Self {
        Self(self.0.saturating_sub(other.0))
    }
}

impl Add for Tokens {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self(self.0.saturating_add(other.0))
    }
}

impl AddAssign for Tokens {
    fn add_assign(&mut self, other: Self) {
        *self = *self + other;
    }
}

/// Saturating subtraction: a token budget never goes negative.
impl Sub for Tokens {
    type Output = Self;
    fn sub(self, other: Self) -> Self {
        self.saturating_sub(other)
    }
}

impl Sum for Tokens {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::ZERO, Add::add)
    }
}

impl fmt::Display for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens", self.0)
    }
}

/// Estimates how many tokens content will cost. Only the provider knows the truth (its
/// `usage`); estimates fill the gap between two responses.
pub trait TokenEstimator: Send + Sync {
    /// Tokens of a piece of text.
    fn text(&self, text: &str) -> Tokens;

    /// Tokens of an image block.
    fn image(&self) -> Tokens;

    /// Tokens of one content block.
    fn block(&self, block: &ContentBlock) -> Tokens {
        match block {
            ContentBlock::Text(text) => self.text(&text.text),
            ContentBlock::Image(_) => self.image(),
            ContentBlock::ToolUse(tool_use) => {
                self.text(&tool_use.name) + self.text(&tool_use.input.to_string())
            }
            ContentBlock::ToolResult(result) => match &result.content {
                ToolResultContent::Text(text) => self.text(text),
                ToolResultContent::Blocks(blocks) => blocks.iter().map(|b| self.block(b)).sum(),
            },
            ContentBlock::Thinking(thinking) => self.text(&thinking.thinking),
            ContentBlock::RedactedThinking(redacted) => self.text(&redacted.data),
            other => self.text(&serde_json::to_string(other).unwrap_or_default()),
        }
    }

    /// Tokens of one message: its blocks plus a small framing cost.
    fn message(&self, message: &MessageParam) -> Tokens {
        Tokens(4) + message.content.iter().map(|block| self.block(block)).sum()
    }

    /// Tokens of a list of messages.
    fn messages(&self, messages: &[MessageParam]) -> Tokens {
        messages.iter().map(|message| self.message(message)).sum()
    }
}

/// The default estimator: one token per 4 bytes of text, 1,600 tokens per image.
///
/// An approximation: Claude's tokenizers average about 3.5-4 bytes per token on English and
/// code, fewer on other scripts. 1,600 tokens is the cost of a ~1.15-megapixel image (width x
/// height / 750), the size the API scales larger images down to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BytesEstimator {
    /// Bytes per token. Default 4.
    pub bytes_per_token: u64,
    /// Tokens per image. Default 1,600.
    pub image_tokens: u64,
}

impl Default for BytesEstimator {
    fn default() -> Self {
        Self {
            bytes_per_token: 4,
            image_tokens: 1_600,
        }
    }
}

impl TokenEstimator for BytesEstimator {
    fn text(&self, text: &str) -> Tokens {
        Tokens((text.len() as u64).div_ceil(self.bytes_per_token.max(1)))
    }

    fn image(&self) -> Tokens {
        Tokens(self.image_tokens)
    }
}

/// The token count of a history: what the provider reported for the last response, plus an
/// estimate of only the messages appended since.
///
/// `usage` is the last response's usage (input + cache reads + cache writes + output: the whole
/// request and its answer); `covered` is how many leading messages of `messages` that response
/// accounted for (the request's messages plus the response itself). Without a usage everything
/// is estimated.
pub fn history_tokens(
    messages: &[MessageParam],
    last: Option<(&Usage, usize)>,
    estimator: &dyn TokenEstimator,
) -> Tokens {
    match last {
        Some((usage, covered)) if covered <= messages.len() => {
            Tokens(usage.context_tokens()) + estimator.messages(&messages[covered..])
        }
        _ => estimator.messages(messages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_over_four_rounded_up() {
        let estimator = BytesEstimator::default();
        assert_eq!(estimator.text(""), Tokens(0));
        assert_eq!(estimator.text("abcd"), Tokens(1));
        assert_eq!(estimator.text("abcde"), Tokens(2));
        assert_eq!(
            estimator.message(&MessageParam::user_text("x".repeat(400))),
            Tokens(104)
        );
    }

    #[test]
    fn reported_usage_plus_estimate_of_what_came_after() {
        let estimator = BytesEstimator::default();
        let usage: Usage = serde_json::from_str(
            r#"{"input_tokens":10,"cache_read_input_tokens":1000,"cache_creation_input_tokens":90,"output_tokens":100}"#,
        )
        .unwrap();
        let messages = vec![
            MessageParam::user_text("a".repeat(4000)),
            MessageParam::user_text("b".repeat(40)),
        ];
        // The response covered the first message: 1_200 reported + 14 estimated.
        assert_eq!(
            history_tokens(&messages, Some((&usage, 1)), &estimator),
            Tokens(1_214)
        );
        assert_eq!(
            history_tokens(&messages, None, &estimator),
            Tokens(1_004 + 14)
        );
    }
}
