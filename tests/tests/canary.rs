//! INV-ADMIN-KEY canary: every /api route, through every upstream outcome,
//! with fresh random admin and consumer keys. Neither key may appear in any
//! response status line, header or body, nor in anything the host logged —
//! even when the upstream itself puts the keys (or the bearer it received)
//! in its answers: the proxy redacts them before they leave.

#[path = "../fixtures/debug-support.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use component_tests::*;
use futures::StreamExt;
use ratatoskr_host::testing::{MockBody, RecordedRequest};
use support::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// A proper answer for every route, laced with both keys.
    Success,
    /// This status, with an error page that echoes the bearer and both keys.
    Status(u16),
    /// JSON routes: 200 with a non-JSON page; streams: a malformed admin id
    /// (the key itself), a turn stream without a terminal event.
    MalformedId,
    /// Streams: admin data that is not a JSON object (the key itself).
    MalformedData,
    /// The answer comes after the upstream timeout.
    Timeout,
    /// Head and part of the body, then silence, then the end.
    Stall,
    /// As `Success`, every key (the received bearer's too) written with JSON
    /// escapes in this form; the turn's `text` and `thinking` deltas also
    /// carry each key split across two deltas.
    Escaped(Escape),
}

/// How a key is hidden behind JSON escapes, which any JSON reader decodes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Escape {
    /// `\u0061\u0064…`
    All,
    /// `\u0061dm…`
    First,
    /// `…12\u0033`
    Last,
}

impl Escape {
    fn apply(self, key: &str) -> String {
        let esc = |c: char| format!("\\u{:04x}", c as u32);
        let n = key.len() - 1;
        match self {
            Escape::All => key.chars().map(esc).collect(),
            Escape::First => format!("{}{}", esc(key.as_bytes()[0] as char), &key[1..]),
            Escape::Last => format!("{}{}", &key[..n], esc(key.as_bytes()[n] as char)),
        }
    }
}

/// The `Success` answer with every key escaped, and split across the turn's deltas.
fn escaped_body(path: &str, leak: &str, keys: &(String, String), escape: Escape) -> (u16, &'static str, String) {
    let placeholders = ("@@ADMIN@@".to_string(), "@@CONSUMER@@".to_string());
    let mut marked = leak.to_string();
    for (key, mark) in [(&keys.0, &placeholders.0), (&keys.1, &placeholders.1)] {
        if !key.is_empty() {
            marked = marked.replace(key.as_str(), mark);
        }
    }
    let (status, content_type, mut body) = success_body(path, &marked, &placeholders);
    if path.ends_with("/turns") {
        let (admin, consumer) = keys;
        let split = |name: &str, key: &str| {
            let cut = key.len() / 3;
            format!(
                "event: {name}\ndata: {{\"delta\":\"key {}\"}}\n\nevent: {name}\ndata: {{\"delta\":\"{} end\"}}\n\n",
                &key[..cut],
                &key[cut..]
            )
        };
        let deltas = format!("{}{}{}", split("text", admin), split("thinking", consumer), split("text", consumer));
        body = body.replacen("event: done", &format!("{deltas}event: done"), 1);
    }
    body = body.replace(&placeholders.0, &escape.apply(&keys.0)).replace(&placeholders.1, &escape.apply(&keys.1));
    (status, content_type, body)
}

/// What the mock puts in its answers: the bearer it received and both keys.
fn leak(r: &RecordedRequest, keys: &(String, String)) -> String {
    let auth = r.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    format!("{auth} | {} | {}", keys.0, keys.1)
}

fn is_stream(path: &str) -> bool {
    path.ends_with("/turns") || path.starts_with("/v1/admin/events")
}

