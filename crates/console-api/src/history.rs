//! Durable affect history: every affect snapshot the proxy has passed on is
//! kept in Spin key-value, per agent, at most [`MAX_SNAPSHOTS`], one per
//! `emitted_at`, oldest dropped first; `GET /api/affect/history` reads it.
//!
//! Spin's key-value API has no compare-and-swap, so there is no shared list
//! to read-modify-write (two browsers polling at once would lose each other's
//! snapshots). Each snapshot is its own key instead:
//! `debug-api:affect:<agent_id>:<emitted_at as 15-digit unix ms>:<emitted_at>`.
//! Writers of the same snapshot write the same key with the same value, so a
//! repeat is idempotent; keys sort by time as text; the bound is kept by
//! deleting whatever is older than the newest 500 keys a writer or reader
//! sees. A key deleted that way is beyond the newest 500 of every later,
//! larger set too, so concurrent trims never delete a snapshot that belongs
//! in the log.

pub use guest_http::kv::{Kv, KvError};
use serde_json::Value;

use crate::redact::Redactor;

/// Snapshots kept per agent.
pub const MAX_SNAPSHOTS: usize = 500;
/// The component's keys in the shared `default` store (the simulator's are `sim:`).
const PREFIX: &str = "debug-api:affect:";
/// Longest `emitted_at` recorded (RFC 3339 with nanoseconds and an offset is 35).
const MAX_EMITTED_AT: usize = 40;

/// One snapshot to remember.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub agent_id: String,
    pub key: String,
    /// The snapshot's JSON text as the browser got it (redacted).
    pub value: String,
}

/// The entry for a snapshot the proxy answered with: `None` unless it is a
/// JSON object whose `emitted_at` is an RFC 3339 timestamp (a snapshot
/// without one cannot be placed or deduplicated). `agent_id` is validated.
pub fn entry(agent_id: &str, snapshot: &str) -> Option<Entry> {
    let value: Value = serde_json::from_str(snapshot).ok()?;
    let emitted_at = value.as_object()?.get("emitted_at")?.as_str()?;
    if emitted_at.len() > MAX_EMITTED_AT {
        return None;
    }
    let ms = rfc3339_ms(emitted_at)?;
    Some(Entry {
        agent_id: agent_id.to_string(),
        key: format!("{}{ms:015}:{emitted_at}", agent_prefix(agent_id)),
        value: snapshot.to_string(),
    })
}

fn agent_prefix(agent_id: &str) -> String {
    format!("{PREFIX}{agent_id}:")
}

/// The log of one agent from all the store's keys: its keys oldest first
/// (one per key, so one per `emitted_at`), the newest [`MAX_SNAPSHOTS`] to
/// keep and the older rest to delete.
pub fn merge(keys: impl IntoIterator<Item = String>, agent_id: &str) -> (Vec<String>, Vec<String>) {
    let prefix = agent_prefix(agent_id);
    let mut mine: Vec<String> = keys.into_iter().filter(|k| k.starts_with(&prefix)).collect();
    mine.sort_unstable();
    mine.dedup();
    let keep = mine.split_off(mine.len().saturating_sub(MAX_SNAPSHOTS));
    (keep, mine)
}

/// Records a snapshot: written once (a repeat of a known key writes
/// nothing), then the agent's log is trimmed to its bound.
pub fn remember(kv: &impl Kv, entry: &Entry) -> Result<(), KvError> {
    if kv.exists(&entry.key)? {
        return Ok(());
    }
    kv.set(&entry.key, entry.value.as_bytes())?;
    let (_, older) = merge(kv.keys()?, &entry.agent_id);
    for key in older {
        kv.delete(&key)?;
    }
    Ok(())
}

/// The body of `GET /api/affect/history`:
/// `{"agent_id":"…","snapshots":[<snapshot>, …]}`, oldest first, newest
/// last, each snapshot's JSON text as it was passed on.
pub fn read(kv: &impl Kv, agent_id: &str, redactor: &Redactor) -> Result<String, KvError> {
    let (keep, older) = merge(kv.keys()?, agent_id);
    for key in older {
        // A concurrent writer may have trimmed it already.
        let _ = kv.delete(&key);
    }
    let mut body = format!(r#"{{"agent_id":{},"snapshots":["#, Value::from(agent_id));
    let mut first = true;
    for key in keep {
        // Gone since the listing (trimmed by a concurrent writer): skipped.
        let Some(bytes) = kv.get(&key)? else { continue };
        let Ok(text) = std::str::from_utf8(&bytes) else { continue };
        if !matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(_))) {
            continue;
        }
        let Some(text) = redactor.redact_json(text) else { continue };
        if !first {
            body.push(',');
        }
        body.push_str(&text);
        first = false;
    }
    body.push_str("]}");
    Ok(body)
}

