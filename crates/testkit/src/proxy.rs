//! A minimal HTTP CONNECT proxy on loopback, for testing clients that honour `HTTPS_PROXY`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// A CONNECT proxy that only tunnels to 127.0.0.1 / localhost; records each target.
#[derive(Debug)]
pub struct ConnectProxy {
    addr: SocketAddr,
    targets: Arc<Mutex<Vec<String>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl ConnectProxy {
    /// Starts on a free loopback port.
    ///
    /// # Errors
    ///
    /// When the port cannot be bound.
    pub async fn start() -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the proxy")?;
        let addr = listener.local_addr()?;
        let targets = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&targets);
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                tokio::spawn(async move {
                    let _ = tunnel(client, recorded).await;
                });
            }
        });
        Ok(Self {
            addr,
            targets,
            accept,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `host:port` of every CONNECT received.
    pub fn targets(&self) -> Vec<String> {
        self.targets
            .lock()
            .map(|targets| targets.clone())
            .unwrap_or_default()
    }
}

async fn tunnel(mut client: TcpStream, recorded: Arc<Mutex<Vec<String>>>) -> anyhow::Result<()> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await? == 0 || head.len() > 8192 {
            anyhow::bail!("bad CONNECT request");
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let target = head
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("CONNECT "))
        .and_then(|rest| rest.split_whitespace().next())
        .context("not a CONNECT request")?
        .to_owned();
    if let Ok(mut targets) = recorded.lock() {
        targets.push(target.clone());
    }
    let port = target
        .rsplit_once(':')
        .map(|(_, port)| port)
        .unwrap_or("443");
    // Loopback only: this proxy never reaches beyond the machine.
    let mut upstream = TcpStream::connect(("127.0.0.1", port.parse::<u16>()?)).await?;
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}
