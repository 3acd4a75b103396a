//! Incremental parser for `text/event-stream`, following the WHATWG HTML
//! "event stream interpretation" (§9.2.6) — with hard memory bounds added.
//!
//! The spec decodes the whole stream as UTF-8 and then splits lines. Every
//! byte the parser splits on (CR, LF, `:`, space) is ASCII and can never be
//! part of a multi-byte sequence, so splitting the raw bytes first and
//! decoding each piece with replacement characters gives exactly the same
//! result, whatever the chunk boundaries are.

use std::fmt;
use std::ops::Range;

/// Default bound for one line and for one event's accumulated `data`.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// A line or data buffer that grew past this is shrunk back after use, so one
/// huge (but allowed) line or event does not pin its capacity for the life of
/// the stream.
const RETAINED_CAPACITY: usize = 64 << 10;

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Memory bounds of a [`Parser`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted line in bytes, line terminator excluded.
    pub max_line_bytes: usize,
    /// Largest accepted data buffer of one event in bytes (the joined
    /// `data:` values plus one `\n` per line, before the final one is cut).
    pub max_event_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_line_bytes: DEFAULT_MAX_BYTES, max_event_bytes: DEFAULT_MAX_BYTES }
    }
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The spec's "last event ID string" at dispatch time: it persists across
    /// events until an `id` field changes it. `None` when it is empty (never
    /// set, or reset by an empty `id` field).
    pub id: Option<String>,
    /// The event type; `"message"` when no (or an empty) `event` field came.
    pub event: String,
    /// The joined `data` lines, without the final line feed.
    pub data: String,
    /// A valid `retry` field seen in this event's block, if any. The value
    /// that persists across events is [`Parser::reconnection_time`].
    pub retry: Option<u64>,
}

/// What the parser yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Event(Event),
    /// A comment line (`:` first), with the `:` and one following space
    /// removed. The spec ignores these; a proxy uses them to see keepalives.
    Comment(String),
}

/// An [`Event`] borrowed from the parser's buffers, as [`Parser::feed_with`]
/// hands it over: a relay reads it in place, with no copy per event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRef<'a> {
    pub id: Option<&'a str>,
    pub event: &'a str,
    pub data: &'a str,
    pub retry: Option<u64>,
}

/// An [`Item`] borrowed from the parser's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemRef<'a> {
    Event(EventRef<'a>),
    Comment(&'a str),
}

impl EventRef<'_> {
    pub fn to_owned(&self) -> Event {
        Event {
            id: self.id.map(str::to_owned),
            event: self.event.to_owned(),
            data: self.data.to_owned(),
            retry: self.retry,
        }
    }
}

impl ItemRef<'_> {
    pub fn to_owned(&self) -> Item {
        match self {
            ItemRef::Event(event) => Item::Event(event.to_owned()),
            ItemRef::Comment(text) => Item::Comment((*text).to_owned()),
        }
    }
}

