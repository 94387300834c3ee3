//! Claude on Google Vertex AI: the Messages API body sent to Vertex's
//! `:streamRawPredict` (`:rawPredict` when not streaming) with a Google access token
//! ([`crate::google`]); the answer is the Messages API's own server-sent events.
//!
//! As Claude Code does it (`CLAUDE_CODE_USE_VERTEX=1`): the project from
//! `ANTHROPIC_VERTEX_PROJECT_ID`, the region from `CLOUD_ML_REGION` (Claude Code's default
//! `us-east5`; `global` for the global endpoint) unless the model's own variable
//! ([`MODEL_REGIONS`], such as `VERTEX_REGION_CLAUDE_HAIKU_4_5`) names another, the endpoint
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

/// Claude Code's per-model region variables (Claude Code 2.1.197's list): the first entry
/// whose model-name prefix the request's model starts with names the variable that, when
/// set, gives that model's region in place of `CLOUD_ML_REGION` (longer prefixes first, so
/// `claude-opus-4-1` is not taken for `claude-opus-4`).
pub const MODEL_REGIONS: &[(&str, &str)] = &[
    ("claude-fable-5", "VERTEX_REGION_CLAUDE_FABLE_5"),
    ("claude-haiku-4-5", "VERTEX_REGION_CLAUDE_HAIKU_4_5"),
    ("claude-3-5-haiku", "VERTEX_REGION_CLAUDE_3_5_HAIKU"),
    ("claude-3-5-sonnet", "VERTEX_REGION_CLAUDE_3_5_SONNET"),
    ("claude-3-7-sonnet", "VERTEX_REGION_CLAUDE_3_7_SONNET"),
    ("claude-opus-4-8", "VERTEX_REGION_CLAUDE_4_8_OPUS"),
    ("claude-opus-4-7", "VERTEX_REGION_CLAUDE_4_7_OPUS"),
    ("claude-opus-4-6", "VERTEX_REGION_CLAUDE_4_6_OPUS"),
    ("claude-opus-4-5", "VERTEX_REGION_CLAUDE_4_5_OPUS"),
    ("claude-opus-4-1", "VERTEX_REGION_CLAUDE_4_1_OPUS"),
    ("claude-opus-4", "VERTEX_REGION_CLAUDE_4_0_OPUS"),
    ("claude-sonnet-5", "VERTEX_REGION_CLAUDE_5_SONNET"),
    ("claude-sonnet-4-6", "VERTEX_REGION_CLAUDE_4_6_SONNET"),
    ("claude-sonnet-4-5", "VERTEX_REGION_CLAUDE_4_5_SONNET"),
    ("claude-sonnet-4", "VERTEX_REGION_CLAUDE_4_0_SONNET"),
];

/// Where and how to reach Claude on Vertex AI.
#[derive(Debug)]
pub struct Vertex {
    /// The Google Cloud project.
    pub project: String,
    /// The region (`us-east5`, `europe-west1`, `global`).
    pub region: String,
    /// The regions set for models ([`MODEL_REGIONS`]): the model-name prefix and the region.
    pub model_regions: Vec<(&'static str, String)>,
    /// The endpoint up to the API version (`https://us-east5-aiplatform.googleapis.com/v1`).
    pub base_url: String,
    /// `base_url` was given (`ANTHROPIC_VERTEX_BASE_URL`): every region's requests go there.
    pub base_url_given: bool,
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
        let given = source.get("ANTHROPIC_VERTEX_BASE_URL");
        let base_url_given = given.is_some();
        let base_url = given.unwrap_or_else(|| endpoint(&region));
        crate::config::check_base_url("ANTHROPIC_VERTEX_BASE_URL", &base_url)?;
        let skip = crate::config::flag(source, "CLAUDE_CODE_SKIP_VERTEX_AUTH");
        let model_regions = MODEL_REGIONS
            .iter()
            .filter_map(|(prefix, key)| Some((*prefix, source.get(key)?)))
            .collect();
        Ok(Self {
            project,
            region,
            model_regions,
            base_url_given,
            base_url: base_url.trim_end_matches('/').to_owned(),
            credentials: (!skip).then(|| GoogleCredentials::new(source, home)),
        })
    }

