//! WHATWG event-stream framing over byte chunks.
//!
//! Guarantees:
//! - The rules of the HTML Standard's "event stream interpretation" hold exactly: LF, CRLF and
//!   lone CR line ends (also when a CR ends one chunk and the LF starts the next); one leading
//!   UTF-8 BOM dropped; `:` comments; `event`, `data`, `id`, `retry` fields with one optional
//!   space after the colon; a line without a colon is a field with an empty value; data lines
//!   joined with `\n`; dispatch on a blank line only; an event without data is not dispatched;
//!   an `id` containing NUL is ignored; `retry` only when all ASCII digits.
//! - Any chunking of the same bytes yields the same events.
//! - When an event's single data line lies inside one chunk, its data is a [`Bytes`] slice of
//!   that chunk: no copy, no allocation ([`Framer::next_event_ref`]: not even a reference
//!   count). Bytes are copied only for a line that spans chunks or for data of several
//!   lines.
//! - The usual event (`event: NAME`, one `data:` line, the blank line, LF line ends) costs two
//!   line-end searches and a few prefix comparisons; every other shape is read line by line
//!   by the same rules.
//! - Memory is bounded by the largest event, however small the chunks: past
//!   [`FramerConfig::max_event_bytes`] the framer fails with [`FrameError::EventTooLarge`] and
//!   stays failed.
//!
//! The framer works on bytes and does not validate UTF-8: invalid sequences cannot contain the
//! ASCII bytes it splits on, so decoding each field afterwards (as [`SseEvent::data_str`] does)
//! gives the same result as the standard's decode-then-parse order.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// The UTF-8 byte order mark, dropped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Default maximum size of one event (data, event type and the line being read): 32 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// One dispatched event.
///
/// Fields are [`Bytes`]: slices of the input chunks when possible (cheap to clone, no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    event: Bytes,
    data: Bytes,
    id: Bytes,
}

impl SseEvent {
    /// An event with the given type (empty means the default, `message`), data and last event
    /// id. Useful to feed the decoder from sources that are not SSE (JSONL fixtures).
    pub fn new(event: impl Into<Bytes>, data: impl Into<Bytes>, id: impl Into<Bytes>) -> Self {
        Self {
            event: event.into(),
            data: data.into(),
            id: id.into(),
        }
    }

    /// The event type as sent in the `event:` field; empty when none was sent.
    pub fn event_bytes(&self) -> &Bytes {
        &self.event
    }

    /// The event type, `"message"` when no `event:` field was sent. Invalid UTF-8 is replaced
    /// with U+FFFD.
    pub fn event_type(&self) -> std::borrow::Cow<'_, str> {
        if self.event.is_empty() {
            std::borrow::Cow::Borrowed("message")
        } else {
            String::from_utf8_lossy(&self.event)
        }
    }

    /// The data: the event's `data:` values joined with `\n`.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The data as text, invalid UTF-8 replaced with U+FFFD.
    pub fn data_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.data)
    }

    /// The last event id in force when the event was dispatched (empty when none was set).
    pub fn id(&self) -> &Bytes {
        &self.id
    }

    /// Consumes the event, returning its data.
    pub fn into_data(self) -> Bytes {
        self.data
    }
}

/// Whether a `Content-Type` header value names the event-stream media type:
/// `text/event-stream`, case-insensitive, parameters (`; charset=utf-8`) allowed. A response
/// with any other media type must be refused before any event is read.
///
/// ```
/// assert!(sse_parser::is_event_stream("text/event-stream; charset=utf-8"));
/// assert!(sse_parser::is_event_stream("Text/Event-Stream;"));
/// assert!(!sse_parser::is_event_stream("application/json"));
/// ```
pub fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default();
    essence.trim().eq_ignore_ascii_case("text/event-stream")
}

/// Limits of a [`Framer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramerConfig {
    /// Largest accepted event in bytes: its data, event type and the line being read together.
    /// Default [`DEFAULT_MAX_EVENT_BYTES`] (32 MiB).
    pub max_event_bytes: usize,
}

impl Default for FramerConfig {
    fn default() -> Self {
        Self {
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
        }
    }
}

/// What went wrong while framing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// An event grew past the configured maximum.
    #[error(
        "event-stream event exceeds the {limit}-byte limit (event starting at byte {event_start})"
    )]
    EventTooLarge {
        /// The configured maximum in bytes.
        limit: usize,
        /// Stream offset (bytes from the start, BOM included) where the event's first line
        /// began.
        event_start: u64,
    },
}

