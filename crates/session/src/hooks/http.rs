//! Claude Code's `http` hooks: the event is POSTed as JSON to the hook's `url`, with its
//! `headers`; a 2xx answer's body is read as a command hook's stdout would be (a JSON answer,
//! or plain text), anything else is a failure told to the user that changes nothing. The
//! request goes through the same HTTPS stack as the model's (its roots, `HTTPS_PROXY` and
//! `NO_PROXY`). At most [`BODY_CAP`] of the answer is read.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::Value;

use super::HookEnv;
use super::process::Exit;
use crate::settings::HookCommand;

/// The most of an answer read: 1 MiB, as a command hook's stdout.
pub const BODY_CAP: usize = super::process::OUTPUT_CAP;

/// POSTs `input` to `hook`'s URL. `Ok` for a 2xx answer (its body as `stdout`, exit code 0);
/// `Err` says what went wrong, for a line after the hook's URL.
pub async fn run(
    env: &HookEnv,
    hook: &HookCommand,
    timeout: Duration,
    input: &Value,
) -> Result<Exit, String> {
    let transport = env
        .http
        .as_ref()
        .ok_or_else(|| "cannot be sent: no HTTP client here".to_owned())?;
    let url = hook.url.as_deref().unwrap_or_default();
    if !env.http_policy.allows_url(url) {
        return Err("was not sent: its URL matches no pattern of allowedHttpHookUrls".to_owned());
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|error| format!("cannot be sent: {url:?} is not a URL ({error})"))?;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let allowed: Vec<String> = hook
        .allowed_env_vars
        .iter()
        .flatten()
        .filter(|name| env.http_policy.allows_variable(name))
        .cloned()
        .collect();
    for (name, value) in hook.headers.iter().flatten() {
        let value = interpolate(value, &allowed, &|key| variable(env, key));
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("cannot be sent: {name:?} is not a header name"))?;
        let value = http::HeaderValue::from_str(&value)
            .map_err(|_| format!("cannot be sent: the value of header {name} is not valid"))?;
        headers.insert(name, value);
    }
    let request = provider::HttpRequest {
        method: http::Method::POST,
        uri,
        headers,
        body: Bytes::from(input.to_string()),
    };
    let exchange = async {
        let response = transport
            .send(request)
            .await
            .map_err(|error| format!("failed: {error}"))?;
        let mut body = Vec::new();
        let mut stream = response.body;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|error| format!("failed: {error}"))?;
            let room = BODY_CAP.saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if room == 0 {
                break;
            }
        }
        let text = String::from_utf8_lossy(&body).trim().to_owned();
        if response.status.is_success() {
            Ok(Exit {
                code: Some(0),
                stdout: text,
                stderr: String::new(),
            })
        } else {
            Err(format!(
                "failed: the server answered {} {}",
                response.status,
                text.chars().take(200).collect::<String>()
            ))
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {} s", timeout.as_secs_f64())))
}

/// The variable `key` as a command hook would see it: settings' `env` (without the
/// providers' key variables), else the variables commands get of the agent's environment
/// (`sandbox::env::PASSED_VARIABLES`): never the agent's keys and tokens, whatever
/// `allowedEnvVars` names.
fn variable(env: &HookEnv, key: &str) -> Option<String> {
    if tools::sandbox::env::AGENT_CREDENTIALS.contains(&key) {
        return None;
    }
    env.env
        .iter()
        .rev()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value.clone())
        .or_else(|| {
            tools::sandbox::env::passed_from(
                std::env::vars_os(),
                tools::sandbox::env::Confinement::Unsandboxed,
            )
            .into_iter()
            .find(|(name, _)| name.to_str() == Some(key))
            .and_then(|(_, value)| value.into_string().ok())
        })
}

/// `value` with each `$NAME` and `${NAME}` replaced by the variable when `allowed` names it,
/// by nothing otherwise (a header never carries a variable the hook was not given).
fn interpolate(value: &str, allowed: &[String], lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        // Claude Code's names: capitals, digits and `_`, not starting with a digit.
        let is_name = name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !is_name {
            out.push('$');
            rest = after;
            continue;
        }
        if allowed.iter().any(|allowed| allowed == name) {
            out.push_str(&lookup(name).unwrap_or_default());
        }
        rest = &after[consumed..];
    }
    out.push_str(rest);
    // As Claude Code: no line break or NUL from a variable may split the header.
    out.retain(|c| !matches!(c, '\r' | '\n' | '\0'));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_get_only_the_variables_they_are_allowed() {
        let lookup = |key: &str| Some(format!("<{key}>"));
        let allowed = vec!["TOKEN".to_owned()];
        assert_eq!(
            interpolate("Bearer $TOKEN and ${TOKEN}!", &allowed, &lookup),
            "Bearer <TOKEN> and <TOKEN>!"
        );
        assert_eq!(
            interpolate("x $SECRET y ${SECRET}", &allowed, &lookup),
            "x  y "
        );
        assert_eq!(
            interpolate("costs $5 or $", &allowed, &lookup),
            "costs $5 or $"
        );
        assert_eq!(interpolate("${unclosed", &allowed, &lookup), "${unclosed");
        // Lower-case names are not variables, as in Claude Code; a value's line breaks go.
        assert_eq!(interpolate("$token", &allowed, &lookup), "$token");
        let multiline = |_: &str| Some("a\r\nb".to_owned());
        assert_eq!(interpolate("$TOKEN", &allowed, &multiline), "ab");
    }
}
