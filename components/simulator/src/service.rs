//! The simulator's state machine over a key-value store, free of Spin types so that it
//! unit-tests natively against an in-memory map.
//!
//! Key-value layout (store "default"; every key is prefixed `sim:`):
//! - `sim:session:<session_id>` — [`SessionRecord`] JSON.
//! - `sim:running:<session_id>` — [`RunningTurn`] JSON while a turn streams; deleted on
//!   every exit path (done, error, cancelled, client gone). The streaming turn refreshes
//!   its `beat_at_ms` about once a second ([`BEAT_EVERY_MS`]). A flag counts as free
//!   (a crashed turn cannot lock its session) once it is older than [`STALE_TURN_MS`]
//!   or its beat is older than [`STALE_BEAT_MS`] — the latter matters because a host
//!   may end the instance as soon as the client goes away, before any exit path runs.
//! - `sim:cancel:<session_id>:<turn_id>` — present once a cancel was requested for the
//!   running turn; the stream polls it and deletes it when the turn ends.
//! - `sim:affect:<agent_id>` — [`AffectLog`] JSON: the last few affect snapshots.
//!
//! The Spin key-value interface has no compare-and-swap, so the 409 check is
//! check-then-set: two turn requests racing within the same few microseconds could both
//! start. Good enough for a simulator; the real gateway is the authority on 409.

use crate::affect::{self, AffectLog, TurnFacts};
use crate::catalog::{self, AgentDef};
use crate::model::{DispatchState, LastDispatch, RunningTurn, SessionCreated, SessionRecord};
use crate::rng::Rng;
use crate::time::rfc3339_millis;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// A running flag older than this is treated as a crashed turn.
pub const STALE_TURN_MS: u64 = 60_000;
/// A running flag whose beat is older than this is treated as a crashed turn.
pub const STALE_BEAT_MS: u64 = 5_000;
/// How often a streaming turn refreshes its beat.
pub const BEAT_EVERY_MS: u64 = 1_000;
/// Recent turn ids remembered per session.
pub const RECENT_TURNS: usize = 32;
pub const MAX_END_USER_ID_CHARS: usize = 256;
pub const MAX_TEXT_CHARS: usize = 16_384;

pub use guest_http::kv::{Kv, KvError};

/// A refusal as the upstream's wire contract (sections 1 and 2) answers it:
/// `{"error": "<code>"}` at a status. Not the console's own envelope
/// (`guest_http::ApiError`, `{"error_code", "message"}`): the simulator plays
/// the upstream, and the console maps these to its envelopes as it would the
/// real gateway's.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamError {
    BadRequest(String),
    Unauthorized,
    ScopeDenied,
    NotFound(&'static str),
    MethodNotAllowed(&'static str),
    Conflict,
    Internal,
}

impl UpstreamError {
    pub fn status(&self) -> u16 {
        match self {
            UpstreamError::BadRequest(_) => 400,
            UpstreamError::Unauthorized => 401,
            UpstreamError::ScopeDenied => 403,
            UpstreamError::NotFound(_) => 404,
            UpstreamError::MethodNotAllowed(_) => 405,
            UpstreamError::Conflict => 409,
            UpstreamError::Internal => 500,
        }
    }

    /// The JSON error body. Never contains request headers or configuration.
    pub fn body(&self) -> Value {
        match self {
            UpstreamError::BadRequest(m) => json!({ "error": "bad_request", "message": m }),
            UpstreamError::Unauthorized => json!({ "error": "unauthorized" }),
            UpstreamError::ScopeDenied => json!({ "error": "scope_denied" }),
            UpstreamError::NotFound(what) => json!({ "error": what }),
            UpstreamError::MethodNotAllowed(_) => json!({ "error": "method_not_allowed" }),
            UpstreamError::Conflict => json!({ "error": "turn_already_running" }),
            UpstreamError::Internal => json!({ "error": "internal" }),
        }
    }
}

pub fn session_key(sid: &str) -> String {
    format!("sim:session:{sid}")
}
pub fn running_key(sid: &str) -> String {
    format!("sim:running:{sid}")
}
pub fn cancel_key(sid: &str, tid: &str) -> String {
    format!("sim:cancel:{sid}:{tid}")
}
pub fn affect_key(agent_id: &str) -> String {
    format!("sim:affect:{agent_id}")
}

/// `s_` + 24 lowercase hex digits.
pub fn valid_session_id(s: &str) -> bool {
    valid_id(s, "s_", 24)
}
/// `t_` + 16 lowercase hex digits.
pub fn valid_turn_id(s: &str) -> bool {
    valid_id(s, "t_", 16)
}
fn valid_id(s: &str, prefix: &str, hex_len: usize) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_len && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
}

