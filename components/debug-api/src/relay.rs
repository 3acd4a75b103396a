//! The stream relays: upstream SSE bytes in, browser frames out.
//!
//! - [`TurnRelay`]: the same events out, re-encoded (so no upstream framing
//!   trick can inject a field) and redacted. If the upstream ends without a
//!   terminal event, the browser is told so with one typed `error` event
//!   instead of a turn that silently never finishes.
//! - [`AdminRelay`]: the admin firehose through `sse::AdminEventFilter`
//!   (INV-FILTER), redacted whole frames at a time.

use sse::{encode_event, AdminEventFilter, Flow, Item, Parser, StreamError};

use crate::redact::Redactor;

const TERMINAL_EVENTS: [&str; 3] = ["done", "error", "cancelled"];

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RelayFlow {
    Continue,
    /// A terminal event (or a `stream_error`) was relayed: nothing follows.
    Ended,
}

/// One of the two relays, as the handler's pump drives it.
pub enum Relay {
    Turn(TurnRelay),
    Admin(AdminRelay),
}

impl Relay {
    /// Appends to `out` every frame the chunk completes.
    pub fn feed(&mut self, chunk: &[u8], out: &mut String) -> RelayFlow {
        match self {
            Relay::Turn(relay) => relay.feed(chunk, out),
            Relay::Admin(relay) => relay.feed(chunk, out),
        }
    }

    /// The upstream body ended or broke.
    pub fn finish(&mut self, out: &mut String) {
        match self {
            Relay::Turn(relay) => relay.finish(out),
            Relay::Admin(relay) => relay.finish(out),
        }
    }
}

/// The admin firehose, filtered for one session (or none) and redacted.
pub struct AdminRelay {
    filter: AdminEventFilter,
    redactor: Redactor,
    frames: String,
}

impl AdminRelay {
    pub fn new(session_id: Option<String>, redactor: Redactor) -> Self {
        Self { filter: AdminEventFilter::new(session_id), redactor, frames: String::new() }
    }

    pub fn feed(&mut self, chunk: &[u8], out: &mut String) -> RelayFlow {
        self.frames.clear();
        let flow = self.filter.feed(chunk, &mut self.frames);
        // Whole frames only, so a key cannot straddle two chunks (INV-ADMIN-KEY).
        out.push_str(&self.redactor.redact(&self.frames));
        match flow {
            Flow::Continue => RelayFlow::Continue,
            Flow::Stop(_) => RelayFlow::Ended,
        }
    }

    /// A healthy firehose never ends: its end is `connection_dropped`.
    pub fn finish(&mut self, out: &mut String) {
        let _ = self.filter.finish(out);
    }

    /// Ends the stream for a reason found before any upstream byte.
    pub fn fail(&mut self, err: StreamError, out: &mut String) {
        let _ = self.filter.fail(err, out);
    }
}

pub struct TurnRelay {
    parser: Parser,
    redactor: Redactor,
    ended: bool,
    /// The upstream's turn id, from `turn.started`, for the log and errors.
    turn_id: Option<String>,
}

impl TurnRelay {
    pub fn new(redactor: Redactor) -> Self {
        Self { parser: Parser::new(), redactor, ended: false, turn_id: None }
    }

    pub fn turn_id(&self) -> Option<&str> {
        self.turn_id.as_deref()
    }

    /// Appends to `out` every event the chunk completes.
    pub fn feed(&mut self, chunk: &[u8], out: &mut String) -> RelayFlow {
        if self.ended {
            return RelayFlow::Ended;
        }
        let Self { parser, redactor, ended, turn_id } = self;
        let result = parser.feed_with(chunk, |item| {
            let Item::Event(event) = item else { return }; // comments are upstream keepalives
            if *ended {
                return;
            }
            if event.event == "turn.started" && turn_id.is_none() {
                *turn_id = serde_json::from_str::<serde_json::Value>(&event.data)
                    .ok()
                    .and_then(|v| v.get("turn_id")?.as_str().map(str::to_string));
            }
            let data = redactor.redact(&event.data);
            // The name is upstream text too.
            let name = redactor.redact(&event.event);
            // The parser never yields CR/LF/NUL in a name, so this cannot fail.
            let _ = encode_event(out, Some(&name), None, &data);
            if TERMINAL_EVENTS.contains(&event.event.as_str()) {
                *ended = true;
            }
        });
        if result.is_err() && !self.ended {
            return self.fail("upstream_event_too_large", "the turn stream sent an oversized event", out);
        }
        if self.ended {
            RelayFlow::Ended
        } else {
            RelayFlow::Continue
        }
    }

