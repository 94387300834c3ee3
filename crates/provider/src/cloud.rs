//! What Claude's cloud platforms (Amazon Bedrock, Google Vertex AI) do alike to a Messages
//! API body: the model moves from the body to the URL, the platform's `anthropic_version`
//! goes in, and a `[1m]` model suffix becomes the 1M-context beta.

use serde_json::{Map, Value};

use crate::error::{ErrorKind, ProviderError};

/// A Messages API body made ready for a cloud platform.
pub(crate) struct CloudBody {
    /// The body, without `model` (and without `stream` unless kept), with `anthropic_version`.
    pub(crate) json: Map<String, Value>,
    /// The model named, its `[1m]` suffix taken off.
    pub(crate) model: String,
    /// Whether the body asked to stream.
    pub(crate) streaming: bool,
    /// `betas`, with [`crate::client::LONG_CONTEXT_BETA`] once when the model had `[1m]`.
    pub(crate) betas: Vec<String>,
}

/// `body` for a platform whose `anthropic_version` is `version`; `keep_stream`: whether
/// `stream` stays in the body (Vertex AI) or is taken out (Bedrock, where the action says it).
///
/// # Errors
///
/// [`ErrorKind::Config`] for a body that is not a JSON object naming a model.
pub(crate) fn cloud_body(
    body: &[u8],
    betas: &[String],
    version: &str,
    keep_stream: bool,
) -> Result<CloudBody, ProviderError> {
    let json: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::new(
            ErrorKind::Config,
            format!("the request is not a Messages API request: {error}"),
        )
    })?;
    let Value::Object(mut json) = json else {
        return Err(ProviderError::new(
            ErrorKind::Config,
            "the request is not a JSON object",
        ));
    };
    let Some(Value::String(mut model)) = json.remove("model") else {
        return Err(ProviderError::new(
            ErrorKind::Config,
            "the request names no model",
        ));
    };
    let stream = if keep_stream {
        json.get("stream").cloned()
    } else {
        json.remove("stream")
    };
    let streaming = stream.as_ref().and_then(Value::as_bool).unwrap_or(false);
    let mut betas = betas.to_vec();
    if let Some(stripped) = model.strip_suffix("[1m]") {
        model = stripped.to_owned();
        if !betas
            .iter()
            .any(|beta| beta == crate::client::LONG_CONTEXT_BETA)
        {
            betas.push(crate::client::LONG_CONTEXT_BETA.to_owned());
        }
    }
    json.insert("anthropic_version".into(), version.into());
    Ok(CloudBody {
        json,
        model,
        streaming,
        betas,
    })
}