/// An event that was still being read when the input ended: the standard does not dispatch it.
/// [`Framer::finish`] returns it so callers can say what was cut off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnterminatedEvent {
    /// The event as it would have been dispatched, its last line included even if that line
    /// had no line end.
    pub event: SseEvent,
    /// Whether the data had at least one `data:` line (an event without data is never
    /// dispatched, even when terminated).
    pub has_data: bool,
    /// Bytes of the last line that had no line end (0 when the input ended on a line end).
    pub unterminated_line_bytes: usize,
}

/// Where the BOM check stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bom {
    /// Still at the start of the stream; the first `n` BOM bytes have been seen and held back.
    Checking(usize),
    /// Past the start.
    Done,
}

/// The data buffer of the event being built.
#[derive(Debug)]
enum Data {
    /// No `data:` line yet.
    Empty,
    /// Exactly one line: a slice of its chunk (zero-copy).
    One(Bytes),
    /// Several lines joined with `\n` (copied).
    Joined(BytesMut),
}

/// One dispatched event borrowed from its [`Framer`]; see [`Framer::next_event_ref`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    event: &'a [u8],
    data: &'a [u8],
    id: &'a [u8],
}

impl<'a> SseEventRef<'a> {
    /// The event type as sent in the `event:` field; empty when none was sent.
    pub fn event_bytes(&self) -> &'a [u8] {
        self.event
    }

    /// The event type, `"message"` when no `event:` field was sent. Invalid UTF-8 is replaced
    /// with U+FFFD.
    pub fn event_type(&self) -> std::borrow::Cow<'a, str> {
        if self.event.is_empty() {
            std::borrow::Cow::Borrowed("message")
        } else {
            String::from_utf8_lossy(self.event)
        }
    }

    /// The data: the event's `data:` values joined with `\n`.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The last event id in force when the event was dispatched (empty when none was set).
    pub fn id(&self) -> &'a [u8] {
        self.id
    }

    /// An owned copy of the event (the fields are copied), for keeping it past the next call
    /// to the framer.
    pub fn to_event(&self) -> SseEvent {
        SseEvent::new(
            Bytes::copy_from_slice(self.event),
            Bytes::copy_from_slice(self.data),
            Bytes::copy_from_slice(self.id),
        )
    }
}

/// A line that spans chunks; see [`Framer`]'s `partial_line`.
#[derive(Debug, Default)]
struct PartialLine {
    /// The line's bytes so far. Each finished line is split off (shared, not copied), so the
    /// allocation is reused once the lines handed out are dropped. Copying each piece at once
    /// (rather than keeping a `Bytes` per piece) keeps the memory at the line's size however
    /// small the pieces a server sends.
    joined: BytesMut,
}

impl PartialLine {
    fn is_empty(&self) -> bool {
        self.joined.is_empty()
    }

    fn len(&self) -> usize {
        self.joined.len()
    }

    fn push(&mut self, piece: &[u8]) {
        self.joined.extend_from_slice(piece);
    }

    /// The whole line, `tail` last; leaves the line empty.
    fn take(&mut self, tail: &[u8]) -> Bytes {
        self.joined.extend_from_slice(tail);
        self.joined.split().freeze()
    }
}

/// What [`Framer::advance`] found.
enum Found {
    /// A single-line event inside the current chunk, as ranges of it.
    Whole(Whole),
    /// An event built line by line.
    Built(SseEvent),
}

/// A single-line event inside the current chunk; see [`Framer::whole_event`].
struct Whole {
    name: Name,
    data: std::ops::Range<usize>,
}