/// Why the parser stopped. After one, every further `feed` returns it again
/// until [`Parser::finish`] starts a new stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseError {
    /// A line exceeded [`Limits::max_line_bytes`].
    LineTooLong { limit: usize },
    /// An event's data buffer exceeded [`Limits::max_event_bytes`].
    EventTooLarge { limit: usize },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong { limit } => write!(f, "SSE line longer than {limit} bytes"),
            SseError::EventTooLarge { limit } => {
                write!(f, "SSE event data larger than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for SseError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BomState {
    /// At stream start: this many bytes of the BOM matched so far.
    Matching(usize),
    Done,
}

/// Incremental event-stream parser. Feed it chunks split anywhere.
#[derive(Debug, Clone)]
pub struct Parser {
    limits: Limits,
    /// The current line's bytes when it spans chunks (empty otherwise: a
    /// line wholly inside one chunk is parsed in place, never copied).
    line: Vec<u8>,
    /// The last chunk ended in CR: an LF starting the next one is the same
    /// line end.
    skip_lf: bool,
    bom: BomState,
    data: String,
    event_type: String,
    event_retry: Option<u64>,
    last_event_id: String,
    reconnection_time: Option<u64>,
    error: Option<SseError>,
    /// A block was left to the line path ([`Parser::block_in_place`]): the
    /// rest of it goes that way too, so no line is scanned twice.
    by_line: bool,
}

impl Default for Parser {
    fn default() -> Self {
        Parser::new()
    }
}

impl Parser {
    /// A parser with the default limits (1 MiB line, 1 MiB event data).
    pub fn new() -> Self {
        Parser::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        Parser {
            limits,
            line: Vec::new(),
            skip_lf: false,
            bom: BomState::Matching(0),
            data: String::new(),
            event_type: String::new(),
            event_retry: None,
            last_event_id: String::new(),
            reconnection_time: None,
            error: None,
            by_line: false,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The spec's last event ID string (what a reconnect sends as
    /// `Last-Event-ID`); empty when unset.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The last valid `retry` value, in milliseconds.
    pub fn reconnection_time(&self) -> Option<u64> {
        self.reconnection_time
    }

    /// Heap bytes held by the parser's buffers. Bounded by the limits
    /// (each buffer at most a small multiple of them), whatever the input.
    pub fn buffered_bytes(&self) -> usize {
        self.line.capacity() + self.data.capacity() + self.event_type.capacity() + self.last_event_id.capacity()
    }

    /// The error the parser is stuck in, if any.
    pub fn error(&self) -> Option<SseError> {
        self.error
    }

    /// Parses `chunk`, appending every completed item to `out`. Items
    /// completed before an error are still appended.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Item>) -> Result<(), SseError> {
        self.feed_with(chunk, |item| out.push(item.to_owned()))
    }

    /// Parses `chunk`, handing every completed item to `on_item` in stream
    /// order, borrowed (valid during the call). Items completed before an
    /// error are still handed over.
    pub fn feed_with<F: FnMut(ItemRef<'_>)>(&mut self, chunk: &[u8], mut on_item: F) -> Result<(), SseError> {
        if let Some(err) = self.error {
            return Err(err);
        }
        let result = self.feed_inner(chunk, &mut on_item);
        if let Err(err) = result {
            self.error = Some(err);
            // Nothing more will be parsed from this stream: give memory back.
            self.line = Vec::new();
            self.data = String::new();
            self.event_type = String::new();
        }
        result
    }

    /// Ends the stream. Per the spec an unterminated line and an event
    /// without its closing blank line are discarded; returns whether anything
    /// was. The parser is then ready for a new stream (a reconnect): buffers,
    /// error state and BOM detection are reset; the last event ID and the
    /// reconnection time are kept.
    pub fn finish(&mut self) -> bool {
        let discarded = !self.line.is_empty()
            || !self.data.is_empty()
            || !self.event_type.is_empty()
            || self.event_retry.is_some()
            || matches!(self.bom, BomState::Matching(n) if n > 0);
        self.line = Vec::new();
        self.data = String::new();
        self.event_type = String::new();
        self.event_retry = None;
        self.skip_lf = false;
        self.bom = BomState::Matching(0);
        self.error = None;
        self.by_line = false;
        discarded
    }

    fn feed_inner(&mut self, mut chunk: &[u8], on_item: &mut dyn FnMut(ItemRef<'_>)) -> Result<(), SseError> {
        if let BomState::Matching(matched) = self.bom {
            chunk = self.strip_bom(matched, chunk);
        }
        if chunk.is_empty() {
            return Ok(());
        }
        if self.skip_lf {
            self.skip_lf = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while !chunk.is_empty() {
            if let Some(used) = self.block_in_place(chunk, on_item) {
                chunk = &chunk[used..];
                continue;
            }
            let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) else {
                // No line end: keep the partial line, refusing to outgrow the bound.
                self.check_line_len(self.line.len() + chunk.len())?;
                self.line.extend_from_slice(chunk);
                break;
            };
            if self.line.is_empty() {
                self.check_line_len(end)?;
                self.process_line(&chunk[..end], on_item)?;
            } else {
                self.check_line_len(self.line.len() + end)?;
                self.line.extend_from_slice(&chunk[..end]);
                let mut line = std::mem::take(&mut self.line);
                let result = self.process_line(&line, on_item);
                line.clear();
                if line.capacity() > RETAINED_CAPACITY {
                    line.shrink_to(RETAINED_CAPACITY);
                }
                self.line = line;
                result?;
            }
            let mut next = end + 1;
            if chunk[end] == b'\r' {
                match chunk.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            chunk = &chunk[next..];
        }
        Ok(())
    }

    /// Reads the block at the start of `chunk` in place when the whole of it,
    /// up to its blank line, is there and nothing of it was read before: its
    /// values are borrowed from the chunk, not copied into the buffers (the
    /// common case, an event that arrived in one read). Returns the bytes
    /// used, or `None`, having changed nothing, when the block is for the
    /// line path: cut by the chunk's end, or with a CR, a comment, a second
    /// `data` line, text that is not UTF-8 or a value past the limits. Both
    /// paths read each line by the same rules ([`field`]).
    fn block_in_place(&mut self, chunk: &[u8], on_item: &mut dyn FnMut(ItemRef<'_>)) -> Option<usize> {
        let idle = self.line.is_empty() && self.data.is_empty() && self.event_type.is_empty();
        if self.by_line || !idle || self.event_retry.is_some() {
            return None;
        }
        // Left to the line path from here on, unless read whole below.
        self.by_line = true;
        // The values as ranges of the block, which is checked as UTF-8 once:
        // pieces of valid text cut at ASCII bytes are valid text.
        let (mut event, mut data, mut id, mut retry) = (None, None, None, None);
        let mut at = 0;
        let used = loop {
            let end = at + memchr::memchr2(b'\n', b'\r', &chunk[at..])?;
            if chunk[end] == b'\r' || end - at > self.limits.max_line_bytes {
                return None;
            }
            let start = at;
            at = end + 1;
            if start == end {
                break at;
            }
            if chunk[start] == b':' {
                return None;
            }
            let (field, value) = field(&chunk[start..end]);
            let value = start + value.start..start + value.end;
            match field {
                Field::Data if data.is_none() && value.len() < self.limits.max_event_bytes => data = Some(value),
                Field::Data => return None,
                Field::Event => event = Some(value),
                Field::Id => id = Some(value),
                Field::Retry(ms) => retry = ms.or(retry),
                Field::Ignored => {}
            }
        };
        let text = std::str::from_utf8(&chunk[..used]).ok()?;
        let (event, data, id) = (event.map(|r| &text[r]), data.map(|r| &text[r]), id.map(|r| &text[r]));
        self.by_line = false;
        if let Some(id) = id {
            self.last_event_id.clear();
            self.last_event_id.push_str(id);
        }
        if retry.is_some() {
            self.reconnection_time = retry;
        }
        if let Some(data) = data {
            let event = event.filter(|e| !e.is_empty()).unwrap_or("message");
            let id = (!self.last_event_id.is_empty()).then_some(self.last_event_id.as_str());
            on_item(ItemRef::Event(EventRef { id, event, data, retry }));
        }
        Some(used)
    }

    /// Consumes a leading BOM, possibly split over chunks, and returns the
    /// rest of the chunk. Bytes that looked like a BOM start but were not
    /// become the start of the first line.
    fn strip_bom<'a>(&mut self, mut matched: usize, chunk: &'a [u8]) -> &'a [u8] {
        let mut used = 0;
        while matched < BOM.len() && used < chunk.len() && chunk[used] == BOM[matched] {
            matched += 1;
            used += 1;
        }
        if matched == BOM.len() {
            self.bom = BomState::Done;
        } else if used == chunk.len() {
            self.bom = BomState::Matching(matched);
        } else {
            self.bom = BomState::Done;
            // At most 2 bytes, and `line` is empty at stream start.
            self.line.extend_from_slice(&BOM[..matched]);
        }
        &chunk[used..]
    }

    fn check_line_len(&self, len: usize) -> Result<(), SseError> {
        if len > self.limits.max_line_bytes {
            Err(SseError::LineTooLong { limit: self.limits.max_line_bytes })
        } else {
            Ok(())
        }
    }

    fn process_line(&mut self, line: &[u8], on_item: &mut dyn FnMut(ItemRef<'_>)) -> Result<(), SseError> {
        let Some(&first) = line.first() else {
            self.dispatch(on_item);
            return Ok(());
        };
        if first == b':' {
            let mut text = String::new();
            push_lossy(&mut text, strip_one_space(&line[1..]));
            on_item(ItemRef::Comment(&text));
            return Ok(());
        }
        let (field, value) = field(line);
        let value = &line[value];
        match field {
            Field::Data => {
                let too_large = SseError::EventTooLarge { limit: self.limits.max_event_bytes };
                // Checked before growing; checked again after, because each
                // invalid byte decodes to a 3-byte replacement character.
                if self.data.len() + value.len() + 1 > self.limits.max_event_bytes {
                    return Err(too_large);
                }
                push_lossy(&mut self.data, value);
                self.data.push('\n');
                if self.data.len() > self.limits.max_event_bytes {
                    return Err(too_large);
                }
            }
            Field::Event => {
                self.event_type.clear();
                push_lossy(&mut self.event_type, value);
            }
            Field::Id => {
                self.last_event_id.clear();
                push_lossy(&mut self.last_event_id, value);
            }
            Field::Retry(Some(ms)) => {
                self.event_retry = Some(ms);
                self.reconnection_time = Some(ms);
            }
            Field::Retry(None) | Field::Ignored => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, on_item: &mut dyn FnMut(ItemRef<'_>)) {
        self.by_line = false;
        let retry = self.event_retry.take();
        if self.data.is_empty() {
            self.event_type.clear();
            return;
        }
        if self.data.ends_with('\n') {
            self.data.pop();
        }
        let event = if self.event_type.is_empty() { "message" } else { self.event_type.as_str() };
        let id = (!self.last_event_id.is_empty()).then_some(self.last_event_id.as_str());
        on_item(ItemRef::Event(EventRef { id, event, data: &self.data, retry }));
        // The buffers are kept for the next event (no allocation per event),
        // unless one huge event grew them.
        self.data.clear();
        if self.data.capacity() > RETAINED_CAPACITY {
            self.data.shrink_to(RETAINED_CAPACITY);
        }
        self.event_type.clear();
    }
}

/// What a field line (not a comment) sets, by the spec's field rules, which
/// both of the parser's paths apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Data,
    Event,
    Id,
    /// The reconnection time, when the value is all ASCII digits and fits.
    Retry(Option<u64>),
    /// An unknown field, or an id with a NUL (it could not round-trip as a
    /// `Last-Event-ID` header).
    Ignored,
}

/// A field line's field and where its value is in it: after the first colon
/// and one space, or empty when there is no colon.
#[inline(always)]
fn field(line: &[u8]) -> (Field, Range<usize>) {
    let (name, value) = match memchr::memchr(b':', line) {
        Some(colon) => (&line[..colon], line.len() - strip_one_space(&line[colon + 1..]).len()..line.len()),
        None => (line, line.len()..line.len()),
    };
    let field = match name {
        b"data" => Field::Data,
        b"event" => Field::Event,
        b"id" if !line[value.clone()].contains(&0) => Field::Id,
        b"retry" => Field::Retry(parse_ascii_digits(&line[value.clone()])),
        _ => Field::Ignored,
    };
    (field, value)
}

fn strip_one_space(value: &[u8]) -> &[u8] {
    match value {
        [b' ', rest @ ..] => rest,
        _ => value,
    }
}

/// Appends `bytes` decoded as UTF-8, each maximal invalid subpart replaced by
/// U+FFFD (what the WHATWG "UTF-8 decode" does).
fn push_lossy(dst: &mut String, bytes: &[u8]) {
    // Valid text, the common case, is checked by the word-at-a-time validator.
    if let Ok(text) = std::str::from_utf8(bytes) {
        dst.push_str(text);
        return;
    }
    for piece in bytes.utf8_chunks() {
        dst.push_str(piece.valid());
        if !piece.invalid().is_empty() {
            dst.push(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// A non-empty all-ASCII-digit value as u64; `None` otherwise or on overflow
/// (a retry that large is nonsense; ignoring it keeps the previous value).
fn parse_ascii_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(bytes: &[u8]) -> Vec<Item> {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        parser.feed(bytes, &mut out).expect("within limits");
        out
    }

    fn events(bytes: &[u8]) -> Vec<Event> {
        items(bytes)
            .into_iter()
            .filter_map(|item| match item {
                Item::Event(ev) => Some(ev),
                Item::Comment(_) => None,
            })
            .collect()
    }

    fn ev(id: Option<&str>, event: &str, data: &str) -> Event {
        Event { id: id.map(str::to_owned), event: event.to_owned(), data: data.to_owned(), retry: None }
    }

    fn feed_each(parser: &mut Parser, chunks: &[&[u8]]) -> Vec<Item> {
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out).expect("within limits");
        }
        out
    }

    #[test]
    fn lf_line_endings() {
        assert_eq!(events(b"data: a\n\ndata: b\n\n"), vec![ev(None, "message", "a"), ev(None, "message", "b")]);
    }

    #[test]
    fn cr_line_endings() {
        assert_eq!(events(b"data: a\r\rdata: b\r\r"), vec![ev(None, "message", "a"), ev(None, "message", "b")]);
    }

    #[test]
    fn crlf_line_endings() {
        assert_eq!(events(b"data: a\r\n\r\ndata: b\r\n\r\n"), vec![ev(None, "message", "a"), ev(None, "message", "b")]);
    }

    #[test]
    fn mixed_line_endings() {
        assert_eq!(events(b"data: a\rdata: b\ndata: c\r\n\n"), vec![ev(None, "message", "a\nb\nc")]);
    }

    #[test]
    fn crlf_split_across_chunks_is_one_line_end() {
        let mut parser = Parser::new();
        // If the LF were a second line end it would dispatch right after "a".
        let out = feed_each(&mut parser, &[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a\nb"))]);
    }

    #[test]
    fn cr_then_empty_chunk_then_lf_is_one_line_end() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"data: a\r", b"", b"\n", b"data: b\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a\nb"))]);
    }

    #[test]
    fn cr_at_chunk_end_then_other_byte_is_a_line_end() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"data: a\r", b"\r"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a"))]);
    }

    #[test]
    fn leading_bom_is_stripped() {
        assert_eq!(events(b"\xEF\xBB\xBFdata: a\n\n"), vec![ev(None, "message", "a")]);
    }

    #[test]
    fn bom_split_across_chunks_is_stripped() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a"))]);
    }

    #[test]
    fn only_one_bom_is_stripped() {
        // The second BOM makes the field name "\u{FEFF}data", an unknown field.
        assert_eq!(events(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"), vec![ev(None, "message", "b")]);
    }

    #[test]
    fn bom_after_stream_start_is_kept() {
        assert_eq!(
            events(b"data: a\n\n\xEF\xBB\xBFdata: b\n\ndata: \xEF\xBB\xBFc\n\n"),
            vec![ev(None, "message", "a"), ev(None, "message", "\u{FEFF}c")]
        );
    }

    #[test]
    fn partial_bom_prefix_is_line_content() {
        // EF BB then 'x': not a BOM; decodes to one U+FFFD then "x".
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"\xEF\xBB", b"x\ndata: a\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a"))]);
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"\xEF", b":\xBB c\n"]);
        assert_eq!(out, vec![]);
        let out = items(b"\xEF\xBB: x\n");
        assert_eq!(out, vec![]); // "\u{FFFD}" field name with value: unknown field
    }

    #[test]
    fn comments_are_reported_and_do_not_dispatch() {
        assert_eq!(
            items(b": keepalive\n:raw\n:\ndata: a\n: mid\n\n"),
            vec![
                Item::Comment("keepalive".into()),
                Item::Comment("raw".into()),
                Item::Comment(String::new()),
                Item::Comment("mid".into()),
                Item::Event(ev(None, "message", "a")),
            ]
        );
    }

    #[test]
    fn comment_keeps_all_but_one_leading_space() {
        assert_eq!(items(b":  two\n"), vec![Item::Comment(" two".into())]);
    }

    #[test]
    fn field_without_colon_has_empty_value() {
        // "data" alone appends an empty line; "event" alone resets the type.
        assert_eq!(
            events(b"data\ndata\n\nevent\ndata: x\n\n"),
            vec![ev(None, "message", "\n"), ev(None, "message", "x")]
        );
    }

    #[test]
    fn field_without_colon_dispatches_empty_data() {
        assert_eq!(events(b"data\n\n"), vec![ev(None, "message", "")]);
    }

    #[test]
    fn only_one_space_after_colon_is_stripped() {
        assert_eq!(
            events(b"data:a\n\ndata: b\n\ndata:  c\n\ndata:\td\n\n"),
            vec![
                ev(None, "message", "a"),
                ev(None, "message", "b"),
                ev(None, "message", " c"),
                ev(None, "message", "\td"),
            ]
        );
    }

    #[test]
    fn value_keeps_later_colons() {
        assert_eq!(events(b"data: a: b:c\n\n"), vec![ev(None, "message", "a: b:c")]);
    }

    #[test]
    fn data_lines_are_joined_with_lf_and_trailing_lf_removed() {
        assert_eq!(events(b"data: a\ndata: b\ndata:\n\n"), vec![ev(None, "message", "a\nb\n")]);
    }

    #[test]
    fn event_type_defaults_to_message_and_resets_per_event() {
        assert_eq!(
            events(b"event: turn.started\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\n"),
            vec![ev(None, "turn.started", "1"), ev(None, "message", "2"), ev(None, "message", "3"),]
        );
    }

    #[test]
    fn last_event_field_wins() {
        assert_eq!(events(b"event: a\nevent: b\ndata: x\n\n"), vec![ev(None, "b", "x")]);
    }

    #[test]
    fn empty_data_is_not_dispatched_and_clears_event_type() {
        assert_eq!(events(b"event: x\n\ndata: a\n\nevent: y\nid: 3\n\n"), vec![ev(None, "message", "a")]);
    }

    #[test]
    fn id_updates_last_event_id_even_without_dispatch() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"id: 7\n\ndata: a\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(Some("7"), "message", "a"))]);
        assert_eq!(parser.last_event_id(), "7");
    }

    #[test]
    fn last_event_id_persists_until_changed_or_reset() {
        assert_eq!(
            events(b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 2\ndata: d\n\nid:\ndata: e\n\n"),
            vec![
                ev(Some("1"), "message", "a"),
                ev(Some("1"), "message", "b"),
                ev(None, "message", "c"),
                ev(Some("2"), "message", "d"),
                ev(None, "message", "e"),
            ]
        );
    }

    #[test]
    fn id_with_nul_is_ignored() {
        assert_eq!(events(b"id: 5\n\nid: 6\x007\ndata: a\n\n"), vec![ev(Some("5"), "message", "a")]);
    }

    #[test]
    fn retry_requires_ascii_digits() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"retry: 1500\ndata: a\n\n"]);
        let expected = Event { retry: Some(1500), ..ev(None, "message", "a") };
        assert_eq!(out, vec![Item::Event(expected)]);
        assert_eq!(parser.reconnection_time(), Some(1500));
        for bad in [
            &b"retry: 15x\n"[..],
            b"retry: -1\n",
            b"retry: +1\n",
            b"retry: 1 \n",
            b"retry:\n",
            b"retry: 99999999999999999999999\n",
        ] {
            let mut out = Vec::new();
            parser.feed(bad, &mut out).expect("within limits");
            parser.feed(b"data: b\n\n", &mut out).expect("within limits");
            assert_eq!(out, vec![Item::Event(ev(None, "message", "b"))], "{bad:?}");
            assert_eq!(parser.reconnection_time(), Some(1500), "{bad:?}");
        }
    }

    #[test]
    fn retry_alone_is_not_dispatched_but_sets_reconnection_time() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"retry: 10\n\ndata: a\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a"))]);
        assert_eq!(parser.reconnection_time(), Some(10));
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert_eq!(events(b"foo: bar\nDATA: x\ndata : y\ndata: a\n\n"), vec![ev(None, "message", "a")]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(events(b"data: a\xFFb\xE2\x82c\n\n"), vec![ev(None, "message", "a\u{FFFD}b\u{FFFD}c")]);
    }

    #[test]
    fn truncated_sequence_before_line_end_does_not_eat_it() {
        assert_eq!(events(b"data: a\xE2\ndata: b\n\n"), vec![ev(None, "message", "a\u{FFFD}\nb")]);
    }

    #[test]
    fn utf8_sequence_split_across_chunks_decodes() {
        let bytes = "data: é€😀\n\n".as_bytes();
        for split in 0..=bytes.len() {
            let mut parser = Parser::new();
            let out = feed_each(&mut parser, &[&bytes[..split], &bytes[split..]]);
            assert_eq!(out, vec![Item::Event(ev(None, "message", "é€😀"))], "split at {split}");
        }
    }

    #[test]
    fn field_name_split_across_chunks() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"ev", b"ent: x\nda", b"ta", b": y\n", b"\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "x", "y"))]);
    }

    #[test]
    fn incomplete_event_at_eof_is_discarded() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"data: a\n\ndata: b\n"]);
        assert_eq!(out.len(), 1);
        assert!(parser.finish());
        // The next stream starts clean: "b" is gone.
        let out = feed_each(&mut parser, &[b"data: c\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "c"))]);
        assert!(!parser.finish());
    }

    #[test]
    fn unterminated_last_line_is_discarded() {
        let mut parser = Parser::new();
        let out = feed_each(&mut parser, &[b"data: a\n\n: no newline"]);
        assert_eq!(out.len(), 1);
        assert!(parser.finish());
    }

    #[test]
    fn finish_keeps_last_event_id_and_rearms_bom() {
        let mut parser = Parser::new();
        feed_each(&mut parser, &[b"id: 9\ndata: a\n\n"]);
        parser.finish();
        let out = feed_each(&mut parser, &[b"\xEF\xBB\xBFdata: b\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(Some("9"), "message", "b"))]);
    }

    fn small(max_line_bytes: usize, max_event_bytes: usize) -> Parser {
        Parser::with_limits(Limits { max_line_bytes, max_event_bytes })
    }

    #[test]
    fn line_at_limit_is_accepted() {
        let mut parser = small(8, 100);
        let out = feed_each(&mut parser, &[b"data: ab\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "ab"))]);
    }

    #[test]
    fn an_event_whole_in_one_read_is_not_copied() {
        let mut parser = Parser::new();
        let mut seen = Vec::new();
        let chunk = b"id: 7\nevent: turn.started\nretry: 50\ndata: {\"a\":1}\n\nid: 8\ndata: x\n\n";
        parser
            .feed_with(chunk, |item| {
                if let ItemRef::Event(e) = item {
                    // Borrowed from the read itself, not from the parser's buffers.
                    let inside = chunk.as_ptr_range().contains(&e.data.as_ptr());
                    seen.push((e.id.map(str::to_owned), e.event.to_owned(), e.data.to_owned(), e.retry, inside));
                }
            })
            .unwrap();
        let row = |id: &str, event: &str, data: &str, retry| (Some(id.into()), event.into(), data.into(), retry, true);
        assert_eq!(seen, [row("7", "turn.started", "{\"a\":1}", Some(50)), row("8", "message", "x", None)]);
        assert_eq!((parser.last_event_id(), parser.reconnection_time()), ("8", Some(50)));
        // Only the last event id was kept (it outlives the read).
        assert_eq!(parser.data.capacity() + parser.event_type.capacity() + parser.line.capacity(), 0);
    }

    #[test]
    fn a_block_left_to_the_line_path_is_not_scanned_again_per_line() {
        // 100,000 lines of a block that the read cuts: reading the rest of it
        // again before each line would take minutes, once takes milliseconds.
        let first = "x\n".repeat(100_000);
        let start = std::time::Instant::now();
        let mut parser = Parser::new();
        let mut items = Vec::new();
        parser.feed(first.as_bytes(), &mut items).unwrap();
        parser.feed(b"data: end\n\n", &mut items).unwrap();
        assert_eq!(items, [Item::Event(ev(None, "message", "end"))]);
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "{:?}", start.elapsed());
    }

    #[test]
    fn long_line_is_an_error_in_one_chunk() {
        let mut parser = small(8, 100);
        let mut out = Vec::new();
        let err = parser.feed(b"data: a\n\ndata: abc\n\n", &mut out);
        assert_eq!(err, Err(SseError::LineTooLong { limit: 8 }));
        assert_eq!(out, vec![Item::Event(ev(None, "message", "a"))]);
    }

    #[test]
    fn long_partial_line_is_an_error_before_its_end_arrives() {
        let mut parser = small(8, 100);
        let mut out = Vec::new();
        parser.feed(b"data:", &mut out).expect("short so far");
        assert_eq!(parser.feed(b" abcdef", &mut out), Err(SseError::LineTooLong { limit: 8 }));
        assert!(parser.line.capacity() <= 8, "the partial line must not have grown");
    }

    #[test]
    fn large_event_is_an_error() {
        let mut parser = small(100, 10);
        let mut out = Vec::new();
        let err = parser.feed(b"data: 12345\ndata: 6789\ndata: x\n\n", &mut out);
        assert_eq!(err, Err(SseError::EventTooLarge { limit: 10 }));
        assert!(out.is_empty());
    }

    #[test]
    fn event_at_limit_is_accepted() {
        // Buffer "12345\n6789\n" is 11 bytes; "1234\n6789\n" is 10.
        let mut parser = small(100, 10);
        let out = feed_each(&mut parser, &[b"data: 1234\ndata: 6789\n\n"]);
        assert_eq!(out, vec![Item::Event(ev(None, "message", "1234\n6789"))]);
    }

    #[test]
    fn error_state_is_sticky_until_finish() {
        let mut parser = small(4, 100);
        let mut out = Vec::new();
        assert!(parser.feed(b"data: long\n", &mut out).is_err());
        assert_eq!(parser.feed(b"data\n\n", &mut out), Err(SseError::LineTooLong { limit: 4 }));
        assert_eq!(parser.error(), Some(SseError::LineTooLong { limit: 4 }));
        assert!(out.is_empty());
        parser.finish();
        parser.feed(b"data\n\n", &mut out).expect("new stream");
        assert_eq!(out, vec![Item::Event(ev(None, "message", ""))]);
    }

    #[test]
    fn long_comment_line_is_bounded_too() {
        let mut parser = small(4, 100);
        let mut out = Vec::new();
        assert_eq!(parser.feed(b": keepalive\n", &mut out), Err(SseError::LineTooLong { limit: 4 }));
    }

    #[test]
    fn feed_with_hands_items_in_order() {
        let mut parser = Parser::new();
        let mut seen = Vec::new();
        parser.feed_with(b": a\ndata: 1\n\n: b\n", |item| seen.push(item.to_owned())).expect("within limits");
        assert_eq!(
            seen,
            vec![Item::Comment("a".into()), Item::Event(ev(None, "message", "1")), Item::Comment("b".into())]
        );
    }
}
