//! A local Messages API server for tests and benchmarks (dev-only), and the scripted
//! model client the loop's and the session's tests share ([`model`]).
//!
//! [`Server`] binds `127.0.0.1:0` (plain HTTP, or TLS with a self-signed certificate made per
//! server with rcgen), answers `POST /v1/messages` from a [`Script`] of [`Reply`]s in order,
//! records every request, and shuts down when dropped. Replies are SSE bodies in the exact wire
//! format (built from a [`Turn`] or taken from a raw `.sse` file), JSON messages for
//! non-streaming requests, or API errors; each can carry [`Faults`]: chunking at arbitrary byte
//! boundaries, a stall after N bytes, a connection reset after N bytes, a delay between chunks.
//!
//! ```
//! use testkit::{Reply, Script, Server, Turn};
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! let server = Server::start(Script::new(vec![Reply::turn(Turn::new().text("Hello"))])).await?;
//! assert!(server.base_url().starts_with("http://127.0.0.1:"));
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod bedrock;
pub mod cache;
mod proxy;
mod script;
mod server;
pub mod web;

pub mod mcp;
pub mod model;
pub mod pdf;
pub mod screen;
pub use proxy::ConnectProxy;
pub use script::{Endless, Faults, Reply, ReplyBody, Script, ScriptError, Turn, sse_frame};
pub use server::{RecordedRequest, Server};
