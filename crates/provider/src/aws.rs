//! AWS credentials for Amazon Bedrock, found where the AWS SDKs and CLI find them, in
//! their order:
//!
//! 1. the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
//! 2. the profile `AWS_PROFILE` names (else `default`) in the shared credentials file
//!    (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) and the config file
//!    (`AWS_CONFIG_FILE`, else `~/.aws/config`): its static keys, or its
//!    `credential_process` (a command printing the credentials as JSON);
//! 3. the container endpoint (ECS, EKS Pod Identity): `AWS_CONTAINER_CREDENTIALS_FULL_URI`
//!    or `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, with `AWS_CONTAINER_AUTHORIZATION_TOKEN`
//!    or `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`;
//! 4. the instance metadata service (IMDSv2), at `AWS_EC2_METADATA_SERVICE_ENDPOINT`, else
//!    `http://169.254.169.254`, unless `AWS_EC2_METADATA_DISABLED=true`.
//!
//! A profile that needs what this module does not do (single sign-on, assuming a role, web
//! identity) is named in the error with the way round it (`aws configure
//! export-credentials`). Credentials that expire are used until five minutes before they
//! do, then fetched again. Every credential says where it came from
//! ([`AwsCredentials::source`]), so an error can name it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};

use crate::config::ConfigSource;
use crate::error::{ErrorKind, ProviderError};
use crate::transport::{Transport, fetch_small};

/// Credentials expiring sooner than this are fetched again before a request.
const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// The container endpoint's host for a relative URI (ECS).
const CONTAINER_HOST: &str = "http://169.254.170.2";

/// The instance metadata service's default endpoint.
const IMDS_ENDPOINT: &str = "http://169.254.169.254";

/// How long a metadata or container endpoint may take to answer.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(2);

/// One set of AWS credentials and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`'s kind of value.
    pub access_key_id: String,
    /// The secret key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
    /// When they stop working, if they do.
    pub expires: Option<SystemTime>,
    /// Where they came from, for messages: `the environment (AWS_ACCESS_KEY_ID)`,
    /// `profile "dev" in /home/me/.aws/credentials`, ...
    pub source: String,
}

impl std::fmt::Debug for AwsCredentials {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("expires", &self.expires)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl AwsCredentials {
    /// Whether they expire within [`REFRESH_BEFORE`] of `now`.
    fn stale(&self, now: SystemTime) -> bool {
        self.expires
            .is_some_and(|expires| expires <= now + REFRESH_BEFORE)
    }
}

/// The credential chain of the module docs, with the environment read once (at
/// construction) and the credentials found kept until they near their expiry.
pub struct CredentialChain {
    variables: HashMap<String, String>,
    home: Option<PathBuf>,
    cached: tokio::sync::Mutex<Option<AwsCredentials>>,
}

impl std::fmt::Debug for CredentialChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialChain").finish_non_exhaustive()
    }
}

/// The variables the chain reads.
const VARIABLES: [&str; 14] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
];

impl CredentialChain {
    /// A chain reading its variables from `source` now and its files under `home` (the
    /// user's home folder, for `~/.aws`).
    pub fn new(source: &dyn ConfigSource, home: Option<PathBuf>) -> Self {
        Self {
            variables: VARIABLES
                .iter()
                .filter_map(|name| source.get(name).map(|value| ((*name).to_owned(), value)))
                .collect(),
            home,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.variables.get(name).map(String::as_str)
    }

    /// The credentials to sign with now: the ones found before while they last, else the
    /// first source of the chain that has some.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Authentication`] naming the sources tried and what was wrong with the
    /// one that failed (a profile that needs single sign-on, a process that failed,
    /// credentials already expired, an endpoint that did not answer).
    pub async fn credentials(
        &self,
        transport: &dyn Transport,
    ) -> Result<AwsCredentials, ProviderError> {
        let mut cached = self.cached.lock().await;
        let now = SystemTime::now();
        if let Some(credentials) = cached.as_ref().filter(|found| !found.stale(now)) {
            return Ok(credentials.clone());
        }
        let found = self.find(transport).await?;
        if found.expires.is_some_and(|expires| expires <= now) {
            return Err(auth_error(format!(
                "the AWS credentials from {} expired at {}; renew them (for a profile with \
                 single sign-on, `aws sso login`)",
                found.source,
                httpdate::fmt_http_date(found.expires.unwrap_or(now))
            )));
        }
        *cached = Some(found.clone());
        Ok(found)
    }

    /// Forgets the credentials found (the server refused them): the next request looks
    /// again.
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }

