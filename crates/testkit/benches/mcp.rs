//! What MCP costs: connecting N stdio servers (`testkit mcp-server`: spawn, handshake, tool
//! list) and one call of an MCP tool (`echo`, JSON-RPC over the child's pipes, or over
//! streamable HTTP to an in-process server on 127.0.0.1) against the same call of an
//! in-process tool. Run with `cargo bench -p testkit --bench mcp` (also part
//! of `cargo xtask bench`).
// A bench: a failed setup is a failed run.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use executor::{Tool, ToolContext, ToolFuture, ToolOutput, Workspace};
use mcp::config::{Configured, ServerConfig};
use serde_json::{Value, json};

fn server(name: &str) -> Configured {
    Configured {
        name: name.into(),
        config: ServerConfig::Stdio {
            command: env!("CARGO_BIN_EXE_testkit").into(),
            args: vec!["mcp-server".into()],
            env: BTreeMap::new(),
        },
        origin: "/bench".into(),
    }
}

/// An in-process tool doing what `echo` does, as the built-in tools run.
struct Echo(Value);

impl Tool for Echo {
    fn name(&self) -> &str {
        "Echo"
    }
    fn description(&self) -> &str {
        "echo"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    fn call(&self, input: Value, _context: ToolContext) -> ToolFuture<'_> {
        Box::pin(async move {
            Ok(ToolOutput::text(
                input["text"].as_str().unwrap_or_default().to_owned(),
            ))
        })
    }
}

fn mcp(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let logs = std::env::temp_dir().join(format!("testkit-mcp-bench-{}", std::process::id()));
    let options = mcp::Options::new(&logs, Duration::from_secs(10));
    let mut group = c.benchmark_group("mcp");
    group.sample_size(20);
    for count in [1usize, 4] {
        group.bench_function(format!("connect_{count}_stdio_servers"), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let servers = (0..count).map(|n| server(&format!("s{n}"))).collect();
                    let connected = mcp::connect_all(servers, &options).await;
                    assert!(
                        connected
                            .iter()
                            .all(|server| server.status == mcp::Status::Connected)
                    );
                });
            });
        });
    }
    let tools = runtime.block_on(async {
        mcp::connect_all(vec![server("kit")], &options)
            .await
            .pop()
            .expect("one server")
            .tools
    });
    let echo = tools
        .iter()
        .find(|tool| tool.name() == "mcp__kit__echo")
        .expect("echo")
        .clone();
    let local: Arc<dyn Tool> = Arc::new(Echo(json!({"type": "object"})));
    let (_remote, http_echo) = runtime.block_on(async {
        let remote = testkit::mcp::McpHttpServer::start(0, None)
            .await
            .expect("an HTTP server");
        let configured = Configured {
            name: "web".into(),
            config: ServerConfig::Http {
                url: remote.url().to_owned(),
                headers: BTreeMap::new(),
            },
            origin: "/bench".into(),
        };
        let tools = mcp::connect_all(vec![configured], &options)
            .await
            .pop()
            .expect("one server")
            .tools;
        let echo = tools
            .into_iter()
            .find(|tool| tool.name() == "mcp__web__echo")
            .expect("echo");
        (remote, echo)
    });
    let workspace = Arc::new(Workspace::default());
    for (name, tool) in [
        ("call_mcp_echo", echo),
        ("call_mcp_http_echo", http_echo),
        ("call_in_process_echo", local),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let context = ToolContext::detached("toolu_1".into(), Arc::clone(&workspace));
                    let out = tool
                        .call(json!({"text": "hello"}), context)
                        .await
                        .expect("the call");
                    assert!(!out.is_error);
                });
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&logs);
}

criterion_group!(benches, mcp);
criterion_main!(benches);
