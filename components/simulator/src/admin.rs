//! The admin event firehose (`GET /v1/admin/events`), generated deterministically from time.
//!
//! Time since [`SIM_EPOCH_MS`] is cut into one-second slots. Slot `k` holds:
//! - id `3k`   at `k s + [0, 200) ms`   — a data event,
//! - id `3k+1` at `k s + [500, 700) ms` — a data event,
//! - id `3k+2` at `k s + 850 ms`        — `system.heartbeat {}`, only when `k % 3 == 0`.
//!
//! So data events arrive every 300–700 ms, a heartbeat every 3 s, ids are non-negative
//! and strictly increasing (with gaps), and every stream — including a replay after a
//! reconnect — sees the same id at the same instant. What an id carries is a pure
//! function of the id and the list of sessions it may talk about (the newest
//! [`LIVE_SESSIONS`] real sessions in the key-value store plus [`SYNTHETIC_SESSIONS`]), so a replayed event names the same
//! kind of thing but may pick a different session if sessions were created since.
//!
//! Data events: mostly `session.created`, `turn.started`, `turn.completed` and
//! `key.rotated` with `data.session_id` (a session's turn id changes every 4 s; its
//! starts fall in the first half of that window, its completions in the second); about 6% are `key.rotated` without a
//! session_id and about 4% are `system.notice`. Every data event has `data.timestamp`.
//!
//! Reconnect: `Last-Event-ID: N` replays the events after N from the last
//! [`REPLAY_WINDOW_SLOTS`] seconds, then continues live. An N ahead of the clock (say
//! from another simulator instance) shifts this stream's ids so they still continue
//! strictly after N; an unparsable or absurd (> 2^53) N is ignored.

use crate::rng::{hash_str, mix, Rng};
use crate::time::rfc3339_millis;
use serde_json::{json, Value};

/// 2025-01-01T00:00:00Z.
pub const SIM_EPOCH_MS: u64 = 1_735_689_600_000;
pub const REPLAY_WINDOW_SLOTS: u64 = 20;
pub const HEARTBEAT_EVERY_SLOTS: u64 = 3;
/// How far behind the clock a live stream may fall before it skips ahead.
pub const MAX_LAG_MS: u64 = 5_000;
/// Largest Last-Event-ID honoured (JavaScript's safe-integer limit).
pub const MAX_ID: u64 = 1 << 53;

/// How many of the newest real sessions the firehose talks about.
pub const LIVE_SESSIONS: usize = 4;

/// The newest [`LIVE_SESSIONS`] of `all` (which is sorted oldest first).
pub fn live_sessions(all: &[String]) -> &[String] {
    &all[all.len().saturating_sub(LIVE_SESSIONS)..]
}

/// Sessions that are always "busy" in the firehose, besides the real ones.
pub const SYNTHETIC_SESSIONS: &[&str] = &["s_5f0c1e2d3a4b5c6d7e8f9a0b", "s_a1b2c3d4e5f60718293a4b5c"];
const SYNTHETIC_AGENTS: &[&str] = &["sindra", "brokkr", "eitri"];

#[derive(Debug, Clone, PartialEq)]
pub struct AdminEvent {
    pub id: u64,
    pub at_ms: u64,
    pub event: &'static str,
    pub data: Value,
}

fn slot_start(k: u64) -> u64 {
    SIM_EPOCH_MS + k * 1000
}

/// When the event with natural id `id` happens, if that id is used at all.
pub fn time_of(id: u64) -> Option<u64> {
    let k = id / 3;
    let base = slot_start(k);
    match id % 3 {
        0 => Some(base + mix(k, 0) % 200),
        1 => Some(base + 500 + mix(k, 1) % 200),
        _ if k.is_multiple_of(HEARTBEAT_EVERY_SLOTS) => Some(base + 850),
        _ => None,
    }
}

/// The first used id strictly greater than `id`.
pub fn next_id(id: u64) -> u64 {
    let mut n = id + 1;
    while time_of(n).is_none() {
        n += 1;
    }
    n
}

/// The last used id whose time is `<= now_ms` (None before the epoch's first event).
pub fn last_id_at(now_ms: u64) -> Option<u64> {
    if now_ms < SIM_EPOCH_MS {
        return None;
    }
    let k = (now_ms - SIM_EPOCH_MS) / 1000;
    (0..=3 * k + 2).rev().take(8).find(|&id| time_of(id).is_some_and(|t| t <= now_ms))
}