    /// The region of the profile in use (`region` in the config file), for when no
    /// `AWS_REGION` is set.
    pub fn profile_region(&self) -> Option<String> {
        let profile = self.profile_name();
        let (path, text) = self.file("AWS_CONFIG_FILE", "config")?;
        let _ = path;
        let section = if profile == "default" {
            "default".to_owned()
        } else {
            format!("profile {profile}")
        };
        ini_section(&text, &section)?.get("region").cloned()
    }

    fn profile_name(&self) -> String {
        self.var("AWS_PROFILE").unwrap_or("default").to_owned()
    }

    /// The text of the shared file `variable` names, else `~/.aws/NAME`.
    fn file(&self, variable: &str, name: &str) -> Option<(PathBuf, String)> {
        let path = match self.var(variable) {
            Some(path) => PathBuf::from(path),
            None => self.home.as_ref()?.join(".aws").join(name),
        };
        let text = std::fs::read_to_string(&path).ok()?;
        Some((path, text))
    }

    async fn find(&self, transport: &dyn Transport) -> Result<AwsCredentials, ProviderError> {
        if let (Some(id), Some(secret)) = (
            self.var("AWS_ACCESS_KEY_ID"),
            self.var("AWS_SECRET_ACCESS_KEY"),
        ) {
            return Ok(AwsCredentials {
                access_key_id: id.to_owned(),
                secret_access_key: secret.to_owned(),
                session_token: self.var("AWS_SESSION_TOKEN").map(str::to_owned),
                expires: None,
                source: "the environment (AWS_ACCESS_KEY_ID)".to_owned(),
            });
        }
        if let Some(found) = self.profile_credentials().await? {
            return Ok(found);
        }
        if let Some(found) = self.container_credentials(transport).await? {
            return Ok(found);
        }
        if !self
            .var("AWS_EC2_METADATA_DISABLED")
            .is_some_and(|value| value.eq_ignore_ascii_case("true"))
            && let Some(found) = self.instance_credentials(transport).await
        {
            return Ok(found);
        }
        Err(auth_error(format!(
            "no AWS credentials for Bedrock: none in the environment (AWS_ACCESS_KEY_ID, \
             AWS_SECRET_ACCESS_KEY), in profile \"{}\" of the shared files, from a container \
             endpoint or from the instance metadata service",
            self.profile_name()
        )))
    }

    /// The profile's static keys (credentials file first, then config file) or its
    /// `credential_process`; `None` when neither file has the profile (an error when
    /// `AWS_PROFILE` named it).
    async fn profile_credentials(&self) -> Result<Option<AwsCredentials>, ProviderError> {
        let profile = self.profile_name();
        let credentials = self.file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
        let config = self.file("AWS_CONFIG_FILE", "config");
        let config_section = if profile == "default" {
            "default".to_owned()
        } else {
            format!("profile {profile}")
        };
        let sections = [
            credentials
                .as_ref()
                .and_then(|(path, text)| Some((path, ini_section(text, &profile)?))),
            config
                .as_ref()
                .and_then(|(path, text)| Some((path, ini_section(text, &config_section)?))),
        ];
        let mut seen = false;
        for (path, keys) in sections.into_iter().flatten() {
            seen = true;
            let source = format!("profile \"{profile}\" in {}", path.display());
            if let (Some(id), Some(secret)) = (
                keys.get("aws_access_key_id"),
                keys.get("aws_secret_access_key"),
            ) {
                return Ok(Some(AwsCredentials {
                    access_key_id: id.clone(),
                    secret_access_key: secret.clone(),
                    session_token: keys.get("aws_session_token").cloned(),
                    expires: None,
                    source,
                }));
            }
            if let Some(command) = keys.get("credential_process") {
                return credential_process(command, &source, self.home.as_deref())
                    .await
                    .map(Some);
            }
            let unsupported = [
                "sso_session",
                "sso_start_url",
                "role_arn",
                "web_identity_token_file",
                "source_profile",
            ];
            if let Some(key) = unsupported.iter().find(|key| keys.contains_key(**key)) {
                return Err(auth_error(format!(
                    "{source} uses {key}, which agent cannot follow; give it the credentials \
                     instead: `eval \"$(aws configure export-credentials --profile {profile} \
                     --format env)\"`"
                )));
            }
        }
        if !seen && self.var("AWS_PROFILE").is_some() {
            return Err(auth_error(format!(
                "AWS_PROFILE names profile \"{profile}\", which neither the shared credentials \
                 file nor the config file has"
            )));
        }
        Ok(None)
    }

