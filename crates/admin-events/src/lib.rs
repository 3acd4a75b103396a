//! The upstream admin event stream, its session filter, and the frames the
//! proxy re-emits to the browser (contract `_admin_event_matches_web`,
//! `_admin_events_endpoint`, INV-FILTER).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use sse::{encode_event, Event, EventRef, ItemRef, Limits, Parser, SseError};

mod plain;

/// The fixed downstream event name: the dotted type rides in the payload so
/// one browser listener renders every type.
pub const ADMIN_EVENT_NAME: &str = "admin_event";
/// The downstream event name of the single frame sent before a stream ends.
pub const STREAM_ERROR_NAME: &str = "stream_error";

/// One parsed admin event. Serializes as `{"id","type","timestamp","data"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdminEvent {
    pub id: u64,
    /// Dotted type (`session.*`, `turn.*`, `key.*`, `system.*`).
    #[serde(rename = "type")]
    pub r#type: String,
    /// `data.timestamp` when it is a JSON string.
    pub timestamp: Option<String>,
    pub data: Map<String, Value>,
}

/// Why an upstream event is not a valid admin event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminEventError {
    /// No id, or an id that is not a plain non-negative integer fitting u64
    /// (empty, sign, spaces, non-digits and overflow are all malformed).
    MalformedSseId,
    /// `data` is not exactly one JSON object.
    MalformedSseData,
}

impl fmt::Display for AdminEventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdminEventError::MalformedSseId => "admin event id is not a non-negative integer",
            AdminEventError::MalformedSseData => "admin event data is not a JSON object",
        })
    }
}

impl std::error::Error for AdminEventError {}

impl AdminEvent {
    /// Validates one upstream SSE event.
    ///
    /// The type is the SSE `event` field as is. An event that came without
    /// an `event` field has the spec's default type `"message"`; that is not
    /// an error (the contract only makes bad ids and bad data fatal), it is
    /// an ordinary non-system type, so it is forwarded only when its
    /// `data.session_id` matches — the same as the Python client, which
    /// takes the parsed SSE event name verbatim.
    ///
    /// The id is the SSE last event ID, so an event without its own `id`
    /// line inherits the previous one (spec behaviour, also the Python
    /// client's); only a stream that never sent one is missing it.
    pub fn from_sse(event: &Event) -> Result<AdminEvent, AdminEventError> {
        let id = event.id.as_deref().and_then(parse_event_id).ok_or(AdminEventError::MalformedSseId)?;
        let data = match serde_json::from_str::<Value>(&event.data) {
            Ok(Value::Object(map)) => map,
            _ => return Err(AdminEventError::MalformedSseData),
        };
        let timestamp = match data.get("timestamp") {
            Some(Value::String(ts)) => Some(ts.clone()),
            _ => None,
        };
        Ok(AdminEvent { id, r#type: event.event.clone(), timestamp, data })
    }
}

/// Only ASCII digits (at least one), no sign or spaces, fitting u64.
fn parse_event_id(raw: &str) -> Option<u64> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    raw.parse().ok()
}

/// `_admin_event_matches_web`: which admin events reach the browser.
///
/// - `filter_post_001`: `system.heartbeat` -> false (keepalive noise).
/// - `filter_post_002`: any other `system.*` -> true (stream-integrity signals).
/// - `filter_post_003`: otherwise true iff `session_id` is `Some` and
///   `data["session_id"]` is a JSON string equal to it; a non-string
///   `session_id` in data never matches. `Some("")` is compared like any
///   other value (as the Python `is not None` check does); mapping an empty
///   query parameter to `None` is the caller's choice.
pub fn admin_event_matches(ev: &AdminEvent, session_id: Option<&str>) -> bool {
    let got = match ev.data.get("session_id") {
        Some(Value::String(got)) => Some(got.as_str()),
        _ => None,
    };
    matches_web(&ev.r#type, got, session_id)
}

/// The rule of [`admin_event_matches`] on what it reads: the type and
/// `data.session_id` when that is a JSON string.
fn matches_web(r#type: &str, data_session_id: Option<&str>, wanted: Option<&str>) -> bool {
    if r#type == "system.heartbeat" {
        return false;
    }
    if r#type.starts_with("system.") {
        return true;
    }
    matches!((wanted, data_session_id), (Some(wanted), Some(got)) if got == wanted)
}

/// Why a downstream admin stream ends. Each becomes one `stream_error`
/// frame with a typed `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamError {
    /// The upstream could not be reached.
    ConnectFailed,
    /// The upstream answered with a non-200 status.
    UpstreamStatus {
        status: u16,
    },
    /// The upstream stream ended or broke (it is endless when healthy).
    ConnectionDropped,
    MalformedSseId,
    MalformedSseData,
    /// A line or an event exceeded the parser's bound.
    EventTooLarge {
        limit_bytes: usize,
    },
}