fn success_body(path: &str, leak: &str, keys: &(String, String)) -> (u16, &'static str, String) {
    let (admin, consumer) = keys;
    let json = |v: serde_json::Value| v.to_string();
    if path == "/v1/agents" {
        (200, "application/json", json(serde_json::json!({"agents": [{"agent_id": "sindra", "display_name": leak}]})))
    } else if path == "/v1/sessions" {
        (
            201,
            "application/json",
            json(serde_json::json!({"session_id": "s_1", "agent_id": "sindra", "created_at": leak})),
        )
    } else if path.ends_with("/cancel") {
        (202, "application/json", json(serde_json::json!({ "echo": leak })))
    } else if path.ends_with("/turns") {
        let body = format!(
            "event: turn.started\ndata: {{\"turn_id\":\"t_{admin}\"}}\n\n\
             : {admin} {consumer}\n\n\
             event: thinking\ndata: {{\"delta\":\"{leak}\"}}\n\n\
             event: {admin}\ndata: {{\"delta\":\"{consumer}\"}}\n\n\
             event: text\ndata: {consumer}\ndata: {admin}\n\n\
             event: done\ndata: {{\"turn_id\":\"{admin}\",\"finish_reason\":\"{consumer}\"}}\n\n"
        );
        (200, "text/event-stream", body)
    } else if path.starts_with("/v1/admin/events") {
        let body = format!(
            ": {admin}\n\n\
             id: 1\nevent: system.{admin}\ndata: {{\"note\":\"{leak}\"}}\n\n\
             id: 2\nevent: turn.started\ndata: {{\"session_id\":\"s_1\",\"timestamp\":\"{admin}\",\"echo\":\"{leak}\"}}\n\n\
             id: 3\nevent: key.rotated\ndata: {{\"session_id\":\"s_1\",\"{consumer}\":\"{admin}\"}}\n\n"
        );
        // The body then ends: a dropped admin stream, reported as such.
        (200, "text/event-stream", body)
    } else {
        // Tools, bifrost, affect.
        (
            200,
            "application/json",
            json(
                serde_json::json!({"session_id": "s_1", "agent_id": "sindra", "echo": leak, "keys": [admin, consumer]}),
            ),
        )
    }
}

async fn answer(outcome: Outcome, r: RecordedRequest, keys: (String, String)) -> http::Response<MockBody> {
    let path = r.path_and_query.clone();
    let leak = leak(&r, &keys);
    let (admin, consumer) = &keys;
    match outcome {
        Outcome::Success => {
            let (status, content_type, body) = success_body(&path, &leak, &keys);
            respond(status, content_type, body)
        }
        Outcome::Status(status) => {
            respond(status, "application/json", format!("{{\"error\":\"{leak}\",\"www-authenticate\":\"{admin}\"}}"))
        }
        Outcome::MalformedId if is_stream(&path) => {
            let body = if path.ends_with("/turns") {
                format!("event: text\ndata: {admin}\n\ngarbage {consumer} without end")
            } else {
                format!("id: 1\nevent: system.x\ndata: {{}}\n\nid: {admin}\nevent: turn.started\ndata: {{\"session_id\":\"s_1\"}}\n\n")
            };
            respond(200, "text/event-stream", body)
        }
        Outcome::MalformedData if is_stream(&path) => {
            let body = if path.ends_with("/turns") {
                format!("event: text\ndata: {{\"delta\":\"{admin}\"\n\n")
            } else {
                format!("id: 1\nevent: turn.started\ndata: {consumer} {admin}\n\n")
            };
            respond(200, "text/event-stream", body)
        }
        Outcome::MalformedId | Outcome::MalformedData => {
            respond(200, "text/html", format!("<html><body>{leak}</body></html>"))
        }
        Outcome::Timeout => {
            tokio::time::sleep(Duration::from_millis(TIMEOUT_MS * 3)).await;
            let (status, content_type, body) = success_body(&path, &leak, &keys);
            respond(status, content_type, body)
        }
        Outcome::Escaped(escape) => {
            let (status, content_type, body) = escaped_body(&path, &leak, &keys, escape);
            respond(status, content_type, body)
        }
        Outcome::Stall => {
            let content_type = if is_stream(&path) { "text/event-stream" } else { "application/json" };
            let (sender, response) = streaming(200, content_type);
            let partial = if is_stream(&path) {
                format!("id: 1\nevent: system.x\ndata: {{\"k\":\"{admin}\"}}\n\nid: 2\nevent: text\ndata: {consumer}")
            } else {
                format!("{{\"echo\":\"{leak}\",")
            };
            let _ = sender.send(partial.into());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(TIMEOUT_MS * 3)).await;
                drop(sender);
            });
            response
        }
    }
}