/// A turn that has been admitted and marked running.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnTicket {
    pub session: SessionRecord,
    pub agent: &'static AgentDef,
    pub turn_id: String,
    pub text: String,
    pub started_at_ms: u64,
}

pub struct Sim<'a, K: Kv> {
    pub kv: &'a K,
}

fn internal<E: std::fmt::Display>(context: &str) -> impl FnOnce(E) -> UpstreamError + '_ {
    move |e| {
        eprintln!("simulator: {context}: {e}");
        UpstreamError::Internal
    }
}

fn parse_object(body: &[u8]) -> Result<serde_json::Map<String, Value>, UpstreamError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err(UpstreamError::BadRequest("body must be a JSON object".into())),
        Err(_) => Err(UpstreamError::BadRequest("body is not valid JSON".into())),
    }
}

fn required_string<'m>(o: &'m serde_json::Map<String, Value>, field: &str) -> Result<&'m str, UpstreamError> {
    match o.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(UpstreamError::BadRequest(format!("{field} must be a string"))),
        None => Err(UpstreamError::BadRequest(format!("{field} is required"))),
    }
}

impl<'a, K: Kv> Sim<'a, K> {
    pub fn new(kv: &'a K) -> Self {
        Sim { kv }
    }

    fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, UpstreamError> {
        match self.kv.get(key).map_err(internal("kv get"))? {
            None => Ok(None),
            Some(bytes) => match serde_json::from_slice(&bytes) {
                Ok(v) => Ok(Some(v)),
                Err(e) => {
                    // A record from an older layout: treat as absent rather than fail forever.
                    eprintln!("simulator: unreadable record under {key}: {e}");
                    Ok(None)
                }
            },
        }
    }

    fn set_json<T: Serialize>(&self, key: &str, value: &T) -> Result<(), UpstreamError> {
        let bytes = serde_json::to_vec(value).map_err(internal("serialize"))?;
        self.kv.set(key, &bytes).map_err(internal("kv set"))
    }

    /// `POST /v1/sessions`.
    pub fn create_session(&self, body: &[u8], now_ms: u64, rng: &mut Rng) -> Result<SessionCreated, UpstreamError> {
        let o = parse_object(body)?;
        let agent_id = required_string(&o, "agent_id")?;
        let end_user_id = required_string(&o, "end_user_id")?;
        if end_user_id.trim().is_empty() {
            return Err(UpstreamError::BadRequest("end_user_id must not be empty".into()));
        }
        if end_user_id.chars().count() > MAX_END_USER_ID_CHARS {
            return Err(UpstreamError::BadRequest("end_user_id is too long".into()));
        }
        let agent = catalog::agent(agent_id).ok_or(UpstreamError::NotFound("unknown_agent"))?;
        // Time-ordered: 12 hex digits of the creation time in ms, then 12 random ones,
        // so sorting ids sorts sessions by age (the admin firehose favours the newest).
        let session_id = format!("s_{:012x}{}", now_ms & 0xffff_ffff_ffff, rng.hex(6));
        let created_at = rfc3339_millis(now_ms);
        let record = SessionRecord {
            session_id: session_id.clone(),
            agent_id: agent.id.to_owned(),
            end_user_id: end_user_id.to_owned(),
            created_at: created_at.clone(),
            created_at_ms: now_ms,
            turn_count: 0,
            recent_turns: Vec::new(),
            last_dispatch: None,
        };
        self.set_json(&session_key(&session_id), &record)?;
        Ok(SessionCreated { session_id, agent_id: agent.id.to_owned(), created_at })
    }

