//! `testkit serve FILE [--port N] [--tls]`: serve a captured `.sse` body, or a JSON list of
//! turns, as a Messages API on 127.0.0.1 until Ctrl-C. The last reply repeats.
//!
//! JSON turns: `[{"text": "...", "tool_uses": [{"id": "toolu_1", "name": "Read", "input": {}}],
//! "stop_reason": "tool_use"}]`.

use anyhow::{Context as _, bail};
use testkit::{Reply, Script, Server, Turn};

fn usage() -> &'static str {
    "usage: testkit serve FILE.sse|FILE.json [--port N] [--tls]"
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some("serve"), Some(file)) = (args.first().map(String::as_str), args.get(1)) else {
        bail!("{}", usage());
    };
    let mut port = 0;
    let mut tls = false;
    let mut rest = args[2..].iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => {
                port = rest
                    .next()
                    .context("--port needs a number")?
                    .parse()
                    .context("--port needs a number")?
            }
            "--tls" => tls = true,
            other => bail!("unknown option {other}\n{}", usage()),
        }
    }
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
