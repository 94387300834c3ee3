//! Claude on Amazon Bedrock: the Messages API body sent to Bedrock's `InvokeModel` and
//! `InvokeModelWithResponseStream`, signed with AWS Signature Version 4 (the
//! `aws-sigv4` crate), and the answer's AWS event stream framing (the
//! `aws-smithy-eventstream` crate) read back into the same stream events the Messages API
//! sends.
//!
//! As Claude Code does it (`CLAUDE_CODE_USE_BEDROCK=1`): the region from `AWS_REGION` (else
//! `AWS_DEFAULT_REGION`, else the profile's `region`), the endpoint
//! `https://bedrock-runtime.{region}.amazonaws.com` unless `ANTHROPIC_BEDROCK_BASE_URL`
//! says otherwise (a gateway), credentials from [`crate::aws::CredentialChain`], or a
//! Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`) sent as a bearer token, or none at all
//! (`CLAUDE_CODE_SKIP_BEDROCK_AUTH=1`, for a gateway that signs itself).
//!
//! The body: the request's own, without `model` and `stream` (the model goes in the path,
//! streaming is the path's choice), with `anthropic_version: "bedrock-2023-05-31"` and the
//! beta flags as `anthropic_beta` (Bedrock reads no `anthropic-beta` header). Model names:
//! a Bedrock model id, inference profile id or ARN is sent as it is; an Anthropic id
//! (`claude-sonnet-4-5-20250929`) becomes the cross-region inference profile for the
//! region's geography (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`), as Bedrock requires
//! for current models. Set `ANTHROPIC_MODEL` to a Bedrock id when that guess is wrong.

use std::time::SystemTime;

use bytes::{Buf as _, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Uri};

use crate::aws::{AwsCredentials, CredentialChain};
use crate::config::ConfigSource;
use crate::error::{ErrorKind, ProviderError};
use crate::transport::{HttpRequest, Transport};

/// The `anthropic_version` Bedrock's Anthropic models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The media type of an AWS event stream (`InvokeModelWithResponseStream`'s answer).
pub const EVENT_STREAM_TYPE: &str = "application/vnd.amazon.eventstream";

/// How requests to Bedrock are authenticated.
#[derive(Debug)]
pub enum BedrockAuth {
    /// Signed with AWS Signature Version 4, with credentials from the chain.
    Sign(CredentialChain),
    /// A Bedrock API key, sent as `authorization: Bearer` (`AWS_BEARER_TOKEN_BEDROCK`).
    Bearer(String),
    /// Nothing (`CLAUDE_CODE_SKIP_BEDROCK_AUTH=1`: a gateway adds it).
    Skip,
}

/// Where and how to reach Claude on Bedrock.
#[derive(Debug)]
pub struct Bedrock {
    /// The AWS region (`us-east-1`).
    pub region: String,
    /// The endpoint, without a trailing slash.
    pub base_url: String,
    /// The credentials.
    pub auth: BedrockAuth,
}

impl Bedrock {
    /// Bedrock as Claude Code's variables describe it (see the module docs); `home` is the
    /// user's home folder (for `~/.aws`).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] when no region is set anywhere, or the base URL is not
    /// `http(s)://`.
    pub fn from_source(
        source: &dyn ConfigSource,
        home: Option<std::path::PathBuf>,
    ) -> Result<Self, ProviderError> {
        let chain = CredentialChain::new(source, home);
        let region = source
            .get("AWS_REGION")
            .or_else(|| source.get("AWS_DEFAULT_REGION"))
            .or_else(|| chain.profile_region())
            .ok_or_else(|| {
                ProviderError::new(
                    ErrorKind::Config,
                    "CLAUDE_CODE_USE_BEDROCK is set but no AWS region is: set AWS_REGION \
                     (for example us-east-1)",
                )
            })?;
        let base_url = source
            .get("ANTHROPIC_BEDROCK_BASE_URL")
            .unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"));
        crate::config::check_base_url("ANTHROPIC_BEDROCK_BASE_URL", &base_url)?;
        let skip = crate::config::flag(source, "CLAUDE_CODE_SKIP_BEDROCK_AUTH");
        let auth = if skip {
            BedrockAuth::Skip
        } else if let Some(token) = source.get("AWS_BEARER_TOKEN_BEDROCK") {
            BedrockAuth::Bearer(token)
        } else {
            BedrockAuth::Sign(chain)
        };
        Ok(Self {
            region,
            base_url: base_url.trim_end_matches('/').to_owned(),
            auth,
        })
    }

