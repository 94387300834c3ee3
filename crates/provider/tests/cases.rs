//! The provider against the local testkit server: retries, idle watchdog, restarts, TLS, VCR.
// Test helpers outside #[test] functions may unwrap: a failure there is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt as _;
use provider::{
    AnthropicClient, Auth, ClientConfig, ErrorKind, HyperTransport, ProviderError, ProviderEvent,
    RecordingTransport, ReplayTransport, Sleeper, TokioSleeper, Transport,
};
use serde_json::json;
use testkit::{Endless, Faults, Reply, Script, Server, Turn};
use tokio_util::sync::CancellationToken;

/// Records requested waits and returns at once.
#[derive(Default)]
struct FakeSleeper(Mutex<Vec<Duration>>);

impl Sleeper for FakeSleeper {
    fn sleep(
        &self,
        duration: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.0.lock().unwrap().push(duration);
        Box::pin(std::future::ready(()))
    }
}

fn body(text: &str) -> Bytes {
    Bytes::from(json!({"model": "claude-test", "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": text}]}).to_string())
}

fn config(server: &Server) -> ClientConfig {
    let mut config = ClientConfig::new(&server.base_url(), Auth::ApiKey("sk-test".into()));
    if let Some(pem) = server.cert_pem() {
        config.extra_roots_pem = pem.as_bytes().to_vec();
    }
    config
}

fn make_client(config: ClientConfig, sleeper: Arc<dyn Sleeper>) -> AnthropicClient {
    let transport = Arc::new(HyperTransport::new(&config.extra_roots_pem).unwrap());
    AnthropicClient::with_transport(config, transport, sleeper).unwrap()
}

