//! End-to-end streaming throughput through hyper over loopback, against testkit serving a
//! large text stream.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::StreamExt as _;
use provider::{AnthropicClient, Auth, ClientConfig, HyperTransport, ProviderEvent, TokioSleeper};
use testkit::{Reply, Script, Server, Turn};
use tokio_util::sync::CancellationToken;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // ~4 MB of text deltas of up to 32 characters, as real streams send them.
    let text: String = (0..60_000).map(|i| format!("word{i} ")).collect();
    let turn = Turn::new().text(&text);
    let body_len = turn.sse().len() as u64;
    let server = runtime
        .block_on(Server::start(Script::new(vec![Reply::turn(turn)])))
        .unwrap();
    let config = ClientConfig::new(&server.base_url(), Auth::None);
    let client = AnthropicClient::with_transport(
        config,
        Arc::new(HyperTransport::new(&[]).unwrap()),
        Arc::new(TokioSleeper),
    )
    .unwrap();
    let request = Bytes::from_static(br#"{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"go"}]}"#);
    let mut group = c.benchmark_group("provider");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(body_len));
    group.bench_function("stream_loopback_4mb", |b| {
        b.to_async(&runtime).iter(|| async {
            let mut stream = client.stream(request.clone(), CancellationToken::new());
            let mut events = 0usize;
            while let Some(event) = stream.next().await {
                if let ProviderEvent::Done { message, .. } = event.unwrap() {
                    assert!(message.text().len() > 100_000);
                }
                events += 1;
            }
            events
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