/// The event name of a [`Whole`] event.
enum Name {
    /// One of [`KNOWN_EVENT_NAMES`].
    Known(&'static [u8]),
    /// A range of the current chunk.
    Slice(std::ops::Range<usize>),
    /// No `event:` line.
    None,
}

/// WHATWG event-stream framer: push byte chunks, pull events.
///
/// ```
/// use bytes::Bytes;
/// use sse_parser::Framer;
///
/// let mut framer = Framer::new();
/// framer.push(Bytes::from_static(b"event: ping\ndata: {\"type\":"));
/// assert!(framer.next_event()?.is_none()); // the line is not complete yet
/// framer.push(Bytes::from_static(b"\"ping\"}\n\n"));
/// let event = framer.next_event()?.expect("one event");
/// assert_eq!(event.event_type(), "ping");
/// assert_eq!(event.data_str(), r#"{"type":"ping"}"#);
/// # Ok::<(), sse_parser::FrameError>(())
/// ```
#[derive(Debug)]
pub struct Framer {
    config: FramerConfig,
    /// The chunk being scanned and the scan position in it.
    chunk: Bytes,
    pos: usize,
    /// Chunks pushed while `chunk` still had unread bytes.
    queued: VecDeque<Bytes>,
    /// Bytes of a line that started in an earlier chunk and has no line end yet.
    partial_line: PartialLine,
    /// The previous line ended with a CR as the last byte of a chunk: an LF at the start of the
    /// next bytes belongs to that line end.
    skip_lf: bool,
    bom: Bom,
    /// The event being built.
    event_type: Bytes,
    data: Data,
    data_len: usize,
    /// The last event id buffer; persists across events.
    last_event_id: Bytes,
    /// The reconnection time in milliseconds set by the last valid `retry:` field.
    retry: Option<u64>,
    /// Stream offset of the next byte to scan, and of the first line of the current event.
    offset: u64,
    event_start: u64,
    failed: Option<FrameError>,
    /// The event [`Framer::next_event_ref`] lends when it was built line by line.
    lent: Option<SseEvent>,
    line_ends: LineEnds,
}

impl Default for Framer {
    fn default() -> Self {
        Self::new()
    }
}

impl Framer {
    /// A framer with the default limits.
    pub fn new() -> Self {
        Self::with_config(FramerConfig::default())
    }

    /// A framer with the given limits.
    pub fn with_config(config: FramerConfig) -> Self {
        Self {
            config,
            chunk: Bytes::new(),
            pos: 0,
            queued: VecDeque::new(),
            partial_line: PartialLine::default(),
            skip_lf: false,
            bom: Bom::Checking(0),
            event_type: Bytes::new(),
            data: Data::Empty,
            data_len: 0,
            last_event_id: Bytes::new(),
            retry: None,
            offset: 0,
            event_start: 0,
            failed: None,
            lent: None,
            line_ends: LineEnds::new(),
        }
    }

    /// Sets the last event id in force before the stream starts, as after a reconnection that
    /// sent `Last-Event-ID`.
    pub fn set_last_event_id(&mut self, id: impl Into<Bytes>) {
        self.last_event_id = id.into();
    }

    /// The reconnection time in milliseconds from the last valid `retry:` field, if any.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Total bytes pushed and scanned so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Adds a chunk of input. Empty chunks are allowed and change nothing. Call
    /// [`Framer::next_event`] until it returns `None` to read the events it completes.
    pub fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        if self.pos >= self.chunk.len() && self.queued.is_empty() {
            self.chunk = chunk;
            self.pos = 0;
        } else {
            self.queued.push_back(chunk);
        }
    }

