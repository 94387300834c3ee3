//! The API's error body, `{"type":"error","error":{"type":KIND,"message":…},"request_id":…}`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::JsonObject;

/// Error body of a failed request, also the payload of a mid-stream `error` event.
///
/// Serializes with `"type":"error"` first, as the API sends it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ApiErrorBody {
    /// The error's kind and message.
    pub error: ApiErrorDetail,
    /// The `request_id` the API assigned, when the body carries it (also in the `request-id`
    /// response header).
    #[serde(default, skip_serializing_if = "skip_none")]
    pub request_id: Option<String>,
}

impl Serialize for ApiErrorBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(rename = "type")]
            ty: &'static str,
            error: &'a ApiErrorDetail,
            #[serde(skip_serializing_if = "Option::is_none")]
            request_id: Option<&'a str>,
        }
        Wire {
            ty: "error",
            error: &self.error,
            request_id: self.request_id.as_deref(),
        }
        .serialize(serializer)
    }
}

impl ApiErrorBody {
    /// Whether the official SDKs would retry a request that failed with this error.
    pub fn is_retryable(&self) -> bool {
        self.error.kind.is_retryable()
    }
}

impl fmt::Display for ApiErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.error.kind, self.error.message)?;
        if let Some(request_id) = &self.request_id {
            write!(f, " (request {request_id})")?;
        }
        Ok(())
    }
}

/// The `error` object of an error body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorDetail {
    /// What went wrong, such as `overloaded_error`.
    #[serde(rename = "type")]
    pub kind: ErrorKind,
    /// Human-readable message (`"Overloaded"`, `"prompt is too long: 210000 tokens > 200000
    /// maximum"`).
    #[serde(default)]
    pub message: String,
    /// Fields this crate does not model (`details`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The API's error kinds, with the HTTP status each usually comes with.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 400 `invalid_request_error` (a "prompt is too long" message is the context overflow).
    InvalidRequest,
    /// 401 `authentication_error`.
    Authentication,
    /// 402 `billing_error`.
    Billing,
    /// 403 `permission_error`.
    Permission,
    /// 404 `not_found_error`.
    NotFound,
    /// 413 `request_too_large`.
    RequestTooLarge,
    /// 429 `rate_limit_error`.
    RateLimit,
    /// 500 `api_error`.
    Api,
    /// 504 `timeout_error`.
    Timeout,
    /// 529 `overloaded_error`.
    Overloaded,
    /// A kind this crate does not know yet.
    Other(String),
}

impl ErrorKind {
    /// The wire string, such as `"overloaded_error"`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::InvalidRequest => "invalid_request_error",
            Self::Authentication => "authentication_error",
            Self::Billing => "billing_error",
            Self::Permission => "permission_error",
            Self::NotFound => "not_found_error",
            Self::RequestTooLarge => "request_too_large",
            Self::RateLimit => "rate_limit_error",
            Self::Api => "api_error",
            Self::Timeout => "timeout_error",
            Self::Overloaded => "overloaded_error",
            Self::Other(other) => other,
        }
    }

    /// Parses a wire string; unknown strings become [`ErrorKind::Other`].
    pub fn parse(kind: &str) -> Self {
        match kind {
            "invalid_request_error" => Self::InvalidRequest,
            "authentication_error" => Self::Authentication,
            "billing_error" => Self::Billing,
            "permission_error" => Self::Permission,
            "not_found_error" => Self::NotFound,
            "request_too_large" => Self::RequestTooLarge,
            "rate_limit_error" => Self::RateLimit,
            "api_error" => Self::Api,
            "timeout_error" => Self::Timeout,
            "overloaded_error" => Self::Overloaded,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether a request that failed this way is worth retrying: rate limits, overload,
    /// timeouts and internal API errors (the SDKs retry 408, 409, 429 and every 5xx).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimit | Self::Api | Self::Timeout | Self::Overloaded
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let kind = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Self::parse(&kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_overloaded_payload() {
        let body: ApiErrorBody = serde_json::from_str(
            r#"{"type":"error","error":{"details":null,"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011Ce3HwQb6vtbs9LQVmh4oe"} "#,
        )
        .unwrap();
        assert_eq!(body.error.kind, ErrorKind::Overloaded);
        assert!(body.is_retryable());
        assert_eq!(
            body.to_string(),
            "overloaded_error: Overloaded (request req_011Ce3HwQb6vtbs9LQVmh4oe)"
        );
    }

    #[test]
    fn retryable_kinds() {
        let retryable: Vec<_> = [
            "invalid_request_error",
            "authentication_error",
            "rate_limit_error",
            "api_error",
            "overloaded_error",
            "timeout_error",
            "new_error",
        ]
        .into_iter()
        .filter(|kind| ErrorKind::parse(kind).is_retryable())
        .collect();
        assert_eq!(
            retryable,
            [
                "rate_limit_error",
                "api_error",
                "overloaded_error",
                "timeout_error"
            ]
        );
    }
}