/// Build the event with natural id `id` (which must be used).
pub fn event_for(id: u64, real_sessions: &[String]) -> AdminEvent {
    let at_ms = time_of(id).expect("unused admin event id");
    let timestamp = rfc3339_millis(at_ms);
    if id % 3 == 2 {
        return AdminEvent { id, at_ms, event: "system.heartbeat", data: json!({}) };
    }
    let mut rng = Rng::new(mix(id, 0xAD41));
    let roll = rng.range(0, 100);
    if roll < 4 {
        let notices = [
            "upstream pool rebalanced (3 -> 4 workers)",
            "dispatch latency p95 back under 900 ms",
            "maintenance window scheduled for Sunday 02:00 UTC",
            "config reloaded: 3 agents, 12 tools",
        ];
        return AdminEvent {
            id,
            at_ms,
            event: "system.notice",
            data: json!({ "message": rng.pick(&notices), "level": "info", "timestamp": timestamp }),
        };
    }
    if roll < 10 {
        return AdminEvent {
            id,
            at_ms,
            event: "key.rotated",
            data: json!({
                "key_id": format!("k_{}", rng.hex(6)),
                "scope": "consumer",
                "timestamp": timestamp,
            }),
        };
    }

    // A session-scoped event. Real sessions get most of the traffic when there are any.
    let is_real = !real_sessions.is_empty() && rng.chance(0.6);
    let session_id: String =
        if is_real { rng.pick(real_sessions).clone() } else { (*rng.pick(SYNTHETIC_SESSIONS)).to_owned() };
    // A turn id that stays the same for a few seconds per session, so that
    // turn.started / turn.completed pairs line up.
    let epoch = id / 3 / 4;
    let turn_id = format!("t_{}", Rng::new(mix(hash_str(&session_id), epoch)).hex(8));
    let kind = rng.range(0, 100);
    // Within each 4-second turn epoch, starts come in the first half and completions in
    // the second, so a session's turn.started precedes its turn.completed.
    let turn_event = if (id / 3) % 4 < 2 { "turn.started" } else { "turn.completed" };
    let (event, data) = if kind < 12 {
        let mut data = json!({ "session_id": session_id, "end_user_id": "operator", "timestamp": timestamp });
        // The agent of a real session is not known here without a store read; only the
        // synthetic sessions name one.
        if !is_real {
            data["agent_id"] = json!(rng.pick(SYNTHETIC_AGENTS));
        }
        ("session.created", data)
    } else if kind < 92 && turn_event == "turn.started" {
        ("turn.started", json!({ "session_id": session_id, "turn_id": turn_id, "timestamp": timestamp }))
    } else if kind < 92 {
        (
            "turn.completed",
            json!({
                "session_id": session_id,
                "turn_id": turn_id,
                "status": if rng.chance(0.9) { "ok" } else { "error" },
                "latency_ms": rng.range(400, 4200),
                "output_tokens": rng.range(20, 900),
                "timestamp": timestamp,
            }),
        )
    } else {
        (
            "key.rotated",
            json!({
                "session_id": session_id,
                "key_id": format!("k_{}", rng.hex(6)),
                "scope": "session",
                "timestamp": timestamp,
            }),
        )
    };
    AdminEvent { id, at_ms, event, data }
}

/// One client's position in the firehose.
#[derive(Debug, Clone, PartialEq)]
pub struct AdminStream {
    /// Added to natural ids on the wire (non-zero only after a Last-Event-ID from the future).
    shift: u64,
    /// The last natural id sent (or the position to continue after).
    last: Option<u64>,
}

impl AdminStream {
    /// Start a stream at `now_ms`; returns the stream and the events to replay at once.
    pub fn start(last_event_id: Option<&str>, now_ms: u64, real_sessions: &[String]) -> (Self, Vec<AdminEvent>) {
        let current = last_id_at(now_ms);
        let requested = last_event_id.and_then(|s| s.trim().parse::<u64>().ok()).filter(|&n| n <= MAX_ID);
        let Some(n) = requested else {
            return (AdminStream { shift: 0, last: current }, Vec::new());
        };
        match current {
            Some(cur) if n <= cur => {
                let window_start = 3 * ((now_ms - SIM_EPOCH_MS) / 1000).saturating_sub(REPLAY_WINDOW_SLOTS);
                let from = n.saturating_add(1).max(window_start);
                let replay = (from..=cur)
                    .filter(|&id| time_of(id).is_some_and(|t| t <= now_ms))
                    .map(|id| event_for(id, real_sessions))
                    .collect();
                (AdminStream { shift: 0, last: Some(cur) }, replay)
            }
            _ => {
                // N is ahead of our clock: keep counting from it.
                let next = current.map(next_id).unwrap_or(0);
                let shift = (n + 1).saturating_sub(next);
                (AdminStream { shift, last: current }, Vec::new())
            }
        }
    }

