//! Amazon Bedrock's side of a conversation, for tests: a request's AWS Signature Version 4
//! checked against the secret of its access key (recomputed from what arrived: method,
//! path, the signed headers, the body and the `x-amz-date` time), and a scripted turn
//! answered in the AWS event stream framing `InvokeModelWithResponseStream` uses (each
//! Messages API event the payload `{"bytes": BASE64}` of a `chunk` event message).

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::Value;

/// The credentials a Bedrock stand-in accepts, by access key id: the secret, and the
/// session tokens it takes as expired.
#[derive(Clone, Debug, Default)]
pub struct AwsKeys {
    /// Secret access key by access key id.
    pub secrets: HashMap<String, String>,
    /// Session tokens answered with `ExpiredTokenException`.
    pub expired_tokens: Vec<String>,
    /// The region signatures must be for.
    pub region: String,
}

/// Why a request is refused: (`x-amzn-errortype`, status, message), or `None` when its
/// signature is the one its credentials make.
pub(crate) fn check(
    keys: &AwsKeys,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Option<(&'static str, u16, String)> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    let refused = |message: &str| Some(("InvalidSignatureException", 403, message.to_owned()));
    let Some(authorization) = header("authorization") else {
        return Some((
            "MissingAuthenticationTokenException",
            403,
            "Missing Authentication Token".into(),
        ));
    };
    let token = header("x-amz-security-token");
    if token.is_some_and(|token| keys.expired_tokens.iter().any(|expired| expired == token)) {
        return Some((
            "ExpiredTokenException",
            403,
            "The security token included in the request is expired".into(),
        ));
    }
    let credential = authorization
        .split("Credential=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())?;
    let mut scope = credential.split('/');
    let access_key = scope.next()?;
    let Some(secret) = keys.secrets.get(access_key) else {
        return Some((
            "UnrecognizedClientException",
            403,
            "The security token included in the request is invalid.".into(),
        ));
    };
    let signed: Vec<&str> = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .map(|list| list.split(';').collect())
        .unwrap_or_default();
    let Some(date) = header("x-amz-date") else {
        return refused("no x-amz-date");
    };
    let Ok(time) = aws_smithy_types::DateTime::from_str(
        &format!(
            "{}-{}-{}T{}:{}:{}Z",
            date.get(0..4)?,
            date.get(4..6)?,
            date.get(6..8)?,
            date.get(9..11)?,
            date.get(11..13)?,
            date.get(13..15)?
        ),
        aws_smithy_types::date_time::Format::DateTime,
    ) else {
        return refused("x-amz-date is not a time");
    };
    let time = std::time::SystemTime::try_from(time).ok()?;
    let identity: aws_smithy_runtime_api::client::identity::Identity =
        aws_credential_types::Credentials::new(
            access_key,
            secret,
            token.map(str::to_owned),
            None,
            "testkit",
        )
        .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(&keys.region)
        .name("bedrock")
        .time(time)
        .settings(aws_sigv4::http_request::SigningSettings::default())
        .build()
        .ok()?
        .into();
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_lowercase();
            signed.contains(&name.as_str())
                && name != "x-amz-date"
                && name != "x-amz-security-token"
        })
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let signable = aws_sigv4::http_request::SignableRequest::new(
        method,
        url,
        pairs.into_iter(),
        aws_sigv4::http_request::SignableBody::Bytes(body),
    )
    .ok()?;
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params)
        .ok()?
        .into_parts();
    let expected = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned());
    if expected.as_deref() == Some(authorization) {
        None
    } else {
        refused("The request signature we calculated does not match the signature you provided.")
    }
}

/// A Messages API SSE body (`event: ...\ndata: {json}\n\n` frames) as Bedrock's event
/// stream: one `chunk` event message per event.
pub(crate) fn frames(sse: &[u8]) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let mut out = Vec::new();
    for frame in String::from_utf8_lossy(sse).split("\n\n") {
        let Some(data) = frame.lines().find_map(|line| {
            line.strip_prefix("data: ")
                .or_else(|| line.strip_prefix("data:"))
        }) else {
            continue;
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(data.trim());
        let payload =
            serde_json::json!({"bytes": encoded, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"});
        let message = Message::new(bytes::Bytes::from(payload.to_string()))
            .add_header(Header::new(
                ":event-type",
                HeaderValue::String("chunk".into()),
            ))
            .add_header(Header::new(
                ":content-type",
                HeaderValue::String("application/json".into()),
            ))
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("event".into()),
            ));
        let _ = aws_smithy_eventstream::frame::write_message_to(&message, &mut out);
    }
    out
}

/// Bedrock's JSON answer to a refused request.
pub(crate) fn refusal_body(message: &str) -> Value {
    serde_json::json!({ "message": message })
}
