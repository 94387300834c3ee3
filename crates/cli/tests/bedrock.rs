//! Claude on Amazon Bedrock (`CLAUDE_CODE_USE_BEDROCK=1`), against a local stand-in that
//! checks every request's AWS Signature Version 4 against the secret of its access key and
//! answers in Bedrock's event stream framing: a four-turn session with tools, each place
//! credentials come from (the environment, a profile's file, a `credential_process`, the
//! container endpoint, the instance metadata service), and credentials Bedrock refuses as
//! expired, named by where they came from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::{Value, json};
use testkit::bedrock::AwsKeys;
use testkit::{Reply, Script, Server, Turn};

const KEY_ID: &str = "AKIDBEDROCKTEST";
const SECRET: &str = "bedrock/test/secret+key";

/// A stand-in for `us-east-1` that takes `KEY_ID`/`SECRET` and calls the session token
/// `expired-token` expired.
async fn bedrock(script: Script) -> Server {
    let server = Server::start(script).await.unwrap();
    server.expect_aws(AwsKeys {
        secrets: [(KEY_ID.to_owned(), SECRET.to_owned())].into(),
        expired_tokens: vec!["expired-token".to_owned()],
        region: "us-east-1".to_owned(),
    });
    server
}

/// `agent -p PROMPT --output-format json` in `repo` with Bedrock on and `env` set, nothing
/// of the test's own environment about AWS or Anthropic.
async fn run(
    repo: &common::Repo,
    server: &Server,
    env: &[(&str, &str)],
    prompt: &str,
) -> std::process::Output {
    let mut all: Vec<(&str, String)> = vec![
        ("CLAUDE_CODE_USE_BEDROCK", "1".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("ANTHROPIC_BEDROCK_BASE_URL", server.base_url()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ];
    all.extend(env.iter().map(|(name, value)| (*name, (*value).to_owned())));
    common::run_on_cloud(
        repo,
        &[
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AWS_DEFAULT_REGION",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        ],
        &all,
        prompt,
    )
    .await
}

fn result(output: &std::process::Output) -> Value {
    common::json_result(output)
}

fn one_turn() -> Script {
    Script::new(vec![Reply::turn(Turn::new().text("Signed and answered."))])
}

/// Read, Edit, Bash and an answer: four requests, each signed (the stand-in refuses any
/// other), each `InvokeModelWithResponseStream` at the inference profile of the region's
/// geography, with Bedrock's body (no `model`, no `stream`, its `anthropic_version`).
#[tokio::test]
async fn a_four_turn_session_runs_on_bedrock() {
    let repo = common::repo("bedrock-session");
    std::fs::write(repo.dir.join("greet.py"), "print('helo')\n").unwrap();
    let server = bedrock(Script::new(vec![
        Reply::turn(Turn::new().text("Looking.").tool_use(
            "toolu_r",
            "Read",
            json!({"file_path": "greet.py"}),
        )),
        Reply::turn(Turn::new().tool_use(
            "toolu_e",
            "Edit",
            json!({"file_path": "greet.py", "old_string": "'helo'", "new_string": "'hello'"}),
        )),
        Reply::turn(Turn::new().tool_use("toolu_b", "Bash", json!({"command": "cat greet.py"}))),
        Reply::turn(Turn::new().text("Fixed the typo in greet.py.")),
    ]))
    .await;
    let output = run(
        &repo,
        &server,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("ANTHROPIC_MODEL", "claude-sonnet-4-5-20250929"),
        ],
        "fix the typo",
    )
    .await;
    let result = result(&output);
    assert_eq!(result["result"], "Fixed the typo in greet.py.", "{result}");
    assert_eq!(
        std::fs::read_to_string(repo.dir.join("greet.py")).unwrap(),
        "print('hello')\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert_eq!(
            request.path,
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
        );
        let body = request.json();
        assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
        assert!(
            body.get("model").is_none() && body.get("stream").is_none(),
            "{body}"
        );
        assert!(
            request
                .header("authorization")
                .unwrap()
                .starts_with("AWS4-HMAC-SHA256 Credential=AKIDBEDROCKTEST/")
        );
    }
    // The Bash result went back: the loop ran over Bedrock's framing as over SSE.
    assert!(
        requests[3].json()["messages"]
            .to_string()
            .contains("print('hello')")
    );
    // Bedrock's ids are priced as the model they name.
    assert!(
        result["total_cost_usd"]
            .as_f64()
            .is_some_and(|cost| cost > 0.0),
        "{result}"
    );
}

/// A signature made with the wrong secret is refused as Bedrock refuses it, and the error
/// names where the credentials came from.
#[tokio::test]
async fn a_bad_signature_is_refused_and_the_credentials_named() {
    let repo = common::repo("bedrock-bad-signature");
    let server = bedrock(one_turn()).await;
    let output = run(
        &repo,
        &server,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", "not-the-secret"),
        ],
        "hello",
    )
    .await;
    assert!(!output.status.success());
    let text = common::all_output(&output);
    assert!(text.contains("InvalidSignatureException"), "{text}");
    assert!(
        text.contains("credentials from the environment (AWS_ACCESS_KEY_ID)"),
        "{text}"
    );
}

