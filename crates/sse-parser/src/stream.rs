//! `futures_core::Stream` adapters (feature `stream`).
//!
//! [`SseStream`] turns a stream of byte chunks into [`SseEvent`]s; [`ItemStream`] runs the
//! whole [`MessageStream`] pipeline. Neither spawns tasks or needs a runtime.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use crate::frame::{FrameError, Framer, SseEvent};
use crate::pipeline::{Error, Item, MessageStream};

/// An error of a stream adapter: the underlying byte stream's, or the parser's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError<E, P> {
    /// The byte stream failed.
    #[error("reading the response body: {0}")]
    Transport(E),
    /// The parser failed.
    #[error(transparent)]
    Parse(P),
}

/// Events framed from a stream of byte chunks. Ends when the byte stream ends; the event the
/// input ended inside is not dispatched (WHATWG).
///
/// # Cancellation safety
///
/// Dropping the stream between polls loses nothing already returned; bytes of a partial event
/// are discarded with it.
#[derive(Debug)]
pub struct SseStream<S> {
    inner: S,
    framer: Framer,
    done: bool,
}

impl<S> SseStream<S> {
    /// Frames the chunks of `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            framer: Framer::new(),
            done: false,
        }
    }
}

impl<S, E> Stream for SseStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<SseEvent, StreamError<E, FrameError>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match this.framer.next_event() {
                Ok(Some(event)) => return Poll::Ready(Some(Ok(event))),
                Ok(None) => {}
                Err(error) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(StreamError::Parse(error))));
                }
            }
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => this.framer.push(chunk),
                Poll::Ready(Some(Err(error))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(StreamError::Transport(error))));
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The [`MessageStream`] pipeline over a stream of byte chunks: events, completed blocks and
/// complete messages as they arrive. At the end of input the accumulator's end-of-input rule
/// applies: an accepted message without `message_stop` comes as a last
/// [`Item::MessageComplete`]; an incomplete one as an error.
///
/// # Cancellation safety
///
/// Dropping the stream between polls loses nothing already returned.
#[derive(Debug)]
pub struct ItemStream<S> {
    inner: S,
    pipeline: Option<MessageStream>,
    input_done: bool,
}

impl<S> ItemStream<S> {
    /// Parses the chunks of `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            pipeline: Some(MessageStream::new()),
            input_done: false,
        }
    }
}

impl<S, E> Stream for ItemStream<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    type Item = Result<Item, StreamError<E, Error>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let Some(pipeline) = this.pipeline.as_mut() else {
                return Poll::Ready(None);
            };
            match pipeline.next_item() {
                Ok(Some(item)) => return Poll::Ready(Some(Ok(item))),
                Ok(None) => {}
                Err(error) => {
                    this.pipeline = None;
                    return Poll::Ready(Some(Err(StreamError::Parse(error))));
                }
            }
            if this.input_done {
                let Some(pipeline) = this.pipeline.take() else {
                    return Poll::Ready(None);
                };
                return Poll::Ready(match pipeline.finish() {
                    Ok(finished) => finished
                        .message
                        .map(|message| Ok(Item::MessageComplete(Box::new(message)))),
                    Err(error) => Some(Err(StreamError::Parse(error))),
                });
            }
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => pipeline.push(chunk),
                Poll::Ready(Some(Err(error))) => {
                    this.pipeline = None;
                    return Poll::Ready(Some(Err(StreamError::Transport(error))));
                }
                Poll::Ready(None) => this.input_done = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