    /// The next live event (the caller waits until its `at_ms`). If the stream fell more
    /// than [`MAX_LAG_MS`] behind `now_ms` (a stalled client, a clock jump) it skips ahead
    /// instead of bursting out the backlog.
    pub fn next(&mut self, now_ms: u64, real_sessions: &[String]) -> AdminEvent {
        let mut id = match self.last {
            Some(l) => next_id(l),
            None => 0,
        };
        if time_of(id).is_some_and(|t| t + MAX_LAG_MS < now_ms) {
            if let Some(cur) = last_id_at(now_ms) {
                id = next_id(cur);
            }
        }
        self.last = Some(id);
        self.wire(event_for(id, real_sessions))
    }

    /// Apply this stream's id shift (replayed events have none).
    pub fn wire(&self, mut ev: AdminEvent) -> AdminEvent {
        ev.id += self.shift;
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_796_000_000_321; // late 2026

    fn sessions() -> Vec<String> {
        vec!["s_00000000000000000000000a".to_owned(), "s_00000000000000000000000b".to_owned()]
    }

    #[test]
    fn schedule_spacing() {
        let mut s = AdminStream::start(None, NOW, &[]).0;
        let mut prev_data: Option<u64> = None;
        let mut prev_hb: Option<u64> = None;
        let mut prev_id = None;
        for _ in 0..3000 {
            let e = s.next(NOW, &[]);
            if let Some(p) = prev_id {
                assert!(e.id > p);
            }
            prev_id = Some(e.id);
            assert_eq!(time_of(e.id), Some(e.at_ms));
            if e.event == "system.heartbeat" {
                assert_eq!(e.data, json!({}));
                if let Some(p) = prev_hb {
                    assert_eq!(e.at_ms - p, 3000);
                }
                prev_hb = Some(e.at_ms);
            } else {
                if let Some(p) = prev_data {
                    let gap = e.at_ms - p;
                    assert!((300..=800).contains(&gap), "gap {gap}");
                }
                prev_data = Some(e.at_ms);
                assert!(e.data["timestamp"].is_string());
            }
            assert!(e.at_ms > NOW);
        }
    }

    #[test]
    fn event_mix() {
        let real = sessions();
        let mut counts = std::collections::HashMap::new();
        let mut no_session = 0;
        let mut real_hits = 0;
        let mut s = AdminStream::start(None, NOW, &real).0;
        for _ in 0..5000 {
            let e = s.next(NOW, &real);
            *counts.entry(e.event).or_insert(0) += 1;
            assert!(e.data.is_object());
            let dotted = e.event.split_once('.').unwrap().0;
            assert!(["session", "turn", "key", "system"].contains(&dotted), "{}", e.event);
            if !e.event.starts_with("system.") {
                match e.data.get("session_id").and_then(|v| v.as_str()) {
                    Some(sid) => {
                        if real.iter().any(|r| r == sid) {
                            real_hits += 1
                        }
                    }
                    None => no_session += 1,
                }
            }
        }
        for t in
            ["session.created", "turn.started", "turn.completed", "key.rotated", "system.heartbeat", "system.notice"]
        {
            assert!(counts.get(t).copied().unwrap_or(0) > 0, "{t} never generated");
        }
        assert!(no_session > 50 && no_session < 700, "{no_session}");
        assert!(real_hits > 1500, "{real_hits}");
    }

    #[test]
    fn a_turn_starts_before_it_completes() {
        let real = sessions();
        let mut s = AdminStream::start(None, NOW, &real).0;
        let mut completed = std::collections::HashSet::new();
        let mut pairs = 0;
        for _ in 0..3000 {
            let e = s.next(NOW, &real);
            let key = (e.data["session_id"].to_string(), e.data["turn_id"].to_string());
            match e.event {
                "turn.started" => assert!(!completed.contains(&key), "started after completed: {key:?}"),
                "turn.completed" => {
                    completed.insert(key);
                    pairs += 1;
                }
                _ => {}
            }
        }
        assert!(pairs > 100);
    }

    #[test]
    fn live_sessions_are_the_newest() {
        let all: Vec<String> = (0..10).map(|i| format!("s_{i:024x}")).collect();
        assert_eq!(live_sessions(&all), &all[6..]);
        assert_eq!(live_sessions(&all[..2]), &all[..2]);
        assert!(live_sessions(&[]).is_empty());
    }

    #[test]
    fn only_synthetic_sessions_when_none_exist() {
        let mut s = AdminStream::start(None, NOW, &[]).0;
        for _ in 0..500 {
            let e = s.next(NOW, &[]);
            if let Some(sid) = e.data.get("session_id") {
                assert!(SYNTHETIC_SESSIONS.contains(&sid.as_str().unwrap()));
            }
        }
    }

    #[test]
    fn same_id_same_event_across_streams() {
        let real = sessions();
        let a = AdminStream::start(None, NOW, &real).0.next(NOW, &real);
        let b = AdminStream::start(None, NOW, &real).0.next(NOW, &real);
        assert_eq!(a, b);
    }

    #[test]
    fn reconnect_replays_strictly_after_n() {
        let real = sessions();
        let (mut s, replay) = AdminStream::start(None, NOW, &real);
        assert!(replay.is_empty());
        let seen: Vec<AdminEvent> = (0..6).map(|_| s.next(NOW, &real)).collect();
        let n = seen[2].id;
        let later = seen[5].at_ms + 1;
        let (mut s2, replay) = AdminStream::start(Some(&n.to_string()), later, &real);
        assert_eq!(replay.iter().map(|e| e.id).collect::<Vec<_>>(), seen[3..].iter().map(|e| e.id).collect::<Vec<_>>());
        assert_eq!(replay, seen[3..].to_vec());
        let next = s2.next(later, &real);
        assert!(next.id > seen[5].id && next.at_ms > later - 1);
    }

    #[test]
    fn reconnect_with_old_id_replays_only_the_window() {
        let (mut s, replay) = AdminStream::start(Some("5"), NOW, &[]);
        assert!(!replay.is_empty() && replay.len() <= 3 * REPLAY_WINDOW_SLOTS as usize + 3);
        assert!(replay.iter().all(|e| e.id > 5 && e.at_ms <= NOW && e.at_ms + 21_000 > NOW));
        assert!(replay.windows(2).all(|w| w[0].id < w[1].id));
        assert!(s.next(NOW, &[]).id > replay.last().unwrap().id);
    }

    #[test]
    fn reconnect_with_future_id_continues_after_it() {
        let n = last_id_at(NOW).unwrap() + 1_000_000;
        let (mut s, replay) = AdminStream::start(Some(&n.to_string()), NOW, &[]);
        assert!(replay.is_empty());
        let a = s.next(NOW, &[]);
        let b = s.next(NOW, &[]);
        assert_eq!(a.id, n + 1);
        assert!(b.id > a.id);
        assert!(a.at_ms > NOW);
    }

    #[test]
    fn garbage_last_event_id_is_ignored() {
        for bad in ["", "abc", "-3", "1.5", "99999999999999999999999", &(MAX_ID + 1).to_string()] {
            let (mut s, replay) = AdminStream::start(Some(bad), NOW, &[]);
            assert!(replay.is_empty());
            let e = s.next(NOW, &[]);
            assert!(e.at_ms > NOW && e.at_ms <= NOW + 1000);
        }
    }

    #[test]
    fn a_stalled_stream_skips_ahead() {
        let mut s = AdminStream::start(None, NOW, &[]).0;
        let first = s.next(NOW, &[]);
        let later = NOW + 60_000;
        let e = s.next(later, &[]);
        assert!(e.at_ms > later && e.at_ms <= later + 1000, "{} vs {later}", e.at_ms);
        assert!(e.id > first.id);
        // a small lag is caught up, not skipped
        let mut s = AdminStream::start(None, NOW, &[]).0;
        let a = s.next(NOW, &[]);
        let b = s.next(NOW + 2000, &[]);
        assert_eq!(b.id, next_id(a.id));
    }

    #[test]
    fn last_id_at_is_consistent() {
        for dt in (0..5000).step_by(37) {
            let now = NOW + dt;
            let id = last_id_at(now).unwrap();
            assert!(time_of(id).unwrap() <= now);
            assert!(time_of(next_id(id)).unwrap() > now);
        }
        assert_eq!(last_id_at(SIM_EPOCH_MS - 1), None);
    }
}
