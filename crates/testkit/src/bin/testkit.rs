//! `testkit pdf PAGES OUT [FILLER]`: write a PDF of PAGES pages (each content stream padded
//! to FILLER bytes, default 2,000) to OUT, for benchmarks.
//!
//! `testkit serve FILE [--port N] [--tls] [--requests LOG]`: serve a captured `.sse` body, or
//! a JSON list of turns, as a Messages API on 127.0.0.1 until Ctrl-C. The last reply repeats.
//! `--requests LOG` appends each request's body to LOG as one line (JSON), as it arrives;
//! `--usage-from-request` reports each turn's `input_tokens` as the request's bytes / 4;
//! `--cache-log LOG` also simulates the API's prompt cache (`testkit::cache`): each turn's
//! usage splits into `input_tokens`, `cache_creation_input_tokens` and
//! `cache_read_input_tokens` as the API would bill its request, and LOG gets one line per
//! Messages request with that usage, in order, as it is answered;
//! `--timeline LOG` writes, when the server is told to stop (SIGTERM, Ctrl-C), one line per
//! model request: `{"request": N, "arrived_unix_us": T}`, N from 0, T the wall-clock time its
//! head arrived in microseconds since the Unix epoch (for `cargo xtask bench-cli --ab`).
//!
//! JSON turns: `[{"text": "...", "tool_uses": [{"id": "toolu_1", "name": "Read", "input": {}}],
//! "stop_reason": "tool_use"}]`.

use anyhow::Context as _;
use testkit::{Reply, Script, Server};

fn usage() -> &'static str {
    "usage: testkit serve FILE.sse|FILE.json [--port N] [--tls] [--requests LOG.jsonl] [--usage-from-request] [--cache-log LOG.jsonl] [--timeline LOG.jsonl]\n       testkit mcp-server   (a scripted MCP server on stdio: echo, fail, slow, huge, image, write, crash, grow)\n       testkit mcp-http-server [--port N] [--bearer TOKEN]   (the same over streamable HTTP; prints its URL)\n       testkit pdf PAGES OUT [FILLER]   (writes a PDF of PAGES pages)"
}