    /// The upstream body ended (or broke). Without a terminal event, that is
    /// a dropped turn, and the browser gets a typed `error` event.
    pub fn finish(&mut self, out: &mut String) {
        if !self.ended {
            self.fail("upstream_stream_dropped", "the turn stream ended before the turn finished", out);
        }
    }

    fn fail(&mut self, code: &str, message: &str, out: &mut String) -> RelayFlow {
        self.ended = true;
        let data = serde_json::json!({ "code": code, "message": message }).to_string();
        let _ = encode_event(out, Some("error"), None, &data);
        RelayFlow::Ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::REDACTED;

    fn events(out: &str) -> Vec<(String, String)> {
        let mut parser = Parser::new();
        let mut items = Vec::new();
        parser.feed(out.as_bytes(), &mut items).unwrap();
        items
            .into_iter()
            .filter_map(|i| match i {
                Item::Event(e) => Some((e.event, e.data)),
                Item::Comment(_) => None,
            })
            .collect()
    }

    #[test]
    fn relays_events_in_order_and_stops_at_the_terminal_one() {
        let mut relay = TurnRelay::new(Redactor::default());
        let upstream = "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n: ping\n\nevent: thinking\ndata: {\"delta\":\"hm\"}\n\nevent: text\ndata: {\"delta\":\"hi\"}\n\nevent: done\ndata: {\"turn_id\":\"t_1\"}\n\nevent: text\ndata: {\"delta\":\"after\"}\n\n";
        let mut out = String::new();
        // Byte by byte: chunk boundaries never matter.
        let mut flow = RelayFlow::Continue;
        for b in upstream.as_bytes() {
            flow = relay.feed(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(flow, RelayFlow::Ended);
        let names: Vec<_> = events(&out).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["turn.started", "thinking", "text", "done"]);
        assert_eq!(relay.turn_id(), Some("t_1"));
        let before = out.len();
        relay.finish(&mut out);
        assert_eq!(out.len(), before, "no error after a terminal event");
    }

    #[test]
    fn a_dropped_stream_ends_with_one_typed_error() {
        let mut relay = TurnRelay::new(Redactor::default());
        let mut out = String::new();
        relay.feed(b"event: text\ndata: {\"delta\":\"partial\"}\n\nevent: text\ndata: {\"del", &mut out);
        relay.finish(&mut out);
        let evs = events(&out);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[1].0, "error");
        let v: serde_json::Value = serde_json::from_str(&evs[1].1).unwrap();
        assert_eq!(v["code"], "upstream_stream_dropped");
    }

    #[test]
    fn upstream_data_cannot_become_a_field_downstream_and_keys_are_redacted() {
        let mut relay = TurnRelay::new(Redactor::new(["sekrit-admin-key"]));
        let mut out = String::new();
        // Parsed, this event's data holds a line break followed by "event: done";
        // re-encoded, that text stays data.
        relay.feed(b"event: text\ndata: {\"delta\":\"a\"}\ndata: event: done\ndata: sekrit-admin-key\n\n", &mut out);
        relay.feed(b"event: sekrit-admin-key\ndata: {}\n\n", &mut out);
        assert!(!out.contains("sekrit-admin-key"));
        let evs = events(&out);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[1].0, REDACTED);
        assert_eq!(evs[0].0, "text");
        assert_eq!(evs[0].1, "{\"delta\":\"a\"}\nevent: done\n[redacted]");
        assert!(!out.contains("\nevent: done\n"), "{out:?}");
    }
}
