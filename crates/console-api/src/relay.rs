//! The stream relays: upstream SSE bytes in, browser frames out.
//!
//! - [`TurnRelay`]: the same events out, re-encoded (so no upstream framing
//!   trick can inject a field) and redacted in what the page decodes and
//!   joins (a key split across two `text` deltas leaves as one redaction:
//!   see [`Joined`]). If the upstream ends without a
//!   terminal event, the browser is told so with one typed `error` event
//!   instead of a turn that silently never finishes.
//! - [`AdminRelay`]: the admin firehose through `admin_events::AdminEventFilter`
//!   (INV-FILTER), redacted whole frames at a time.
//!
//! Timing stamps: every event frame a relay writes is preceded, inside its
//! block, by an SSE comment line with the proxy's receive time, `: t=<ms>`,
//! milliseconds since the stream opened (monotonic), and the stream starts with
//! one `: t0=<unix ms>` block, the wall clock at that moment ([`start`]).
//! Comments are not events: EventSource and the console's reader ignore them
//! unless asked, and event names and data are unchanged byte for byte.

use std::borrow::Cow;
use std::fmt::Write;

use admin_events::{AdminEventFilter, Flow, StreamError};
use sse::{encode_event, ItemRef, Parser};

use crate::alert::{Alerting, Delivery};
use crate::redact::{Joined, Redactor};

const TERMINAL_EVENTS: [&str; 3] = ["done", "error", "cancelled"];

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RelayFlow {
    Continue,
    /// A terminal event (or a `stream_error`) was relayed: nothing follows.
    Ended,
}

/// The first block of every relayed stream: `: t0=<unix ms>`, the wall
/// clock when the stream opened (the origin of every later `: t=`).
pub fn start(out: &mut String, unix_ms: u64) {
    let _ = write!(out, ": t0={unix_ms}\n\n");
}

/// The receive-time stamp line that precedes an event frame, in its block.
fn stamp(out: &mut String, ms: u64) {
    let _ = writeln!(out, ": t={ms}");
}

/// One of the two relays, as the handler's pump drives it. `ms` is the
/// receive time: milliseconds since the stream opened.
pub enum Relay {
    Turn(TurnRelay),
    Admin(AdminRelay),
}

impl Relay {
    /// Appends to `out` every frame the chunk completes.
    pub fn feed(&mut self, chunk: &[u8], ms: u64, out: &mut String) -> RelayFlow {
        match self {
            Relay::Turn(relay) => relay.feed(chunk, ms, out),
            Relay::Admin(relay) => relay.feed(chunk, ms, out),
        }
    }

    /// The upstream body ended or broke.
    pub fn finish(&mut self, ms: u64, out: &mut String) {
        match self {
            Relay::Turn(relay) => relay.finish(ms, out),
            Relay::Admin(relay) => relay.finish(ms, out),
        }
    }

    /// The alert POSTs due at `ms` (a turn with alerting only, see alert.rs).
    pub fn alerts(&mut self, ms: u64) -> Vec<Delivery> {
        match self {
            Relay::Turn(TurnRelay { alerting: Some(a), .. }) => a.take(ms),
            _ => Vec::new(),
        }
    }

    /// When [`Relay::alerts`] could next find a stall, if it still can.
    pub fn next_alert_check(&self) -> Option<u64> {
        match self {
            Relay::Turn(TurnRelay { alerting: Some(a), .. }) => a.rules.next_check(),
            _ => None,
        }
    }
}

/// The admin firehose, filtered for one session (or none) and redacted.
pub struct AdminRelay {
    filter: AdminEventFilter,
    redactor: Redactor,
}

impl AdminRelay {
    pub fn new(session_id: Option<String>, redactor: Redactor) -> Self {
        Self { filter: AdminEventFilter::new(session_id), redactor }
    }

