//! Writes `text/event-stream` frames that cannot carry an injected field.
//!
//! A field ends at CR, LF or CRLF, so those are the only bytes that could
//! smuggle a second field (or end the event early). `data` is split at them
//! into several `data:` lines, which the reader joins back with LF; `event`
//! and `id` values cannot be split, so values containing them are refused.
//! NUL is refused in `id` because a reader silently ignores such an id.
//!
//! Every value is written after `": "`: the reader strips exactly one space,
//! so values that themselves start with a space survive the round trip.

use std::fmt;

/// A value that cannot be written without changing the stream's meaning.
/// Nothing is written when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The `event` value contains CR, LF or NUL.
    InvalidEventName,
    /// The `id` value contains CR, LF or NUL.
    InvalidId,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EncodeError::InvalidEventName => "SSE event name contains CR, LF or NUL",
            EncodeError::InvalidId => "SSE id contains CR, LF or NUL",
        })
    }
}

impl std::error::Error for EncodeError {}

fn is_single_line(value: &str) -> bool {
    !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

/// Appends one event frame: optional `event:` and `id:` lines, one `data:`
/// line per line of `data` (CR, LF and CRLF all split), and the blank line.
///
/// `event: None` (or `Some("")`) reads back as `"message"`. `id: Some("")`
/// writes an empty `id` line, which resets the reader's last event ID.
/// `data` always produces at least one `data:` line, so even an empty
/// string is dispatched. Round trip: a reader gets back the same event name
/// and id, and `data` with CRLF and CR turned into LF.
pub fn encode_event(out: &mut String, event: Option<&str>, id: Option<&str>, data: &str) -> Result<(), EncodeError> {
    if event.is_some_and(|name| !is_single_line(name)) {
        return Err(EncodeError::InvalidEventName);
    }
    if id.is_some_and(|id| !is_single_line(id)) {
        return Err(EncodeError::InvalidId);
    }
    if let Some(name) = event.filter(|name| !name.is_empty()) {
        push_field(out, "event", name);
    }
    if let Some(id) = id {
        push_field(out, "id", id);
    }
    for line in Lines::new(data) {
        push_field(out, "data", line);
    }
    out.push('\n');
    Ok(())
}

/// Appends a comment frame: one `: ` line per line of `text` (so a newline
/// in it cannot start a field), then a blank line. A reader reports each
/// line back as a comment; the blank line dispatches nothing because this
/// encoder never leaves an event open.
pub fn encode_comment(out: &mut String, text: &str) {
    for line in Lines::new(text) {
        out.push_str(": ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
}

/// The keepalive frame a proxy sends to hold an idle stream open.
pub const KEEPALIVE: &str = ": keepalive\n\n";

fn push_field(out: &mut String, name: &str, value: &str) {
    out.reserve(name.len() + value.len() + 3);
    out.push_str(name);
    out.push_str(": ");
    out.push_str(value);
    out.push('\n');
}

/// The lines of `text` split at CRLF, CR or LF; always at least one, and a
/// trailing line end yields a final empty line (so "a\n" is "a" and "").
struct Lines<'a> {
    rest: Option<&'a str>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Self {
        Lines { rest: Some(text) }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = self.rest?;
        let bytes = rest.as_bytes();
        match memchr::memchr2(b'\r', b'\n', bytes) {
            None => {
                self.rest = None;
                Some(rest)
            }
            Some(end) => {
                let skip = if bytes[end] == b'\r' && bytes.get(end + 1) == Some(&b'\n') { 2 } else { 1 };
                // CR and LF are ASCII, so both slice points are char boundaries.
                self.rest = Some(&rest[end + skip..]);
                Some(&rest[..end])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::{Event, Item, Parser};

    fn encoded(event: Option<&str>, id: Option<&str>, data: &str) -> String {
        let mut out = String::new();
        encode_event(&mut out, event, id, data).expect("valid");
        out
    }

    fn parse(text: &str) -> Vec<Item> {
        let mut parser = Parser::new();
        let mut out = Vec::new();
        parser.feed(text.as_bytes(), &mut out).expect("within limits");
        assert!(!parser.finish(), "encoder left an open event: {text:?}");
        out
    }

    #[test]
    fn writes_fields_in_order() {
        assert_eq!(encoded(Some("turn.started"), Some("12"), "{}"), "event: turn.started\nid: 12\ndata: {}\n\n");
        assert_eq!(encoded(None, None, "x"), "data: x\n\n");
    }

    #[test]
    fn data_newlines_become_data_lines() {
        assert_eq!(encoded(None, None, "a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
        assert_eq!(encoded(None, None, "a\n"), "data: a\ndata: \n\n");
        assert_eq!(encoded(None, None, "\r\n\r"), "data: \ndata: \ndata: \n\n");
    }

    #[test]
    fn empty_data_still_dispatches() {
        assert_eq!(encoded(None, None, ""), "data: \n\n");
        assert_eq!(
            parse("data: \n\n"),
            vec![Item::Event(Event { id: None, event: "message".into(), data: String::new(), retry: None })]
        );
    }

    #[test]
    fn injection_through_data_stays_data() {
        let hostile = "x\n\nevent: admin\nid: 999\r\nretry: 1\rdata: y";
        let items = parse(&encoded(Some("safe"), Some("1"), hostile));
        assert_eq!(
            items,
            vec![Item::Event(Event {
                id: Some("1".into()),
                event: "safe".into(),
                data: "x\n\nevent: admin\nid: 999\nretry: 1\ndata: y".into(),
                retry: None,
            })]
        );
    }

    #[test]
    fn event_name_with_line_break_or_nul_is_refused() {
        for bad in ["a\nb", "a\rb", "a\r\n", "\n", "a\0"] {
            let mut out = String::from("kept");
            assert_eq!(encode_event(&mut out, Some(bad), None, "d"), Err(EncodeError::InvalidEventName));
            assert_eq!(out, "kept", "nothing written for {bad:?}");
        }
    }

    #[test]
    fn id_with_line_break_or_nul_is_refused() {
        for bad in ["1\n2", "1\r", "\r\n", "1\u{0}"] {
            let mut out = String::new();
            assert_eq!(encode_event(&mut out, Some("ok"), Some(bad), "d"), Err(EncodeError::InvalidId));
            assert!(out.is_empty());
        }
    }

    #[test]
    fn values_with_leading_spaces_and_colons_survive() {
        let items = parse(&encoded(Some(" sp:ace"), Some(" 7"), "  two: spaces"));
        assert_eq!(
            items,
            vec![Item::Event(Event {
                id: Some(" 7".into()),
                event: " sp:ace".into(),
                data: "  two: spaces".into(),
                retry: None
            })]
        );
    }

    #[test]
    fn empty_event_name_reads_as_message_and_empty_id_resets() {
        let mut text = encoded(None, Some("5"), "a");
        text.push_str(&encoded(Some(""), Some(""), "b"));
        let items = parse(&text);
        let Item::Event(second) = &items[1] else { panic!("{items:?}") };
        assert_eq!((second.id.as_deref(), second.event.as_str()), (None, "message"));
    }

    #[test]
    fn comment_lines_cannot_start_fields() {
        let mut out = String::new();
        encode_comment(&mut out, "hi\ndata: injected\r\n");
        assert_eq!(out, ": hi\n: data: injected\n: \n\n");
        assert_eq!(
            parse(&out),
            vec![Item::Comment("hi".into()), Item::Comment("data: injected".into()), Item::Comment(String::new()),]
        );
    }

    #[test]
    fn keepalive_is_a_comment() {
        assert_eq!(KEEPALIVE, ": keepalive\n\n");
        assert_eq!(parse(KEEPALIVE), vec![Item::Comment("keepalive".into())]);
    }
}