/// Exit codes: 0 after Ctrl-C, 1 when the file cannot be served, 2 on a usage error.
fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        println!("{}", usage());
        return std::process::ExitCode::SUCCESS;
    }
    if args.first().map(String::as_str) == Some("mcp-server") {
        return match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|runtime| runtime.block_on(testkit::mcp::serve_stdio()))
        {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("testkit mcp-server: {error:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if args.first().map(String::as_str) == Some("mcp-http-server") {
        return mcp_http_server(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("pdf") {
        return pdf(&args[1..]);
    }
    // `--help` anywhere (`testkit serve --help` too) is a question, not a file name.
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{}", usage());
        return std::process::ExitCode::SUCCESS;
    }
    let (Some("serve"), Some(file)) = (args.first().map(String::as_str), args.get(1)) else {
        eprintln!("testkit: {}", usage());
        return std::process::ExitCode::from(2);
    };
    let options = match parse_options(&args[2..]) {
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
    match runtime.block_on(serve(file, options)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("testkit: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The options of `testkit serve`.
#[derive(Default)]
struct ServeOptions {
    /// `--port N` (0: any free port).
    port: u16,
    /// `--tls`.
    tls: bool,
    /// `--requests LOG`.
    log: Option<String>,
    /// `--usage-from-request`.
    usage_from_request: bool,
    /// `--timeline LOG`.
    timeline: Option<String>,
    /// `--cache-log LOG`.
    cache_log: Option<String>,
}

fn parse_options(options: &[String]) -> Result<ServeOptions, String> {
    let mut parsed = ServeOptions::default();
    let mut rest = options.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--port" => {
                parsed.port = rest
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or("--port needs a number from 0 to 65535")?;
            }
            "--tls" => parsed.tls = true,
            "--requests" => {
                parsed.log = Some(rest.next().ok_or("--requests needs a file")?.clone());
            }
            "--timeline" => {
                parsed.timeline = Some(rest.next().ok_or("--timeline needs a file")?.clone());
            }
            "--usage-from-request" => parsed.usage_from_request = true,
            "--cache-log" => {
                parsed.cache_log = Some(rest.next().ok_or("--cache-log needs a file")?.clone());
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(parsed)
}

async fn serve(file: &str, options: ServeOptions) -> anyhow::Result<()> {
    let ServeOptions {
        port,
        tls,
        log,
        usage_from_request,
        timeline,
        cache_log,
    } = options;
    let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
    let script = if file.ends_with(".json") {
        let text = String::from_utf8(bytes).with_context(|| format!("{file}: not UTF-8"))?;
        Script::from_json(&text).with_context(|| file.to_owned())?
    } else {
        Script::new(vec![Reply::raw_sse(bytes)])
    };
    let script = if cache_log.is_some() {
        script.simulate_cache()
    } else if usage_from_request {
        script.usage_from_request()
    } else {
        script
    };
    let server = std::sync::Arc::new(Server::bind(script, tls.then_some(()), port).await?);
    // The logs: new lines appended every 10 ms, and the rest when the server is told to stop
    // (Ctrl-C or SIGTERM), so a log read after `kill` is whole.
    let mut logs = Vec::new();
    if let Some(path) = log {
        logs.push(AppendLog::open(&path, |server: &Server| {
            server
                .requests()
                .into_iter()
                .map(|request| request.body)
                .collect()
        })?);
    }
    if let Some(path) = cache_log {
        logs.push(AppendLog::open(&path, |server: &Server| {
            server
                .billed()
                .into_iter()
                .map(|usage| usage.to_json().to_string().into_bytes())
                .collect()
        })?);
    }
    let logs = std::sync::Arc::new(std::sync::Mutex::new(logs));
    let write_new = {
        let server = std::sync::Arc::clone(&server);
        let logs = std::sync::Arc::clone(&logs);
        move || -> bool {
            let mut logs = logs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            logs.iter_mut().all(|log| log.write_new(&server))
        }
    };
    {
        let write_new = write_new.clone();
        tokio::spawn(async move {
            while write_new() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        });
    }
    println!("{}", server.base_url());
    if let Some(pem) = server.cert_pem() {
        eprintln!("{pem}");
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        signal = tokio::signal::ctrl_c() => signal.context("waiting for Ctrl-C")?,
        _ = terminate.recv() => {}
    }
    write_new();
    if let Some(timeline) = timeline {
        write_timeline(&server, &timeline)?;
    }
    Ok(())
}

/// A log file that gets one line per item of a list that only grows (the requests, the
/// billed usage), appended as the list grows.
struct AppendLog {
    out: std::fs::File,
    written: usize,
    lines: fn(&Server) -> Vec<Vec<u8>>,
}

impl AppendLog {
    fn open(path: &str, lines: fn(&Server) -> Vec<Vec<u8>>) -> anyhow::Result<Self> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {path}"))?;
        Ok(Self {
            out,
            written: 0,
            lines,
        })
    }

    /// Appends the lines not written yet; `false` once the file cannot be written.
    fn write_new(&mut self, server: &Server) -> bool {
        use std::io::Write as _;
        let lines = (self.lines)(server);
        for line in lines.iter().skip(self.written) {
            let mut line = line.clone();
            line.push(b'\n');
            if self
                .out
                .write_all(&line)
                .and_then(|()| self.out.flush())
                .is_err()
            {
                return false;
            }
        }
        self.written = lines.len();
        true
    }
}

/// `--timeline LOG`: one line per model request, when its head arrived.
fn write_timeline(server: &Server, path: &str) -> anyhow::Result<()> {
    let mut lines = String::new();
    for (index, request) in server.requests().iter().enumerate() {
        let since_epoch = request
            .arrived
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        lines.push_str(
            &serde_json::json!({"request": index, "arrived_unix_us": since_epoch.as_micros()})
                .to_string(),
        );
        lines.push('\n');
    }
    std::fs::write(path, lines).with_context(|| format!("writing {path}"))
}

/// `testkit mcp-http-server [--port N] [--bearer TOKEN]`: prints the URL, serves until Ctrl-C.
fn mcp_http_server(args: &[String]) -> std::process::ExitCode {
    let mut port = 0u16;
    let mut bearer = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let value = rest.next();
        match (arg.as_str(), value.map(String::as_str)) {
            ("--port", Some(value)) if value.parse::<u16>().is_ok() => {
                port = value.parse().unwrap_or_default();
            }
            ("--bearer", Some(value)) => bearer = Some(value.to_owned()),
            _ => {
                eprintln!("testkit: bad option {arg:?}\n{}", usage());
                return std::process::ExitCode::from(2);
            }
        }
    }
    let served = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| {
            runtime.block_on(async {
                let server = testkit::mcp::McpHttpServer::start(port, bearer.as_deref()).await?;
                println!("{}", server.url());
                tokio::signal::ctrl_c().await?;
                Ok(())
            })
        });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("testkit mcp-http-server: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `testkit pdf PAGES OUT [FILLER]`.
fn pdf(args: &[String]) -> std::process::ExitCode {
    let parsed = match args {
        [pages, out] => pages.parse().ok().map(|pages| (pages, out, 2_000)),
        [pages, out, filler] => pages
            .parse()
            .ok()
            .zip(filler.parse().ok())
            .map(|(pages, filler)| (pages, out, filler)),
        _ => None,
    };
    let Some((pages, out, filler)) = parsed else {
        eprintln!("testkit: {}", usage());
        return std::process::ExitCode::from(2);
    };
    match testkit::pdf::document(pages, filler)
        .map_err(anyhow::Error::from)
        .and_then(|bytes| std::fs::write(out, bytes).map_err(anyhow::Error::from))
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("testkit pdf: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