    pub fn feed(&mut self, chunk: &[u8], ms: u64, out: &mut String) -> RelayFlow {
        self.stamp_frames(ms);
        // The frames are written in place and scanned there; rewritten only
        // when a key is found (never, in a healthy stream).
        let start = out.len();
        let flow = self.filter.feed(chunk, out);
        // Whole frames only, so a key cannot straddle two chunks (INV-ADMIN-KEY).
        if let Cow::Owned(clean) = self.redactor.redact(&out[start..]) {
            out.truncate(start);
            out.push_str(&clean);
        }
        match flow {
            Flow::Continue => RelayFlow::Continue,
            Flow::Stop(_) => RelayFlow::Ended,
        }
    }

    /// A healthy firehose never ends: its end is `connection_dropped`.
    pub fn finish(&mut self, ms: u64, out: &mut String) {
        self.stamp_frames(ms);
        let _ = self.filter.finish(out);
    }

    /// Ends the stream for a reason found before any upstream byte.
    pub fn fail(&mut self, err: StreamError, ms: u64, out: &mut String) {
        self.stamp_frames(ms);
        let _ = self.filter.fail(err, out);
    }

    /// Every frame of this read opens with its stamp (formatted once per
    /// read): the filter writes it, so the frames need no second pass.
    fn stamp_frames(&mut self, ms: u64) {
        let mut line = String::new();
        stamp(&mut line, ms);
        self.filter.set_frame_prefix(&line);
    }
}

pub struct TurnRelay {
    parser: Parser,
    redactor: Redactor,
    ended: bool,
    /// The upstream's turn id, from `turn.started`, for the log and errors.
    turn_id: Option<String>,
    /// The page joins each of these events' `delta`s into one text.
    joined: [(&'static str, Joined); 2],
    /// The turn's alert rules, when `alert_webhook_url` is set (boxed: most turns have none).
    alerting: Option<Box<Alerting>>,
}

impl TurnRelay {
    pub fn new(redactor: Redactor) -> Self {
        let joined = [("text", Joined::default()), ("thinking", Joined::default())];
        Self { parser: Parser::new(), redactor, ended: false, turn_id: None, joined, alerting: None }
    }

    /// This turn's events also feed its alert rules.
    pub fn with_alerting(mut self, alerting: Option<Alerting>) -> Self {
        self.alerting = alerting.map(Box::new);
        self
    }

    /// The stream opened at this wall-clock time (the alerts' `at_unix_ms`).
    pub fn opened(&mut self, unix_ms: u64) {
        if let Some(a) = &mut self.alerting {
            a.opened(unix_ms);
        }
    }

    pub fn turn_id(&self) -> Option<&str> {
        self.turn_id.as_deref()
    }

    /// Appends to `out` every event the chunk completes, each stamped `ms`.
    pub fn feed(&mut self, chunk: &[u8], ms: u64, out: &mut String) -> RelayFlow {
        if self.ended {
            return RelayFlow::Ended;
        }
        let Self { parser, redactor, ended, turn_id, joined, alerting } = self;
        let result = parser.feed_with(chunk, |item| {
            let ItemRef::Event(event) = item else { return }; // comments are upstream keepalives
            if *ended {
                return;
            }
            if event.event == "turn.started" && turn_id.is_none() {
                *turn_id = serde_json::from_str::<serde_json::Value>(event.data)
                    .ok()
                    .and_then(|v| v.get("turn_id")?.as_str().map(str::to_string));
                if let (Some(a), Some(id)) = (alerting.as_mut(), turn_id.as_deref()) {
                    a.turn_id(id);
                }
            }
            let terminal = TERMINAL_EVENTS.contains(&event.event);
            if let Some(a) = alerting.as_mut() {
                observe(a, event.event, event.data, ms);
            }
            if terminal {
                flush_joined(joined, ms, out);
            }
            let data = match joined.iter_mut().find(|(name, _)| *name == event.event) {
                Some((_, text)) => joined_delta(redactor, text, event.data),
                None => redact_data(redactor, event.data),
            };
            // The name is upstream text too.
            let name = redactor.redact(event.event);
            stamp(out, ms);
            // The parser never yields CR/LF/NUL in a name, so this cannot fail.
            let _ = encode_event(out, Some(&name), None, &data);
            *ended = terminal;
        });
        if result.is_err() && !self.ended {
            return self.fail("upstream_event_too_large", "the turn stream sent an oversized event", ms, out);
        }
        if self.ended {
            RelayFlow::Ended
        } else {
            RelayFlow::Continue
        }
    }

    /// The upstream body ended (or broke). Without a terminal event, that is
    /// a dropped turn, and the browser gets a typed `error` event.
    pub fn finish(&mut self, ms: u64, out: &mut String) {
        if !self.ended {
            if let Some(a) = &mut self.alerting {
                a.rules.dropped(ms);
            }
            self.fail("upstream_stream_dropped", "the turn stream ended before the turn finished", ms, out);
        }
    }

    fn fail(&mut self, code: &str, message: &str, ms: u64, out: &mut String) -> RelayFlow {
        if let Some(a) = &mut self.alerting {
            a.rules.error(ms, Some(code), Some(message));
        }
        flush_joined(&mut self.joined, ms, out);
        self.ended = true;
        let data = serde_json::json!({ "code": code, "message": message }).to_string();
        stamp(out, ms);
        let _ = encode_event(out, Some("error"), None, &data);
        RelayFlow::Ended
    }
}

/// An upstream event as the alert rules see it: it moves the turn, and a
/// terminal one ends it (an `error` with its code and message).
fn observe(a: &mut Alerting, name: &str, data: &str, ms: u64) {
    a.rules.event(ms);
    match name {
        "error" => {
            let v = serde_json::from_str::<serde_json::Value>(data).ok();
            let field = |k: &str| v.as_ref().and_then(|v| v.get(k)?.as_str());
            a.rules.error(ms, field("code"), field("message"));
        }
        "done" | "cancelled" => a.rules.ended(),
        _ => {}
    }
}

/// An event's data as the browser may have it: JSON redacted in its decoded
/// strings; anything else (not JSON, or a key in a number) redacted as text.
fn redact_data<'d>(redactor: &Redactor, data: &'d str) -> Cow<'d, str> {
    redactor.redact_json(data).unwrap_or_else(|| redactor.redact(data))
}