    /// The container endpoint's credentials, when its variables are set.
    async fn container_credentials(
        &self,
        transport: &dyn Transport,
    ) -> Result<Option<AwsCredentials>, ProviderError> {
        let url = match (
            self.var("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
            self.var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        ) {
            (Some(full), _) => full.to_owned(),
            (None, Some(relative)) => format!("{CONTAINER_HOST}{relative}"),
            (None, None) => return Ok(None),
        };
        let token = match (
            self.var("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
            self.var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
        ) {
            (Some(token), _) => Some(token.to_owned()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .map_err(|error| {
                        auth_error(format!(
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {file}: {error}"
                        ))
                    })?
                    .trim()
                    .to_owned(),
            ),
            (None, None) => None,
        };
        let source = format!("the container endpoint {url}");
        let mut headers = HeaderMap::new();
        if let Some(token) = token
            && let Ok(value) = HeaderValue::from_str(&token)
        {
            headers.insert("authorization", value);
        }
        let body = fetch(transport, Method::GET, &url, headers)
            .await
            .map_err(|error| auth_error(format!("{source}: {error}")))?;
        parse_json_credentials(&body, &source).map(Some)
    }

    /// The instance profile's credentials from IMDSv2 (a session token first); `None` when
    /// the service does not answer (not on EC2).
    async fn instance_credentials(&self, transport: &dyn Transport) -> Option<AwsCredentials> {
        let base = self
            .var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
            .unwrap_or(IMDS_ENDPOINT)
            .trim_end_matches('/')
            .to_owned();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-aws-ec2-metadata-token-ttl-seconds",
            HeaderValue::from_static("21600"),
        );
        let token = fetch(
            transport,
            Method::PUT,
            &format!("{base}/latest/api/token"),
            headers,
        )
        .await
        .ok()?;
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-aws-ec2-metadata-token",
            HeaderValue::from_bytes(token.trim_ascii()).ok()?,
        );
        let listing = format!("{base}/latest/meta-data/iam/security-credentials/");
        let roles = fetch(transport, Method::GET, &listing, headers.clone())
            .await
            .ok()?;
        let role = String::from_utf8_lossy(&roles)
            .lines()
            .next()?
            .trim()
            .to_owned();
        let body = fetch(transport, Method::GET, &format!("{listing}{role}"), headers)
            .await
            .ok()?;
        let source = format!("the instance profile \"{role}\" (instance metadata at {base})");
        parse_json_credentials(&body, &source).ok()
    }
}

/// [`fetch_small`] with no body, within [`ENDPOINT_TIMEOUT`].
async fn fetch(
    transport: &dyn Transport,
    method: Method,
    url: &str,
    headers: HeaderMap,
) -> Result<Vec<u8>, String> {
    fetch_small(
        transport,
        method,
        url,
        headers,
        Bytes::new(),
        ENDPOINT_TIMEOUT,
    )
    .await
}

fn auth_error(message: String) -> ProviderError {
    let mut error = ProviderError::new(ErrorKind::Authentication, message);
    error.lasting = true;
    error
}