    pub fn session(&self, sid: &str) -> Result<Option<SessionRecord>, UpstreamError> {
        if !valid_session_id(sid) {
            return Ok(None);
        }
        self.get_json(&session_key(sid))
    }

    fn require_session(&self, sid: &str) -> Result<SessionRecord, UpstreamError> {
        self.session(sid)?.ok_or(UpstreamError::NotFound("unknown_session"))
    }

    /// The running turn, unless there is none or it is stale.
    pub fn running(&self, sid: &str, now_ms: u64) -> Result<Option<RunningTurn>, UpstreamError> {
        Ok(self.get_json::<RunningTurn>(&running_key(sid))?.filter(|r| {
            now_ms.saturating_sub(r.started_at_ms) < STALE_TURN_MS
                && now_ms.saturating_sub(r.beat_at_ms.max(r.started_at_ms)) < STALE_BEAT_MS
        }))
    }

    /// Refresh the running flag's beat (only if the flag is still this turn's).
    pub fn beat(&self, t: &TurnTicket, now_ms: u64) {
        let key = running_key(&t.session.session_id);
        if let Ok(Some(mut r)) = self.get_json::<RunningTurn>(&key) {
            if r.turn_id == t.turn_id {
                r.beat_at_ms = now_ms;
                let _ = self.set_json(&key, &r);
            }
        }
    }

    /// `POST /v1/sessions/{id}/turns`: admit a turn and mark it running.
    pub fn begin_turn(&self, sid: &str, body: &[u8], now_ms: u64, rng: &mut Rng) -> Result<TurnTicket, UpstreamError> {
        let mut session = self.require_session(sid)?;
        let o = parse_object(body)?;
        let text = required_string(&o, "text")?;
        if text.chars().count() > MAX_TEXT_CHARS {
            return Err(UpstreamError::BadRequest("text is too long".into()));
        }
        if self.running(sid, now_ms)?.is_some() {
            return Err(UpstreamError::Conflict);
        }
        let agent = catalog::agent(&session.agent_id).ok_or(UpstreamError::Internal)?;
        let turn_id = format!("t_{}", rng.hex(8));
        let flag = RunningTurn { turn_id: turn_id.clone(), started_at_ms: now_ms, beat_at_ms: now_ms };
        self.set_json(&running_key(sid), &flag)?;
        // A stale cancel flag of a crashed turn must not leak into this one (ids are random,
        // so this is belt and braces).
        let _ = self.kv.delete(&cancel_key(sid, &turn_id));
        session.turn_count += 1;
        session.recent_turns.push(turn_id.clone());
        let excess = session.recent_turns.len().saturating_sub(RECENT_TURNS);
        session.recent_turns.drain(..excess);
        if let Err(e) = self.set_json(&session_key(sid), &session) {
            let _ = self.kv.delete(&running_key(sid));
            return Err(e);
        }
        Ok(TurnTicket { session, agent, turn_id, text: text.to_owned(), started_at_ms: now_ms })
    }

    pub fn cancel_requested(&self, sid: &str, tid: &str) -> bool {
        matches!(self.kv.get(&cancel_key(sid, tid)), Ok(Some(_)))
    }