/// A `{"delta": …}` event of a joined text: the delta goes through
/// [`Joined`], so a key split across deltas never leaves whole; the event is
/// unchanged when nothing was redacted or held back.
fn joined_delta<'d>(redactor: &Redactor, text: &mut Joined, data: &'d str) -> Cow<'d, str> {
    let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(data) else {
        return redact_data(redactor, data);
    };
    let Some(delta) = fields.get("delta").and_then(serde_json::Value::as_str) else {
        return redact_data(redactor, data);
    };
    let send = text.push(redactor, delta);
    if send == delta {
        return redact_data(redactor, data);
    }
    fields.insert("delta".to_string(), send.into());
    Cow::Owned(redact_data(redactor, &serde_json::Value::Object(fields).to_string()).into_owned())
}

/// Text held back from the joined deltas goes out, as one more delta of
/// its own kind, before the turn ends.
fn flush_joined(joined: &mut [(&'static str, Joined)], ms: u64, out: &mut String) {
    for (name, text) in joined {
        if let Some(rest) = text.flush() {
            stamp(out, ms);
            let _ = encode_event(out, Some(name), None, &serde_json::json!({ "delta": rest }).to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::REDACTED;
    use sse::Item;

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
        for (ms, b) in upstream.as_bytes().iter().enumerate() {
            flow = relay.feed(std::slice::from_ref(b), ms as u64, &mut out);
        }
        assert_eq!(flow, RelayFlow::Ended);
        let names: Vec<_> = events(&out).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["turn.started", "thinking", "text", "done"]);
        assert_eq!(relay.turn_id(), Some("t_1"));
        let before = out.len();
        relay.finish(999, &mut out);
        assert_eq!(out.len(), before, "no error after a terminal event");
    }

    #[test]
    fn a_dropped_stream_ends_with_one_typed_error() {
        let mut relay = TurnRelay::new(Redactor::default());
        let mut out = String::new();
        relay.feed(b"event: text\ndata: {\"delta\":\"partial\"}\n\nevent: text\ndata: {\"del", 1, &mut out);
        relay.finish(2, &mut out);
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
        relay.feed(b"event: text\ndata: {\"delta\":\"a\"}\ndata: event: done\ndata: sekrit-admin-key\n\n", 0, &mut out);
        relay.feed(b"event: sekrit-admin-key\ndata: {}\n\n", 0, &mut out);
        assert!(!out.contains("sekrit-admin-key"));
        let evs = events(&out);
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[1].0, REDACTED);
        assert_eq!(evs[0].0, "text");
        assert_eq!(evs[0].1, "{\"delta\":\"a\"}\nevent: done\n[redacted]");
        assert!(!out.contains("\nevent: done\n"), "{out:?}");
    }

    /// What the page makes of a relayed turn: each event's data decoded,
    /// and the `text` deltas joined.
    fn page_view(out: &str) -> (Vec<serde_json::Value>, String) {
        let mut joined = String::new();
        let decoded: Vec<serde_json::Value> = events(out)
            .into_iter()
            .map(|(name, data)| {
                let v: serde_json::Value = serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data));
                if name == "text" {
                    joined.push_str(v["delta"].as_str().unwrap_or_default());
                }
                v
            })
            .collect();
        (decoded, joined)
    }

    #[test]
    fn escaped_keys_in_turn_events_are_redacted_in_what_the_page_decodes() {
        let key = "sekrit-admin-key";
        let all: String = key.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let first = format!("\\u0073{}", &key[1..]);
        let mut relay = TurnRelay::new(Redactor::new([key]));
        let mut out = String::new();
        let upstream = format!(
            "event: turn.started\ndata: {{\"turn_id\":\"t_1\",\"{first}\":1}}\n\n\
             event: tool_call\ndata: {{\"call_id\":\"c\",\"name\":\"x\",\"arguments\":{{\"q\":\"{all}\"}}}}\n\n\
             event: text\ndata: {{\"delta\":\"key: {first}\"}}\n\n\
             event: done\ndata: {{\"turn_id\":\"t_1\",\"echo\":\"{all}\"}}\n\n"
        );
        relay.feed(upstream.as_bytes(), 0, &mut out);
        let (decoded, joined) = page_view(&out);
        assert_eq!(decoded.len(), 4);
        for v in &decoded {
            assert!(!v.to_string().contains(key), "{v}");
        }
        assert_eq!(decoded[1]["arguments"]["q"], REDACTED);
        assert_eq!(joined, format!("key: {REDACTED}"));
        assert!(!out.contains(key) && !out.contains(&first) && !out.contains(&all));
    }

    #[test]
    fn a_key_split_across_text_deltas_leaves_as_one_redaction_and_nothing_is_lost() {
        let key = "sekrit-admin-key";
        for cut in 1..key.len() {
            let mut relay = TurnRelay::new(Redactor::new([key]));
            let mut out = String::new();
            let upstream = format!(
                "event: text\ndata: {{\"delta\":\"the key is {}\"}}\n\n\
                 event: tool_call\ndata: {{\"call_id\":\"c\",\"name\":\"x\",\"arguments\":{{}}}}\n\n\
                 event: text\ndata: {{\"delta\":\"{}, bye\"}}\n\n\
                 event: text\ndata: {{\"delta\":\" s\"}}\n\n\
                 event: done\ndata: {{}}\n\n",
                &key[..cut],
                &key[cut..]
            );
            assert_eq!(relay.feed(upstream.as_bytes(), 0, &mut out), RelayFlow::Ended);
            let names: Vec<_> = events(&out).into_iter().map(|(n, _)| n).collect();
            // The held " s" (it could start the key) goes out before `done`.
            assert_eq!(names, ["text", "tool_call", "text", "text", "text", "done"], "cut {cut}");
            let (_, joined) = page_view(&out);
            assert_eq!(joined, format!("the key is {REDACTED}, bye s"), "cut {cut}");
        }
        // A dropped turn hands over what was held before its typed error.
        let mut relay = TurnRelay::new(Redactor::new([key]));
        let mut out = String::new();
        relay.feed(b"event: thinking\ndata: {\"delta\":\"hmm sekrit\"}\n\n", 0, &mut out);
        relay.finish(1, &mut out);
        let evs = events(&out);
        assert_eq!((evs[0].1.as_str(), evs[1].1.as_str()), (r#"{"delta":"hmm "}"#, r#"{"delta":"sekrit"}"#));
        assert_eq!(evs[2].0, "error");
    }

    /// `out` without its `: t=` stamp lines, and the stamps in order.
    fn unstamp(out: &str) -> (String, Vec<u64>) {
        let mut rest = String::new();
        let mut stamps = Vec::new();
        for line in out.split_inclusive('\n') {
            match line.strip_prefix(": t=") {
                Some(ms) => stamps.push(ms.trim_end().parse().unwrap()),
                None => rest.push_str(line),
            }
        }
        (rest, stamps)
    }

    /// Every event frame of `out` starts with its stamp line.
    fn every_frame_is_stamped(out: &str) {
        for block in out.split_terminator("\n\n") {
            if block.starts_with(": t0=") || block == ": keepalive" {
                continue;
            }
            assert!(block.starts_with(": t="), "{block:?}");
            assert_eq!(block.matches(": t=").count(), 1, "{block:?}");
        }
    }

    fn alerting_relay() -> TurnRelay {
        let settings = crate::alert::AlertSettings {
            https: false,
            authority: "hook.test".into(),
            path_and_query: "/h".into(),
            stall_ms: 100,
            include_text: false,
            timeout: std::time::Duration::from_millis(300),
        };
        let context = crate::alert::TurnContext { session_id: "s_1".into(), agent_id: None, user_text: "hi".into() };
        let alerting = Alerting::new(settings, context, Redactor::default());
        let mut relay = TurnRelay::new(Redactor::default()).with_alerting(Some(alerting));
        relay.opened(1_000);
        relay
    }

    fn alert_kinds(relay: &mut Relay, ms: u64) -> Vec<(&'static str, serde_json::Value)> {
        let body = |d: &Delivery| serde_json::from_str::<serde_json::Value>(&d.body).unwrap()["alert"].clone();
        relay.alerts(ms).iter().map(|d| (d.kind.name(), body(d))).collect()
    }

    #[test]
    fn the_turn_relay_feeds_its_alert_rules_from_the_upstream_events() {
        // A silence, then an upstream error: a stall alert and an error alert, with the turn id.
        let mut relay = Relay::Turn(alerting_relay());
        let mut out = String::new();
        relay.feed(b"event: turn.started\ndata: {\"turn_id\":\"t_7\"}\n\n", 5, &mut out);
        assert_eq!(relay.next_alert_check(), Some(105));
        assert!(alert_kinds(&mut relay, 104).is_empty());
        let stall = alert_kinds(&mut relay, 105);
        assert_eq!((stall[0].0, &stall[0].1["turn_id"]), ("stall", &serde_json::json!("t_7")));
        relay.feed(b"event: error\ndata: {\"code\":\"overloaded\",\"message\":\"m\"}\n\n", 300, &mut out);
        let error = alert_kinds(&mut relay, 300);
        assert_eq!(
            (error.len(), error[0].0, &error[0].1["error_code"]),
            (1, "error", &serde_json::json!("overloaded"))
        );
        relay.finish(400, &mut out);
        assert!(alert_kinds(&mut relay, 400).is_empty(), "the turn had ended: no drop");
        // A stream that drops: one dropped alert; `done` ends a turn without one.
        let mut relay = Relay::Turn(alerting_relay());
        relay.feed(b"event: text\ndata: {\"delta\":\"a\"}\n\n", 10, &mut out);
        relay.finish(50, &mut out);
        assert_eq!(alert_kinds(&mut relay, 50).iter().map(|k| k.0).collect::<Vec<_>>(), ["dropped"]);
        let mut relay = Relay::Turn(alerting_relay());
        relay.feed(b"event: done\ndata: {}\n\n", 10, &mut out);
        relay.finish(20, &mut out);
        assert!(alert_kinds(&mut relay, 9_999).is_empty());
        assert_eq!(relay.next_alert_check(), None);
        // Without alerting, and on the admin relay, there is nothing to send or check.
        let mut plain = Relay::Turn(TurnRelay::new(Redactor::default()));
        plain.finish(1, &mut out);
        assert!(plain.alerts(1).is_empty() && plain.next_alert_check().is_none());
    }

    #[test]
    fn the_stream_opens_with_its_wall_clock() {
        let mut out = String::new();
        start(&mut out, 1_764_000_000_123);
        assert_eq!(out, ": t0=1764000000123\n\n");
        let mut items = Vec::new();
        Parser::new().feed(out.as_bytes(), &mut items).unwrap();
        assert!(matches!(items.as_slice(), [Item::Comment(c)] if c == "t0=1764000000123"));
    }

    #[test]
    fn turn_events_carry_their_receive_time_and_are_otherwise_unchanged() {
        let chunks: [(&[u8], u64); 4] = [
            (b"event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\nevent: thinking\ndata: {\"delta\":\"h", 0),
            (b"m\"}\n\n: upstream ping\n\n", 5),
            (b"event: text\ndata: {\"delta\":\"a\"}\n\nevent: text\ndata: line 1\ndata: line 2\n\n", 12),
            (b"event: done\ndata: {\"turn_id\":\"t_1\"}\n\n", 40),
        ];
        let mut stamped = String::new();
        let mut plain = String::new();
        let mut relay = TurnRelay::new(Redactor::default());
        for (chunk, ms) in chunks {
            relay.feed(chunk, ms, &mut stamped);
        }
        // The same events, re-encoded without stamps, as before the stamps.
        for (name, data) in events(&stamped) {
            encode_event(&mut plain, Some(&name), None, &data).unwrap();
        }
        let (rest, stamps) = unstamp(&stamped);
        assert_eq!(rest, plain, "byte for byte apart from the stamps");
        assert_eq!(stamps, [0, 5, 12, 12, 40], "an event's time is the read that completed it");
        every_frame_is_stamped(&stamped);
        // A dropped turn's typed error is stamped too.
        let mut relay = TurnRelay::new(Redactor::default());
        let mut out = String::new();
        relay.feed(b"event: text\ndata: x\n\n", 3, &mut out);
        relay.finish(9, &mut out);
        assert_eq!(unstamp(&out).1, [3, 9]);
        every_frame_is_stamped(&out);
    }

    #[test]
    fn admin_frames_carry_their_receive_time_and_are_otherwise_the_filters_output() {
        let upstream: [(&[u8], u64); 3] = [
            (
                b"id: 1\nevent: system.heartbeat\ndata: {}\n\nid: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\nid: 3\nevent: turn.started\ndata: {\"session_id\":\"s_2\"}\n\n",
                4,
            ),
            (b"id: 4\nevent: system.reset\ndata: {\"k\":\"sekrit-admin-key\"}\n\nid: 5\nevent: key.rotated\ndata: {\"session_id\":\"s_1\"}\n", 4),
            (b"\n", 17),
        ];
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let mut relay = AdminRelay::new(Some("s_1".into()), Redactor::new(["sekrit-admin-key"]));
        let (mut plain, mut stamped) = (String::new(), String::new());
        for (chunk, ms) in upstream {
            let _ = filter.feed(chunk, &mut plain);
            assert_eq!(relay.feed(chunk, ms, &mut stamped), RelayFlow::Continue);
        }
        let _ = filter.finish(&mut plain);
        relay.finish(30, &mut stamped);
        let (rest, stamps) = unstamp(&stamped);
        assert_eq!(rest, plain.replace("sekrit-admin-key", "[redacted]"), "byte for byte apart from the stamps");
        assert_eq!(stamps, [4, 4, 17, 30], "ids 2, 4, 5, then the stream_error");
        assert!(!stamped.contains("sekrit-admin-key"));
        every_frame_is_stamped(&stamped);
        // A stream that fails to open: its one frame, stamped.
        let mut out = String::new();
        AdminRelay::new(None, Redactor::default()).fail(StreamError::ConnectFailed, 0, &mut out);
        assert!(out.starts_with(": t=0\nevent: stream_error\n"), "{out}");
    }
}