async fn collect(
    client: &AnthropicClient,
    text: &str,
) -> (Vec<ProviderEvent>, Option<ProviderError>) {
    let mut stream = client.stream(body(text), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

fn done_text(events: &[ProviderEvent]) -> Option<String> {
    events.iter().find_map(|event| match event {
        ProviderEvent::Done { message, .. } => Some(message.text()),
        _ => None,
    })
}

#[tokio::test]
async fn rate_limits_honour_retry_after() {
    let server = Server::start(Script::new(vec![
        Reply::error(429, "rate_limit_error", "slow down")
            .header("retry-after", "3")
            .header("anthropic-ratelimit-requests-remaining", "0"),
        Reply::error(429, "rate_limit_error", "slow down").header("retry-after", "3"),
        Reply::turn(Turn::new().text("finally")),
    ]))
    .await
    .unwrap();
    let sleeper = Arc::new(FakeSleeper::default());
    let client = make_client(config(&server), sleeper.clone());
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(done_text(&events).as_deref(), Some("finally"));
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        *sleeper.0.lock().unwrap(),
        [Duration::from_secs(3), Duration::from_secs(3)]
    );
    let first_retry = events.iter().find_map(|event| match event {
        ProviderEvent::Retry {
            attempt: 1,
            rate_limits,
            ..
        } => Some(rate_limits.clone()),
        _ => None,
    });
    assert_eq!(
        first_retry.unwrap(),
        [(
            "anthropic-ratelimit-requests-remaining".to_owned(),
            "0".to_owned()
        )]
    );
    // The request carried the required headers.
    let request = &server.requests()[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert!(request.header("user-agent").unwrap().starts_with("agent/"));
}

#[tokio::test]
async fn overload_retries_are_bounded_and_can_switch_to_the_fallback() {
    let server = Server::start(Script::new(vec![Reply::error(
        529,
        "overloaded_error",
        "Overloaded",
    )]))
    .await
    .unwrap();
    let sleeper = Arc::new(FakeSleeper::default());
    let mut config = config(&server);
    config.max_retries = 4;
    let client = make_client(config.clone(), sleeper.clone());
    let (_, error) = collect(&client, "hi").await;
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::Overloaded);
    assert_eq!(error.status, Some(529));
    assert_eq!(error.request_id.as_deref(), Some("req_testkit"));
    assert_eq!(server.request_count(), 5);
    let waits = sleeper.0.lock().unwrap().clone();
    assert_eq!(waits.len(), 4);
    for (index, wait) in waits.iter().enumerate() {
        let nominal = Duration::from_millis(500) * (1 << index);
        assert!(
            *wait <= nominal && *wait >= nominal.mul_f64(0.75),
            "wait {index}: {wait:?}"
        );
    }

    let server = Server::start(Script::new(vec![Reply::error(
        529,
        "overloaded_error",
        "Overloaded",
    )]))
    .await
    .unwrap();
    let mut config = self::config(&server);
    config.max_retries = 4;
    config.fallback_model = true;
    let client = make_client(config, Arc::new(FakeSleeper::default()));
    let (_, error) = collect(&client, "hi").await;
    assert_eq!(error.unwrap().kind, ErrorKind::SwitchToFallback);
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_is_retried_but_pings_keep_it_alive() {
    let turn = Turn::new().text("Hello there, general");
    let stall_at = {
        let sse = turn.sse();
        // After message_start and the first delta (4 frames: start, block start, delta).
        let mut frames = 0;
        let mut at = 0;
        for (index, pair) in sse.windows(2).enumerate() {
            if pair == b"\n\n" {
                frames += 1;
                if frames == 3 {
                    at = index + 2;
                    break;
                }
            }
        }
        at
    };
    let server = Server::start(Script::new(vec![
        Reply::turn(turn.clone()).faults(Faults {
            stall_after: Some(stall_at),
            ..Faults::default()
        }),
        Reply::turn(turn.clone()),
    ]))
    .await
    .unwrap();
    let mut config = config(&server);
    config.idle_warn = Duration::from_millis(100);
    config.idle_timeout = Duration::from_millis(200);
    let client = make_client(config.clone(), Arc::new(FakeSleeper::default()));
    let start = Instant::now();
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert!(
        start.elapsed() < Duration::from_millis(1_000),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(server.request_count(), 2);
    let kinds: Vec<&str> = events
        .iter()
        .map(|event| match event {
            ProviderEvent::Idle { .. } => "idle",
            ProviderEvent::Restart { .. } => "restart",
            ProviderEvent::Retry { .. } => "retry",
            ProviderEvent::Done { .. } => "done",
            _ => "",
        })
        .filter(|kind| !kind.is_empty())
        .collect();
    assert_eq!(kinds, ["idle", "restart", "retry", "done"]);
    let retry_reason = events.iter().find_map(|event| match event {
        ProviderEvent::Retry { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(
        retry_reason.unwrap(),
        "stream idle: no data for 200 ms (AGENT_STREAM_IDLE_TIMEOUT_MS sets the limit)"
    );
    assert_eq!(done_text(&events).as_deref(), Some("Hello there, general"));

    // A healthy stream pinging every 50 ms for 2 s is never cut.
    let server = Server::start(Script::new(vec![Reply::pinging(
        Duration::from_millis(50),
        Duration::from_secs(2),
        turn,
    )]))
    .await
    .unwrap();
    let mut healthy = self::config(&server);
    healthy.idle_warn = Duration::from_millis(100);
    healthy.idle_timeout = Duration::from_millis(200);
    let client = make_client(healthy, Arc::new(FakeSleeper::default()));
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.request_count(), 1);
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, ProviderEvent::Idle { .. }))
    );
    assert_eq!(done_text(&events).as_deref(), Some("Hello there, general"));
}

#[tokio::test]
async fn a_reset_mid_stream_restarts_without_duplicate_blocks() {
    let turn =
        Turn::new()
            .text("first block")
            .tool_use("toolu_1", "Read", json!({"file_path": "a.rs"}));
    let sse_len = turn.sse().len();
    let server = Server::start(Script::new(vec![
        Reply::turn(turn.clone()).faults(Faults {
            reset_after: Some(700),
            chunk_sizes: Some(vec![97, 13, 1, 256]),
            ..Faults::default()
        }),
        Reply::turn(turn.clone()).faults(Faults {
            chunk_sizes: Some(vec![1, 7, 64]),
            ..Faults::default()
        }),
    ]))
    .await
    .unwrap();
    assert!(sse_len > 700);
    let client = make_client(config(&server), Arc::new(FakeSleeper::default()));
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.request_count(), 2);
    let restart = events
        .iter()
        .position(|event| {
            matches!(
                event,
                ProviderEvent::Restart {
                    non_streaming: false,
                    ..
                }
            )
        })
        .unwrap_or_else(|| panic!("no restart: {events:#?}"));
    // Events were handed out before the restart; blocks after it are whole and not repeated.
    assert!(
        events[..restart]
            .iter()
            .any(|event| matches!(event, ProviderEvent::Stream(_)))
    );
    let blocks_after: Vec<usize> = events[restart..]
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::Block(block) => Some(block.index),
            _ => None,
        })
        .collect();
    assert_eq!(blocks_after, [0, 1]);
    let ProviderEvent::Done { message, .. } = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(message.text(), "first block");
    assert_eq!(
        message.content[1].as_tool_use().unwrap().input,
        json!({"file_path": "a.rs"})
    );
}

