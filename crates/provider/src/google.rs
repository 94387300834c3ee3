//! Google access tokens for Vertex AI, from application default credentials as Google's
//! client libraries find them:
//!
//! 1. the file `GOOGLE_APPLICATION_CREDENTIALS` names;
//! 2. the user's `gcloud auth application-default login` file
//!    (`$CLOUDSDK_CONFIG/application_default_credentials.json`, else
//!    `~/.config/gcloud/application_default_credentials.json`);
//! 3. the metadata server of a Google Cloud machine (`GCE_METADATA_HOST`, else
//!    `metadata.google.internal`).
//!
//! A file is either a service account's key (`"type": "service_account"`: a JWT signed with
//! its RSA key, RS256 by `ring`, exchanged at its `token_uri`) or a user's login
//! (`"type": "authorized_user"`: its refresh token exchanged at `token_uri`, else Google's
//! `https://oauth2.googleapis.com/token`). Tokens are kept until five minutes before they
//! expire. Every token says where it came from, so an error can name it.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};

use crate::config::ConfigSource;
use crate::error::{ErrorKind, ProviderError};
use crate::transport::{Transport, fetch_small, percent_encode};

/// Google's token endpoint, for a login file that names none.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The scope Vertex AI needs.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Tokens expiring sooner than this are fetched again before a request.
const REFRESH_BEFORE: Duration = Duration::from_secs(5 * 60);

/// How long a token endpoint or the metadata server may take.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(10);

/// An access token and where it came from.
#[derive(Clone)]
pub struct AccessToken {
    /// The bearer token.
    pub token: String,
    /// When it stops working.
    pub expires: SystemTime,
    /// Where it came from, for messages.
    pub source: String,
}

impl std::fmt::Debug for AccessToken {
    // Never print secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("expires", &self.expires)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Application default credentials (see the module docs), the token kept while it lasts.
pub struct GoogleCredentials {
    file: Option<PathBuf>,
    gcloud_file: Option<PathBuf>,
    metadata_host: String,
    cached: tokio::sync::Mutex<Option<AccessToken>>,
}

impl std::fmt::Debug for GoogleCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleCredentials").finish_non_exhaustive()
    }
}

impl GoogleCredentials {
    /// Credentials found through `source`'s variables, `home` the user's home folder.
    pub fn new(source: &dyn ConfigSource, home: Option<PathBuf>) -> Self {
        let gcloud_dir = source
            .get("CLOUDSDK_CONFIG")
            .map(PathBuf::from)
            .or_else(|| home.map(|home| home.join(".config/gcloud")));
        Self {
            file: source
                .get("GOOGLE_APPLICATION_CREDENTIALS")
                .map(PathBuf::from),
            gcloud_file: gcloud_dir.map(|dir| dir.join("application_default_credentials.json")),
            metadata_host: source
                .get("GCE_METADATA_HOST")
                .unwrap_or_else(|| "metadata.google.internal".to_owned()),
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// The token to send now.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Authentication`] naming the source that failed and why, or every place
    /// looked in when none had credentials.
    pub async fn token(&self, transport: &dyn Transport) -> Result<AccessToken, ProviderError> {
        let mut cached = self.cached.lock().await;
        if let Some(token) = cached
            .as_ref()
            .filter(|token| token.expires > SystemTime::now() + REFRESH_BEFORE)
        {
            return Ok(token.clone());
        }
        let token = self.fetch(transport).await?;
        *cached = Some(token.clone());
        Ok(token)
    }

    /// Forgets the token (the server refused it).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }

    async fn fetch(&self, transport: &dyn Transport) -> Result<AccessToken, ProviderError> {
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path).map_err(|error| {
                auth_error(format!(
                    "GOOGLE_APPLICATION_CREDENTIALS {}: {error}",
                    path.display()
                ))
            })?;
            let source = format!("GOOGLE_APPLICATION_CREDENTIALS ({})", path.display());
            return from_file(&text, &source, transport).await;
        }
        if let Some(path) = &self.gcloud_file
            && let Ok(text) = std::fs::read_to_string(path)
        {
            let source = format!("the gcloud login ({})", path.display());
            return from_file(&text, &source, transport).await;
        }
        let url = format!(
            "http://{}/computeMetadata/v1/instance/service-accounts/default/token",
            self.metadata_host
        );
        let mut headers = HeaderMap::new();
        headers.insert("metadata-flavor", HeaderValue::from_static("Google"));
        let source = format!("the metadata server ({})", self.metadata_host);
        match fetch_small(
            transport,
            Method::GET,
            &url,
            headers,
            Bytes::new(),
            ENDPOINT_TIMEOUT,
        )
        .await
        {
            Ok(body) => token_answer(&body, &source),
            Err(error) => Err(auth_error(format!(
                "no Google credentials for Vertex AI: GOOGLE_APPLICATION_CREDENTIALS is not set, \
                 there is no gcloud login (`gcloud auth application-default login`), and {source} \
                 did not answer ({error})"
            ))),
        }
    }
}

fn auth_error(message: String) -> ProviderError {
    let mut error = ProviderError::new(ErrorKind::Authentication, message);
    error.lasting = true;
    error
}