impl StreamError {
    /// The `reason` value of the frame.
    pub fn reason(&self) -> &'static str {
        match self {
            StreamError::ConnectFailed => "connect_failed",
            StreamError::UpstreamStatus { .. } => "upstream_status",
            StreamError::ConnectionDropped => "connection_dropped",
            StreamError::MalformedSseId => "malformed_sse_id",
            StreamError::MalformedSseData => "malformed_sse_data",
            StreamError::EventTooLarge { .. } => "event_too_large",
        }
    }

    /// A fixed human-readable message (never upstream text).
    pub fn message(&self) -> &'static str {
        match self {
            StreamError::ConnectFailed => "could not connect to the admin event stream",
            StreamError::UpstreamStatus { .. } => "the admin event stream was refused",
            StreamError::ConnectionDropped => "the admin event stream ended",
            StreamError::MalformedSseId => "the admin event stream sent an event with a malformed id",
            StreamError::MalformedSseData => "the admin event stream sent an event whose data is not a JSON object",
            StreamError::EventTooLarge { .. } => "the admin event stream sent an oversized event",
        }
    }

    fn payload(&self) -> Value {
        let mut payload = Map::new();
        payload.insert("reason".into(), self.reason().into());
        match *self {
            StreamError::UpstreamStatus { status } => {
                payload.insert("status".into(), status.into());
            }
            StreamError::EventTooLarge { limit_bytes } => {
                payload.insert("limit_bytes".into(), limit_bytes.into());
            }
            _ => {}
        }
        payload.insert("message".into(), self.message().into());
        Value::Object(payload)
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::UpstreamStatus { status } => {
                write!(f, "{} (HTTP {status})", self.message())
            }
            _ => f.write_str(self.message()),
        }
    }
}

impl From<AdminEventError> for StreamError {
    fn from(err: AdminEventError) -> Self {
        match err {
            AdminEventError::MalformedSseId => StreamError::MalformedSseId,
            AdminEventError::MalformedSseData => StreamError::MalformedSseData,
        }
    }
}

impl From<SseError> for StreamError {
    fn from(err: SseError) -> Self {
        match err {
            SseError::LineTooLong { limit } | SseError::EventTooLarge { limit } => {
                StreamError::EventTooLarge { limit_bytes: limit }
            }
        }
    }
}

/// Appends `event: stream_error\ndata: {"reason":..,..}\n\n`.
pub fn encode_stream_error(out: &mut String, err: &StreamError) {
    let json = err.payload().to_string();
    // The name is a constant and there is no id: this cannot fail.
    let _ = encode_event(out, Some(STREAM_ERROR_NAME), None, &json);
}

/// Appends `event: admin_event\nid: <id>\ndata: {"id","type","timestamp","data"}\n\n`.
/// Nothing is written if serialization fails (it cannot for this type).
pub fn encode_admin_event(out: &mut String, ev: &AdminEvent) -> Result<(), serde_json::Error> {
    let json = serde_json::to_string(ev)?;
    push_admin_frame(out, ev.id, &json);
    Ok(())
}

fn push_admin_frame(out: &mut String, id: u64, json: &str) {
    push_admin_frame_text(out, itoa::Buffer::new().format(id), json);
}

/// `json` must be one line (compact JSON, or data without CR or LF).
fn push_admin_frame_text(out: &mut String, id: &str, json: &str) {
    debug_assert!(!json.contains(['\r', '\n']));
    push_admin_frame_head(out, id);
    out.push_str(json);
    out.push_str("\n\n");
}

/// A frame up to its id: the constant name, so nothing to check or split.
const FRAME_HEAD: &str = "event: admin_event\nid: ";

/// A frame up to its one data line's text: a constant name, digits and one
/// line, so nothing to check or split.
fn push_admin_frame_head(out: &mut String, id: &str) {
    out.push_str(FRAME_HEAD);
    out.push_str(id);
    out.push_str("\ndata: ");
}

/// What the proxy does after a [`AdminEventFilter`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Flow {
    /// Write the output (if any) and keep reading upstream.
    Continue,
    /// Write the output — it ends with the `stream_error` frame — and end
    /// the downstream response. Every later call writes nothing.
    Stop(StreamError),
}

/// Running counts: what the filter saw and passed on (its tests read them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FilterStats {
    /// Valid admin events parsed (forwarded or not).
    pub events: u64,
    /// Events written downstream.
    pub forwarded: u64,
    /// `system.heartbeat` events seen (never forwarded).
    pub heartbeats: u64,
    /// SSE comment lines seen (upstream keepalives).
    pub comments: u64,
}

/// Upstream admin SSE bytes in, session-filtered `admin_event` frames out.
///
/// Each call appends every frame the chunk completed to ONE caller buffer,
/// so the proxy can write them with a single body write. The first invalid
/// event or oversized line ends the stream with one `stream_error` frame:
/// like the Python generator, validation happens before filtering, so a
/// malformed event of another session still ends the stream.
#[derive(Debug, Clone)]
pub struct AdminEventFilter {
    parser: Parser,
    session_id: Option<String>,
    stats: FilterStats,
    stopped: Option<StreamError>,
    /// Written before each frame, inside its block ([`Self::set_frame_prefix`]).
    prefix: String,
}

impl AdminEventFilter {
    pub fn new(session_id: Option<String>) -> Self {
        AdminEventFilter::with_limits(session_id, Limits::default())
    }