    /// Pushes `chunk` and returns an iterator over the events it completes.
    pub fn feed(&mut self, chunk: Bytes) -> Events<'_> {
        self.push(chunk);
        Events { framer: self }
    }

    /// The next complete event from the bytes pushed so far, or `None` when more input is
    /// needed.
    ///
    /// # Errors
    ///
    /// [`FrameError::EventTooLarge`] when an event grows past the limit; every later call
    /// returns the same error.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, FrameError> {
        Ok(match self.advance()? {
            None => None,
            Some(Found::Whole(whole)) => Some(SseEvent {
                // The one reference count of the event, taken before the other stores: an
                // atomic operation waits for every pending store.
                data: self.chunk.slice(whole.data),
                event: match whole.name {
                    Name::Known(known) => Bytes::from_static(known),
                    Name::Slice(range) => self.chunk.slice(range),
                    Name::None => Bytes::new(),
                },
                id: if self.last_event_id.is_empty() {
                    Bytes::new()
                } else {
                    self.last_event_id.clone()
                },
            }),
            Some(Found::Built(event)) => Some(event),
        })
    }

    /// The next complete event, borrowed from the framer: the same events as
    /// [`Framer::next_event`], without a reference count or a copy for the usual single-line
    /// event (its fields are slices of the chunk being read). Use it when the event is decoded
    /// at once, as [`crate::MessageStream`] does; the borrow ends before the next call.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use sse_parser::Framer;
    ///
    /// let mut framer = Framer::new();
    /// framer.push(Bytes::from_static(b"event: ping\ndata: {\"type\":\"ping\"}\n\n"));
    /// let event = framer.next_event_ref()?.expect("one event");
    /// assert_eq!(event.event_type(), "ping");
    /// assert_eq!(event.data(), br#"{"type":"ping"}"#);
    /// # Ok::<(), sse_parser::FrameError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Framer::next_event`].
    pub fn next_event_ref(&mut self) -> Result<Option<SseEventRef<'_>>, FrameError> {
        self.lent = None;
        Ok(match self.advance()? {
            None => None,
            Some(Found::Whole(whole)) => Some(SseEventRef {
                event: match whole.name {
                    Name::Known(known) => known,
                    Name::Slice(range) => &self.chunk[range],
                    Name::None => b"",
                },
                data: &self.chunk[whole.data],
                id: &self.last_event_id,
            }),
            Some(Found::Built(event)) => {
                let lent = self.lent.insert(event);
                Some(SseEventRef {
                    event: &lent.event,
                    data: &lent.data,
                    id: &lent.id,
                })
            }
        })
    }

    /// Reads until the next event: the fast path's ranges into the chunk, or an event built
    /// line by line.
    fn advance(&mut self) -> Result<Option<Found>, FrameError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        loop {
            if self.pos >= self.chunk.len() {
                match self.queued.pop_front() {
                    Some(next) => {
                        self.chunk = next;
                        self.pos = 0;
                    }
                    None => return Ok(None),
                }
            }
            if let Bom::Checking(_) = self.bom
                && !self.check_bom()
            {
                continue;
            }
            if self.skip_lf {
                self.skip_lf = false;
                if self.chunk[self.pos] == b'\n' {
                    self.pos += 1;
                    self.offset += 1;
                    if matches!(self.data, Data::Empty) && self.event_type.is_empty() {
                        // The LF belongs to the previous line's end: the next event starts
                        // after it, as it does when CR and LF arrive in one chunk.
                        self.event_start = self.offset;
                    }
                    continue;
                }
            }
            if self.partial_line.is_empty()
                && matches!(self.data, Data::Empty)
                && self.event_type.is_empty()
                && let Some(whole) = self.whole_event()
            {
                return Ok(Some(Found::Whole(whole)));
            }
            match self.scan_line() {
                Ok(Some(event)) => return Ok(Some(Found::Built(event))),
                Ok(None) => {}
                Err(error) => {
                    self.failed = Some(error.clone());
                    return Err(error);
                }
            }
        }
    }

    /// Ends the input. Returns the event that was still being read, if any: the standard does
    /// not dispatch it, but callers can report what was cut off. Bytes pushed but not yet read
    /// with [`Framer::next_event`] are taken into account.
    ///
    /// # Errors
    ///
    /// [`FrameError::EventTooLarge`] when the framer had failed, or fails on the remaining
    /// bytes.
    pub fn finish(&mut self) -> Result<Option<UnterminatedEvent>, FrameError> {
        // Events completed by unread bytes are dropped here: the caller chose to stop reading.
        while self.next_event()?.is_some() {}
        if let Bom::Checking(held) = self.bom {
            // A stream that is only a BOM prefix: those bytes are line content.
            self.partial_line.push(&BOM[..held]);
            self.bom = Bom::Done;
        }
        let unterminated_line_bytes = self.partial_line.len();
        if unterminated_line_bytes > 0 {
            let line = self.partial_line.take(&[]);
            // Interpreting the cut line cannot dispatch: it is not empty.
            self.process_line(&line, 0, line.len());
        }
        let has_data = !matches!(self.data, Data::Empty);
        if !has_data && self.event_type.is_empty() && unterminated_line_bytes == 0 {
            return Ok(None);
        }
        let event = self.take_event();
        Ok(Some(UnterminatedEvent {
            event,
            has_data,
            unterminated_line_bytes,
        }))
    }

    /// Handles the start of the stream; returns `true` once past the BOM check.
    fn check_bom(&mut self) -> bool {
        let Bom::Checking(held) = self.bom else {
            return true;
        };
        let available = &self.chunk[self.pos..];
        let wanted = &BOM[held..];
        let n = wanted.len().min(available.len());
        if available[..n] == wanted[..n] {
            self.pos += n;
            self.offset += n as u64;
            if held + n == BOM.len() {
                self.bom = Bom::Done;
                self.event_start = self.offset;
                return true;
            }
            self.bom = Bom::Checking(held + n);
            return false;
        }
        // Not a BOM: the bytes held back are the start of the first line.
        self.partial_line.push(&BOM[..held]);
        self.bom = Bom::Done;
        true
    }

    /// The fast path for the events every LLM API sends: an optional `event: NAME` line, one
    /// `data: VALUE` line and the blank line, LF line ends, all inside the current chunk, with
    /// no event in progress. Two line-end searches and a few prefix checks dispatch the event;
    /// its data is a slice of the chunk and a known name is a static [`Bytes`] (no reference
    /// count for it). Anything else (another field, a CR, a line that leaves the chunk, an
    /// event near the size limit) returns `None` having changed nothing, and the line-by-line
    /// path reads the same bytes, so this can only be faster, never different.
    fn whole_event(&mut self) -> Option<Whole> {
        let start = self.pos;
        let bytes = &self.chunk[start..];
        let (name, data_line) = match bytes.strip_prefix(b"event: ") {
            // A known name is recognised with its line end, without searching for the end.
            Some(rest) => match known_event_line(rest) {
                Some(known) => (Name::Known(known), 8 + known.len()),
                None => {
                    let name_len = self.line_ends.lf_line(rest)?;
                    (Name::Slice(start + 7..start + 7 + name_len), 8 + name_len)
                }
            },
            None => (Name::None, 0),
        };
        let value_len = self
            .line_ends
            .lf_line(bytes[data_line..].strip_prefix(b"data: ")?)?;
        let value_start = data_line + 6;
        let end = value_start + value_len + 1;
        if bytes.get(end) != Some(&b'\n') {
            return None;
        }
        // The limits the line-by-line path checks: the event line alone, then the event type
        // plus the data line.
        let name_len = data_line.saturating_sub(8);
        let max = self.config.max_event_bytes;
        if data_line > 0 && 7 + name_len > max || name_len + 6 + value_len > max {
            return None;
        }
        let consumed = end + 1;
        self.pos += consumed;
        self.offset += consumed as u64;
        self.event_start = self.offset;
        Some(Whole {
            name,
            data: start + value_start..start + value_start + value_len,
        })
    }

    /// Scans one line from the current chunk. Returns an event when the line dispatched one.
    fn scan_line(&mut self) -> Result<Option<SseEvent>, FrameError> {
        let start = self.pos;
        let rest = &self.chunk[start..];
        let Some(found) = self.line_ends.find(rest) else {
            // No line end in this chunk: carry the bytes over.
            self.check_size(self.partial_line.len() + rest.len())?;
            self.partial_line.push(rest);
            self.pos = self.chunk.len();
            self.offset += rest.len() as u64;
            return Ok(None);
        };
        let end = start + found;
        let mut next = end + 1;
        if self.chunk[end] == b'\r' {
            if next < self.chunk.len() {
                if self.chunk[next] == b'\n' {
                    next += 1;
                }
            } else {
                self.skip_lf = true;
            }
        }
        self.offset += (next - start) as u64;
        self.pos = next;
        let dispatched = if self.partial_line.is_empty() {
            self.check_size(end - start)?;
            // Take the chunk out for the call instead of cloning it: no refcount traffic.
            let chunk = std::mem::take(&mut self.chunk);
            let dispatched = self.process_line(&chunk, start, end);
            self.chunk = chunk;
            dispatched
        } else {
            self.check_size(self.partial_line.len() + (end - start))?;
            let line = self.partial_line.take(&self.chunk[start..end]);
            self.process_line(&line, 0, line.len())
        };
        if matches!(self.data, Data::Empty) && self.event_type.is_empty() {
            // No event in progress: the next one starts at the next line.
            self.event_start = self.offset;
        }
        Ok(dispatched)
    }

    /// Fails when the event being built plus `line_bytes` would pass the limit.
    fn check_size(&self, line_bytes: usize) -> Result<(), FrameError> {
        let total = self.data_len + self.event_type.len() + line_bytes;
        if total > self.config.max_event_bytes {
            return Err(FrameError::EventTooLarge {
                limit: self.config.max_event_bytes,
                event_start: self.event_start,
            });
        }
        Ok(())
    }

    /// Interprets the line `buf[start..end]` (without its line end).
    fn process_line(&mut self, buf: &Bytes, start: usize, end: usize) -> Option<SseEvent> {
        let line = &buf[start..end];
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let (name, value_start) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let mut value_start = start + colon + 1;
                if value_start < end && buf[value_start] == b' ' {
                    value_start += 1;
                }
                (&line[..colon], value_start)
            }
            None => (line, end),
        };
        match name {
            b"data" => {
                let value = &buf[value_start..end];
                self.data = match std::mem::replace(&mut self.data, Data::Empty) {
                    Data::Empty => {
                        self.data_len = value.len();
                        Data::One(buf.slice(value_start..end))
                    }
                    Data::One(first) => {
                        let mut joined = BytesMut::with_capacity(first.len() + 1 + value.len());
                        joined.extend_from_slice(&first);
                        joined.extend_from_slice(b"\n");
                        joined.extend_from_slice(value);
                        self.data_len = joined.len();
                        Data::Joined(joined)
                    }
                    Data::Joined(mut joined) => {
                        joined.extend_from_slice(b"\n");
                        joined.extend_from_slice(value);
                        self.data_len = joined.len();
                        Data::Joined(joined)
                    }
                };
            }
            b"event" => {
                self.event_type = known_event_name(&buf[value_start..end])
                    .unwrap_or_else(|| buf.slice(value_start..end));
            }
            b"id" if memchr::memchr(0, &buf[value_start..end]).is_none() => {
                self.last_event_id = buf.slice(value_start..end);
            }
            b"retry" => {
                let value = &buf[value_start..end];
                if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                    // All digits: only overflow can fail; saturate like a browser's clamp.
                    self.retry = Some(
                        std::str::from_utf8(value)
                            .ok()
                            .and_then(|digits| digits.parse().ok())
                            .unwrap_or(u64::MAX),
                    );
                }
            }
            _ => {}
        }
        None
    }

    /// A blank line: dispatches the event if it has data, and resets the buffers.
    fn dispatch(&mut self) -> Option<SseEvent> {
        if matches!(self.data, Data::Empty) {
            self.event_type = Bytes::new();
            return None;
        }
        Some(self.take_event())
    }

    /// Takes the event being built, resetting the data and event type buffers.
    fn take_event(&mut self) -> SseEvent {
        let data = match std::mem::replace(&mut self.data, Data::Empty) {
            Data::Empty => Bytes::new(),
            Data::One(data) => data,
            Data::Joined(joined) => joined.freeze(),
        };
        self.data_len = 0;
        SseEvent {
            event: std::mem::take(&mut self.event_type),
            data,
            id: self.last_event_id.clone(),
        }
    }
}