    /// End a turn: record `last_dispatch`, clear the running and cancel flags, and after a
    /// completed turn record the next affect snapshot. Call BEFORE sending the terminal
    /// event, so a client that reacts to `done` with a new turn never sees a stale 409.
    pub fn finish_turn(&self, t: &TurnTicket, status: &str, now_ms: u64, rng: &mut Rng) {
        let latency_ms = now_ms.saturating_sub(t.started_at_ms);
        match self.get_json::<SessionRecord>(&session_key(&t.session.session_id)) {
            Ok(Some(mut s)) => {
                s.last_dispatch =
                    Some(LastDispatch { turn_id: t.turn_id.clone(), latency_ms, status: status.to_owned() });
                let _ = self.set_json(&session_key(&s.session_id), &s);
            }
            _ => eprintln!("simulator: session vanished during a turn"),
        }
        // Only clear the flag if it is still ours.
        if let Ok(Some(r)) = self.get_json::<RunningTurn>(&running_key(&t.session.session_id)) {
            if r.turn_id == t.turn_id {
                let _ = self.kv.delete(&running_key(&t.session.session_id));
            }
        }
        let _ = self.kv.delete(&cancel_key(&t.session.session_id, &t.turn_id));
        if status == "ok" {
            let _ = self.record_affect(t, now_ms, rng);
        }
    }

    fn record_affect(&self, t: &TurnTicket, now_ms: u64, rng: &mut Rng) -> Result<(), UpstreamError> {
        let key = affect_key(t.agent.id);
        let mut log: AffectLog = self.get_json(&key)?.unwrap_or_default();
        let facts = TurnFacts {
            agent: t.agent,
            end_user_id: &t.session.end_user_id,
            user_text: &t.text,
            turn_number: t.session.turn_count,
            now_ms,
        };
        let snap = affect::evolve(log.latest(), &facts, rng);
        log.push(snap);
        self.set_json(&key, &log)
    }

    /// `POST /v1/sessions/{id}/turns/{turn_id}/cancel`.
    pub fn cancel(&self, sid: &str, tid: &str, now_ms: u64) -> Result<(), UpstreamError> {
        let session = self.require_session(sid)?;
        if !valid_turn_id(tid) {
            return Err(UpstreamError::NotFound("unknown_turn"));
        }
        if let Some(r) = self.running(sid, now_ms)? {
            if r.turn_id == tid {
                return self.kv.set(&cancel_key(sid, tid), b"1").map_err(internal("kv set"));
            }
        }
        // A finished turn of this session: nothing left to cancel, still accepted.
        if session.recent_turns.iter().any(|t| t == tid) {
            Ok(())
        } else {
            Err(UpstreamError::NotFound("unknown_turn"))
        }
    }

    /// `GET /v1/sessions/{id}/tools`.
    pub fn tools(&self, sid: &str) -> Result<Value, UpstreamError> {
        let s = self.require_session(sid)?;
        let agent = catalog::agent(&s.agent_id).ok_or(UpstreamError::Internal)?;
        Ok(json!({ "session_id": s.session_id, "agent_id": s.agent_id, "tools": agent.tool_inventory() }))
    }

    /// `GET /v1/sessions/{id}/bifrost`.
    pub fn bifrost(&self, sid: &str, now_ms: u64) -> Result<DispatchState, UpstreamError> {
        let s = self.session(sid)?.ok_or(UpstreamError::NotFound("not_bound"))?;
        let agent = catalog::agent(&s.agent_id).ok_or(UpstreamError::Internal)?;
        if agent.bifrost_scope_denied {
            return Err(UpstreamError::ScopeDenied);
        }
        let inflight = u64::from(self.running(sid, now_ms)?.is_some());
        Ok(DispatchState {
            session_id: s.session_id,
            agent_id: s.agent_id,
            endpoint: agent.endpoint.to_owned(),
            model: agent.model.to_owned(),
            caps: agent.caps(),
            tools: agent.tool_summaries(),
            bound_at: s.created_at,
            inflight_turns: inflight,
            last_dispatch: s.last_dispatch,
        })
    }

    /// `GET /worldtree/affect?agent_id=...`.
    pub fn affect(&self, agent_id: Option<&str>, now_ms: u64) -> Result<Value, UpstreamError> {
        let agent_id = match agent_id {
            Some(a) if !a.is_empty() => a,
            _ => return Err(UpstreamError::BadRequest("agent_id is required".into())),
        };
        let agent = catalog::agent(agent_id).ok_or(UpstreamError::NotFound("unknown_agent"))?;
        let log: AffectLog = self.get_json(&affect_key(agent.id))?.unwrap_or_default();
        let snap = log.visible(now_ms).ok_or(UpstreamError::NotFound("no_snapshot"))?;
        Ok(affect::to_wire(agent, snap))
    }