async fn canary_mock(keys: &Keys, outcome: Arc<Mutex<Outcome>>) -> MockUpstream {
    let pair = (keys.admin.clone(), keys.consumer.clone());
    MockUpstream::start(move |r| {
        let outcome = *outcome.lock().unwrap();
        answer(outcome, r, pair.clone())
    })
    .await
}

/// Every route, good and bad input: (method, path, body, Last-Event-ID).
const ROUTES: &[(&str, &str, &str, Option<&str>)] = &[
    ("GET", "/api/config", "", None),
    ("POST", "/api/sessions", r#"{"agent_id":"sindra"}"#, None),
    ("POST", "/api/sessions/s_1/turns", r#"{"text":"hi"}"#, None),
    ("POST", "/api/sessions/s_1/turns/t_1/cancel", "", None),
    ("GET", "/api/sessions/s_1/tools", "", None),
    ("GET", "/api/sessions/s_1/bifrost", "", None),
    ("GET", "/api/admin/events?session_id=s_1", "", None),
    ("GET", "/api/admin/events?session_id=s_1", "", Some("7")),
    ("GET", "/api/admin/events", "", None),
    ("GET", "/api/affect?agent_id=sindra", "", None),
    // Bad input never reaches an upstream, but must not leak either.
    ("GET", "/api/admin/events", "", Some("x")),
    ("POST", "/api/sessions", "{", None),
    ("POST", "/api/sessions/s_1/turns", "{}", None),
    ("GET", "/api/sessions/s%2F1/tools", "", None),
    ("DELETE", "/api/sessions/s_1/bifrost", "", None),
    ("GET", "/api/nope", "", None),
    ("GET", "/api/affect/history?agent_id=sindra", "", None),
];

/// Status line, every header and the whole body (streams: until they end,
/// or for at most a few seconds) as one text.
async fn transcript(app: &TestApp, (method, path, body, last_event_id): (&str, &str, &str, Option<&str>)) -> String {
    let method = http::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client().request(method.clone(), app.url(path));
    if !body.is_empty() || method == http::Method::POST {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    let response = request.send().await.unwrap();
    let mut text = format!("{method} {path} -> {}\n", response.status());
    for (name, value) in response.headers() {
        text.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
    }
    text.push('\n');
    let mut stream = response.bytes_stream();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, stream.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

/// What a page makes of a transcript's body: the JSON body decoded, every
/// event's data decoded, and each event kind's `delta`s joined, as the
/// console joins a turn's text.
fn decoded(text: &str) -> String {
    let body = text.split_once("\n\n").map_or("", |(_, body)| body);
    let mut views = Vec::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        views.push(v.to_string());
    }
    let mut joined: std::collections::BTreeMap<String, String> = Default::default();
    for block in body.split("\n\n") {
        let mut name = "message".to_string();
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_string();
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push(d);
            }
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&data.join("\n")) else { continue };
        if let Some(delta) = v.get("delta").and_then(|d| d.as_str()) {
            joined.entry(name).or_default().push_str(delta);
        }
        views.push(v.to_string());
    }
    views.extend(joined.into_values());
    views.join("\n")
}

/// Runs every route once, concurrently; asserts no transcript holds a key,
/// in its bytes or in what a page decodes and joins from them.
async fn run_all_routes(app: &TestApp, keys: &Keys, label: &str) -> Vec<String> {
    let transcripts = futures::future::join_all(ROUTES.iter().map(|route| transcript(app, *route))).await;
    for text in &transcripts {
        let decoded = decoded(text);
        for key in keys.all() {
            assert!(!text.contains(key), "[{label}] a key left the server:\n{text}");
            assert!(!decoded.contains(key), "[{label}] a key left the server escaped or split:\n{text}\n{decoded}");
        }
    }
    transcripts
}

async fn assert_log_clean(app: &TestApp, keys: &Keys) {
    // A request's line is written as its response body is dropped.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = app.log();
    // Real Spin logs no requests, only component output: the keys are looked for there.
    if Runtime::selected() == Runtime::Host {
        assert!(
            log.lines().filter(|l| l.contains(" /api/")).count() >= ROUTES.len(),
            "every request was logged:\n{log}"
        );
    }
    for key in keys.all() {
        assert!(!log.contains(key), "a key was logged:\n{log}");
    }
}

/// The keys really went out (so the canary was exercised): the consumer key
/// on consumer calls, the admin key on admin calls.
fn assert_keys_were_used(mock: &MockUpstream, keys: &Keys) {
    let bearers: Vec<String> = mock
        .requests()
        .iter()
        .filter_map(|r| r.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()))
        .collect();
    assert!(bearers.contains(&format!("Bearer {}", keys.consumer)), "{bearers:?}");
    if !keys.admin.is_empty() {
        assert!(bearers.contains(&format!("Bearer {}", keys.admin)), "{bearers:?}");
    }
}