/// The search for line ends (LF or CR): memchr's AVX2 searcher made once per framer where the
/// CPU has AVX2 (a call to `memchr::memchr2` would pick it and set it up again for every line),
/// else `memchr::memchr2`.
#[derive(Clone, Copy, Debug)]
struct LineEnds {
    #[cfg(target_arch = "x86_64")]
    avx2: Option<memchr::arch::x86_64::avx2::memchr::Two>,
}

impl LineEnds {
    fn new() -> Self {
        Self {
            #[cfg(target_arch = "x86_64")]
            avx2: memchr::arch::x86_64::avx2::memchr::Two::new(b'\n', b'\r'),
        }
    }

    /// The first LF or CR in `bytes`.
    fn find(&self, bytes: &[u8]) -> Option<usize> {
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = &self.avx2 {
            return avx2.find(bytes);
        }
        memchr::memchr2(b'\n', b'\r', bytes)
    }

    /// The length of the line at the start of `bytes` when it ends with an LF inside `bytes`;
    /// `None` when it ends with a CR (the line-by-line path handles CR and CRLF) or not at
    /// all.
    fn lf_line(&self, bytes: &[u8]) -> Option<usize> {
        let end = self.find(bytes)?;
        (bytes[end] == b'\n').then_some(end)
    }
}