    /// The region `model` is served from: its own variable's ([`MODEL_REGIONS`]), else
    /// [`Vertex::region`].
    pub fn region_for(&self, model: &str) -> &str {
        let Some((prefix, _)) = MODEL_REGIONS
            .iter()
            .find(|(prefix, _)| model.starts_with(prefix))
        else {
            return &self.region;
        };
        self.model_regions
            .iter()
            .find(|(set, _)| set == prefix)
            .map_or(&self.region, |(_, region)| region)
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
        let crate::cloud::CloudBody {
            json,
            model,
            streaming,
            betas,
        } = crate::cloud::cloud_body(body, betas, VERTEX_ANTHROPIC_VERSION, true)?;
        let json = serde_json::Value::Object(json);
        let action = if streaming {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        let region = self.region_for(&model);
        let base_url = if self.base_url_given || region == self.region {
            self.base_url.clone()
        } else {
            endpoint(region)
        };
        let url = format!(
            "{base_url}/projects/{}/locations/{region}/publishers/anthropic/models/{}:{action}",
            self.project,
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

/// Vertex AI's endpoint for `region`, up to the API version.
fn endpoint(region: &str) -> String {
    if region == "global" {
        "https://aiplatform.googleapis.com/v1".to_owned()
    } else {
        format!("https://{region}-aiplatform.googleapis.com/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model's own region variable moves only that model (and its endpoint); the longest
    /// prefix decides (`claude-opus-4-1` is not `claude-opus-4`); a given base URL stays.
    #[tokio::test]
    async fn a_models_region_variable_moves_that_model_only() {
        let source = crate::config::MapSource::new([
            ("ANTHROPIC_VERTEX_PROJECT_ID", "p"),
            ("CLOUD_ML_REGION", "global"),
            ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
            ("VERTEX_REGION_CLAUDE_HAIKU_4_5", "europe-west1"),
            ("VERTEX_REGION_CLAUDE_4_0_OPUS", "us-east5"),
        ]);
        let vertex = Vertex::from_source(&source, None).unwrap();
        let transport = crate::transport::HyperTransport::new(&[]).unwrap();
        let url = |model: &str| {
            let body = serde_json::json!({"model": model, "stream": true}).to_string();
            let vertex = &vertex;
            let transport = &transport;
            async move {
                let request = vertex
                    .request(body.as_bytes(), &[], transport)
                    .await
                    .unwrap();
                request.uri.to_string()
            }
        };
        assert_eq!(
            url("claude-haiku-4-5-20251001").await,
            "https://europe-west1-aiplatform.googleapis.com/v1/projects/p/locations/europe-west1/publishers/anthropic/models/claude-haiku-4-5@20251001:streamRawPredict"
        );
        assert_eq!(
            url("claude-opus-4@20250514").await,
            "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-opus-4@20250514:streamRawPredict"
        );
        // claude-opus-4-1 has its own variable (not set): the default region.
        assert_eq!(
            url("claude-opus-4-1").await,
            "https://aiplatform.googleapis.com/v1/projects/p/locations/global/publishers/anthropic/models/claude-opus-4-1:streamRawPredict"
        );
        let gateway = crate::config::MapSource::new([
            ("ANTHROPIC_VERTEX_PROJECT_ID", "p"),
            ("ANTHROPIC_VERTEX_BASE_URL", "https://gateway.example/v1"),
            ("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
            ("VERTEX_REGION_CLAUDE_HAIKU_4_5", "europe-west1"),
        ]);
        let vertex = Vertex::from_source(&gateway, None).unwrap();
        let request = vertex
            .request(br#"{"model":"claude-haiku-4-5"}"#, &[], &transport)
            .await
            .unwrap();
        assert_eq!(
            request.uri.to_string(),
            "https://gateway.example/v1/projects/p/locations/europe-west1/publishers/anthropic/models/claude-haiku-4-5:rawPredict"
        );
    }

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