    /// The Bedrock id for `model` (see the module docs).
    pub fn model_id(&self, model: &str) -> String {
        if model.contains("anthropic.") || model.starts_with("arn:") {
            return model.to_owned();
        }
        let geography = match self.region.split('-').next() {
            Some("us") => "us",
            Some("eu") => "eu",
            Some("ap") => "apac",
            _ => "global",
        };
        format!("{geography}.anthropic.{model}-v1:0")
    }

    /// The signed HTTP request for a Messages API `body` (JSON, as the loop writes it) and
    /// the beta flags `betas`: `InvokeModelWithResponseStream` when the body streams, else
    /// `InvokeModel`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for a body that is not a JSON object with a `model`;
    /// [`ErrorKind::Authentication`] when no credentials can be had (naming where it
    /// looked).
    pub async fn request(
        &self,
        body: &[u8],
        betas: &[String],
        transport: &dyn Transport,
    ) -> Result<HttpRequest, ProviderError> {
        let (model, streaming, body) = bedrock_body(body, betas)?;
        let action = if streaming {
            "invoke-with-response-stream"
        } else {
            "invoke"
        };
        let url = format!(
            "{}/model/{}/{action}",
            self.base_url,
            crate::transport::percent_encode(&self.model_id(&model))
        );
        let uri: Uri = url.parse().map_err(|error| {
            ProviderError::new(ErrorKind::Config, format!("Bedrock URL {url}: {error}"))
        })?;
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "accept",
            HeaderValue::from_static(if streaming {
                EVENT_STREAM_TYPE
            } else {
                "application/json"
            }),
        );
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("agent/", env!("CARGO_PKG_VERSION"))),
        );
        match &self.auth {
            BedrockAuth::Skip => {}
            BedrockAuth::Bearer(token) => {
                if let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}")) {
                    headers.insert("authorization", value);
                }
            }
            BedrockAuth::Sign(chain) => {
                let credentials = chain.credentials(transport).await?;
                sign(
                    &mut headers,
                    "POST",
                    &url,
                    &body,
                    &credentials,
                    &self.region,
                    SystemTime::now(),
                )?;
            }
        }
        Ok(HttpRequest {
            method: Method::POST,
            uri,
            headers,
            body,
        })
    }

    /// Where the credentials of the last request came from, for an error that refuses
    /// them.
    pub async fn credential_source(&self, transport: &dyn Transport) -> String {
        match &self.auth {
            BedrockAuth::Skip => "nowhere (CLAUDE_CODE_SKIP_BEDROCK_AUTH is set)".to_owned(),
            BedrockAuth::Bearer(_) => "AWS_BEARER_TOKEN_BEDROCK".to_owned(),
            BedrockAuth::Sign(chain) => chain
                .credentials(transport)
                .await
                .map_or_else(|error| error.message, |found| found.source),
        }
    }

    /// Forgets cached credentials (the server refused them).
    pub async fn invalidate(&self) {
        if let BedrockAuth::Sign(chain) = &self.auth {
            chain.invalidate().await;
        }
    }
}