/// The event names of the Anthropic Messages API and the most frequent of OpenAI's Responses
/// API, the most frequent first: an event named by one of them gets a static [`Bytes`] (no
/// reference count).
const KNOWN_EVENT_NAMES: &[&[u8]] = &[
    b"content_block_delta",
    b"response.output_text.delta",
    b"response.function_call_arguments.delta",
    b"ping",
    b"content_block_start",
    b"content_block_stop",
    b"message_start",
    b"message_delta",
    b"message_stop",
    b"error",
    b"response.reasoning_summary_text.delta",
    b"response.output_item.added",
    b"response.output_item.done",
];

/// A known event name as static [`Bytes`].
fn known_event_name(name: &[u8]) -> Option<Bytes> {
    KNOWN_EVENT_NAMES
        .iter()
        .find(|known| **known == name)
        .map(|known| Bytes::from_static(known))
}

/// The known event name followed by an LF at the start of `line`.
fn known_event_line(line: &[u8]) -> Option<&'static [u8]> {
    KNOWN_EVENT_NAMES
        .iter()
        .find(|known| line.get(known.len()) == Some(&b'\n') && line.starts_with(known))
        .copied()
}

/// Iterator over the events completed by the bytes pushed so far; see [`Framer::feed`].
#[derive(Debug)]
pub struct Events<'a> {
    framer: &'a mut Framer,
}

impl Iterator for Events<'_> {
    type Item = Result<SseEvent, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.framer.next_event().transpose()
    }
}