/// A token from a credentials file's text (`source` names the file).
async fn from_file(
    text: &str,
    source: &str,
    transport: &dyn Transport,
) -> Result<AccessToken, ProviderError> {
    let file: serde_json::Value = serde_json::from_str(text)
        .map_err(|error| auth_error(format!("{source} is not JSON: {error}")))?;
    let field = |name: &str| {
        file[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| auth_error(format!("{source} has no {name:?}")))
    };
    let token_uri = file["token_uri"]
        .as_str()
        .unwrap_or(GOOGLE_TOKEN_URI)
        .to_owned();
    let form = match file["type"].as_str() {
        Some("authorized_user") => form_encode(&[
            ("grant_type", "refresh_token"),
            ("client_id", &field("client_id")?),
            ("client_secret", &field("client_secret")?),
            ("refresh_token", &field("refresh_token")?),
        ]),
        Some("service_account") => {
            let assertion = service_account_jwt(
                &field("client_email")?,
                &field("private_key")?,
                &token_uri,
                SystemTime::now(),
            )
            .map_err(|error| auth_error(format!("{source}: {error}")))?;
            form_encode(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", &assertion),
            ])
        }
        other => {
            return Err(auth_error(format!(
                "{source} holds credentials of type {other:?}, which agent cannot use (it takes \
                 a service account key or a gcloud login)"
            )));
        }
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/x-www-form-urlencoded"),
    );
    let body = fetch_small(
        transport,
        Method::POST,
        &token_uri,
        headers,
        Bytes::from(form),
        ENDPOINT_TIMEOUT,
    )
    .await
    .map_err(|error| auth_error(format!("{source}: the token endpoint {token_uri}: {error}")))?;
    token_answer(&body, source)
}

/// A token endpoint's or the metadata server's answer: `access_token`, `expires_in`
/// (seconds).
fn token_answer(body: &[u8], source: &str) -> Result<AccessToken, ProviderError> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| auth_error(format!("{source} gave no JSON token: {error}")))?;
    let Some(token) = value["access_token"].as_str() else {
        return Err(auth_error(format!("{source} gave no access_token")));
    };
    let lifetime = value["expires_in"].as_u64().unwrap_or(3600);
    Ok(AccessToken {
        token: token.to_owned(),
        expires: SystemTime::now() + Duration::from_secs(lifetime),
        source: source.to_owned(),
    })
}

/// The signed JWT a service account exchanges for a token (RFC 7523): RS256 over
/// `{"alg":"RS256","typ":"JWT"}` and the claims `iss`, `scope`, `aud` (`token_uri`), `iat`,
/// `exp` (an hour on).
///
/// # Errors
///
/// When `private_key` is not a PEM PKCS #8 RSA key.
pub fn service_account_jwt(
    client_email: &str,
    private_key: &str,
    token_uri: &str,
    now: SystemTime,
) -> Result<String, String> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let issued = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "the clock is before 1970".to_owned())?
        .as_secs();
    let header = engine.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = engine.encode(
        serde_json::json!({
            "iss": client_email, "scope": SCOPE, "aud": token_uri,
            "iat": issued, "exp": issued + 3600,
        })
        .to_string(),
    );
    let signed = format!("{header}.{claims}");
    let der = pem_body(private_key).ok_or("private_key is not a PEM key")?;
    let key = ring::signature::RsaKeyPair::from_pkcs8(&der)
        .map_err(|error| format!("private_key is not an RSA PKCS #8 key: {error}"))?;
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "signing failed".to_owned())?;
    Ok(format!("{signed}.{}", engine.encode(signature)))
}

/// The bytes of a PEM block (`-----BEGIN ...-----` to `-----END ...-----`).
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let text: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect::<String>();
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
}

/// `pairs` as `application/x-www-form-urlencoded`.
fn form_encode(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2048-bit RSA key made for this test (`openssl genpkey -algorithm RSA`).
    pub(crate) const TEST_KEY: &str = include_str!("../tests/fixtures/test-rsa-key.pem");

    /// The JWT is three base64url parts, its claims as Google's token endpoint reads them,
    /// and its signature verifies with the key's public half (RS256).
    #[test]
    fn a_service_account_jwt_is_signed_with_its_key() {
        use base64::Engine as _;
        let now = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let jwt = service_account_jwt(
            "sa@p.iam.gserviceaccount.com",
            TEST_KEY,
            "https://t/token",
            now,
        )
        .unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let claims: serde_json::Value =
            serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "sa@p.iam.gserviceaccount.com");
        assert_eq!(claims["aud"], "https://t/token");
        assert_eq!(claims["exp"], 1_800_003_600);
        let key = ring::signature::RsaKeyPair::from_pkcs8(&pem_body(TEST_KEY).unwrap()).unwrap();
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            key.public().as_ref(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(signed.as_bytes(), &engine.decode(parts[2]).unwrap())
            .unwrap();
        assert!(
            public
                .verify(b"something else", &engine.decode(parts[2]).unwrap())
                .is_err()
        );
        assert!(service_account_jwt("x", "not a key", "u", now).is_err());
    }

    #[test]
    fn forms_are_encoded() {
        assert_eq!(
            form_encode(&[("grant_type", "urn:a b"), ("x", "1/2+3")]),
            "grant_type=urn%3Aa%20b&x=1%2F2%2B3"
        );
    }
}