#[tokio::test]
async fn prompt_too_long_and_bad_media_types_are_not_retried() {
    let server = Server::start(Script::new(vec![Reply::error(
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
    )]))
    .await
    .unwrap();
    let client = make_client(config(&server), Arc::new(FakeSleeper::default()));
    let (_, error) = collect(&client, "hi").await;
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::PromptTooLong);
    assert_eq!(server.request_count(), 1);

    let server = Server::start(Script::new(vec![Reply {
        status: 200,
        headers: Vec::new(),
        body: testkit::ReplyBody::Raw {
            content_type: "application/json".into(),
            bytes: b"{}".to_vec(),
        },
        faults: Faults::default(),
    }]))
    .await
    .unwrap();
    let client = make_client(config(&server), Arc::new(FakeSleeper::default()));
    let (events, error) = collect(&client, "hi").await;
    assert!(events.is_empty());
    assert_eq!(
        error.unwrap().to_string(),
        "not an event stream (HTTP 200): expected text/event-stream, got \"application/json\""
    );
}

#[tokio::test]
async fn an_overloaded_error_event_mid_stream_is_retried() {
    let server = Server::start(Script::new(vec![
        Reply::error_event("overloaded_error", "Overloaded"),
        Reply::turn(Turn::new().text("ok")),
    ]))
    .await
    .unwrap();
    let client = make_client(config(&server), Arc::new(FakeSleeper::default()));
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.request_count(), 2);
    assert!(
        events
            .iter()
            .any(|event| matches!(event, ProviderEvent::Restart { .. }))
    );
    assert_eq!(done_text(&events).as_deref(), Some("ok"));
}

#[tokio::test]
async fn broken_streams_end_with_one_non_streaming_request() {
    let turn = Turn::new().text("from the fallback");
    let server = Server::start(Script::new(vec![
        Reply::turn(turn.clone()).faults(Faults {
            reset_after: Some(200),
            ..Faults::default()
        }),
        Reply::turn(turn.clone()).faults(Faults {
            reset_after: Some(200),
            ..Faults::default()
        }),
        Reply::turn(turn),
    ]))
    .await
    .unwrap();
    let mut config = config(&server);
    config.max_retries = 1;
    let client = make_client(config, Arc::new(FakeSleeper::default()));
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.request_count(), 3);
    assert_eq!(server.requests()[2].json()["stream"], false);
    let ProviderEvent::Done {
        message,
        non_streaming,
        ..
    } = events.last().unwrap()
    else {
        panic!()
    };
    assert!(non_streaming);
    assert_eq!(message.text(), "from the fallback");
}

#[tokio::test]
async fn tls_works_with_the_trusted_certificate_and_names_the_host_otherwise() {
    let server = Server::start_tls(Script::new(vec![Reply::turn(Turn::new().text("secure"))]))
        .await
        .unwrap();
    let client = make_client(config(&server), Arc::new(TokioSleeper));
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(done_text(&events).as_deref(), Some("secure"));

    let mut untrusted = config(&server);
    untrusted.extra_roots_pem.clear();
    let client = make_client(untrusted, Arc::new(FakeSleeper::default()));
    let (_, error) = collect(&client, "hi").await;
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::Tls, "{error}");
    assert!(
        error
            .message
            .contains("TLS handshake with localhost failed"),
        "{error}"
    );
    assert!(
        error.message.contains("UnknownIssuer")
            || error.message.contains("unknown issuer")
            || error.message.contains("invalid peer certificate"),
        "{error}"
    );
}

fn cassette_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("provider-{name}-{}.jsonl", std::process::id()))
}

