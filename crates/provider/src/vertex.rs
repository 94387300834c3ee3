//! Claude on Google Vertex AI: the Messages API body sent to Vertex's
//! `:streamRawPredict` (`:rawPredict` when not streaming) with a Google access token
//! ([`crate::google`]); the answer is the Messages API's own server-sent events.
//!
//! As Claude Code does it (`CLAUDE_CODE_USE_VERTEX=1`): the project from
//! `ANTHROPIC_VERTEX_PROJECT_ID`, the region from `CLOUD_ML_REGION` (Claude Code's default
//! `us-east5`; `global` for the global endpoint), the endpoint
//! `https://{region}-aiplatform.googleapis.com/v1` (`https://aiplatform.googleapis.com/v1`
//! for `global`) unless `ANTHROPIC_VERTEX_BASE_URL` says otherwise, and no token at all
//! with `CLAUDE_CODE_SKIP_VERTEX_AUTH=1` (a gateway that adds it).
//!
//! The body: the request's own without `model` (it goes in the path), with
//! `anthropic_version: "vertex-2023-10-16"`; beta flags stay in the `anthropic-beta`
//! header. Model names: Vertex's own (`claude-sonnet-4-5@20250929`) are sent as they are;
//! an Anthropic id with a date (`claude-sonnet-4-5-20250929`) gets Vertex's `@` before it.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri};

use crate::config::ConfigSource;
use crate::error::{ErrorKind, ProviderError};
use crate::google::GoogleCredentials;
use crate::transport::{HttpRequest, Transport};

/// The `anthropic_version` Vertex AI's Anthropic models take in the body.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Claude Code's region when `CLOUD_ML_REGION` is not set.
pub const DEFAULT_REGION: &str = "us-east5";

/// Where and how to reach Claude on Vertex AI.
#[derive(Debug)]
pub struct Vertex {
    /// The Google Cloud project.
    pub project: String,
    /// The region (`us-east5`, `europe-west1`, `global`).
    pub region: String,
    /// The endpoint up to the API version (`https://us-east5-aiplatform.googleapis.com/v1`).
    pub base_url: String,
    /// The credentials; `None` with `CLAUDE_CODE_SKIP_VERTEX_AUTH`.
    pub credentials: Option<GoogleCredentials>,
}

impl Vertex {
    /// Vertex AI as Claude Code's variables describe it (see the module docs); `home` is
    /// the user's home folder (for gcloud's login).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when no project is set, or the base URL is not `http(s)://`.
    pub fn from_source(
        source: &dyn ConfigSource,
        home: Option<std::path::PathBuf>,
    ) -> Result<Self, ProviderError> {
        let project = source.get("ANTHROPIC_VERTEX_PROJECT_ID").ok_or_else(|| {
            ProviderError::new(
                ErrorKind::Config,
                "CLAUDE_CODE_USE_VERTEX is set but ANTHROPIC_VERTEX_PROJECT_ID is not: set it to \
                 the Google Cloud project that has Claude enabled",
            )
        })?;
        let region = source
            .get("CLOUD_ML_REGION")
            .unwrap_or_else(|| DEFAULT_REGION.to_owned());
        let base_url = source.get("ANTHROPIC_VERTEX_BASE_URL").unwrap_or_else(|| {
            if region == "global" {
                "https://aiplatform.googleapis.com/v1".to_owned()
            } else {
                format!("https://{region}-aiplatform.googleapis.com/v1")
            }
        });
        crate::config::check_base_url("ANTHROPIC_VERTEX_BASE_URL", &base_url)?;
        let skip = crate::config::flag(source, "CLAUDE_CODE_SKIP_VERTEX_AUTH");
        Ok(Self {
            project,
            region,
            base_url: base_url.trim_end_matches('/').to_owned(),
            credentials: (!skip).then(|| GoogleCredentials::new(source, home)),
        })
    }

    /// Vertex's name for `model` (see the module docs).
    pub fn model_id(model: &str) -> String {
        if model.contains('@') {
            return model.to_owned();
        }
        match model.rsplit_once('-') {
            Some((name, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
                format!("{name}@{date}")
            }
            _ => model.to_owned(),
        }
    }

    /// The HTTP request for a Messages API `body` and the beta flags `betas`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for a body that is not a JSON object with a `model`;
    /// [`ErrorKind::Authentication`] when no token can be had (naming where it looked).
    pub async fn request(
        &self,
        body: &[u8],
        betas: &[String],
        transport: &dyn Transport,
    ) -> Result<HttpRequest, ProviderError> {
        let mut json: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
            ProviderError::new(
                ErrorKind::Config,
                format!("the request is not a Messages API request: {error}"),
            )
        })?;
        let object = json.as_object_mut().ok_or_else(|| {
            ProviderError::new(ErrorKind::Config, "the request is not a JSON object")
        })?;
        let Some(serde_json::Value::String(mut model)) = object.remove("model") else {
            return Err(ProviderError::new(
                ErrorKind::Config,
                "the request names no model",
            ));
        };
        let streaming = object
            .get("stream")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        object.insert("anthropic_version".into(), VERTEX_ANTHROPIC_VERSION.into());
        let mut betas = betas.to_vec();
        if let Some(stripped) = model.strip_suffix("[1m]") {
            model = stripped.to_owned();
            betas.push(crate::client::LONG_CONTEXT_BETA.to_owned());
        }
        let action = if streaming {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        let url = format!(
            "{}/projects/{}/locations/{}/publishers/anthropic/models/{}:{action}",
            self.base_url,
            self.project,
            self.region,
            Self::model_id(&model)
        );
        let uri: Uri = url.parse().map_err(|error| {
            ProviderError::new(ErrorKind::Config, format!("Vertex AI URL {url}: {error}"))
        })?;
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("agent/", env!("CARGO_PKG_VERSION"))),
        );
        if !betas.is_empty()
            && let Ok(value) = HeaderValue::from_str(&betas.join(","))
        {
            headers.insert("anthropic-beta", value);
        }
        if let Some(credentials) = &self.credentials {
            let token = credentials.token(transport).await?;
            if let Ok(value) = HeaderValue::from_str(&format!("Bearer {}", token.token)) {
                headers.insert("authorization", value);
            }
        }
        Ok(HttpRequest {
            method: Method::POST,
            uri,
            headers,
            body: Bytes::from(json.to_string()),
        })
    }

    /// Where the token of the last request came from, for an error that refuses it.
    pub async fn credential_source(&self, transport: &dyn Transport) -> String {
        match &self.credentials {
            None => "nowhere (CLAUDE_CODE_SKIP_VERTEX_AUTH is set)".to_owned(),
            Some(credentials) => credentials
                .token(transport)
                .await
                .map_or_else(|error| error.message, |token| token.source),
        }
    }

    /// Forgets the cached token (the server refused it).
    pub async fn invalidate(&self) {
        if let Some(credentials) = &self.credentials {
            credentials.invalidate().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_take_vertex_form() {
        assert_eq!(
            Vertex::model_id("claude-sonnet-4-5-20250929"),
            "claude-sonnet-4-5@20250929"
        );
        assert_eq!(
            Vertex::model_id("claude-opus-4-1@20250805"),
            "claude-opus-4-1@20250805"
        );
        assert_eq!(Vertex::model_id("claude-opus-4-8"), "claude-opus-4-8");
    }
}