/// Adds AWS Signature Version 4 headers (`x-amz-date`, `authorization`, and
/// `x-amz-security-token` for temporary credentials) for a `method` request to `url` with
/// `body` and the `headers` already set, for service `bedrock` in `region` at `time`.
///
/// # Errors
///
/// [`ErrorKind::Config`] when the request cannot be signed (a header that is not text).
pub fn sign(
    headers: &mut HeaderMap,
    method: &str,
    url: &str,
    body: &[u8],
    credentials: &AwsCredentials,
    region: &str,
    time: SystemTime,
) -> Result<(), ProviderError> {
    sign_for(
        headers,
        method,
        url,
        body,
        credentials,
        region,
        "bedrock",
        time,
    )
}

/// [`sign`] for any `service` (the AWS test suite's is `service`).
///
/// # Errors
///
/// As [`sign`].
#[allow(clippy::too_many_arguments)]
pub fn sign_for(
    headers: &mut HeaderMap,
    method: &str,
    url: &str,
    body: &[u8],
    credentials: &AwsCredentials,
    region: &str,
    service: &str,
    time: SystemTime,
) -> Result<(), ProviderError> {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings};
    let failed = |error: &dyn std::fmt::Display| {
        ProviderError::new(
            ErrorKind::Config,
            format!("signing the Bedrock request: {error}"),
        )
    };
    let identity: aws_smithy_runtime_api::client::identity::Identity =
        aws_credential_types::Credentials::new(
            &credentials.access_key_id,
            &credentials.secret_access_key,
            credentials.session_token.clone(),
            credentials.expires,
            "agent",
        )
        .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|error| failed(&error))?
        .into();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(name, _)| name.as_str() != "user-agent")
        .filter_map(|(name, value)| Some((name.as_str(), value.to_str().ok()?)))
        .collect();
    let signable = SignableRequest::new(method, url, pairs.into_iter(), SignableBody::Bytes(body))
        .map_err(|error| failed(&error))?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .map_err(|error| failed(&error))?
        .into_parts();
    for (name, value) in instructions.headers() {
        let value = HeaderValue::from_str(value).map_err(|error| failed(&error))?;
        headers.insert(
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|error| failed(&error))?,
            value,
        );
    }
    Ok(())
}

/// The Bedrock body of a Messages API `body` (see the module docs): the model, whether it
/// streams, and the bytes.
fn bedrock_body(body: &[u8], betas: &[String]) -> Result<(String, bool, Bytes), ProviderError> {
    let mut ready = crate::cloud::cloud_body(body, betas, BEDROCK_ANTHROPIC_VERSION, false)?;
    if !ready.betas.is_empty() {
        ready
            .json
            .insert("anthropic_beta".into(), ready.betas.into());
    }
    let json = serde_json::Value::Object(ready.json);
    Ok((ready.model, ready.streaming, Bytes::from(json.to_string())))
}

/// An `InvokeModelWithResponseStream` body read as the Messages API's stream: each
/// `chunk` event's payload (`{"bytes": BASE64}`) is one stream event's JSON, handed to the
/// same parser as a server-sent event; an `exception` message ends the stream with the
/// error it names.
pub(crate) struct EventStream {
    decoder: aws_smithy_eventstream::frame::MessageFrameDecoder,
    buffer: BytesMut,
    /// SSE text for the Messages parser.
    pub(crate) events: Vec<u8>,
    failure: Option<ProviderError>,
}

impl EventStream {
    pub(crate) fn new() -> Self {
        Self {
            decoder: aws_smithy_eventstream::frame::MessageFrameDecoder::new(),
            buffer: BytesMut::new(),
            events: Vec::new(),
            failure: None,
        }
    }