#[tokio::test]
async fn record_then_replay_with_the_server_gone() {
    let turns = vec![
        Reply::turn(Turn::new().text("turn one").tool_use(
            "toolu_1",
            "Read",
            json!({"file_path": "/work/repo/src/lib.rs"}),
        )),
        Reply::turn(Turn::new().thinking("hmm", "sig").text("turn two")),
        Reply::turn(Turn::new().text("turn three")),
    ];
    let path = cassette_path("vcr");
    let workspace = Some("/work/repo".to_owned());
    let live_events = {
        let server = Server::start(Script::new(turns)).await.unwrap();
        let config = config(&server);
        let transport =
            RecordingTransport::new(HyperTransport::new(&[]).unwrap(), &path, workspace.clone())
                .unwrap();
        let client = AnthropicClient::with_transport(
            config,
            Arc::new(transport),
            Arc::new(FakeSleeper::default()),
        )
        .unwrap();
        let mut all = Vec::new();
        for prompt in ["one /work/repo/src/lib.rs", "two", "three"] {
            let (events, error) = collect(&client, prompt).await;
            assert!(error.is_none(), "{error:?}");
            all.push(events);
        }
        all
        // The server stops here.
    };
    let cassette = std::fs::read_to_string(&path).unwrap();
    assert_eq!(cassette.lines().count(), 3);
    assert!(cassette.contains("${WORKSPACE}/src/lib.rs"));
    assert!(
        !cassette.contains("sk-test"),
        "the API key is never written"
    );

    let replay = Arc::new(ReplayTransport::open(&path, workspace.clone(), false).unwrap());
    let config = ClientConfig::new("http://127.0.0.1:9", Auth::ApiKey("other".into()));
    let client = AnthropicClient::with_transport(
        config.clone(),
        replay.clone() as Arc<dyn Transport>,
        Arc::new(FakeSleeper::default()),
    )
    .unwrap();
    for (prompt, live) in ["one /work/repo/src/lib.rs", "two", "three"]
        .into_iter()
        .zip(&live_events)
    {
        let (events, error) = collect(&client, prompt).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(&events, live);
    }
    assert_eq!(replay.remaining(), 0);

    // A changed request fails with a diff naming the field.
    let replay = Arc::new(ReplayTransport::open(&path, workspace, false).unwrap());
    let client = AnthropicClient::with_transport(
        config,
        replay as Arc<dyn Transport>,
        Arc::new(FakeSleeper::default()),
    )
    .unwrap();
    let (_, error) = collect(&client, "ONE /work/repo/src/lib.rs").await;
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::Replay);
    assert_eq!(
        error.message,
        r#"request does not match the cassette: $.messages[0].content: recorded "one ${WORKSPACE}/src/lib.rs" but now "ONE ${WORKSPACE}/src/lib.rs""#
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn recording_refuses_to_overwrite_what_is_not_a_cassette() {
    let path = cassette_path("not-a-cassette");
    std::fs::write(&path, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    let error =
        RecordingTransport::new(HyperTransport::new(&[]).unwrap(), &path, None).unwrap_err();
    assert_eq!(error.kind, ErrorKind::Config);
    assert!(
        error
            .message
            .contains("is not a cassette; refusing to overwrite it"),
        "{}",
        error.message
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "root:x:0:0:root:/root:/bin/bash\n",
        "the file is left alone"
    );
    // A directory is refused too; an empty file or an earlier cassette is replaced.
    let error = RecordingTransport::new(
        HyperTransport::new(&[]).unwrap(),
        &std::env::temp_dir(),
        None,
    )
    .unwrap_err();
    assert!(
        error.message.contains("not a regular file"),
        "{}",
        error.message
    );
    std::fs::write(&path, "").unwrap();
    assert!(RecordingTransport::new(HyperTransport::new(&[]).unwrap(), &path, None).is_ok());
    // An earlier cassette is replaced only when something is recorded: a run that fails
    // before its first request leaves it whole.
    let earlier = r#"{"method":"POST","path":"/v1/messages","request_body":"{}","request_hash":"h","status":200,"headers":[],"body":"x"}"#;
    std::fs::write(&path, format!("{earlier}\n")).unwrap();
    drop(RecordingTransport::new(HyperTransport::new(&[]).unwrap(), &path, None).unwrap());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{earlier}\n")
    );
    let error = RecordingTransport::new(
        HyperTransport::new(&[]).unwrap(),
        &std::env::temp_dir().join("no-such-folder-4711/c.jsonl"),
        None,
    )
    .unwrap_err();
    assert!(
        error.message.contains("does not exist"),
        "{}",
        error.message
    );
    // A place that cannot be written fails at once, not silently at the first exchange.
    let error = RecordingTransport::new(
        HyperTransport::new(&[]).unwrap(),
        &PathBuf::from("/proc/self/cassette.jsonl"),
        None,
    )
    .unwrap_err();
    assert_eq!(error.kind, ErrorKind::Config, "{}", error.message);
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn https_proxy_is_honoured_and_no_proxy_bypasses_it() {
    let server = Server::start_tls(Script::new(vec![Reply::turn(
        Turn::new().text("via the proxy"),
    )]))
    .await
    .unwrap();
    let proxy = testkit::ConnectProxy::start().await.unwrap();
    let mut config = config(&server);
    config.proxy = provider::ProxyConfig {
        https: Some(proxy.url()),
        no_proxy: None,
    };
    let client = AnthropicClient::new(config.clone()).unwrap();
    let (events, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(done_text(&events).as_deref(), Some("via the proxy"));
    assert_eq!(
        proxy.targets(),
        [format!("localhost:{}", server.addr().port())]
    );

    config.proxy.no_proxy = Some("localhost".into());
    let client = AnthropicClient::new(config).unwrap();
    let (_, error) = collect(&client, "hi").await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(proxy.targets().len(), 1, "NO_PROXY bypassed the proxy");
}

/// Hostile servers: one that never sends headers, one that pings forever, one that streams
/// text forever, one whose non-streaming body is 2 GiB, one whose error body never ends.
/// Each ends with an error naming the limit and the variable that sets it.
#[tokio::test]
async fn hostile_servers_end_at_a_named_limit() {
    let limited = |server: &Server| {
        let mut config = config(server);
        config.max_retries = 0;
        config.headers_timeout = Duration::from_millis(300);
        config.idle_timeout = Duration::from_millis(300);
        config.idle_warn = Duration::from_millis(300);
        config.progress_timeout = Duration::from_millis(400);
        config.non_streaming_timeout = Duration::from_millis(600);
        config.max_stream_bytes = 1 << 20;
        config.max_body_bytes = 1 << 20;
        make_client(config, Arc::new(FakeSleeper::default()))
    };
    let error_of = |replies: Vec<Reply>| async move {
        let server = Server::start(Script::new(replies)).await.unwrap();
        let started = Instant::now();
        let (_, error) = collect(&limited(&server), "hi").await;
        let error = error.expect("a hostile server must end the call with an error");
        (error, started.elapsed(), server.request_count())
    };

    let (error, took, requests) = error_of(vec![Reply::endless(Endless::NoHeaders)]).await;
    assert_eq!(error.kind, ErrorKind::ResponseTimeout, "{error}");
    assert!(
        error.to_string().ends_with(
            "sent no response headers within 300 ms (AGENT_HEADERS_TIMEOUT_MS sets the limit)"
        ),
        "{error}"
    );
    assert_eq!(requests, 1);
    assert!(took < Duration::from_secs(2), "{took:?}");

    // Pings keep the byte watchdog quiet; the progress limit ends the stream, and the
    // non-streaming last resort (pinging too) ends at its own limit.
    let server = Server::start(Script::new(vec![Reply::endless(Endless::Pings(
        Duration::from_millis(20),
    ))]))
    .await
    .unwrap();
    let (events, error) = collect(&limited(&server), "hi").await;
    let restart = events.iter().find_map(|event| match event {
        ProviderEvent::Restart { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(
        restart.as_deref(),
        Some(
            "stream idle: nothing but pings or empty updates for 400 ms (AGENT_STREAM_PROGRESS_TIMEOUT_MS sets the limit)"
        )
    );
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::ResponseTimeout, "{error}");
    assert!(
        error
            .to_string()
            .contains("did not complete within 600 ms (AGENT_NON_STREAMING_TIMEOUT_MS"),
        "{error}"
    );
    assert_eq!(server.request_count(), 2);

    let (error, took, requests) = error_of(vec![Reply::endless(Endless::Text)]).await;
    assert_eq!(error.kind, ErrorKind::ResponseTooLarge, "{error}");
    assert_eq!(
        error.to_string(),
        "response too large: the streamed response passed 1048576 bytes (set AGENT_MAX_STREAM_BYTES to allow more)"
    );
    assert_eq!(requests, 1, "a response too large is not retried");
    assert!(took < Duration::from_secs(2), "{took:?}");

    // The streamed attempt stalls; the non-streaming one gets a 2 GiB body.
    let (error, took, requests) = error_of(vec![
        Reply::turn(Turn::new().text("hello")).faults(Faults {
            stall_after: Some(10),
            ..Faults::default()
        }),
        Reply::endless(Endless::JsonBody { bytes: 2 << 30 }),
    ])
    .await;
    assert_eq!(error.kind, ErrorKind::ResponseTooLarge, "{error}");
    assert!(
        error.to_string().ends_with(
            "the non-streaming response passed 1048576 bytes (set AGENT_MAX_BODY_BYTES to allow more)"
        ),
        "{error}"
    );
    assert_eq!(requests, 2);
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Empty deltas are not progress; a steady trickle of real ones is, until the whole
    // stream's time is up (not retried).
    let (error, took, _) = error_of(vec![Reply::endless(Endless::Trickle {
        interval: Duration::from_millis(20),
        empty: true,
    })])
    .await;
    assert!(
        error
            .to_string()
            .contains("nothing but pings or empty updates")
            || error.kind == ErrorKind::ResponseTimeout,
        "{error}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    let server = Server::start(Script::new(vec![Reply::endless(Endless::Trickle {
        interval: Duration::from_millis(20),
        empty: false,
    })]))
    .await
    .unwrap();
    let mut config = config(&server);
    config.max_retries = 0;
    config.progress_timeout = Duration::from_millis(400);
    config.stream_timeout = Duration::from_millis(700);
    let (_, error) = collect(&make_client(config, Arc::new(FakeSleeper::default())), "hi").await;
    let error = error.unwrap();
    assert_eq!(error.kind, ErrorKind::ResponseTooLarge, "{error}");
    assert!(
        error
            .to_string()
            .contains("ran longer than 700 ms (set AGENT_STREAM_TIMEOUT_MS"),
        "{error}"
    );
    assert_eq!(server.request_count(), 1, "not retried");

    // An error status whose body never ends: classified by its status within the idle
    // timeout, not read forever.
    let mut forever = Reply::endless(Endless::Pings(Duration::from_millis(20)));
    forever.status = 400;
    let (error, took, _) = error_of(vec![forever]).await;
    assert_eq!(error.kind, ErrorKind::InvalidRequest, "{error}");
    assert_eq!(error.status, Some(400));
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// Gemini's OpenAI-compatible endpoint attaches `extra_content` (its thought signature) to a
/// tool call and refuses a later request that names the call without it: the client keeps
/// it (never in the history) and sends it back with the call, whether it came with the
/// call's first piece or alone in a later one.
#[tokio::test]
async fn a_tool_calls_extra_content_goes_back_with_it() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat-servers");
    for (fixture, signature) in [
        ("gemini-tool-call.sse", "SIG1"),
        ("gemini-split-args-signature-only.sse", "SIG1"),
    ] {
        let stream = std::fs::read(dir.join(fixture)).unwrap();
        let server = Server::start(Script::new(vec![
            Reply::raw_sse(stream),
            Reply::turn(Turn::new().text("Done.")),
        ]))
        .await
        .unwrap();
        let mut config = config(&server);
        config.api = provider::Api::ChatCompletions(provider::chat::ChatOptions::default());
        let client = make_client(config, Arc::new(provider::TokioSleeper));
        let (events, error) = collect(&client, "read a.txt").await;
        assert!(error.is_none(), "{error:?}");
        let Some(ProviderEvent::Done { message, .. }) = events.last() else {
            panic!("{events:?}");
        };
        let call = message
            .content
            .iter()
            .find_map(protocol::ContentBlock::as_tool_use)
            .unwrap();
        assert_eq!(call.id.as_str(), "fc1");
        // Not in the history's blocks.
        assert!(!serde_json::to_string(&message).unwrap().contains(signature));
        let history = json!({
            "model": "gemini-3-flash-preview", "max_tokens": 100, "stream": true,
            "messages": [
                {"role": "user", "content": "read a.txt"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "fc1", "name": "Read", "input": {"file_path": "a.txt"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "fc1", "content": "hello"}]},
            ],
        });
        let mut stream = client.stream(Bytes::from(history.to_string()), CancellationToken::new());
        while let Some(item) = stream.next().await {
            item.unwrap();
        }
        let sent = server.requests()[1].json();
        assert_eq!(
            sent["messages"][1]["tool_calls"][0]["extra_content"],
            json!({"google": {"thought_signature": signature}}),
            "{fixture}: {sent}"
        );
    }
}