    pub fn with_limits(session_id: Option<String>, limits: Limits) -> Self {
        AdminEventFilter {
            parser: Parser::with_limits(limits),
            session_id,
            stats: FilterStats::default(),
            stopped: None,
            prefix: String::new(),
        }
    }

    /// Lines (each ending in LF, none blank) written at the head of every
    /// later frame, e.g. the proxy's `: t=<ms>` receive-time comment: the
    /// frames then need no second pass to find their starts.
    pub fn set_frame_prefix(&mut self, prefix: &str) {
        debug_assert!(prefix.is_empty() || (prefix.ends_with('\n') && !prefix.contains("\n\n")));
        self.prefix.clear();
        self.prefix.push_str(prefix);
    }

    #[cfg(test)]
    pub(crate) fn stats(&self) -> FilterStats {
        self.stats
    }

    /// The upstream last event ID (for a `Last-Event-ID` on reconnect).
    pub fn last_event_id(&self) -> &str {
        self.parser.last_event_id()
    }

    /// Why the stream ended, once it has.
    pub fn stopped(&self) -> Option<StreamError> {
        self.stopped
    }

    /// Parses one upstream chunk and appends the resulting frames to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut String) -> Flow {
        if let Some(err) = self.stopped {
            return Flow::Stop(err);
        }
        let AdminEventFilter { parser, session_id, stats, prefix, .. } = self;
        let mut failure: Option<StreamError> = None;
        let parsed = parser.feed_with(chunk, |item| {
            if failure.is_some() {
                return; // the stream is over; ignore the rest of this chunk
            }
            match item {
                ItemRef::Comment(_) => stats.comments += 1,
                ItemRef::Event(event) => match forward(event, session_id.as_deref(), stats, prefix, out) {
                    Ok(()) => {}
                    Err(err) => failure = Some(err.into()),
                },
            }
        });
        if let (None, Err(err)) = (failure, parsed) {
            failure = Some(err.into());
        }
        match failure {
            Some(err) => self.fail(err, out),
            None => Flow::Continue,
        }
    }

    /// The upstream body ended (or a read failed): for an endless stream
    /// that is always a drop. Appends the `connection_dropped` frame.
    pub fn finish(&mut self, out: &mut String) -> Flow {
        self.fail(StreamError::ConnectionDropped, out)
    }

    /// Ends the stream for a reason found outside the filter (connect
    /// failure, upstream status). Appends the frame unless already stopped.
    pub fn fail(&mut self, err: StreamError, out: &mut String) -> Flow {
        if let Some(first) = self.stopped {
            return Flow::Stop(first);
        }
        self.stopped = Some(err);
        self.parser.finish();
        out.push_str(&self.prefix);
        encode_stream_error(out, &err);
        Flow::Stop(err)
    }
}

/// Validates one event and, when it passes the session filter, appends its
/// downstream frame.
///
/// The data is read once, without building a tree ([`Probe`]; without
/// escapes, by the one-pass scan of [`plain`]). Data with no
/// backslash and no line break has no escape to decode, so it is forwarded
/// as written (an escape is the only way a key could hide from the
/// redactor's byte scan, and such data stays on one `data:` line); anything
/// else is decoded and re-encoded compact, as a whole.
fn forward(
    event: EventRef,
    session_id: Option<&str>,
    stats: &mut FilterStats,
    prefix: &str,
    out: &mut String,
) -> Result<(), AdminEventError> {
    let id = event.id.and_then(parse_event_id).ok_or(AdminEventError::MalformedSseId)?;
    let slow = memchr::memchr3(b'\\', b'\n', b'\r', event.data.as_bytes()).is_some();
    let probe = if slow { Probe::read(event.data)? } else { plain::probe(event.data)? };
    stats.events += 1;
    if event.event == "system.heartbeat" {
        stats.heartbeats += 1;
    }
    if !matches_web(event.event, probe.session_id.as_deref(), session_id) {
        return Ok(());
    }
    let mut digits = itoa::Buffer::new();
    let id_text = digits.format(id);
    // The frame is written in place: every piece is text already, so there is
    // no buffer to copy and nothing to validate again.
    let decoded = match slow {
        true => {
            let admin = AdminEvent::from_sse(&event.to_owned())?;
            // Serializing a string-keyed map cannot fail; if it somehow did,
            // refusing the event is the safe side.
            Some(serde_json::to_string(&admin).map_err(|_| AdminEventError::MalformedSseData)?)
        }
        false => None,
    };
    out.push_str(prefix);
    match decoded {
        Some(json) => push_admin_frame_text(out, id_text, &json),
        // After the head every frame shares, adjacent constant pieces are one
        // piece each: a push costs more than its bytes.
        None => {
            push_admin_frame_head(out, id_text);
            out.push_str("{\"id\":");
            out.push_str(id_text);
            out.push_str(",\"type\":");
            push_json_str(out, event.event);
            match &probe.timestamp {
                // A string the plain scan read holds no quote, backslash or
                // control character: it needs no escape.
                Some(ts) => {
                    out.push_str(",\"timestamp\":\"");
                    out.push_str(ts);
                    out.push_str("\",\"data\":");
                }
                None => out.push_str(",\"timestamp\":null,\"data\":"),
            }
            out.push_str(event.data);
            out.push_str("}\n\n");
        }
    }
    stats.forwarded += 1;
    Ok(())
}

