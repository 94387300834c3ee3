//! Claude on Google Vertex AI (`CLAUDE_CODE_USE_VERTEX=1`), against a local stand-in that
//! takes only the bearer token its token endpoint handed out: a four-turn session with a
//! service account key, a gcloud login and the metadata server each giving the token, and
//! a refused token named by where it came from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use testkit::{Reply, Script, Server, Turn};

/// The stand-in: takes `good-token` only; `/token` hands it out, as does the metadata
/// server's path.
async fn vertex(script: Script) -> Server {
    let server = Server::start(script).await.unwrap();
    server.expect_bearer("good-token");
    let token = json!({"access_token": "good-token", "expires_in": 3600, "token_type": "Bearer"});
    server.answer_get("/token", token.clone());
    server.answer_get(
        "/computeMetadata/v1/instance/service-accounts/default/token",
        token,
    );
    server
}

async fn run(
    repo: &common::Repo,
    server: &Server,
    env: &[(&str, &str)],
    prompt: &str,
) -> std::process::Output {
    let mut all: Vec<(&str, String)> = vec![
        ("CLAUDE_CODE_USE_VERTEX", "1".to_owned()),
        ("ANTHROPIC_VERTEX_PROJECT_ID", "my-project".to_owned()),
        (
            "ANTHROPIC_VERTEX_BASE_URL",
            format!("{}/v1", server.base_url()),
        ),
        ("GCE_METADATA_HOST", "127.0.0.1:9".to_owned()),
    ];
    all.extend(env.iter().map(|(name, value)| (*name, (*value).to_owned())));
    common::run_on_cloud(
        repo,
        &[
            "GOOGLE_APPLICATION_CREDENTIALS",
            "CLOUDSDK_CONFIG",
            "CLOUD_ML_REGION",
        ],
        &all,
        prompt,
    )
    .await
}

fn result(output: &std::process::Output) -> Value {
    common::json_result(output)
}

/// A service account key whose `token_uri` is the stand-in's.
fn service_account(repo: &common::Repo, server: &Server) -> std::path::PathBuf {
    let key = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../provider/tests/fixtures/test-rsa-key.pem"),
    )
    .unwrap();
    let file = repo.home.join("service-account.json");
    std::fs::write(
        &file,
        json!({
            "type": "service_account", "project_id": "my-project",
            "client_email": "agent@my-project.iam.gserviceaccount.com",
            "private_key": key, "token_uri": format!("{}/token", server.base_url()),
        })
        .to_string(),
    )
    .unwrap();
    file
}

/// Read, Edit, Bash and an answer over `:streamRawPredict`, each request with the token
/// the service account's JWT was exchanged for, Vertex's body and model name.
#[tokio::test]
async fn a_four_turn_session_runs_on_vertex() {
    let repo = common::repo("vertex-session");
    std::fs::write(repo.dir.join("greet.py"), "print('helo')\n").unwrap();
    let server = vertex(Script::new(vec![
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
    let key = service_account(&repo, &server);
    let output = run(
        &repo,
        &server,
        &[
            ("GOOGLE_APPLICATION_CREDENTIALS", key.to_str().unwrap()),
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
            "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
        );
        let body = request.json();
        assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
        assert!(body.get("model").is_none(), "{body}");
        assert_eq!(body["stream"], true);
    }
    assert!(
        requests[3].json()["messages"]
            .to_string()
            .contains("print('hello')")
    );
    // One token for the whole session.
    assert_eq!(server.gets(), ["/token"]);
    assert!(
        result["total_cost_usd"]
            .as_f64()
            .is_some_and(|cost| cost > 0.0),
        "{result}"
    );
}

/// The gcloud login file (its refresh token exchanged at its `token_uri`) and the
/// metadata server each give the token.
#[tokio::test]
async fn the_token_comes_from_a_gcloud_login_or_the_metadata_server() {
    let repo = common::repo("vertex-gcloud");
    let server = vertex(Script::new(vec![Reply::turn(
        Turn::new().text("Hello from Vertex."),
    )]))
    .await;
    let gcloud = repo.home.join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    std::fs::write(
        gcloud.join("application_default_credentials.json"),
        json!({"type": "authorized_user", "client_id": "id", "client_secret": "secret",
               "refresh_token": "refresh", "token_uri": format!("{}/token", server.base_url())})
        .to_string(),
    )
    .unwrap();
    let output = run(&repo, &server, &[], "hello").await;
    assert_eq!(result(&output)["result"], "Hello from Vertex.");
    assert_eq!(server.gets(), ["/token"]);

    let repo = common::repo("vertex-metadata");
    let server = vertex(Script::new(vec![Reply::turn(
        Turn::new().text("Hello from Vertex."),
    )]))
    .await;
    let host = server.base_url().trim_start_matches("http://").to_owned();
    let output = run(&repo, &server, &[("GCE_METADATA_HOST", &host)], "hello").await;
    assert_eq!(result(&output)["result"], "Hello from Vertex.");
    assert_eq!(
        server.gets(),
        ["/computeMetadata/v1/instance/service-accounts/default/token"]
    );
}

/// A token the server refuses: fetched once more, then the error names where it came from.
#[tokio::test]
async fn a_refused_token_is_named_by_its_source() {
    let repo = common::repo("vertex-refused");
    let server = vertex(Script::new(vec![Reply::turn(Turn::new().text("never"))])).await;
    server.answer_get(
        "/token",
        json!({"access_token": "stale-token", "expires_in": 3600}),
    );
    let key = service_account(&repo, &server);
    let output = run(
        &repo,
        &server,
        &[("GOOGLE_APPLICATION_CREDENTIALS", key.to_str().unwrap())],
        "hello",
    )
    .await;
    assert!(!output.status.success());
    let text = common::all_output(&output);
    assert!(
        text.contains("invalid authentication credentials"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "token from GOOGLE_APPLICATION_CREDENTIALS ({})",
            key.display()
        )),
        "{text}"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(server.gets(), ["/token", "/token"]);
}
