//! `testkit serve FILE [--port N] [--tls]`: serve a captured `.sse` body, or a JSON list of
//! turns, as a Messages API on 127.0.0.1 until Ctrl-C. The last reply repeats.
//!
//! JSON turns: `[{"text": "...", "tool_uses": [{"id": "toolu_1", "name": "Read", "input": {}}],
//! "stop_reason": "tool_use"}]`.

use anyhow::Context as _;
use testkit::{Reply, Script, Server};

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
    let script = if file.ends_with(".json") {
        let text = String::from_utf8(bytes).with_context(|| format!("{file}: not UTF-8"))?;
        Script::from_json(&text).with_context(|| file.to_owned())?
    } else {
        Script::new(vec![Reply::raw_sse(bytes)])
    };
    let server = Server::bind(script, tls.then_some(()), port).await?;
    println!("{}", server.base_url());
    if let Some(pem) = server.cert_pem() {
        eprintln!("{pem}");
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