/// `text` as a JSON string: copied when nothing in it needs an escape (an
/// event name, nearly always), else serde_json's escaping.
fn push_json_str(json: &mut String, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        json.push('"');
        json.push_str(text);
        json.push('"');
    } else {
        // A str always serializes.
        json.push_str(&serde_json::to_string(text).expect("a str serializes"));
    }
}

/// What the filter reads of an event's data: `session_id` and `timestamp`
/// when they are JSON strings (the last of duplicate keys, as a decoded
/// object keeps). Reading it checks that the data is exactly one JSON
/// object by the same grammar and limits as decoding it into a `Value`
/// (every number is parsed, so an out-of-range one fails as it does there).
struct Probe<'a> {
    session_id: Option<Cow<'a, str>>,
    timestamp: Option<Cow<'a, str>>,
}

impl<'a> Probe<'a> {
    fn read(data: &'a str) -> Result<Probe<'a>, AdminEventError> {
        let mut de = serde_json::Deserializer::from_str(data);
        let probe = de.deserialize_map(ProbeVisitor).map_err(|_| AdminEventError::MalformedSseData)?;
        de.end().map_err(|_| AdminEventError::MalformedSseData)?;
        Ok(probe)
    }
}

struct ProbeVisitor;

impl<'de> Visitor<'de> for ProbeVisitor {
    type Value = Probe<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Probe<'de>, A::Error> {
        let mut probe = Probe { session_id: None, timestamp: None };
        while let Some(key) = map.next_key::<Scalar<'de>>()? {
            let slot = match key.0.as_deref() {
                Some("session_id") => &mut probe.session_id,
                Some("timestamp") => &mut probe.timestamp,
                _ => {
                    map.next_value::<Scalar>()?;
                    continue;
                }
            };
            *slot = map.next_value::<Scalar>()?.0;
        }
        Ok(probe)
    }
}