/// Unix milliseconds of an RFC 3339 timestamp
/// (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`), from 1970 on.
pub fn rfc3339_ms(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month) || day < 1 || day > month_days[month as usize - 1] {
        return None;
    }
    // A leap second (60) is accepted as the last second of its minute.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0;
    if sep(i, b".") {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &text[start..i.min(start + 3)];
        millis = frac.parse::<i64>().ok()? * 10_i64.pow(3 - frac.len() as u32);
    }
    let offset_minutes = match b.get(i..) {
        Some(b"Z" | b"z") => 0,
        Some([sign @ (b'+' | b'-'), _, _, b':', _, _]) => {
            let (h, m) = (digits(i + 1..i + 3)?, digits(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    // Days from the civil date (H. Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second.min(59) - offset_minutes * 60;
    u64::try_from(seconds * 1000 + millis).ok()
}

#[cfg(test)]
mod tests {
    use guest_http::kv::MemKv;

    use super::*;

    /// A snapshot emitted `second` seconds after 2025-01-01T00:00:00Z.
    fn snapshot(second: u64) -> String {
        let (h, m, s) = (second / 3600, second / 60 % 60, second % 60);
        format!(r#"{{"agent_id":"sindra","emitted_at":"2025-01-01T{h:02}:{m:02}:{s:02}Z","pad":{{"pleasure":0.1}}}}"#)
    }

    fn emitted(body: &str) -> Vec<String> {
        let v: Value = serde_json::from_str(body).unwrap();
        v["snapshots"].as_array().unwrap().iter().map(|s| s["emitted_at"].as_str().unwrap().to_string()).collect()
    }

    #[test]
    fn parses_rfc3339_to_unix_ms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_ms("2025-01-01T00:00:05Z"), Some(1_735_689_605_000));
        assert_eq!(rfc3339_ms("2025-01-01T00:00:05.25Z"), Some(1_735_689_605_250));
        assert_eq!(rfc3339_ms("2025-01-01T00:00:05.123456789Z"), Some(1_735_689_605_123));
        assert_eq!(rfc3339_ms("2025-01-01T02:00:05+02:00"), Some(1_735_689_605_000));
        assert_eq!(rfc3339_ms("2024-12-31T19:00:05-05:00"), Some(1_735_689_605_000));
        assert_eq!(rfc3339_ms("2024-02-29t12:00:00z"), Some(1_709_208_000_000));
        assert_eq!(rfc3339_ms("9999-12-31T23:59:59.999Z"), Some(253_402_300_799_999));
        for bad in [
            "",
            "2025-01-01",
            "2025-01-01T00:00:05",
            "2025-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2025-01-01T24:00:00Z",
            "2025-01-01T00:00:05.Z",
            "2025-01-01T00:00:05+0200",
            "1969-12-31T23:59:59Z",
            "2025-01-01T00:00:05Z ",
            "+2025-01-01T00:00:05Z",
            "1735689605000",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn entries_need_an_object_with_a_timestamp_and_sort_by_time() {
        let e = entry("sindra", &snapshot(5)).unwrap();
        assert_eq!(e.key, "debug-api:affect:sindra:001735689605000:2025-01-01T00:00:05Z");
        assert_eq!(e.value, snapshot(5));
        for bad in ["[]", "{}", r#"{"emitted_at":5}"#, r#"{"emitted_at":"yesterday"}"#, "not json"] {
            assert_eq!(entry("sindra", bad), None, "{bad}");
        }
        let long = format!(r#"{{"emitted_at":"2025-01-01T00:00:05.{}Z"}}"#, "1".repeat(40));
        assert_eq!(entry("sindra", &long), None);
        // Text order is time order, whatever the offset.
        let a = entry("a", r#"{"emitted_at":"2025-01-01T09:00:00+10:00"}"#).unwrap();
        let b = entry("a", r#"{"emitted_at":"2025-01-01T00:00:00Z"}"#).unwrap();
        assert!(a.key < b.key);
    }

    #[test]
    fn merge_orders_dedupes_bounds_and_keeps_to_its_agent() {
        let key = |agent: &str, s: u64| entry(agent, &snapshot(s)).unwrap().key;
        let mut keys: Vec<String> = (0..=MAX_SNAPSHOTS as u64).rev().map(|s| key("sindra", s)).collect();
        keys.push(key("sindra", 7)); // a duplicate
        keys.push(key("brokkr", 0)); // another agent
        keys.push(key("sindra2", 0)); // an agent whose id starts with this one's
        keys.push("sim:affect:sindra".into()); // the simulator's
        let (keep, drop) = merge(keys, "sindra");
        assert_eq!(keep.len(), MAX_SNAPSHOTS);
        assert_eq!(drop, [key("sindra", 0)], "the oldest goes");
        assert_eq!(keep.first(), Some(&key("sindra", 1)));
        assert_eq!(keep.last(), Some(&key("sindra", MAX_SNAPSHOTS as u64)));
        assert!(keep.windows(2).all(|w| w[0] < w[1]), "oldest first, no duplicate");
    }

    #[test]
    fn an_entry_stored_with_an_escaped_key_is_read_redacted() {
        let kv = MemKv::default();
        // As an older build stored it: the key behind a JSON escape.
        let stored = r#"{"emitted_at":"2025-01-01T00:00:05Z","note":"\u0061dmin-key-123"}"#;
        remember(&kv, &entry("sindra", stored).unwrap()).unwrap();
        let body = read(&kv, "sindra", &Redactor::new(["admin-key-123"])).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["snapshots"][0]["note"], "[redacted]");
        assert!(!v.to_string().contains("admin-key-123"));
    }

    #[test]
    fn remember_and_read_bound_dedupe_and_order() {
        let kv = MemKv::default();
        // 501 distinct snapshots, out of order, each seen twice.
        for s in (0..=MAX_SNAPSHOTS as u64).rev().chain(0..10) {
            remember(&kv, &entry("sindra", &snapshot(s)).unwrap()).unwrap();
        }
        remember(&kv, &entry("brokkr", &snapshot(3)).unwrap()).unwrap();
        let body = read(&kv, "sindra", &Redactor::default()).unwrap();
        let got = emitted(&body);
        assert_eq!(got.len(), MAX_SNAPSHOTS);
        assert_eq!(got[0], "2025-01-01T00:00:01Z", "the oldest was dropped");
        assert_eq!(got.last().unwrap(), "2025-01-01T00:08:20Z", "newest last");
        // Stored and served verbatim.
        assert!(body.starts_with(r#"{"agent_id":"sindra","snapshots":[{"agent_id":"sindra","emitted_at":"2025-01-01T00:00:01Z","pad":{"pleasure":0.1}},"#));
        assert_eq!(emitted(&read(&kv, "brokkr", &Redactor::default()).unwrap()), ["2025-01-01T00:00:03Z"]);
        assert_eq!(read(&kv, "eitri", &Redactor::default()).unwrap(), r#"{"agent_id":"eitri","snapshots":[]}"#);
    }

    #[test]
    fn interleaved_writers_lose_nothing_and_duplicate_nothing() {
        // Two writers' steps interleaved by hand: both list the keys before
        // either trims, one of them writing a snapshot the other also writes.
        let kv = MemKv::default();
        for s in 0..MAX_SNAPSHOTS as u64 - 1 {
            remember(&kv, &entry("sindra", &snapshot(s + 10)).unwrap()).unwrap();
        }
        let a = entry("sindra", &snapshot(2_000)).unwrap();
        let b = entry("sindra", &snapshot(2_001)).unwrap();
        let old = entry("sindra", &snapshot(0)).unwrap();
        for e in [&a, &b, &old, &a] {
            kv.set(&e.key, e.value.as_bytes()).unwrap();
        }
        let seen_by_a = kv.keys().unwrap();
        let seen_by_b = kv.keys().unwrap();
        for (_, drop) in [merge(seen_by_b, "sindra"), merge(seen_by_a, "sindra")] {
            for key in drop {
                kv.delete(&key).unwrap();
            }
        }
        let got = emitted(&read(&kv, "sindra", &Redactor::default()).unwrap());
        assert_eq!(got.len(), MAX_SNAPSHOTS);
        let mut unique = got.clone();
        unique.dedup();
        assert_eq!(unique, got);
        assert!(got.contains(&"2025-01-01T00:33:20Z".to_string()) && got.contains(&"2025-01-01T00:33:21Z".to_string()));
        assert!(!got.contains(&"2025-01-01T00:00:00Z".to_string()), "the oldest is the one beyond the bound");
    }

    #[test]
    fn unreadable_values_are_skipped() {
        let kv = MemKv::default();
        let e = entry("sindra", &snapshot(1)).unwrap();
        kv.set(&e.key, b"\xff").unwrap();
        let e2 = entry("sindra", &snapshot(2)).unwrap();
        kv.set(&e2.key, b"[1]").unwrap();
        remember(&kv, &entry("sindra", &snapshot(3)).unwrap()).unwrap();
        assert_eq!(emitted(&read(&kv, "sindra", &Redactor::default()).unwrap()), ["2025-01-01T00:00:03Z"]);
    }
}