/// Expired temporary credentials: Bedrock's refusal, tried once more with the credentials
/// looked up again, then an error naming where they came from.
#[tokio::test]
async fn expired_credentials_are_named_by_their_source() {
    let repo = common::repo("bedrock-expired");
    let server = bedrock(one_turn()).await;
    let output = run(
        &repo,
        &server,
        &[
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", "expired-token"),
        ],
        "hello",
    )
    .await;
    assert!(!output.status.success());
    let text = common::all_output(&output);
    assert!(
        text.contains("ExpiredTokenException: The security token included in the request is expired (credentials from the environment (AWS_ACCESS_KEY_ID))"),
        "{text}"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "one more try with the credentials looked up again"
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A profile's static keys in `~/.aws/credentials`, and a profile's `credential_process`
/// in `~/.aws/config` (the region from there too).
#[tokio::test]
async fn credentials_come_from_a_profile_and_a_credential_process() {
    let repo = common::repo("bedrock-profile");
    write(
        &repo.home.join(".aws/credentials"),
        &format!(
            "[default]\naws_access_key_id = WRONG\naws_secret_access_key = wrong\n\n[dev]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
        ),
    );
    let server = bedrock(one_turn()).await;
    let output = run(&repo, &server, &[("AWS_PROFILE", "dev")], "hello").await;
    assert_eq!(result(&output)["result"], "Signed and answered.");

    let repo = common::repo("bedrock-process");
    let json = json!({"Version": 1, "AccessKeyId": KEY_ID, "SecretAccessKey": SECRET, "SessionToken": "fresh-token", "Expiration": "2099-01-01T00:00:00Z"});
    write(
        &repo.home.join(".aws/config"),
        &format!(
            "[profile tools]\nregion = us-east-1\ncredential_process = printf '%s' '{json}'\n"
        ),
    );
    let server = bedrock(one_turn()).await;
    let output = run(
        &repo,
        &server,
        &[("AWS_PROFILE", "tools"), ("AWS_REGION", "")],
        "hello",
    )
    .await;
    assert_eq!(result(&output)["result"], "Signed and answered.");
    assert_eq!(
        server.requests()[0].header("x-amz-security-token"),
        Some("fresh-token")
    );

    // A profile that needs single sign-on is named with the way round it.
    let repo = common::repo("bedrock-sso");
    write(
        &repo.home.join(".aws/config"),
        "[profile sso]\nsso_session = corp\nregion = us-east-1\n",
    );
    let server = bedrock(one_turn()).await;
    let output = run(&repo, &server, &[("AWS_PROFILE", "sso")], "hello").await;
    let text = common::all_output(&output);
    assert!(
        text.contains("uses sso_session")
            && text.contains("aws configure export-credentials --profile sso"),
        "{text}"
    );
    assert!(server.requests().is_empty());
}

/// The container endpoint (with its authorization token) and the instance metadata service
/// (IMDSv2: a token, the role, its credentials), each a local stand-in.
#[tokio::test]
async fn credentials_come_from_the_container_and_instance_endpoints() {
    let credentials = json!({"AccessKeyId": KEY_ID, "SecretAccessKey": SECRET, "Token": "container-token", "Expiration": "2099-01-01T00:00:00Z"});
    let repo = common::repo("bedrock-container");
    let server = bedrock(one_turn()).await;
    server.answer_get("/v2/credentials/abc", credentials.clone());
    let url = format!("{}/v2/credentials/abc", server.base_url());
    let output = run(
        &repo,
        &server,
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-token"),
        ],
        "hello",
    )
    .await;
    assert_eq!(result(&output)["result"], "Signed and answered.");
    assert_eq!(
        server.requests()[0].header("x-amz-security-token"),
        Some("container-token")
    );

    let repo = common::repo("bedrock-imds");
    let server = bedrock(one_turn()).await;
    server.answer_get("/latest/api/token", json!("imds-session"));
    server.answer_get(
        "/latest/meta-data/iam/security-credentials/",
        json!("agent-role\n"),
    );
    let mut instance = credentials;
    instance["Token"] = json!("instance-token");
    server.answer_get(
        "/latest/meta-data/iam/security-credentials/agent-role",
        instance,
    );
    let endpoint = server.base_url();
    let output = run(
        &repo,
        &server,
        &[
            ("AWS_EC2_METADATA_DISABLED", "false"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &endpoint),
        ],
        "hello",
    )
    .await;
    assert_eq!(result(&output)["result"], "Signed and answered.");
    assert_eq!(
        server.requests()[0].header("x-amz-security-token"),
        Some("instance-token")
    );
    assert_eq!(
        server.gets(),
        [
            "/latest/api/token",
            "/latest/meta-data/iam/security-credentials/",
            "/latest/meta-data/iam/security-credentials/agent-role"
        ]
    );
}