/// Any JSON value, read through (parsed, not kept); a string is kept.
struct Scalar<'a>(Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar(Some(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar(Some(Cow::Owned(v.to_owned()))))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Scalar(None))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Scalar(None))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Scalar(None))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Scalar(None))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Scalar>()?.is_some() {}
        Ok(Scalar(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<Scalar, Scalar>()?.is_some() {}
        Ok(Scalar(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sse::Item;

    fn sse(id: Option<&str>, event: &str, data: &str) -> Event {
        Event { id: id.map(str::to_owned), event: event.into(), data: data.into(), retry: None }
    }

    fn admin(r#type: &str, data: Value) -> AdminEvent {
        let Value::Object(data) = data else { panic!("object") };
        AdminEvent { id: 1, r#type: r#type.into(), timestamp: None, data }
    }

    // --- from_sse ---

    #[test]
    fn from_sse_reads_id_type_data_and_timestamp() {
        let ev = AdminEvent::from_sse(&sse(
            Some("1042"),
            "turn.started",
            r#"{"session_id":"s_1","turn_id":"t_1","timestamp":"2025-01-01T00:00:00Z"}"#,
        ))
        .expect("valid");
        assert_eq!(ev.id, 1042);
        assert_eq!(ev.r#type, "turn.started");
        assert_eq!(ev.timestamp.as_deref(), Some("2025-01-01T00:00:00Z"));
        assert_eq!(ev.data["turn_id"], "t_1");
    }

    #[test]
    fn timestamp_only_from_a_string() {
        for data in [r#"{"timestamp":12}"#, r#"{"timestamp":null}"#, "{}"] {
            let ev = AdminEvent::from_sse(&sse(Some("1"), "x.y", data)).expect("valid");
            assert_eq!(ev.timestamp, None, "{data}");
        }
    }

    #[test]
    fn ids_that_are_malformed() {
        for id in [
            None,
            Some(""),
            Some("+1"),
            Some("-1"),
            Some(" 1"),
            Some("1 "),
            Some("1.0"),
            Some("0x1"),
            Some("１"),
            Some("18446744073709551616"),
        ] {
            assert_eq!(AdminEvent::from_sse(&sse(id, "x.y", "{}")), Err(AdminEventError::MalformedSseId), "{id:?}");
        }
    }

    #[test]
    fn ids_that_are_valid() {
        for (raw, want) in [("0", 0), ("007", 7), ("18446744073709551615", u64::MAX)] {
            assert_eq!(AdminEvent::from_sse(&sse(Some(raw), "x.y", "{}")).map(|e| e.id), Ok(want));
        }
    }

    #[test]
    fn data_that_is_malformed() {
        for data in ["", "[]", "1", "\"s\"", "null", "{", "{}{}", "{} x", "{\"a\":1}\n{}"] {
            assert_eq!(
                AdminEvent::from_sse(&sse(Some("1"), "x.y", data)),
                Err(AdminEventError::MalformedSseData),
                "{data:?}"
            );
        }
    }

    #[test]
    fn id_is_checked_before_data() {
        assert_eq!(AdminEvent::from_sse(&sse(None, "x.y", "[]")), Err(AdminEventError::MalformedSseId));
    }

    #[test]
    fn default_message_type_is_kept_as_is() {
        let ev = AdminEvent::from_sse(&sse(Some("1"), "message", r#"{"session_id":"s"}"#)).expect("valid");
        assert_eq!(ev.r#type, "message");
        assert!(admin_event_matches(&ev, Some("s")));
        assert!(!admin_event_matches(&ev, Some("t")));
    }

    #[test]
    fn serializes_with_contract_field_names() {
        let mut ev = admin("turn.done", json!({"session_id": "s"}));
        ev.timestamp = Some("ts".into());
        assert_eq!(
            serde_json::to_value(&ev).expect("serializable"),
            json!({"id": 1, "type": "turn.done", "timestamp": "ts", "data": {"session_id": "s"}})
        );
    }

    // --- admin_event_matches (seed POST-001..003) ---

    #[test]
    fn post_001_heartbeat_never_matches() {
        let hb = admin("system.heartbeat", json!({"session_id": "s"}));
        assert!(!admin_event_matches(&hb, Some("s")));
        assert!(!admin_event_matches(&hb, None));
    }

    #[test]
    fn post_002_other_system_events_always_match() {
        for t in ["system.restart", "system.", "system.heartbeat.extra", "system.lagged"] {
            let ev = admin(t, json!({"session_id": "other"}));
            assert!(admin_event_matches(&ev, Some("s")), "{t}");
            assert!(admin_event_matches(&ev, None), "{t}");
        }
    }

    #[test]
    fn post_003_session_scoped() {
        let ev = admin("turn.started", json!({"session_id": "s_1"}));
        assert!(admin_event_matches(&ev, Some("s_1")));
        assert!(!admin_event_matches(&ev, Some("s_2")));
        assert!(!admin_event_matches(&ev, Some("S_1")));
        assert!(!admin_event_matches(&ev, None), "None forwards no non-system event");
    }

    #[test]
    fn post_003_missing_or_non_string_session_id_never_matches() {
        for data in [
            json!({}),
            json!({"session_id": null}),
            json!({"session_id": 1}),
            json!({"session_id": ["s"]}),
            json!({"session_id": {"id": "s"}}),
        ] {
            let ev = admin("turn.started", data.clone());
            assert!(!admin_event_matches(&ev, Some("s")), "{data}");
            assert!(!admin_event_matches(&ev, Some("1")), "{data}");
            assert!(!admin_event_matches(&ev, None), "{data}");
        }
    }

    #[test]
    fn post_003_prefix_is_not_system() {
        for t in ["system", "systemx.y", "System.restart", "key.rotated"] {
            let ev = admin(t, json!({}));
            assert!(!admin_event_matches(&ev, Some("s")), "{t}");
        }
    }

    #[test]
    fn post_003_empty_session_id_compares_literally() {
        let ev = admin("turn.started", json!({"session_id": ""}));
        assert!(admin_event_matches(&ev, Some("")));
        assert!(!admin_event_matches(&ev, None));
    }

    // --- frames ---

    fn parse_frames(text: &str) -> Vec<Event> {
        let mut parser = Parser::new();
        let mut items = Vec::new();
        parser.feed(text.as_bytes(), &mut items).expect("within limits");
        assert!(!parser.finish(), "frames must be complete: {text:?}");
        items
            .into_iter()
            .map(|item| match item {
                Item::Event(ev) => ev,
                Item::Comment(c) => panic!("unexpected comment {c:?}"),
            })
            .collect()
    }

    #[test]
    fn admin_frame_format() {
        let mut ev = admin("turn.started", json!({"session_id": "s\n\"x\"", "n": 1}));
        ev.id = 77;
        let mut out = String::new();
        encode_admin_event(&mut out, &ev).expect("serializable");
        assert!(out.starts_with("event: admin_event\nid: 77\ndata: {"), "{out}");
        assert_eq!(out.matches('\n').count(), 4, "JSON on one data line: {out:?}");
        let frames = parse_frames(&out);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].event, ADMIN_EVENT_NAME);
        assert_eq!(frames[0].id.as_deref(), Some("77"));
        let payload: Value = serde_json::from_str(&frames[0].data).expect("json");
        assert_eq!(
            payload,
            json!({"id": 77, "type": "turn.started", "timestamp": null, "data": {"session_id": "s\n\"x\"", "n": 1}})
        );
    }

    #[test]
    fn stream_error_frames() {
        let cases = [
            (StreamError::ConnectFailed, json!("connect_failed"), None),
            (StreamError::UpstreamStatus { status: 403 }, json!("upstream_status"), Some(("status", json!(403)))),
            (StreamError::ConnectionDropped, json!("connection_dropped"), None),
            (StreamError::MalformedSseId, json!("malformed_sse_id"), None),
            (StreamError::MalformedSseData, json!("malformed_sse_data"), None),
            (StreamError::EventTooLarge { limit_bytes: 9 }, json!("event_too_large"), Some(("limit_bytes", json!(9)))),
        ];
        for (err, reason, extra) in cases {
            let mut out = String::new();
            encode_stream_error(&mut out, &err);
            assert!(out.starts_with("event: stream_error\ndata: {"), "{out}");
            assert!(out.ends_with("}\n\n"), "{out}");
            let frames = parse_frames(&out);
            assert_eq!(frames.len(), 1);
            assert_eq!(frames[0].event, STREAM_ERROR_NAME);
            assert_eq!(frames[0].id, None);
            let payload: Value = serde_json::from_str(&frames[0].data).expect("json");
            assert_eq!(payload["reason"], reason);
            assert!(payload["message"].is_string());
            if let Some((key, value)) = extra {
                assert_eq!(payload[key], value);
            }
        }
    }

    // --- filter ---

    const STREAM: &str = concat!(
        ": hello\n\n",
        "id: 1\nevent: system.heartbeat\ndata: {}\n\n",
        "id: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\",\"turn_id\":\"t_1\",\"timestamp\":\"T\"}\n\n",
        "id: 3\nevent: turn.started\ndata: {\"session_id\":\"s_2\"}\n\n",
        "id: 4\nevent: system.restart\ndata: {}\n\n",
        "id: 5\nevent: key.rotated\ndata: {}\n\n",
        "id: 6\nevent: turn.done\ndata: {\"session_id\":\"s_1\"}\n\n",
    );

    fn run(filter: &mut AdminEventFilter, chunks: &[&[u8]]) -> (String, Flow) {
        let mut out = String::new();
        let mut flow = Flow::Continue;
        for chunk in chunks {
            flow = filter.feed(chunk, &mut out);
            if flow != Flow::Continue {
                break;
            }
        }
        (out, flow)
    }

    fn forwarded(out: &str) -> Vec<(u64, String)> {
        parse_frames(out)
            .into_iter()
            .filter(|f| f.event == ADMIN_EVENT_NAME)
            .map(|f| {
                let payload: Value = serde_json::from_str(&f.data).expect("json");
                let id = payload["id"].as_u64().expect("id");
                assert_eq!(f.id, Some(id.to_string()), "SSE id matches the payload id");
                (id, payload["type"].as_str().expect("type").to_owned())
            })
            .collect()
    }

    #[test]
    fn filter_forwards_session_events_and_system_signals() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let (out, flow) = run(&mut filter, &[STREAM.as_bytes()]);
        assert_eq!(flow, Flow::Continue);
        assert_eq!(
            forwarded(&out),
            vec![(2, "turn.started".to_owned()), (4, "system.restart".to_owned()), (6, "turn.done".to_owned())]
        );
        assert_eq!(filter.stats(), FilterStats { events: 6, forwarded: 3, heartbeats: 1, comments: 1 });
        assert_eq!(filter.last_event_id(), "6");
    }

    #[test]
    fn filter_without_session_forwards_only_system_signals() {
        let mut filter = AdminEventFilter::new(None);
        let (out, _) = run(&mut filter, &[STREAM.as_bytes()]);
        assert_eq!(forwarded(&out), vec![(4, "system.restart".to_owned())]);
    }

    #[test]
    fn filter_payload_carries_timestamp_and_data() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let (out, _) = run(&mut filter, &[STREAM.as_bytes()]);
        let first = &parse_frames(&out)[0];
        let payload: Value = serde_json::from_str(&first.data).expect("json");
        assert_eq!(
            payload,
            json!({
                "id": 2, "type": "turn.started", "timestamp": "T",
                "data": {"session_id": "s_1", "turn_id": "t_1", "timestamp": "T"}
            })
        );
    }

    #[test]
    fn filter_output_is_independent_of_chunking() {
        let whole = run(&mut AdminEventFilter::new(Some("s_1".into())), &[STREAM.as_bytes()]).0;
        let bytes = STREAM.as_bytes();
        for size in [1, 2, 3, 7, 64] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            let (out, flow) = run(&mut AdminEventFilter::new(Some("s_1".into())), &chunks);
            assert_eq!((out.as_str(), flow), (whole.as_str(), Flow::Continue), "chunk size {size}");
        }
    }

    #[test]
    fn filter_one_chunk_one_buffer() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let mut out = String::new();
        // Nothing complete yet: nothing written.
        assert_eq!(
            filter.feed(b"id: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n", &mut out),
            Flow::Continue
        );
        assert!(out.is_empty());
        // The blank line completes it, together with a second event.
        assert_eq!(
            filter.feed(b"\nid: 3\nevent: turn.done\ndata: {\"session_id\":\"s_1\"}\n\n", &mut out),
            Flow::Continue
        );
        assert_eq!(forwarded(&out), vec![(2, "turn.started".to_owned()), (3, "turn.done".to_owned())]);
    }

    fn last_frame_reason(out: &str) -> String {
        let frames = parse_frames(out);
        let last = frames.last().expect("a frame");
        assert_eq!(last.event, STREAM_ERROR_NAME);
        let payload: Value = serde_json::from_str(&last.data).expect("json");
        payload["reason"].as_str().expect("reason").to_owned()
    }

    #[test]
    fn filter_malformed_id_stops_after_earlier_events() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let input = "id: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\nid: x\nevent: turn.done\ndata: {\"session_id\":\"s_1\"}\n\nid: 9\nevent: system.restart\ndata: {}\n\n";
        let (out, flow) = run(&mut filter, &[input.as_bytes()]);
        assert_eq!(flow, Flow::Stop(StreamError::MalformedSseId));
        assert_eq!(forwarded(&out), vec![(2, "turn.started".to_owned())], "nothing after the error");
        assert_eq!(last_frame_reason(&out), "malformed_sse_id");
        assert_eq!(out.matches("event: stream_error").count(), 1);
    }

    #[test]
    fn filter_missing_id_is_malformed() {
        let mut filter = AdminEventFilter::new(None);
        let (out, flow) = run(&mut filter, &[b"event: system.restart\ndata: {}\n\n"]);
        assert_eq!(flow, Flow::Stop(StreamError::MalformedSseId));
        assert_eq!(last_frame_reason(&out), "malformed_sse_id");
    }

    #[test]
    fn filter_malformed_data_of_another_session_still_stops() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        let (out, flow) = run(&mut filter, &[b"id: 1\nevent: turn.started\ndata: [\"s_2\"]\n\n"]);
        assert_eq!(flow, Flow::Stop(StreamError::MalformedSseData));
        assert_eq!(last_frame_reason(&out), "malformed_sse_data");
    }

    #[test]
    fn filter_oversized_event_stops() {
        let limits = Limits { max_line_bytes: 64, max_event_bytes: 64 };
        let mut filter = AdminEventFilter::with_limits(None, limits);
        let big = format!("id: 1\nevent: system.x\ndata: {}\n\n", "a".repeat(100));
        let (out, flow) = run(&mut filter, &[big.as_bytes()]);
        assert_eq!(flow, Flow::Stop(StreamError::EventTooLarge { limit_bytes: 64 }));
        assert_eq!(last_frame_reason(&out), "event_too_large");
    }

    /// The payload the filter forwards for `data` (session `s`): its data
    /// line and the decoded payload, or how the stream stopped.
    fn payload_of(data: &str) -> Result<(String, Value), Flow> {
        let mut filter = AdminEventFilter::new(Some("s".into()));
        // A line break in `data` is a second `data:` line on the wire.
        let lines: String = data.split('\n').map(|line| format!("data: {line}\n")).collect();
        let (out, flow) = run(&mut filter, &[format!("id: 9\nevent: turn.x\n{lines}\n").as_bytes()]);
        if flow != Flow::Continue {
            return Err(flow);
        }
        let frame = parse_frames(&out).pop().expect("forwarded");
        let payload = serde_json::from_str(&frame.data).expect("json");
        Ok((frame.data, payload))
    }

    #[test]
    fn forwarded_payload_is_the_decoded_events_payload_for_any_data_form() {
        let cases = [
            r#"{"session_id":"s","b":1,"a":[1,{"z":null,"y":true}],"timestamp":"T"}"#,
            r#"  { "z" : 1.5 , "session_id" : "s" ,"n":-0,"e":1e5,"u":"é — 😀"}"#,
            r#"{"session_id":"x","session_id":"s","timestamp":1,"timestamp":"last"}"#,
            r#"{"session_id":"s","big":123456789012345678901234567890,"i":18446744073709551615}"#,
            r#"{"session_id":"\u0073","k":"\u0061dmin","t":"a\/b","timestamp":"\ud83d\ude00"}"#,
            "{\"session_id\":\"s\",\n\"k\":\"line\\nbreak\"}",
        ];
        for data in cases {
            let (line, payload) = payload_of(data).unwrap_or_else(|f| panic!("{data}: {f:?}"));
            let event = Event { id: Some("9".into()), event: "turn.x".into(), data: data.into(), retry: None };
            let decoded = serde_json::to_value(AdminEvent::from_sse(&event).unwrap()).unwrap();
            assert_eq!(payload, decoded, "{data}");
            assert!(!line.contains(['\r', '\n']), "one data line: {line:?}");
        }
    }

    #[test]
    fn escaped_data_is_forwarded_decoded_so_a_key_cannot_hide_in_an_escape() {
        // `\u0061dmin-key` is "admin-key" to any JSON reader: the frame must
        // carry the literal text, where the proxy's byte scan finds it.
        let (line, _) = payload_of(r#"{"session_id":"s","k":"\u0061dmin-key","p":"a\/b"}"#).unwrap();
        assert!(line.contains(r#""admin-key""#), "{line}");
        assert!(line.contains(r#""a/b""#), "{line}");
        assert!(!line.contains('\\'), "{line}");
        // An escaped key name is read too.
        assert!(payload_of(r#"{"session\u005fid":"s"}"#).is_ok());
    }

    #[test]
    fn data_is_refused_exactly_where_decoding_it_fails() {
        for data in [r#"{"x":1e400}"#, "[1]", "{} {}", r#"{"a":}"#, r#""s""#, r#"{"a":"\x"}"#, "{\"a\":\"\u{1}\"}", ""]
        {
            let event = Event { id: Some("9".into()), event: "turn.x".into(), data: data.into(), retry: None };
            assert_eq!(AdminEvent::from_sse(&event).err(), Some(AdminEventError::MalformedSseData), "{data}");
            assert_eq!(payload_of(data).err(), Some(Flow::Stop(StreamError::MalformedSseData)), "{data}");
        }
    }

    #[test]
    fn the_frame_prefix_heads_every_frame_stream_error_included() {
        let mut filter = AdminEventFilter::new(Some("s_1".into()));
        filter.set_frame_prefix(": t=7\n");
        let mut out = String::new();
        assert_eq!(filter.feed(STREAM.as_bytes(), &mut out), Flow::Continue);
        filter.set_frame_prefix(": t=8\n");
        let _ = filter.finish(&mut out);
        let blocks: Vec<&str> = out.split_inclusive("\n\n").collect();
        assert_eq!(blocks.len(), 4, "{out}");
        assert!(blocks[..3].iter().all(|b| b.starts_with(": t=7\nevent: admin_event\n")), "{out}");
        assert!(blocks[3].starts_with(": t=8\nevent: stream_error\n"), "{out}");
    }

    #[test]
    fn a_plain_event_is_framed_with_its_data_as_written() {
        let cases = [
            ("turn.started", r#"{"session_id":"s_1", "timestamp":"2026-01-02T03:04:05Z","n":[1,{"x":null}]}"#),
            ("system.reset", r#"{ "timestamp" : 7 }"#),
            ("system.a\"b</script>", r#"{"timestamp":"é — 😀"}"#),
            ("system.x", "{}"),
        ];
        for (i, (name, data)) in cases.into_iter().enumerate() {
            let id = 41 + i;
            let mut filter = AdminEventFilter::new(Some("s_1".into()));
            let (out, _) = run(&mut filter, &[format!("id: {id}\nevent: {name}\ndata: {data}\n\n").as_bytes()]);
            let v: Value = serde_json::from_str(data).unwrap();
            let (name_json, ts_json) = (
                serde_json::to_string(name).unwrap(),
                match &v["timestamp"] {
                    Value::String(ts) => serde_json::to_string(ts).unwrap(),
                    _ => "null".into(),
                },
            );
            let want = format!(
                "event: {ADMIN_EVENT_NAME}\nid: {id}\ndata: {{\"id\":{id},\"type\":{name_json},\"timestamp\":{ts_json},\"data\":{data}}}\n\n"
            );
            assert_eq!(out, want);
        }
    }

    #[test]
    fn json_strings_are_written_as_serde_json_writes_them() {
        for text in ["turn.started", "", "é — 😀", "a\"b", "a\\b", "tab\there", "\u{1}", "\u{7f}", "</script>"] {
            let mut json = String::new();
            push_json_str(&mut json, text);
            assert_eq!(json, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn filter_stays_stopped() {
        let mut filter = AdminEventFilter::new(None);
        let (_, flow) = run(&mut filter, &[b"id: x\ndata: {}\n\n"]);
        assert_eq!(flow, Flow::Stop(StreamError::MalformedSseId));
        let mut out = String::new();
        assert_eq!(
            filter.feed(b"id: 1\nevent: system.x\ndata: {}\n\n", &mut out),
            Flow::Stop(StreamError::MalformedSseId)
        );
        assert_eq!(filter.finish(&mut out), Flow::Stop(StreamError::MalformedSseId));
        assert_eq!(filter.fail(StreamError::ConnectFailed, &mut out), Flow::Stop(StreamError::MalformedSseId));
        assert!(out.is_empty(), "one stream_error per stream");
        assert_eq!(filter.stopped(), Some(StreamError::MalformedSseId));
    }

    #[test]
    fn filter_finish_is_connection_dropped() {
        let mut filter = AdminEventFilter::new(None);
        let mut out = String::new();
        assert_eq!(filter.feed(b"id: 4\nevent: system.x\ndata: {}\n\nid: 5\n", &mut out), Flow::Continue);
        assert_eq!(filter.finish(&mut out), Flow::Stop(StreamError::ConnectionDropped));
        assert_eq!(forwarded(&out), vec![(4, "system.x".to_owned())]);
        assert_eq!(last_frame_reason(&out), "connection_dropped");
    }

    #[test]
    fn filter_fail_writes_the_given_reason() {
        let mut filter = AdminEventFilter::new(None);
        let mut out = String::new();
        assert_eq!(
            filter.fail(StreamError::UpstreamStatus { status: 401 }, &mut out),
            Flow::Stop(StreamError::UpstreamStatus { status: 401 })
        );
        let frames = parse_frames(&out);
        let payload: Value = serde_json::from_str(&frames[0].data).expect("json");
        assert_eq!((payload["reason"].as_str(), payload["status"].as_u64()), (Some("upstream_status"), Some(401)));
    }

    #[test]
    fn filter_never_leaks_the_upstream_type_as_event_name() {
        // A hostile upstream type cannot become the downstream event name or
        // break out of the data line.
        let mut filter = AdminEventFilter::new(None);
        let (out, _) = run(
            &mut filter,
            &["id: 1\nevent: system.x\u{2028}</script>\ndata: {\"k\":\"a\\nevent: evil\"}\n\n".as_bytes()],
        );
        let frames = parse_frames(&out);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].event, ADMIN_EVENT_NAME);
        assert!(!out.contains("\nevent: evil"));
    }
}