/// Frames a whole input at once. Returns the dispatched events and the unterminated event at
/// the end, if any.
///
/// # Errors
///
/// [`FrameError::EventTooLarge`] past the default 32 MiB limit.
pub fn frame_all(
    input: impl Into<Bytes>,
) -> Result<(Vec<SseEvent>, Option<UnterminatedEvent>), FrameError> {
    let mut framer = Framer::new();
    let events = framer.feed(input.into()).collect::<Result<Vec<_>, _>>()?;
    let rest = framer.finish()?;
    Ok((events, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames `chunks` in order and returns each event as (type, data, id).
    fn frame(chunks: &[&[u8]]) -> Vec<(String, String, String)> {
        let mut framer = Framer::new();
        let mut out = Vec::new();
        for chunk in chunks {
            for event in framer.feed(Bytes::copy_from_slice(chunk)) {
                let event = event.unwrap();
                out.push((
                    event.event_type().into_owned(),
                    event.data_str().into_owned(),
                    String::from_utf8_lossy(event.id()).into_owned(),
                ));
            }
        }
        framer.finish().unwrap();
        out
    }

    /// Checks `input` split at every byte offset (and whole) against `expected` data values.
    fn check(input: &[u8], expected: &[&str]) {
        let whole: Vec<String> = frame(&[input]).into_iter().map(|e| e.1).collect();
        assert_eq!(
            whole,
            expected,
            "whole input {:?}",
            String::from_utf8_lossy(input)
        );
        for split in 0..=input.len() {
            let (a, b) = input.split_at(split);
            let got: Vec<String> = frame(&[a, b]).into_iter().map(|e| e.1).collect();
            assert_eq!(got, expected, "split at {split}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        let got: Vec<String> = frame(&bytes).into_iter().map(|e| e.1).collect();
        assert_eq!(got, expected, "one-byte chunks");
    }

    #[test]
    fn cr_at_chunk_end_then_lf() {
        assert_eq!(
            frame(&[b"data: x\r", b"\ndata: y\r\n\r\n"])
                .into_iter()
                .map(|e| e.1)
                .collect::<Vec<_>>(),
            ["x\ny"]
        );
        check(b"data: x\r\ndata: y\r\n\r\n", &["x\ny"]);
    }

    #[test]
    fn lone_cr_and_mixed_line_ends() {
        check(b"data: hello\r\r", &["hello"]);
        check(b"data: first\r\ndata: second\n\n", &["first\nsecond"]);
    }

    #[test]
    fn bom_dropped_once_whatever_the_chunking() {
        let input = b"\xEF\xBB\xBFdata: first\n\ndata: second\n\n";
        check(input, &["first", "second"]);
        assert_eq!(frame(&[b"\xEF", b"\xBB\xBFdata: first\n\n"])[0].1, "first");
        assert_eq!(frame(&[b"", b"\xEF\xBB\xBFdata: first\n\n"])[0].1, "first");
        // A U+FEFF later in the data is kept.
        check(b"data: a\xEF\xBB\xBFb\n\n", &["a\u{FEFF}b"]);
        // A BOM prefix that turns out not to be a BOM is line content.
        check(b"\xEF\xBBdata: x\n\ndata: y\n\n", &["y"]);
    }

    #[test]
    fn comments_and_no_space_after_colon() {
        let events = frame(&[b": keep-alive\n\nevent:content_block_start\ndata:{\"a\":1}\n\n"]);
        assert_eq!(
            events,
            [(
                "content_block_start".to_owned(),
                "{\"a\":1}".to_owned(),
                String::new()
            )]
        );
        check(b": keep-alive\n\ndata:{\"a\":1}\n\n", &["{\"a\":1}"]);
    }

    #[test]
    fn only_one_space_stripped_and_colonless_fields() {
        check(b"data:  two\n\n", &[" two"]);
        check(b"data\n\n", &[""]);
        check(b"data\ndata\n\n", &["\n"]);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_type_resets() {
        let events = frame(&[b"event: a\n\ndata: x\n\n"]);
        assert_eq!(events, [("message".into(), "x".into(), String::new())]);
    }

    #[test]
    fn ids_persist_and_nul_ids_are_ignored() {
        let events = frame(&[b"id: 1\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\nid\ndata: d\n\n"]);
        let ids: Vec<&str> = events.iter().map(|e| e.2.as_str()).collect();
        assert_eq!(ids, ["1", "1", "1", ""]);
    }

    #[test]
    fn retry_only_all_digits() {
        let mut framer = Framer::new();
        let _ = framer
            .feed(Bytes::from_static(
                b"retry: 12a\n\nretry: 3000\n\nretry: \n\n",
            ))
            .count();
        assert_eq!(framer.retry(), Some(3000));
    }

    #[test]
    fn unterminated_event_is_reported_not_dispatched() {
        let mut framer = Framer::new();
        let events: Vec<_> = framer
            .feed(Bytes::from_static(
                b"data: a\n\nevent: message_stop\ndata: {\"type\"",
            ))
            .collect();
        assert_eq!(events.len(), 1);
        let rest = framer.finish().unwrap().unwrap();
        assert_eq!(rest.event.event_type(), "message_stop");
        assert_eq!(rest.event.data_str(), "{\"type\"");
        assert_eq!(rest.unterminated_line_bytes, 13);
        assert!(rest.has_data);

        let mut framer = Framer::new();
        let _ = framer.feed(Bytes::from_static(b"data: a\n\n")).count();
        assert_eq!(framer.finish().unwrap(), None);
    }

    #[test]
    fn single_line_data_is_a_slice_of_the_chunk() {
        let chunk = Bytes::from_static(b"event: x\ndata: payload\n\n");
        let mut framer = Framer::new();
        let event = framer.feed(chunk.clone()).next().unwrap().unwrap();
        let data = event.data();
        assert_eq!(&data[..], b"payload");
        // Same memory as the chunk: no copy was made.
        assert_eq!(data.as_ptr(), chunk[15..].as_ptr());
    }

    #[test]
    fn event_too_large_is_a_typed_error_and_sticks() {
        let mut framer = Framer::with_config(FramerConfig {
            max_event_bytes: 12,
        });
        let first = framer.feed(Bytes::from_static(b"data: 1234\n\n")).next();
        assert_eq!(first.unwrap().unwrap().data_str(), "1234");
        let error = framer
            .feed(Bytes::from_static(b"data: 123456789\n\n"))
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(
            error,
            FrameError::EventTooLarge {
                limit: 12,
                event_start: 12
            }
        );
        assert_eq!(
            error.to_string(),
            "event-stream event exceeds the 12-byte limit (event starting at byte 12)"
        );
        assert!(framer.next_event().is_err());
        // A long line without a line end is bounded too.
        let mut framer = Framer::with_config(FramerConfig {
            max_event_bytes: 12,
        });
        framer.push(Bytes::from_static(b"data: 12"));
        framer.push(Bytes::from_static(b"3456789"));
        assert!(framer.next_event().is_err());
    }

    /// Regression (found by fuzzing): a CR ending one chunk and its LF starting the next made
    /// the following event's `event_start` one byte early.
    #[test]
    fn event_start_does_not_depend_on_a_split_cr_lf() {
        let error_for = |chunks: &[&'static [u8]]| {
            let mut framer = Framer::with_config(FramerConfig { max_event_bytes: 4 });
            let mut error = None;
            for chunk in chunks {
                framer.push(Bytes::from_static(chunk));
                if let Err(e) = framer.next_event() {
                    error = Some(e);
                    break;
                }
            }
            error
        };
        let expected = Some(FrameError::EventTooLarge {
            limit: 4,
            event_start: 2,
        });
        assert_eq!(error_for(&[b"\r\ndata: 123456\n\n"]), expected);
        assert_eq!(error_for(&[b"\r", b"\ndata: 123456\n\n"]), expected);
    }

    #[test]
    fn borrowed_events_are_the_owned_ones() {
        let input = b"event: ping\ndata: a\n\nid: 7\nevent: custom\ndata: b\ndata: c\n\n";
        let mut owned = Framer::new();
        let expected: Vec<SseEvent> = owned
            .feed(Bytes::from_static(input))
            .collect::<Result<_, _>>()
            .unwrap();
        let mut borrowed = Framer::new();
        borrowed.push(Bytes::from_static(input));
        let mut got = Vec::new();
        while let Some(event) = borrowed.next_event_ref().unwrap() {
            got.push(event.to_event());
        }
        assert_eq!(got, expected);
        assert_eq!(got[1].id(), &Bytes::from_static(b"7"));
        assert_eq!(got[1].data_str(), "b\nc");
    }

    #[test]
    fn pushing_before_draining_keeps_order() {
        let mut framer = Framer::new();
        framer.push(Bytes::from_static(b"data: a\n\ndata: b"));
        framer.push(Bytes::from_static(b"\n\ndata: c\n\n"));
        framer.push(Bytes::new());
        let data: Vec<_> = std::iter::from_fn(|| framer.next_event().unwrap())
            .map(|e| e.data_str().into_owned())
            .collect();
        assert_eq!(data, ["a", "b", "c"]);
    }
}