async fn canary(outcomes: &[Outcome]) {
    let keys = Keys::random();
    let outcome = Arc::new(Mutex::new(outcomes[0]));
    let mock = canary_mock(&keys, outcome.clone()).await;
    let app = app_with(&keys, &mock).await;
    for o in outcomes {
        *outcome.lock().unwrap() = *o;
        run_all_routes(&app, &keys, &format!("{o:?}")).await;
    }
    assert_keys_were_used(&mock, &keys);
    assert_log_clean(&app, &keys).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_success_answers_are_redacted() {
    let keys = Keys::random();
    let mock = canary_mock(&keys, Arc::new(Mutex::new(Outcome::Success))).await;
    let app = app_with(&keys, &mock).await;
    let transcripts = run_all_routes(&app, &keys, "Success").await;
    // Redacted, not merely absent: every upstream-fed route carried the keys.
    for (route, text) in ROUTES.iter().zip(&transcripts).take(10) {
        if route.1.ends_with("/cancel") {
            continue; // answered with our own `{}`, not the upstream's body
        }
        assert!(text.contains("[redacted]"), "{route:?}:\n{text}");
    }
    assert_keys_were_used(&mock, &keys);
    assert_log_clean(&app, &keys).await;
}

/// An upstream that echoes the keys with JSON escapes (all, the first or the
/// last character) and splits them across a turn's deltas: on every route
/// and stream the page decodes `[redacted]`, never a key.
#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_escaped_and_split_keys_are_redacted_in_what_the_page_decodes() {
    let keys = Keys::random();
    let outcome = Arc::new(Mutex::new(Outcome::Success));
    let mock = canary_mock(&keys, outcome.clone()).await;
    let app = app_with(&keys, &mock).await;
    for escape in [Escape::All, Escape::First, Escape::Last] {
        *outcome.lock().unwrap() = Outcome::Escaped(escape);
        let transcripts = run_all_routes(&app, &keys, &format!("{escape:?}")).await;
        for (route, text) in ROUTES.iter().zip(&transcripts).take(10) {
            if route.1.ends_with("/cancel") {
                continue;
            }
            assert!(decoded(text).contains("[redacted]"), "{escape:?} {route:?}:\n{text}");
        }
        let turn = &transcripts[2];
        let joined = decoded(turn);
        assert!(joined.contains("key [redacted] end"), "the split keys are redacted whole:\n{joined}");
    }
    assert_keys_were_used(&mock, &keys);
    assert_log_clean(&app, &keys).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_every_upstream_status() {
    canary(&[400, 401, 403, 404, 409, 429, 500, 502, 503].map(Outcome::Status)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_malformed_answers_and_streams() {
    canary(&[Outcome::MalformedId, Outcome::MalformedData]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_timeouts_and_stalls() {
    canary(&[Outcome::Timeout, Outcome::Stall]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_connect_failure() {
    let keys = Keys::random();
    let app = start(redirect_all(app_options(&keys), closed_port())).await;
    run_all_routes(&app, &keys, "connect failure").await;
    assert_log_clean(&app, &keys).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_connection_dropped_mid_body() {
    if not_on_jco(JCO_DROPPED_BODY) {
        return;
    }
    let keys = Keys::random();
    let partial = format!(
        "id: 1\nevent: turn.started\ndata: {{\"session_id\":\"s_1\",\"k\":\"{} {}\"}}\n\nevent: text\ndata: {}",
        keys.admin, keys.consumer, keys.admin
    );
    let app = start(redirect_all(app_options(&keys), dropping_server("text/event-stream", partial).await)).await;
    run_all_routes(&app, &keys, "drop").await;
    assert_log_clean(&app, &keys).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_without_an_admin_key_the_consumer_key_still_never_leaks() {
    let keys = Keys::without_admin();
    let mock = canary_mock(&keys, Arc::new(Mutex::new(Outcome::Success))).await;
    let app = app_with(&keys, &mock).await;
    let transcripts = run_all_routes(&app, &keys, "no admin key").await;
    assert!(transcripts.iter().any(|t| t.contains("admin_key_not_configured")));
    assert_keys_were_used(&mock, &keys);
    assert_log_clean(&app, &keys).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_affect_history_holds_only_redacted_snapshots() {
    if spin_app_only(NO_STORE) {
        return;
    }
    let keys = Keys::random();
    let (admin, consumer) = (keys.admin.clone(), keys.consumer.clone());
    let affect = MockUpstream::start(move |r| {
        let body = serde_json::json!({
            "agent_id": "sindra",
            "emitted_at": "2025-01-01T00:00:05Z",
            "echo": leak(&r, &(admin.clone(), consumer.clone())),
            "keys": [admin.clone(), consumer.clone()],
        });
        async move { respond(200, "application/json", body.to_string()) }
    })
    .await;
    let app = start(app_options(&keys).redirect(AFFECT, &affect).redirect(UPSTREAM, &affect)).await;
    let history = ("GET", "/api/affect/history?agent_id=sindra", "", None);
    transcript(&app, ("GET", "/api/affect?agent_id=sindra", "", None)).await;
    let text = transcript(&app, history).await;
    assert!(text.contains("\"emitted_at\":\"2025-01-01T00:00:05Z\"") && text.contains("[redacted]"), "{text}");
    for key in keys.all() {
        assert!(!text.contains(key), "a key left the server through the history:\n{text}");
    }
    let log = app.log();
    for key in keys.all() {
        assert!(!log.contains(key), "a key was logged:\n{log}");
    }
}

/// The admin stream at full speed: 20,000 events flooded as fast as
/// the proxy takes them, in chunks that each end in the middle of a key, the
/// keys raw, in event names, as JSON object keys and hidden behind JSON
/// escapes (`\u0061...`, which any JSON reader decodes). Every event arrives
/// in order, and neither key is in the bytes or in any decoded payload.
#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_admin_stream_redacted_across_chunk_boundaries_at_full_speed() {
    let keys = Keys::random();
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&keys, &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    let (admin, consumer) = (keys.admin.as_str(), keys.consumer.as_str());
    let escaped = |key: &str| key.chars().map(|c| format!("\\u{:04x}", c as u32)).collect::<String>();
    let n = 20_000u64;
    let mut body = String::new();
    for id in 1..=n {
        let data = match id % 4 {
            0 => format!(r#"{{"session_id":"s_1","note":"{admin}","{consumer}":{id}}}"#),
            1 => format!(r#"{{"session_id":"s_1","hidden":"{}","also":"x{}y"}}"#, escaped(admin), escaped(consumer)),
            2 => format!(r#"{{"session_id":"s_1","timestamp":"{admin}"}}"#),
            _ => format!(r#"{{"session_id":"s_1","n":{id}}}"#),
        };
        let name = if id % 7 == 0 { format!("turn.{consumer}") } else { "turn.delta".to_string() };
        body.push_str(&format!("id: {id}\nevent: {name}\ndata: {data}\n\n"));
    }
    // Chunk ends: the middle of the first key found past a varying size.
    let mut middles: Vec<usize> = [admin, consumer]
        .iter()
        .flat_map(|key| body.match_indices(key).map(|(at, key)| at + key.len() / 2).collect::<Vec<_>>())
        .collect();
    middles.sort_unstable();
    let (mut start, mut cuts) = (0, 0);
    for (i, &middle) in middles.iter().enumerate() {
        if middle - start >= 1024 + (i * 7919) % (60 * 1024) {
            push(&upstream, &body[start..middle]);
            (start, cuts) = (middle, cuts + 1);
        }
    }
    push(&upstream, &body[start..]);
    assert!(cuts >= 50, "the body went out in {cuts} key-splitting chunks");

    let started = std::time::Instant::now();
    let mut seen = 0;
    while seen < n {
        let frame = sse.next_event(Duration::from_secs(10)).await.expect("the stream stays open");
        let payload = frame.json();
        seen += 1;
        assert_eq!(payload["id"], seen, "every event, in order");
        let decoded = payload.to_string();
        for key in keys.all() {
            assert!(!decoded.contains(key), "a key survived in a decoded payload: {decoded}");
        }
        if seen % 4 == 1 {
            assert_eq!(payload["data"]["hidden"], "[redacted]", "{decoded}");
            assert_eq!(payload["data"]["also"], "x[redacted]y", "{decoded}");
        }
    }
    eprintln!("{n} events through the proxy in {:?}", started.elapsed());
    for key in keys.all() {
        assert!(!sse.raw.contains(key), "a key left the server in the admin stream");
        assert!(!app.log().contains(key), "a key was logged");
    }
}

/// The alert webhook's bodies (docs/alerts.md) hold no key, in their bytes or
/// decoded, whatever the turn stream carried: keys raw and JSON-escaped in the
/// turn id, the error's code and message, the user's own text, with and
/// without `alert_include_text`; a stall, an error and a drop each fire.
#[tokio::test(flavor = "multi_thread")]
async fn inv_admin_key_alert_webhook_bodies_hold_no_key() {
    let keys = Keys::random();
    let (admin, consumer) = (keys.admin.clone(), keys.consumer.clone());
    let esc = |k: &str| k.chars().map(|c| format!("\\u{:04x}", c as u32)).collect::<String>();
    let (ea, ec) = (esc(&admin), esc(&consumer));
    // Each turn: what the upstream sends, then whether it ends the body after a pause (a stall and a drop).
    let scripts = [
        format!("event: turn.started\ndata: {{\"turn_id\":\"{admin}\"}}\n\nevent: error\ndata: {{\"code\":\"{consumer}\",\"message\":\"{admin} {ea} {ec}\"}}\n\n"),
        format!("event: turn.started\ndata: {{\"turn_id\":\"t_{ea}\"}}\n\nevent: text\ndata: {{\"delta\":\"{consumer}\"}}\n\n"),
    ];
    let turn = Arc::new(Mutex::new(0usize));
    let mock = {
        let (turn, scripts) = (turn.clone(), scripts.clone());
        MockUpstream::start(move |r| {
            let script = scripts[*turn.lock().unwrap() % scripts.len()].clone();
            async move {
                if !r.path_and_query.ends_with("/turns") {
                    return respond(404, "application/json", "{}");
                }
                let (sender, response) = streaming(200, "text/event-stream");
                let _ = sender.send(script.into());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    drop(sender);
                });
                response
            }
        })
        .await
    };
    let hook = MockUpstream::start(|_| async { respond(200, "text/plain", "ok") }).await;
    for include_text in ["false", "true"] {
        let options = app_options(&keys)
            .redirect(UPSTREAM, &mock)
            .redirect(AFFECT, &mock)
            .redirect("webhook.test:80", &hook)
            .variable("alert_webhook_url", "http://webhook.test/hook")
            .variable("alert_webhook_origin", "http://webhook.test")
            .variable("alert_stall_ms", "200")
            .variable("alert_include_text", include_text);
        let app = start(options).await;
        for index in 0..scripts.len() {
            *turn.lock().unwrap() = index;
            let text = format!("my keys are {admin} and {consumer}");
            let body = serde_json::json!({ "text": text, "agent_id": "sindra" }).to_string();
            transcript(&app, ("POST", "/api/sessions/s_1/turns", body.as_str(), None)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let log = app.log();
        for key in keys.all() {
            assert!(!log.contains(key), "a key was logged:\n{log}");
        }
    }
    // Error, then stall + drop, for each setting: six alerts.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while hook.requests().len() < 6 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let bodies: Vec<String> = hook.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    let kinds: Vec<String> = bodies
        .iter()
        .map(|b| serde_json::from_str::<serde_json::Value>(b).unwrap()["alert"]["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["error", "stall", "dropped", "error", "stall", "dropped"], "{bodies:?}");
    for body in &bodies {
        let decoded = serde_json::from_str::<serde_json::Value>(body).unwrap().to_string();
        for key in keys.all() {
            assert!(!body.contains(key) && !decoded.contains(key), "a key reached the webhook:\n{body}");
        }
        assert!(!body.contains(&ea) && !body.contains(&ec), "an escaped key reached the webhook:\n{body}");
    }
    assert!(bodies[3].contains("my keys are [redacted] and [redacted]"), "the text went, redacted: {}", bodies[3]);
}
