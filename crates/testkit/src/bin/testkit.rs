//! `testkit serve FILE [--port N] [--tls]`: serve a captured `.sse` body, or a JSON list of
//! turns, as a Messages API on 127.0.0.1 until Ctrl-C. The last reply repeats.
//!
//! JSON turns: `[{"text": "...", "tool_uses": [{"id": "toolu_1", "name": "Read", "input": {}}],
//! "stop_reason": "tool_use"}]`.

use anyhow::Context as _;
use testkit::{Reply, Script, Server, Turn};

fn usage() -> &'static str {
    "usage: testkit serve FILE.sse|FILE.json [--port N] [--tls]"
}

/// Exit codes: 0 after Ctrl-C, 1 when the file cannot be served, 2 on a usage error.
fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        println!("{}", usage());
        return std::process::ExitCode::SUCCESS;
    }
    let (Some("serve"), Some(file)) = (args.first().map(String::as_str), args.get(1)) else {
        eprintln!("testkit: {}", usage());
        return std::process::ExitCode::from(2);
    };
    let (port, tls) = match parse_options(&args[2..]) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("testkit: {error}\n{}", usage());
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("testkit: starting the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(file, port, tls)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("testkit: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `--port N` and `--tls`.
fn parse_options(options: &[String]) -> Result<(u16, bool), String> {
    let mut port = 0;
    let mut tls = false;
    let mut rest = options.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => {
                port = rest
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or("--port needs a number from 0 to 65535")?;
            }
            "--tls" => tls = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok((port, tls))
}

async fn serve(file: &str, port: u16, tls: bool) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
    let replies = if file.ends_with(".json") {
        let turns: Vec<serde_json::Value> =
            serde_json::from_slice(&bytes).with_context(|| format!("parsing {file}"))?;
        turns
            .iter()
            .map(|spec| {
                let mut turn = Turn::new();
                if let Some(text) = spec["text"].as_str() {
                    turn = turn.text(text);
                }
                for tool in spec["tool_uses"].as_array().into_iter().flatten() {
                    turn = turn.tool_use(
                        tool["id"].as_str().unwrap_or("toolu_1"),
                        tool["name"].as_str().unwrap_or("Read"),
                        tool["input"].clone(),
                    );
                }
                if let Some(reason) = spec["stop_reason"].as_str() {
                    turn = turn.stop(reason);
                }
                Reply::turn(turn)
            })
            .collect()
    } else {
        vec![Reply::raw_sse(bytes)]
    };
    let server = Server::bind(Script::new(replies), tls.then_some(()), port).await?;
    println!("{}", server.base_url());
    if let Some(pem) = server.cert_pem() {
        eprintln!("{pem}");
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