/// Credentials in the shape the container endpoint, the metadata service and a
/// `credential_process` print: `AccessKeyId`, `SecretAccessKey`, `Token` or
/// `SessionToken`, `Expiration` (RFC 3339).
fn parse_json_credentials(body: &[u8], source: &str) -> Result<AwsCredentials, ProviderError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| auth_error(format!("{source} gave no JSON credentials: {error}")))?;
    let field = |name: &str| value[name].as_str().map(str::to_owned);
    let (Some(access_key_id), Some(secret_access_key)) =
        (field("AccessKeyId"), field("SecretAccessKey"))
    else {
        return Err(auth_error(format!(
            "{source} gave no AccessKeyId and SecretAccessKey"
        )));
    };
    let expires = match field("Expiration") {
        Some(text) => Some(parse_rfc3339(&text).ok_or_else(|| {
            auth_error(format!(
                "{source} gave an Expiration that is not a time: {text:?}"
            ))
        })?),
        None => None,
    };
    Ok(AwsCredentials {
        access_key_id,
        secret_access_key,
        session_token: field("Token").or_else(|| field("SessionToken")),
        expires,
        source: source.to_owned(),
    })
}

/// An RFC 3339 time (`2026-12-07T23:00:00Z`, fractions and offsets allowed).
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let time =
        aws_smithy_types::DateTime::from_str(text, aws_smithy_types::date_time::Format::DateTime)
            .ok()?;
    SystemTime::try_from(time).ok()
}

/// Runs a profile's `credential_process` (through `sh -c`, as the AWS CLI does on Unix) in
/// the user's `home` folder (never the workspace, which a repository could steer a relative
/// path through), and reads the credentials it prints.
async fn credential_process(
    command: &str,
    source: &str,
    home: Option<&std::path::Path>,
) -> Result<AwsCredentials, ProviderError> {
    let source = format!("{source} (credential_process `{command}`)");
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(home.unwrap_or(std::path::Path::new("/")))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| auth_error(format!("{source} did not finish within 60 s")))?
    .map_err(|error| auth_error(format!("{source} could not start: {error}")))?;
    if !output.status.success() {
        return Err(auth_error(format!(
            "{source} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    parse_json_credentials(&output.stdout, &source)
}

/// The keys of section `[name]` of an INI file as the AWS files write them (`key = value`
/// lines; `#` and `;` comments; keys lower-cased); `None` when there is no such section.
fn ini_section(text: &str, name: &str) -> Option<HashMap<String, String>> {
    let mut keys = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with(['#', ';']) || line.is_empty() {
            continue;
        }
        if let Some(header) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            if keys.is_some() {
                break;
            }
            if header.split_whitespace().collect::<Vec<_>>().join(" ") == name {
                keys = Some(HashMap::new());
            }
            continue;
        }
        if let Some(keys) = keys.as_mut()
            && let Some((key, value)) = line.split_once('=')
        {
            keys.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini_sections_are_read_as_the_aws_files_write_them() {
        let text = "# comment\n[default]\naws_access_key_id = AKID\n\n[profile dev]\nregion=eu-west-1\nAWS_SECRET_ACCESS_KEY = s ; not a comment\n[other]\nx=1\n";
        assert_eq!(
            ini_section(text, "default").unwrap()["aws_access_key_id"],
            "AKID"
        );
        let dev = ini_section(text, "profile dev").unwrap();
        assert_eq!(dev["region"], "eu-west-1");
        assert_eq!(dev["aws_secret_access_key"], "s ; not a comment");
        assert!(!dev.contains_key("x"));
        assert!(ini_section(text, "missing").is_none());
    }

    #[test]
    fn json_credentials_and_their_expiry_are_read() {
        let body = br#"{"AccessKeyId":"ASIA1","SecretAccessKey":"s","Token":"t","Expiration":"2026-12-07T23:00:00Z"}"#;
        let found = parse_json_credentials(body, "here").unwrap();
        assert_eq!(found.session_token.as_deref(), Some("t"));
        assert_eq!(
            found.expires,
            Some(std::time::UNIX_EPOCH + Duration::from_secs(1_796_684_400))
        );
        assert!(!format!("{found:?}").contains("\"s\""));
        let error = parse_json_credentials(br#"{"AccessKeyId":"A"}"#, "the endpoint").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the endpoint gave no AccessKeyId"),
            "{error}"
        );
    }
}