    /// Ids of the sessions in the store (for the admin firehose), oldest first.
    pub fn session_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .kv
            .keys()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|k| k.strip_prefix("sim:session:").map(str::to_owned))
            .filter(|s| valid_session_id(s))
            .collect();
        ids.sort();
        ids
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    pub use guest_http::kv::MemKv;

    const NOW: u64 = 1_796_000_000_000;

    fn new_session(sim: &Sim<MemKv>, agent: &str, rng: &mut Rng) -> String {
        let body = json!({"agent_id": agent, "end_user_id": "operator"}).to_string();
        sim.create_session(body.as_bytes(), NOW, rng).unwrap().session_id
    }

    #[test]
    fn create_session_validates() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(1);
        let ok =
            sim.create_session(br#"{"agent_id":"sindra","end_user_id":"operator","extra":1}"#, NOW, &mut rng).unwrap();
        assert!(valid_session_id(&ok.session_id), "{}", ok.session_id);
        let later = sim.create_session(br#"{"agent_id":"eitri","end_user_id":"u"}"#, NOW + 1, &mut rng).unwrap();
        assert!(later.session_id > ok.session_id, "ids sort by creation time");
        assert_eq!(ok.agent_id, "sindra");
        assert_eq!(ok.created_at, rfc3339_millis(NOW));
        for bad in [
            &b""[..],
            b"nope",
            b"[]",
            b"{}",
            br#"{"agent_id":"sindra"}"#,
            br#"{"end_user_id":"u"}"#,
            br#"{"agent_id":7,"end_user_id":"u"}"#,
            br#"{"agent_id":"sindra","end_user_id":""}"#,
            br#"{"agent_id":"sindra","end_user_id":null}"#,
        ] {
            assert_eq!(
                sim.create_session(bad, NOW, &mut rng).unwrap_err().status(),
                400,
                "{:?}",
                std::str::from_utf8(bad)
            );
        }
        let e = sim.create_session(br#"{"agent_id":"odin","end_user_id":"u"}"#, NOW, &mut rng).unwrap_err();
        assert_eq!(e, UpstreamError::NotFound("unknown_agent"));
        assert_eq!(sim.session_ids(), vec![ok.session_id, later.session_id]);
    }

    #[test]
    fn turn_lifecycle_and_409() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(2);
        let sid = new_session(&sim, "sindra", &mut rng);
        assert_eq!(
            sim.begin_turn("s_000000000000000000000000", br#"{"text":"hi"}"#, NOW, &mut rng).unwrap_err().status(),
            404
        );
        assert_eq!(sim.begin_turn("../etc", br#"{"text":"hi"}"#, NOW, &mut rng).unwrap_err().status(), 404);
        assert_eq!(sim.begin_turn(&sid, br#"{"txt":"hi"}"#, NOW, &mut rng).unwrap_err().status(), 400);
        let t = sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW, &mut rng).unwrap();
        assert!(valid_turn_id(&t.turn_id));
        assert_eq!(
            sim.begin_turn(&sid, br#"{"text":"again"}"#, NOW + 10, &mut rng).unwrap_err(),
            UpstreamError::Conflict
        );
        assert_eq!(sim.bifrost(&sid, NOW + 10).unwrap().inflight_turns, 1);
        assert!(sim.bifrost(&sid, NOW).unwrap().last_dispatch.is_none());
        sim.finish_turn(&t, "ok", NOW + 2500, &mut rng);
        let b = sim.bifrost(&sid, NOW + 2600).unwrap();
        assert_eq!(b.inflight_turns, 0);
        assert_eq!(
            b.last_dispatch,
            Some(LastDispatch { turn_id: t.turn_id.clone(), latency_ms: 2500, status: "ok".into() })
        );
        // free again
        let t2 = sim.begin_turn(&sid, br#"{"text":"more"}"#, NOW + 3000, &mut rng).unwrap();
        assert_eq!(t2.session.turn_count, 2);
        sim.finish_turn(&t2, "error", NOW + 3100, &mut rng);
        assert_eq!(sim.bifrost(&sid, NOW + 3200).unwrap().last_dispatch.unwrap().status, "error");
        assert!(!kv.0.borrow().keys().any(|k| k.starts_with("sim:running:") || k.starts_with("sim:cancel:")));
    }

    #[test]
    fn stale_running_flag_is_free() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(3);
        let sid = new_session(&sim, "brokkr", &mut rng);
        // A turn that keeps beating holds the session for up to STALE_TURN_MS.
        let long = sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW, &mut rng).unwrap();
        let mut now = NOW;
        while now + BEAT_EVERY_MS < NOW + STALE_TURN_MS {
            now += BEAT_EVERY_MS;
            sim.beat(&long, now);
            assert_eq!(sim.begin_turn(&sid, br#"{"text":"hi"}"#, now, &mut rng).unwrap_err(), UpstreamError::Conflict);
        }
        let t = sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW + STALE_TURN_MS, &mut rng).unwrap();
        // finishing (or beating) the old one later must not touch the new one's flag
        sim.beat(&long, NOW + STALE_TURN_MS + 1);
        sim.finish_turn(&long, "disconnected", NOW + STALE_TURN_MS + 5, &mut rng);
        let r = sim.running(&sid, NOW + STALE_TURN_MS + 6).unwrap().unwrap();
        assert_eq!(r.turn_id, t.turn_id);
        assert_eq!(r.beat_at_ms, NOW + STALE_TURN_MS);

        // A turn whose instance died (no beat, no exit path) frees the session quickly.
        let sid = new_session(&sim, "sindra", &mut rng);
        let _dead = sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW, &mut rng).unwrap();
        assert_eq!(
            sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW + STALE_BEAT_MS - 1, &mut rng).unwrap_err(),
            UpstreamError::Conflict
        );
        assert_eq!(sim.bifrost(&sid, NOW + STALE_BEAT_MS - 1).unwrap().inflight_turns, 1);
        assert_eq!(sim.bifrost(&sid, NOW + STALE_BEAT_MS).unwrap().inflight_turns, 0);
        sim.begin_turn(&sid, br#"{"text":"hi"}"#, NOW + STALE_BEAT_MS, &mut rng).unwrap();

        // A flag written by an older layout without a beat falls back to its start time.
        kv.set(&running_key(&sid), br#"{"turn_id":"t_0000000000000000","started_at_ms":1796000000000}"#).unwrap();
        assert!(sim.running(&sid, NOW + 10).unwrap().is_some());
        assert!(sim.running(&sid, NOW + STALE_BEAT_MS).unwrap().is_none());
    }

    #[test]
    fn cancel_flow() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(4);
        let sid = new_session(&sim, "sindra", &mut rng);
        assert_eq!(sim.cancel(&sid, "t_0000000000000000", NOW).unwrap_err(), UpstreamError::NotFound("unknown_turn"));
        assert_eq!(sim.cancel(&sid, "garbage", NOW).unwrap_err(), UpstreamError::NotFound("unknown_turn"));
        assert_eq!(
            sim.cancel("s_ffffffffffffffffffffffff", "t_0000000000000000", NOW).unwrap_err(),
            UpstreamError::NotFound("unknown_session")
        );
        let t = sim.begin_turn(&sid, br#"{"text":"/slow"}"#, NOW, &mut rng).unwrap();
        assert!(!sim.cancel_requested(&sid, &t.turn_id));
        sim.cancel(&sid, &t.turn_id, NOW + 100).unwrap();
        assert!(sim.cancel_requested(&sid, &t.turn_id));
        sim.finish_turn(&t, "cancelled", NOW + 200, &mut rng);
        assert!(!sim.cancel_requested(&sid, &t.turn_id));
        // cancelling a finished turn is accepted and leaves nothing behind
        sim.cancel(&sid, &t.turn_id, NOW + 300).unwrap();
        assert!(!sim.cancel_requested(&sid, &t.turn_id));
        assert!(sim.affect(Some("sindra"), NOW + 100_000).is_err(), "no affect after a cancelled turn");
    }

    #[test]
    fn tools_and_bifrost() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(5);
        let s = new_session(&sim, "sindra", &mut rng);
        let e = new_session(&sim, "eitri", &mut rng);
        let inv = sim.tools(&s).unwrap();
        assert_eq!(inv["session_id"], s.as_str());
        assert_eq!(inv["agent_id"], "sindra");
        let t0 = &inv["tools"][0];
        assert!(t0["name"].is_string() && t0["description"].is_string() && t0["input_schema"].is_object());
        assert_eq!(sim.tools("s_000000000000000000000000").unwrap_err().status(), 404);
        assert!(sim.tools(&e).is_ok(), "tools is not scope-limited");

        let b = serde_json::to_value(sim.bifrost(&s, NOW).unwrap()).unwrap();
        let mut keys: Vec<&str> = b.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "agent_id",
                "bound_at",
                "caps",
                "endpoint",
                "inflight_turns",
                "last_dispatch",
                "model",
                "session_id",
                "tools"
            ]
        );
        assert!(b["last_dispatch"].is_null());
        assert!(b["endpoint"].as_str().unwrap().starts_with("http://"));
        assert_eq!(b["caps"]["max_tokens"], 4096);
        assert_eq!(b["caps"]["parallel_tools"], true);
        assert_eq!(b["tools"][0].as_object().unwrap().len(), 2);
        assert_eq!(sim.bifrost(&e, NOW).unwrap_err(), UpstreamError::ScopeDenied);
        assert_eq!(sim.bifrost("s_000000000000000000000000", NOW).unwrap_err(), UpstreamError::NotFound("not_bound"));
    }

    #[test]
    fn affect_appears_after_done_with_delay() {
        let kv = MemKv::default();
        let sim = Sim::new(&kv);
        let mut rng = Rng::new(6);
        assert_eq!(sim.affect(None, NOW).unwrap_err().status(), 400);
        assert_eq!(sim.affect(Some(""), NOW).unwrap_err().status(), 400);
        assert_eq!(sim.affect(Some("odin"), NOW).unwrap_err(), UpstreamError::NotFound("unknown_agent"));
        assert_eq!(sim.affect(Some("sindra"), NOW).unwrap_err(), UpstreamError::NotFound("no_snapshot"));
        let sid = new_session(&sim, "sindra", &mut rng);
        let t = sim.begin_turn(&sid, br#"{"text":"thanks!"}"#, NOW, &mut rng).unwrap();
        sim.finish_turn(&t, "ok", NOW + 2000, &mut rng);
        assert!(sim.affect(Some("sindra"), NOW + 2000).is_err(), "emitted in the future");
        let a = sim.affect(Some("sindra"), NOW + 2000 + 8000).unwrap();
        assert_eq!(a["agent_id"], "sindra");
        assert!(a["relations"].is_array());
        assert!(sim.affect(Some("brokkr"), NOW + 20_000).is_err(), "per agent");

        let eid = new_session(&sim, "eitri", &mut rng);
        let t = sim.begin_turn(&eid, br#"{"text":"hello"}"#, NOW, &mut rng).unwrap();
        sim.finish_turn(&t, "ok", NOW + 1000, &mut rng);
        let a = sim.affect(Some("eitri"), NOW + 10_000).unwrap();
        assert!(a.get("relations").is_none() && a["valence"].is_number());
    }

    #[test]
    fn error_bodies_are_fixed() {
        assert_eq!(UpstreamError::Unauthorized.body().to_string(), r#"{"error":"unauthorized"}"#);
        assert_eq!(UpstreamError::Conflict.status(), 409);
    }
}