    /// Adds body bytes; the complete messages in them become SSE text in `events`.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        use aws_smithy_eventstream::frame::DecodedFrame;
        self.buffer.extend_from_slice(chunk);
        while self.failure.is_none() {
            let message = match self.decoder.decode_frame(&mut self.buffer) {
                Ok(DecodedFrame::Complete(message)) => message,
                Ok(DecodedFrame::Incomplete) => break,
                Err(error) => {
                    self.failure = Some(ProviderError::new(
                        ErrorKind::StreamBroken,
                        format!("Bedrock's event stream is damaged: {error}"),
                    ));
                    break;
                }
            };
            self.message(&message);
        }
    }

    /// The error an `exception` message or damaged framing ended the stream with.
    pub(crate) fn failure(&mut self) -> Option<ProviderError> {
        self.failure.take()
    }

    /// Whether bytes of an unfinished message are left.
    pub(crate) fn has_partial(&self) -> bool {
        self.buffer.has_remaining()
    }

    fn message(&mut self, message: &aws_smithy_types::event_stream::Message) {
        let header = |name: &str| {
            message.headers().iter().find_map(|header| {
                (header.name().as_str() == name)
                    .then(|| {
                        header
                            .value()
                            .as_string()
                            .ok()
                            .map(|value| value.as_str().to_owned())
                    })
                    .flatten()
            })
        };
        let payload = message.payload();
        match header(":message-type").as_deref() {
            Some("event") if header(":event-type").as_deref() == Some("chunk") => {
                let decoded = serde_json::from_slice::<serde_json::Value>(payload)
                    .ok()
                    .and_then(|value| value["bytes"].as_str().map(str::to_owned))
                    .and_then(|text| {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD.decode(text).ok()
                    });
                match decoded {
                    Some(event) => {
                        let kind = serde_json::from_slice::<serde_json::Value>(&event)
                            .ok()
                            .and_then(|value| value["type"].as_str().map(str::to_owned))
                            .unwrap_or_default();
                        self.events.extend_from_slice(b"event: ");
                        self.events.extend_from_slice(kind.as_bytes());
                        self.events.extend_from_slice(b"\ndata: ");
                        // One line: the JSON has no raw line breaks.
                        self.events.extend_from_slice(&event);
                        self.events.extend_from_slice(b"\n\n");
                    }
                    None => {
                        self.failure = Some(ProviderError::new(
                            ErrorKind::Parse,
                            "a Bedrock chunk holds no base64 `bytes`",
                        ));
                    }
                }
            }
            Some("event") => {}
            Some("exception" | "error") => {
                let kind = header(":exception-type")
                    .or_else(|| header(":error-code"))
                    .unwrap_or_default();
                let text = serde_json::from_slice::<serde_json::Value>(payload)
                    .ok()
                    .and_then(|value| value["message"].as_str().map(str::to_owned))
                    .or_else(|| header(":error-message"))
                    .unwrap_or_else(|| String::from_utf8_lossy(payload).into_owned());
                self.failure = Some(exception(&kind, &text));
            }
            _ => {}
        }
    }
}

/// The error for a Bedrock exception `kind` (`throttlingException`, ...) saying `text`.
pub(crate) fn exception(kind: &str, text: &str) -> ProviderError {
    let lower = kind.to_ascii_lowercase();
    let error_kind =
        if text.contains("prompt is too long") || text.contains("too many total text bytes") {
            ErrorKind::PromptTooLong
        } else if lower.starts_with("throttling") || lower.starts_with("toomanyrequests") {
            ErrorKind::RateLimited
        } else if lower.starts_with("serviceunavailable") {
            ErrorKind::Overloaded
        } else if lower.starts_with("modelstreamerror") {
            ErrorKind::StreamBroken
        } else if lower.starts_with("modeltimeout") {
            ErrorKind::StreamIdle
        } else if lower.starts_with("internalserver") {
            ErrorKind::Server
        } else if lower.starts_with("validation") {
            ErrorKind::InvalidRequest
        } else if lower.starts_with("accessdenied") {
            ErrorKind::Permission
        } else if lower.starts_with("expiredtoken")
            || lower.starts_with("unrecognizedclient")
            || lower.starts_with("invalidsignature")
        {
            ErrorKind::Authentication
        } else if lower.starts_with("resourcenotfound") {
            ErrorKind::NotFound
        } else {
            ErrorKind::Server
        };
    let name = kind.split(':').next().unwrap_or(kind);
    ProviderError::new(
        error_kind,
        format!(
            "Bedrock {name}: {}",
            text.chars().take(1_000).collect::<String>()
        ),
    )
}

