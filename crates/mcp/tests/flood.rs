//! A server that floods the client with requests and notifications, over an in-memory pipe
//! whose buffers are small: while the server does not read the answers, the client's memory
//! stays bounded (it stops reading, the flood waits in the pipe); once the server reads,
//! every request gets exactly one answer, a result or the busy error.
//!
//! The allocator counts every thread of the process, so this file holds ONE test: nothing
//! else runs while the heap is measured.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::alloc::System;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp::flood::{BUSY_ERROR_CODE, Bounded, FloodStats, MAX_SERVER_REQUESTS};
use rmcp::ServiceExt as _;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Requests the server sends (each followed by a notification).
const FLOOD: usize = 20_000;

/// The most the client's heap may grow while the flood is held back. Unbounded, rmcp keeps a
/// task and the message for every request: tens of megabytes for this flood.
const MAX_GROWTH: usize = 4 * 1024 * 1024;

/// Answers the client's `initialize` (echoing its protocol version) and reads its
/// `notifications/initialized`.
async fn handshake<R, W>(lines: &mut tokio::io::Lines<BufReader<R>>, writer: &mut W)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let line = lines.next_line().await.unwrap().unwrap();
    let request: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(request["method"], "initialize", "{request}");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "protocolVersion": request["params"]["protocolVersion"],
        "capabilities": {"tools": {"listChanged": true}},
        "serverInfo": {"name": "flood", "version": "1.0.0"},
    }});
    writer
        .write_all(format!("{answer}\n").as_bytes())
        .await
        .unwrap();
    let line = lines.next_line().await.unwrap().unwrap();
    assert!(line.contains("notifications/initialized"), "{line}");
}

fn net_growth(region: &Region<'_, System>) -> usize {
    let change = region.change();
    change
        .bytes_allocated
        .saturating_sub(change.bytes_deallocated)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_keeps_the_clients_memory_bounded() {
    let (client_io, server_io) = tokio::io::duplex(16 * 1024);
    let (client_read, client_write) = tokio::io::split(client_io);
    let (server_read, mut server_write) = tokio::io::split(server_io);
    let stats = Arc::new(FloodStats::default());
    let transport = Bounded::new(
        AsyncRwTransport::new_client(client_read, client_write),
        "flood",
        Arc::default(),
        Arc::clone(&stats),
    );
    let mut lines = BufReader::new(server_read).lines();
    let client = tokio::spawn(async move { ().serve(transport).await.unwrap() });
    handshake(&mut lines, &mut server_write).await;
    let client = client.await.unwrap();

    let region = Region::new(GLOBAL);
    let written = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&written);
    let flood = tokio::spawn(async move {
        for at in 0..FLOOD {
            let mut burst =
                json!({"jsonrpc": "2.0", "id": format!("f{at}"), "method": "ping"}).to_string();
            burst.push('\n');
            let notification = if at % 100 == 0 {
                json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            } else {
                json!({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "x".repeat(64)}})
            };
            burst.push_str(&notification.to_string());
            burst.push('\n');
            server_write.write_all(burst.as_bytes()).await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
        }
        server_write
    });

    // The server does not read: the flood stalls once the pipe is full both ways.
    let mut last = usize::MAX;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = written.load(Ordering::SeqCst);
        if now == last || now == FLOOD || Instant::now() > deadline {
            break;
        }
        last = now;
    }
    let held = written.load(Ordering::SeqCst);
    let growth = net_growth(&region);
    eprintln!(
        "held back after {held} of {FLOOD} requests; heap +{growth} bytes; {stats:?}; {} tasks",
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    );
    assert!(
        held < FLOOD / 4,
        "the client read {held} requests whose answers could not be written"
    );
    assert!(growth < MAX_GROWTH, "the heap grew by {growth} bytes");
    assert!(
        stats.most_in_flight.load(Ordering::SeqCst) <= MAX_SERVER_REQUESTS as u64,
        "{stats:?}"
    );

    // The server reads now: every request is answered once, with a result or the busy
    // error, and the flood goes through.
    let mut results = 0;
    let mut refusals = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while results + refusals < FLOOD {
        let line = tokio::time::timeout_at(deadline.into(), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("{results} results and {refusals} refusals only"))
            .unwrap()
            .unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert!(
            answer["id"].as_str().is_some_and(|id| id.starts_with('f')),
            "{answer}"
        );
        if answer.get("result").is_some() {
            results += 1;
        } else {
            assert_eq!(answer["error"]["code"], BUSY_ERROR_CODE, "{answer}");
            refusals += 1;
        }
    }
    flood.await.unwrap();
    let growth = net_growth(&region);
    eprintln!("{results} results, {refusals} refusals; heap +{growth} bytes; {stats:?}");
    assert!(growth < MAX_GROWTH, "the heap grew by {growth} bytes");
    assert!(
        stats.most_in_flight.load(Ordering::SeqCst) <= MAX_SERVER_REQUESTS as u64,
        "{stats:?}"
    );
    // The notifications it does not act on were dropped, list changes folded.
    assert!(
        stats.dropped.load(Ordering::SeqCst) >= (FLOOD - FLOOD / 100) as u64,
        "{stats:?}"
    );
    drop(client);
}