/// The kind of an HTTP error Bedrock answered with (its `x-amzn-errortype` header and JSON
/// `message`), or `None` when `body` is not Bedrock's error shape.
pub(crate) fn http_error(headers: &HeaderMap, status: u16, body: &[u8]) -> Option<ProviderError> {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()?
        .get("message")?
        .as_str()?
        .to_owned();
    let kind = headers
        .get("x-amzn-errortype")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut error = if kind.is_empty() {
        let fallback = match status {
            403 if message.contains("expired") || message.contains("security token") => {
                "ExpiredTokenException"
            }
            403 => "AccessDeniedException",
            429 => "ThrottlingException",
            503 => "ServiceUnavailableException",
            _ => "",
        };
        exception(fallback, &message)
    } else {
        exception(&kind, &message)
    };
    error.status = Some(status);
    Some(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite_credentials(token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: token.map(str::to_owned),
            expires: None,
            source: "the test suite".into(),
        }
    }

    /// Vectors of AWS's Signature Version 4 test suite (`aws4_testsuite`: `get-vanilla`,
    /// `get-vanilla-query-order-key-case`, `post-vanilla`, `post-x-www-form-urlencoded`; credentials
    /// `AKIDEXAMPLE`, region `us-east-1`, service `service`, 2015-08-30 12:36:00 UTC), signed
    /// through [`sign_for`] as every Bedrock request is.
    #[test]
    fn signatures_match_the_aws_test_suite() {
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        // Method, URL, headers besides host and date, body, what the signature must end with.
        type Vector<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);
        let vectors: [Vector<'_>; 4] = [
            (
                "GET",
                "https://example.amazonaws.com/",
                &[],
                "",
                "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            (
                "GET",
                "https://example.amazonaws.com/?Param2=value2&Param1=value1",
                &[],
                "",
                "SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
            (
                "POST",
                "https://example.amazonaws.com/",
                &[],
                "",
                "SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            (
                "POST",
                "https://example.amazonaws.com/",
                &[("content-type", "application/x-www-form-urlencoded")],
                "Param1=value1",
                "SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
            ),
        ];
        for (method, url, extra, body, expected) in vectors {
            let mut headers = HeaderMap::new();
            for (name, value) in extra {
                headers.insert(*name, HeaderValue::from_static(value));
            }
            sign_for(
                &mut headers,
                method,
                url,
                body.as_bytes(),
                &suite_credentials(None),
                "us-east-1",
                "service",
                time,
            )
            .unwrap();
            assert_eq!(headers["x-amz-date"], "20150830T123600Z");
            assert_eq!(
                headers["authorization"],
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, {expected}"
                ),
                "{method} {url}"
            );
        }
    }

    #[test]
    fn the_body_moves_the_model_to_the_path_and_names_the_version_and_betas() {
        let (model, streaming, body) = bedrock_body(
            br#"{"model":"claude-sonnet-4-5[1m]","max_tokens":5,"stream":true,"messages":[]}"#,
            &["interleaved-thinking-2025-05-14".to_owned()],
        )
        .unwrap();
        assert_eq!(model, "claude-sonnet-4-5");
        assert!(streaming);
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["anthropic_version"], BEDROCK_ANTHROPIC_VERSION);
        assert_eq!(
            body["anthropic_beta"],
            serde_json::json!(["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"])
        );
        assert!(body.get("model").is_none() && body.get("stream").is_none());
        let bedrock = Bedrock {
            region: "eu-central-1".into(),
            base_url: String::new(),
            auth: BedrockAuth::Skip,
        };
        assert_eq!(
            bedrock.model_id("claude-sonnet-4-5-20250929"),
            "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
        );
        assert_eq!(
            bedrock.model_id("anthropic.claude-3-5-haiku-20241022-v1:0"),
            "anthropic.claude-3-5-haiku-20241022-v1:0"
        );
        assert_eq!(
            crate::transport::percent_encode("us.anthropic.x-v1:0"),
            "us.anthropic.x-v1%3A0"
        );
    }

    /// A chunk frame as Bedrock sent it, from a capture quoted in a public issue
    /// (awsdocs/aws-doc-sdk-examples#5541, printed as text, so its non-ASCII bytes were
    /// lost): its three headers in Bedrock's order and its payload are exact, and the
    /// prelude rebuilt from them has the capture's own prelude checksum (`v[O6`, printable
    /// there), so the length is Bedrock's too. Written here byte by byte, not by the
    /// encoder the decoder comes with, and pushed in every split.
    #[test]
    fn a_captured_bedrock_chunk_frame_is_read() {
        let payload: &[u8] = br#"{"bytes":"eyJjb21wbGV0aW9uIjoiIEhlcmUiLCJzdG9wX3JlYXNvbiI6bnVsbCwic3RvcCI6bnVsbH0="}"#;
        let mut headers = Vec::new();
        for (name, value) in [
            (":event-type", "chunk"),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ] {
            headers.push(name.len() as u8);
            headers.extend_from_slice(name.as_bytes());
            headers.push(7); // a string value
            headers.extend_from_slice(&(value.len() as u16).to_be_bytes());
            headers.extend_from_slice(value.as_bytes());
        }
        assert_eq!(headers.len(), 0x4b, "the capture's header length");
        let total = 12 + headers.len() + payload.len() + 4;
        let mut frame = Vec::new();
        frame.extend_from_slice(&(total as u32).to_be_bytes());
        frame.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        let prelude_crc = crc32fast::hash(&frame);
        assert_eq!(
            prelude_crc.to_be_bytes(),
            *b"v[O6",
            "the capture's prelude checksum"
        );
        frame.extend_from_slice(&prelude_crc.to_be_bytes());
        frame.extend_from_slice(&headers);
        frame.extend_from_slice(payload);
        frame.extend_from_slice(&crc32fast::hash(&frame).to_be_bytes());
        assert_eq!(frame.len(), total);
        let want =
            b"event: \ndata: {\"completion\":\" Here\",\"stop_reason\":null,\"stop\":null}\n\n";
        for cut in 0..=frame.len() {
            let mut stream = EventStream::new();
            stream.push(&frame[..cut]);
            stream.push(&frame[cut..]);
            assert!(stream.failure().is_none(), "cut at {cut}");
            assert!(!stream.has_partial(), "cut at {cut}");
            assert_eq!(
                String::from_utf8_lossy(&stream.events),
                String::from_utf8_lossy(want)
            );
        }
        // One bit changed in the payload: the message checksum refuses the frame.
        let mut damaged = frame.clone();
        damaged[12 + 0x4b + 3] ^= 1;
        let mut stream = EventStream::new();
        stream.push(&damaged);
        let failure = stream.failure().expect("a damaged frame is refused");
        assert!(failure.message.contains("damaged"), "{}", failure.message);
        assert!(stream.events.is_empty());
    }

    #[test]
    fn exceptions_are_classified() {
        assert_eq!(
            exception("throttlingException", "slow down").kind,
            ErrorKind::RateLimited
        );
        assert_eq!(
            exception(
                "validationException",
                "prompt is too long: 300000 tokens > 200000 maximum"
            )
            .kind,
            ErrorKind::PromptTooLong
        );
        assert_eq!(
            exception("modelStreamErrorException", "x").kind,
            ErrorKind::StreamBroken
        );
        let error = exception(
            "ExpiredTokenException:http://internal",
            "The security token included in the request is expired",
        );
        assert_eq!(error.kind, ErrorKind::Authentication);
        assert_eq!(
            error.message,
            "Bedrock ExpiredTokenException: The security token included in the request is expired"
        );
    }
}
