//! The upstream simulator through the real host and .wasm, on a public route
//! (tests/fixtures/simulator.toml): the wire contract of upstream.md sections 1
//! (Ratatoskr sessions API) and 2 (Worldtree affect read).

use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use component_tests::*;
use futures::{Stream, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};

/// Distinctive bearers: neither may ever show up in a body, a stream or the log.
const CONSUMER: &str = "canary-consumer-key-3f9d1c";
const ADMIN: &str = "canary-admin-key-7b2e4a";

#[derive(Clone)]
enum Auth {
    Nothing,
    Consumer,
    Admin,
    /// A verbatim `Authorization` value.
    Raw(String),
}

struct Sim {
    app: TestApp,
}

async fn sim() -> Sim {
    require_wasm("simulator.wasm");
    let options =
        TestAppOptions::new(fixture("simulator.toml")).variable("consumer_key", CONSUMER).variable("admin_key", ADMIN);
    Sim { app: TestApp::start(options).await.expect("the simulator app starts") }
}

fn assert_no_keys(what: &str, text: &str) {
    for key in [CONSUMER, ADMIN] {
        assert!(!text.contains(key), "a bearer leaked into {what}: {text}");
    }
}

impl Sim {
    fn request(&self, method: Method, path: &str, auth: &Auth) -> reqwest::RequestBuilder {
        let request = client().request(method, self.app.url(path));
        match auth {
            Auth::Nothing => request,
            Auth::Consumer => request.bearer_auth(CONSUMER),
            Auth::Admin => request.bearer_auth(ADMIN),
            Auth::Raw(value) => request.header("authorization", value.as_str()),
        }
    }

    /// Any JSON call: status and parsed body (`Null` when empty).
    async fn call(&self, method: Method, path: &str, auth: &Auth, body: Option<String>) -> (u16, Value) {
        let mut request = self.request(method.clone(), path, auth);
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        assert_no_keys(&format!("the body of {method} {path}"), &text);
        assert_eq!(content_type.as_deref(), Some("application/json; charset=utf-8"), "{method} {path}: {text}");
        let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text:?}"));
        (status, value)
    }

    async fn get(&self, path: &str, auth: &Auth) -> (u16, Value) {
        self.call(Method::GET, path, auth, None).await
    }

    async fn post(&self, path: &str, auth: &Auth, body: &Value) -> (u16, Value) {
        self.call(Method::POST, path, auth, Some(body.to_string())).await
    }

    /// A new session (asserting the 201 shape); returns the 201 body.
    async fn session(&self, agent_id: &str, end_user_id: &str) -> Value {
        let (status, created) = self
            .post("/v1/sessions", &Auth::Consumer, &json!({"agent_id": agent_id, "end_user_id": end_user_id}))
            .await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(keys(&created), ["agent_id", "created_at", "session_id"]);
        assert_eq!(created["agent_id"], agent_id);
        let session_id = created["session_id"].as_str().unwrap();
        assert!(is_hex_id(session_id, "s_", 24), "{session_id}");
        rfc3339_ms(created["created_at"].as_str().unwrap());
        created
    }

    /// Starts a turn, asserting a 200 event stream.
    async fn open_turn(&self, session_id: &str, text: &str) -> Sse {
        let response = self
            .request(Method::POST, &format!("/v1/sessions/{session_id}/turns"), &Auth::Consumer)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(json!({ "text": text }).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Sse::new(response)
    }

    /// A whole turn, to the end of its stream.
    async fn run_turn(&self, session_id: &str, text: &str) -> Vec<Event> {
        let mut stream = self.open_turn(session_id, text).await;
        let events = stream.rest(Instant::now() + Duration::from_secs(20)).await;
        assert!(stream.ended, "the turn stream did not end within 20 s: {events:?}");
        events
    }

    async fn affect(&self, agent_id: &str) -> (u16, Value) {
        self.get(&format!("/worldtree/affect?agent_id={agent_id}"), &Auth::Nothing).await
    }

    fn assert_log_clean(&self) {
        assert_no_keys("the host log", &self.app.log());
    }
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> =
        value.as_object().unwrap_or_else(|| panic!("not an object: {value}")).keys().map(String::as_str).collect();
    keys.sort();
    keys
}

fn is_hex_id(id: &str, prefix: &str, hex_digits: usize) -> bool {
    id.strip_prefix(prefix)
        .is_some_and(|h| h.len() == hex_digits && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// Unix milliseconds of a strict RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.fff]Z`).
fn rfc3339_ms(text: &str) -> i64 {
    let fail = || -> ! { panic!("not an RFC 3339 UTC timestamp: {text:?}") };
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        fail();
    }
    let num = |range: std::ops::Range<usize>| -> i64 {
        let s = &text[range];
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            fail();
        }
        s.parse().unwrap()
    };
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let (hour, minute, second) = (num(11..13), num(14..16), num(17..19));
    let rest = &text[19..];
    let millis = match rest.strip_prefix('.').and_then(|r| r.strip_suffix('Z')) {
        Some(fraction) if !fraction.is_empty() && fraction.bytes().all(|c| c.is_ascii_digit()) => {
            format!("{fraction:0<3}")[..3].parse::<i64>().unwrap()
        }
        _ if rest == "Z" => 0,
        _ => fail(),
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        fail();
    }
    // Howard Hinnant's days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One server-sent event as received.
#[derive(Debug)]
struct Event {
    id: Option<String>,
    event: String,
    data: Value,
    at: Instant,
}

/// A minimal SSE reader: `id`, `event` and `data` fields, `:` comments, LF or CRLF lines.
struct Sse {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: Vec<u8>,
    ended: bool,
}

impl Sse {
    fn new(response: reqwest::Response) -> Sse {
        Sse { body: Box::pin(response.bytes_stream()), buf: Vec::new(), ended: false }
    }

    /// The next event; `None` at the end of the stream or once `deadline` passes.
    async fn next(&mut self, deadline: Instant) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.buf.drain(..end + 2).collect();
                if let Some(event) = parse_frame(&String::from_utf8(frame).expect("SSE is UTF-8")) {
                    return Some(event);
                }
                continue;
            }
            if self.ended {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.body.next()).await {
                Err(_) => return None,
                Ok(None) => {
                    assert!(
                        self.buf.iter().all(u8::is_ascii_whitespace),
                        "stream ended inside a frame: {:?}",
                        self.buf
                    );
                    self.ended = true;
                }
                Ok(Some(chunk)) => {
                    let chunk = chunk.expect("the event stream broke");
                    assert_no_keys("an event stream", &String::from_utf8_lossy(&chunk));
                    self.buf.extend(chunk.iter().filter(|&&b| b != b'\r'));
                }
            }
        }
    }

    /// Every further event until the stream ends or `deadline` passes.
    async fn rest(&mut self, deadline: Instant) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next(deadline).await {
            events.push(event);
        }
        events
    }
}

fn parse_frame(frame: &str) -> Option<Event> {
    let (mut id, mut event, mut data) = (None, None, Vec::new());
    for line in frame.lines().filter(|l| !l.is_empty() && !l.starts_with(':')) {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => id = Some(value.to_owned()),
            "event" => event = Some(value.to_owned()),
            "data" => data.push(value),
            other => panic!("unexpected SSE field {other:?} in {frame:?}"),
        }
    }
    if event.is_none() && data.is_empty() {
        return None; // a comment or keep-alive
    }
    let data = data.join("\n");
    let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("data is not JSON ({e}): {frame:?}"));
    Some(Event { id, event: event.unwrap_or_else(|| "message".to_owned()), data, at: Instant::now() })
}

/// Checks a turn stream against upstream.md's grammar:
/// `turn.started thinking* [tool_call tool_result] text* <terminal>`, where a
/// `cancelled` may cut the sequence anywhere after `turn.started`. Returns the turn id.
fn check_turn(events: &[Event], terminal: &str) -> String {
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    let terminals = names.iter().filter(|n| matches!(**n, "done" | "error" | "cancelled")).count();
    assert_eq!(terminals, 1, "exactly one terminal event: {names:?}");
    assert_eq!(names.last(), Some(&terminal), "{names:?}");
    assert_eq!(names[0], "turn.started", "{names:?}");
    let turn_id = events[0].data["turn_id"].as_str().expect("turn.started has turn_id").to_owned();
    assert!(is_hex_id(&turn_id, "t_", 16), "{turn_id}");

    let body = &events[1..events.len() - 1];
    let mut i = 0;
    while i < body.len() && body[i].event == "thinking" {
        assert!(body[i].data["delta"].is_string(), "{:?}", body[i]);
        i += 1;
    }
    if i < body.len() && body[i].event == "tool_call" {
        let call = &body[i].data;
        assert!(call["call_id"].is_string() && call["name"].is_string() && call["arguments"].is_object(), "{call}");
        i += 1;
        if i < body.len() {
            let result = &body[i].data;
            assert_eq!(body[i].event, "tool_result", "{names:?}");
            assert_eq!(result["call_id"], call["call_id"]);
            assert_eq!(result["name"], call["name"]);
            assert!(result["output"].is_string(), "{result}");
            assert_eq!(result["is_error"], false);
            i += 1;
        } else {
            assert_eq!(terminal, "cancelled", "a tool_call without its result: {names:?}");
        }
    }
    while i < body.len() && body[i].event == "text" {
        assert!(body[i].data["delta"].is_string(), "{:?}", body[i]);
        i += 1;
    }
    assert_eq!(i, body.len(), "out of order: {names:?}");
    if terminal == "done" {
        assert!(names.contains(&"tool_result") && names.contains(&"text"), "{names:?}");
    }
    turn_id
}

fn text_of(events: &[Event]) -> String {
    events.iter().filter(|e| e.event == "text").map(|e| e.data["delta"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_are_listed_for_the_consumer_bearer_only() {
    let sim = sim().await;
    let (status, body) = sim.get("/v1/agents", &Auth::Consumer).await;
    assert_eq!(status, 200);
    assert_eq!(keys(&body), ["agents"]);
    let agents = body["agents"].as_array().unwrap();
    let mut ids = Vec::new();
    for agent in agents {
        assert_eq!(keys(agent), ["agent_id", "display_name"]);
        assert!(!agent["display_name"].as_str().unwrap().is_empty());
        ids.push(agent["agent_id"].as_str().unwrap());
    }
    assert_eq!(ids, ["sindra", "brokkr", "eitri"]);
    // The scheme is case-insensitive, as RFC 9110 says.
    assert_eq!(sim.get("/v1/agents", &Auth::Raw(format!("bearer {CONSUMER}"))).await.0, 200);

    let refused = [
        Auth::Nothing,
        Auth::Raw("Bearer wrong-bearer-canary-11".to_owned()),
        Auth::Raw(format!("Bearer {CONSUMER}x")),
        Auth::Raw(format!("Basic {CONSUMER}")),
        Auth::Raw(CONSUMER.to_owned()),
        Auth::Raw("Bearer ".to_owned()),
        // The admin key replaces the consumer bearer on admin calls; it is not a consumer bearer.
        Auth::Admin,
    ];
    for auth in &refused {
        let (status, body) = sim.get("/v1/agents", auth).await;
        assert_eq!(status, 401);
        assert_eq!(body, json!({"error": "unauthorized"}));
    }
    // Two Authorization headers are ambiguous: refused.
    let doubled = sim
        .request(Method::GET, "/v1/agents", &Auth::Consumer)
        .header("authorization", format!("Bearer {CONSUMER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(doubled.status(), 401);

    // Routing comes before authentication: 405 with Allow, 404 for unknown paths.
    let wrong_method = sim.request(Method::POST, "/v1/agents", &Auth::Consumer).send().await.unwrap();
    assert_eq!(wrong_method.status(), 405);
    assert_eq!(wrong_method.headers()["allow"], "GET");
    assert_eq!(sim.get("/v1/nothing-here", &Auth::Consumer).await, (404, json!({"error": "not_found"})));
    sim.assert_log_clean();

    // The fixture's own defaults work when nothing overrides them.
    let defaults = TestApp::start(TestAppOptions::new(fixture("simulator.toml"))).await.unwrap();
    let listed = client().get(defaults.url("/v1/agents")).bearer_auth("test-consumer").send().await.unwrap();
    assert_eq!(listed.status(), 200);
    let admin = client().get(defaults.url("/v1/agents")).bearer_auth("test-admin").send().await.unwrap();
    assert_eq!(admin.status(), 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_are_created_and_bad_requests_refused() {
    let sim = sim().await;
    let before = now_ms();
    let first = sim.session("sindra", "operator").await;
    let created_at = rfc3339_ms(first["created_at"].as_str().unwrap());
    assert!((before - 1000..=now_ms() + 1000).contains(&created_at), "created_at is now: {first}");
    let second = sim.session("eitri", "someone else").await;
    assert_ne!(first["session_id"], second["session_id"]);

    let (status, body) =
        sim.post("/v1/sessions", &Auth::Consumer, &json!({"agent_id": "odin", "end_user_id": "u"})).await;
    assert_eq!((status, body), (404, json!({"error": "unknown_agent"})));
    // An untrusted agent id is not echoed back.
    let hostile = json!({"agent_id": "<script>alert(1)</script>", "end_user_id": "u"});
    let (status, body) = sim.post("/v1/sessions", &Auth::Consumer, &hostile).await;
    assert_eq!(status, 404);
    assert!(!body.to_string().contains("<script>"), "{body}");

    let bad_bodies = [
        "",
        "not json",
        "[]",
        "{}",
        r#"{"agent_id":"sindra"}"#,
        r#"{"end_user_id":"u"}"#,
        r#"{"agent_id":7,"end_user_id":"u"}"#,
        r#"{"agent_id":"sindra","end_user_id":""}"#,
        r#"{"agent_id":"sindra","end_user_id":null}"#,
    ];
    for bad in bad_bodies {
        let (status, body) = sim.call(Method::POST, "/v1/sessions", &Auth::Consumer, Some(bad.to_owned())).await;
        assert_eq!(status, 400, "{bad:?}");
        assert_eq!(body["error"], "bad_request", "{bad:?}");
        assert!(body["message"].is_string(), "{bad:?}");
    }
    let valid = json!({"agent_id": "sindra", "end_user_id": "operator"});
    assert_eq!(sim.post("/v1/sessions", &Auth::Nothing, &valid).await.0, 401);
    assert_eq!(sim.post("/v1/sessions", &Auth::Admin, &valid).await.0, 401);

    // Turns: unknown sessions are 404 (well-formed or not), bad bodies 400.
    let sid = first["session_id"].as_str().unwrap();
    for unknown in ["s_000000000000000000000000", "s_nope", "..%2f..%2fetc"] {
        let (status, body) =
            sim.post(&format!("/v1/sessions/{unknown}/turns"), &Auth::Consumer, &json!({"text": "hi"})).await;
        assert_eq!((status, body), (404, json!({"error": "unknown_session"})), "{unknown}");
    }
    for bad in [json!({"txt": "hi"}), json!({"text": 5}), json!(["hi"])] {
        let (status, body) = sim.post(&format!("/v1/sessions/{sid}/turns"), &Auth::Consumer, &bad).await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["error"], "bad_request");
    }
    assert_eq!(sim.post(&format!("/v1/sessions/{sid}/turns"), &Auth::Admin, &json!({"text": "hi"})).await.0, 401);
    sim.assert_log_clean();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_streams_its_events_in_order_and_a_second_turn_is_409() {
    let sim = sim().await;
    let session = sim.session("brokkr", "operator").await;
    let sid = session["session_id"].as_str().unwrap();
    let turns = format!("/v1/sessions/{sid}/turns");

    let sent = Instant::now();
    // Untrusted text with quotes, markup and a line break must not break the framing.
    let mut stream = sim.open_turn(sid, "Please check \"this\" </script>\nand data: that").await;
    let first = stream.next(sent + Duration::from_secs(5)).await.expect("a first event");
    assert_eq!(first.event, "turn.started");
    let first_latency = first.at - sent;

    // While it streams, the session is busy.
    let (status, body) = sim.post(&turns, &Auth::Consumer, &json!({"text": "me too"})).await;
    assert_eq!((status, body), (409, json!({"error": "turn_already_running"})));

    let mut events = vec![first];
    events.extend(stream.rest(Instant::now() + Duration::from_secs(20)).await);
    assert!(stream.ended, "the stream ends after the terminal event");
    let turn_id = check_turn(&events, "done");
    let done = events.last().unwrap();
    assert_eq!(done.data["turn_id"], turn_id.as_str());
    assert_eq!(keys(&done.data["usage"]), ["input_tokens", "output_tokens"]);
    assert!(done.data["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(done.data["usage"]["output_tokens"].as_u64().unwrap() > 0);
    assert!(!done.data["finish_reason"].as_str().unwrap().is_empty());
    assert!(!text_of(&events).trim().is_empty());
    assert!(events.iter().all(|e| e.id.is_none()), "turn events carry no id");

    // Streaming, not buffering: the first event came at once, the end much later.
    let spread = done.at - events[0].at;
    assert!(first_latency < Duration::from_millis(1500), "first event after {first_latency:?}");
    assert!(spread >= Duration::from_millis(600), "all events within {spread:?}: buffered?");
    let distinct_arrivals = events.windows(2).filter(|w| w[1].at - w[0].at >= Duration::from_millis(20)).count();
    assert!(distinct_arrivals >= events.len() / 3, "events arrived in bursts: {distinct_arrivals} of {}", events.len());

    // The running flag is cleared before `done` is sent: an immediate next turn is admitted.
    // `/error` ends it with an `error` event after the tool round-trip, and no `done`.
    let errored = sim.run_turn(sid, "/error").await;
    let error_turn = check_turn(&errored, "error");
    assert_ne!(error_turn, turn_id);
    let error = &errored.last().unwrap().data;
    assert!(error["code"].is_string() && error["message"].is_string(), "{error}");
    assert!(errored.iter().any(|e| e.event == "tool_result"));
    sim.assert_log_clean();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_a_running_turn_with_one_cancelled_event() {
    let sim = sim().await;
    let session = sim.session("sindra", "operator").await;
    let sid = session["session_id"].as_str().unwrap();

    let mut stream = sim.open_turn(sid, "/slow").await;
    let started = stream.next(Instant::now() + Duration::from_secs(5)).await.expect("turn.started");
    assert_eq!(started.event, "turn.started");
    let turn_id = started.data["turn_id"].as_str().unwrap().to_owned();
    let thinking = stream.next(Instant::now() + Duration::from_secs(5)).await.expect("a delta");
    assert_eq!(thinking.event, "thinking", "mid-turn");

    let cancel = |sid: &str, tid: &str| format!("/v1/sessions/{sid}/turns/{tid}/cancel");
    let (status, body) = sim.post(&cancel(sid, "t_0000000000000000"), &Auth::Consumer, &json!({})).await;
    assert_eq!((status, body), (404, json!({"error": "unknown_turn"})));
    let (status, body) = sim.post(&cancel("s_ffffffffffffffffffffffff", &turn_id), &Auth::Consumer, &json!({})).await;
    assert_eq!((status, body), (404, json!({"error": "unknown_session"})));
    assert_eq!(sim.post(&cancel(sid, &turn_id), &Auth::Nothing, &json!({})).await.0, 401);

    let (status, body) = sim.post(&cancel(sid, &turn_id), &Auth::Consumer, &json!({})).await;
    assert_eq!((status, body), (202, json!({})));
    let cancelled_at = Instant::now();
    let mut events = vec![started, thinking];
    events.extend(stream.rest(Instant::now() + Duration::from_secs(10)).await);
    assert!(stream.ended, "the stream ends after `cancelled`");
    check_turn(&events, "cancelled");
    let cancelled = events.last().unwrap();
    assert_eq!(cancelled.data, json!({"turn_id": turn_id}));
    // A /slow turn runs 12–25 s: ending within ~1 s can only be the cancel.
    let took = cancelled.at - cancelled_at;
    assert!(took < Duration::from_millis(1500), "cancelled {took:?} after the cancel");

    // Cancelling a finished turn is accepted and changes nothing.
    assert_eq!(sim.post(&cancel(sid, &turn_id), &Auth::Consumer, &json!({})).await.0, 202);
    let (status, state) = sim.get(&format!("/v1/sessions/{sid}/bifrost"), &Auth::Admin).await;
    assert_eq!(status, 200);
    assert_eq!(state["inflight_turns"], 0);
    assert_eq!(state["last_dispatch"]["turn_id"], turn_id.as_str());
    assert_eq!(state["last_dispatch"]["status"], "cancelled");
    // The session is free again.
    let mut next = sim.open_turn(sid, "hello again").await;
    let again = next.next(Instant::now() + Duration::from_secs(5)).await.unwrap();
    assert_eq!(again.event, "turn.started");
    assert_ne!(again.data["turn_id"], turn_id.as_str());
    sim.assert_log_clean();
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_inventory_has_the_contract_shape() {
    let sim = sim().await;
    for (agent, tool_names) in [
        ("sindra", &["web_search", "read_url", "calculator"][..]),
        ("eitri", &["recall_memory", "calendar_lookup"][..]),
    ] {
        let session = sim.session(agent, "operator").await;
        let sid = session["session_id"].as_str().unwrap();
        let (status, inventory) = sim.get(&format!("/v1/sessions/{sid}/tools"), &Auth::Consumer).await;
        assert_eq!(status, 200, "{agent}: tools are not scope-limited");
        assert_eq!(keys(&inventory), ["agent_id", "session_id", "tools"]);
        assert_eq!(inventory["session_id"], sid);
        assert_eq!(inventory["agent_id"], agent);
        let tools = inventory["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, tool_names);
        for tool in tools {
            assert_eq!(keys(tool), ["description", "input_schema", "name"]);
            assert!(!tool["description"].as_str().unwrap().is_empty());
            assert_eq!(tool["input_schema"]["type"], "object", "{tool}");
            assert!(tool["input_schema"]["properties"].is_object(), "{tool}");
        }
        assert_eq!(sim.get(&format!("/v1/sessions/{sid}/tools"), &Auth::Nothing).await.0, 401);
        assert_eq!(sim.get(&format!("/v1/sessions/{sid}/tools"), &Auth::Admin).await.0, 401);
    }
    let (status, body) = sim.get("/v1/sessions/s_000000000000000000000000/tools", &Auth::Consumer).await;
    assert_eq!((status, body), (404, json!({"error": "unknown_session"})));
    sim.assert_log_clean();
}

#[tokio::test(flavor = "multi_thread")]
async fn bifrost_needs_the_admin_bearer_and_tracks_dispatch() {
    let sim = sim().await;
    let session = sim.session("sindra", "operator").await;
    let sid = session["session_id"].as_str().unwrap();
    let bifrost = format!("/v1/sessions/{sid}/bifrost");

    let (status, state) = sim.get(&bifrost, &Auth::Admin).await;
    assert_eq!(status, 200);
    assert_eq!(
        keys(&state),
        ["agent_id", "bound_at", "caps", "endpoint", "inflight_turns", "last_dispatch", "model", "session_id", "tools"]
    );
    assert_eq!(state["session_id"], sid);
    assert_eq!(state["agent_id"], "sindra");
    assert!(state["endpoint"].as_str().unwrap().starts_with("http://"));
    assert!(!state["model"].as_str().unwrap().is_empty());
    assert!(state["caps"]["max_tokens"].as_u64().unwrap() > 0);
    assert!(state["caps"]["parallel_tools"].is_boolean());
    for tool in state["tools"].as_array().unwrap() {
        assert_eq!(keys(tool), ["description", "name"]);
    }
    assert_eq!(state["bound_at"], session["created_at"]);
    assert_eq!(state["inflight_turns"], 0);
    assert!(state["last_dispatch"].is_null());

    // Admin scope: the consumer bearer is not an admin bearer.
    for auth in [Auth::Consumer, Auth::Nothing, Auth::Raw("Bearer wrong-admin-canary-12".to_owned())] {
        assert_eq!(sim.get(&bifrost, &auth).await, (401, json!({"error": "unauthorized"})));
    }
    for unknown in ["s_000000000000000000000000", "nope"] {
        let (status, body) = sim.get(&format!("/v1/sessions/{unknown}/bifrost"), &Auth::Admin).await;
        assert_eq!((status, body), (404, json!({"error": "not_bound"})), "{unknown}");
    }
    let eitri = sim.session("eitri", "operator").await;
    let (status, body) =
        sim.get(&format!("/v1/sessions/{}/bifrost", eitri["session_id"].as_str().unwrap()), &Auth::Admin).await;
    assert_eq!((status, body), (403, json!({"error": "scope_denied"})));

    // A turn in flight counts, and its outcome is recorded once it is done.
    let mut stream = sim.open_turn(sid, "hello").await;
    let started = stream.next(Instant::now() + Duration::from_secs(5)).await.unwrap();
    let during = sim.get(&bifrost, &Auth::Admin).await.1;
    assert_eq!(during["inflight_turns"], 1);
    let rest = stream.rest(Instant::now() + Duration::from_secs(20)).await;
    assert_eq!(rest.last().unwrap().event, "done");
    let after = sim.get(&bifrost, &Auth::Admin).await.1;
    assert_eq!(after["inflight_turns"], 0);
    let last = &after["last_dispatch"];
    assert_eq!(keys(last), ["latency_ms", "status", "turn_id"]);
    assert_eq!(last["turn_id"], started.data["turn_id"]);
    assert_eq!(last["status"], "ok");
    let latency = last["latency_ms"].as_u64().unwrap();
    assert!((500..20_000).contains(&latency), "latency {latency}");
    sim.assert_log_clean();
}

fn event_id(event: &Event) -> u64 {
    let id = event.id.as_deref().unwrap_or_else(|| panic!("admin event without id: {event:?}"));
    assert!(!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()), "id is not a non-negative integer: {id:?}");
    id.parse().unwrap()
}

async fn open_admin_events(sim: &Sim, last_event_id: Option<u64>) -> Sse {
    let mut request = sim.request(Method::GET, "/v1/admin/events", &Auth::Admin).header("accept", "text/event-stream");
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    Sse::new(response)
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_stream_with_ids_heartbeats_and_replay() {
    let sim = sim().await;
    for auth in [Auth::Nothing, Auth::Consumer] {
        assert_eq!(sim.get("/v1/admin/events", &auth).await, (401, json!({"error": "unauthorized"})));
    }
    let session = sim.session("sindra", "operator").await;
    let sid = session["session_id"].as_str().unwrap().to_owned();

    let opened = Instant::now();
    let mut stream = open_admin_events(&sim, None).await;
    let mut events: Vec<Event> = Vec::new();
    let names_session = |e: &Event| e.data["session_id"] == sid.as_str();
    // Read ~4 s; a little longer only if the heartbeat or our session has not shown up yet.
    let hard_deadline = opened + Duration::from_secs(9);
    while let Some(event) = stream.next(hard_deadline).await {
        events.push(event);
        let seen_all = events.iter().any(|e| e.event == "system.heartbeat") && events.iter().any(names_session);
        if opened.elapsed() >= Duration::from_secs(4) && seen_all {
            break;
        }
    }
    assert!(!stream.ended, "the admin stream is endless");
    drop(stream);
    assert!(events.len() >= 6, "only {} events in {:?}", events.len(), opened.elapsed());

    let ids: Vec<u64> = events.iter().map(event_id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids strictly increase: {ids:?}");
    for event in &events {
        assert!(event.data.is_object(), "data is one JSON object: {event:?}");
        let family = event.event.split('.').next().unwrap();
        assert!(event.event.contains('.') && ["session", "turn", "key", "system"].contains(&family), "{event:?}");
        if event.event == "system.heartbeat" {
            assert_eq!(event.data, json!({}));
        } else {
            rfc3339_ms(event.data["timestamp"].as_str().unwrap_or_else(|| panic!("no timestamp: {event:?}")));
        }
    }
    assert!(events.iter().any(|e| e.event == "system.heartbeat"), "no heartbeat in {:?}", opened.elapsed());
    assert!(events.iter().any(names_session), "the real session {sid} never appeared");
    let scoped = events.iter().filter(|e| !e.event.starts_with("system.")).collect::<Vec<_>>();
    let with_session = scoped.iter().filter(|e| e.data["session_id"].is_string()).count();
    assert!(with_session * 2 > scoped.len(), "most non-system events name a session");
    for e in scoped.iter().filter(|e| e.data["session_id"].is_string()) {
        assert!(is_hex_id(e.data["session_id"].as_str().unwrap(), "s_", 24), "{e:?}");
    }
    // Live, not buffered: events spread over the read.
    let spread = events.last().unwrap().at - events[0].at;
    assert!(spread >= Duration::from_secs(2), "events spread over only {spread:?}");

    // Reconnect after the second event: only later ids, replayed at once, and the same events.
    let n = ids[1];
    let reconnected = Instant::now();
    let mut stream = open_admin_events(&sim, Some(n)).await;
    let replayed = stream.rest(reconnected + Duration::from_millis(1200)).await;
    assert!(!replayed.is_empty());
    let replayed_ids: Vec<u64> = replayed.iter().map(event_id).collect();
    assert!(replayed_ids.iter().all(|&id| id > n), "Last-Event-ID {n} but got {replayed_ids:?}");
    assert!(replayed_ids.windows(2).all(|w| w[0] < w[1]), "{replayed_ids:?}");
    assert!(replayed_ids.starts_with(&ids[2..]), "replay {replayed_ids:?} should start with {:?}", &ids[2..]);
    for (seen, again) in events[2..].iter().zip(&replayed) {
        assert_eq!((&seen.event, &seen.data), (&again.event, &again.data), "id {}", event_id(seen));
    }
    // A garbage Last-Event-ID is ignored: a live stream, no replay burst.
    let response = sim
        .request(Method::GET, "/v1/admin/events", &Auth::Admin)
        .header("last-event-id", "not-a-number")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut live = Sse::new(response);
    let first = live.next(Instant::now() + Duration::from_secs(3)).await.expect("a live event");
    assert!(event_id(&first) > *replayed_ids.last().unwrap());
    drop(live);
    // A Last-Event-ID ahead of this upstream's clock (another instance's): ids continue after it.
    let ahead = 1u64 << 50;
    let mut shifted = open_admin_events(&sim, Some(ahead)).await;
    let next = shifted.next(Instant::now() + Duration::from_secs(3)).await.expect("a live event");
    assert!(event_id(&next) > ahead, "{next:?}");
    sim.assert_log_clean();
}

/// Polls the affect read every 500 ms until `accept` takes a 200 snapshot.
async fn poll_affect(sim: &Sim, agent_id: &str, timeout: Duration, accept: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let (status, body) = sim.affect(agent_id).await;
        match status {
            200 if accept(&body) => return body,
            200 | 404 => {}
            other => panic!("affect for {agent_id}: {other} {body}"),
        }
        assert!(started.elapsed() < timeout, "no new {agent_id} snapshot within {timeout:?}; last: {status} {body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn assert_signed(value: &Value, what: &str) {
    let x = value.as_f64().unwrap_or_else(|| panic!("{what} is not a number: {value}"));
    assert!((-1.0..=1.0).contains(&x), "{what} = {x}");
}

fn assert_pad(snapshot: &Value) {
    let pad = &snapshot["pad"];
    assert_eq!(keys(pad), ["arousal", "dominance", "pleasure"]);
    for axis in ["pleasure", "arousal", "dominance"] {
        assert_signed(&pad[axis], axis);
    }
}

fn assert_relation_edge(edge: &Value) {
    assert_eq!(
        keys(edge),
        [
            "agency",
            "obligation_balance",
            "relation_context",
            "target_entity",
            "trust_ability",
            "trust_benevolence",
            "trust_integrity",
            "warmth"
        ]
    );
    assert!(edge["target_entity"].is_string() && edge["relation_context"].is_string(), "{edge}");
    for dimension in ["trust_ability", "trust_benevolence", "trust_integrity", "warmth"] {
        let d = &edge[dimension];
        assert_eq!(keys(d), ["confidence", "evidence_count", "value"], "{dimension}");
        for unit in ["value", "confidence"] {
            let x = d[unit].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x), "{dimension}.{unit} = {x}");
        }
        d["evidence_count"].as_u64().expect("evidence_count is a count");
    }
    assert_signed(&edge["agency"], "agency");
    assert_signed(&edge["obligation_balance"], "obligation_balance");
}

/// Runs a completed turn; returns the wall-clock time (Unix ms) its `done` arrived.
async fn completed_turn(sim: &Sim, sid: &str, text: &str) -> i64 {
    let events = sim.run_turn(sid, text).await;
    check_turn(&events, "done");
    now_ms()
}

#[tokio::test(flavor = "multi_thread")]
async fn affect_snapshots_appear_after_a_completed_turn() {
    let sim = sim().await;
    // Before any turn: nothing emitted yet. Bad queries are refused.
    for agent in ["sindra", "brokkr", "eitri"] {
        assert_eq!(sim.affect(agent).await, (404, json!({"error": "no_snapshot"})), "{agent}");
    }
    assert_eq!(sim.affect("odin").await, (404, json!({"error": "unknown_agent"})));
    let (status, body) = sim.get("/worldtree/affect", &Auth::Nothing).await;
    assert_eq!((status, &body["error"]), (400, &json!("bad_request")));

    let sindra = async {
        let session = sim.session("sindra", "operator-zq").await;
        let sid = session["session_id"].as_str().unwrap();
        let done = completed_turn(&sim, sid, "thanks, that was great!").await;
        // Emitted asynchronously, at least a second after done: not there yet.
        let (status, _) = sim.affect("sindra").await;
        if now_ms() - done < 400 {
            assert_eq!(status, 404, "the snapshot appeared at once");
        }
        let first = poll_affect(&sim, "sindra", Duration::from_secs(10), |_| true).await;
        assert_eq!(keys(&first), ["agent_id", "emitted_at", "pad", "relations"]);
        assert_eq!(first["agent_id"], "sindra");
        assert_pad(&first);
        let emitted = rfc3339_ms(first["emitted_at"].as_str().unwrap());
        // 1–8 s after done (done is when the test saw the stream end, a few ms after).
        assert!(emitted >= done + 500 && emitted <= done + 8500, "emitted_at {emitted} vs done {done}");
        assert!(emitted <= now_ms() + 200, "a snapshot from the future was visible");
        let relations = first["relations"].as_array().unwrap();
        assert!(!relations.is_empty());
        relations.iter().for_each(assert_relation_edge);
        let user_edge = |snapshot: &Value| {
            snapshot["relations"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["target_entity"] == "end_user:operator-zq")
                .cloned()
                .expect("an edge towards the session's end user")
        };
        let evidence = user_edge(&first)["trust_ability"]["evidence_count"].as_u64().unwrap();
        assert!(evidence >= 1);

        // A second turn: a newer snapshot, later emitted_at, one more piece of evidence.
        completed_turn(&sim, sid, "one more question please").await;
        let second =
            poll_affect(&sim, "sindra", Duration::from_secs(10), |s| s["emitted_at"] != first["emitted_at"]).await;
        assert!(rfc3339_ms(second["emitted_at"].as_str().unwrap()) > emitted, "emitted_at advances");
        assert_pad(&second);
        second["relations"].as_array().unwrap().iter().for_each(assert_relation_edge);
        assert_eq!(user_edge(&second)["trust_ability"]["evidence_count"].as_u64().unwrap(), evidence + 1);
    };
    let eitri = async {
        let session = sim.session("eitri", "operator").await;
        let done = completed_turn(&sim, session["session_id"].as_str().unwrap(), "hello").await;
        let snapshot = poll_affect(&sim, "eitri", Duration::from_secs(10), |_| true).await;
        // The legacy emitter: a flat valence instead of relations.
        assert_eq!(keys(&snapshot), ["agent_id", "emitted_at", "pad", "valence"]);
        assert_eq!(snapshot["agent_id"], "eitri");
        assert_pad(&snapshot);
        assert_signed(&snapshot["valence"], "valence");
        let emitted = rfc3339_ms(snapshot["emitted_at"].as_str().unwrap());
        assert!(emitted >= done + 500 && emitted <= done + 8500, "emitted_at {emitted} vs done {done}");
    };
    tokio::join!(sindra, eitri);
    // Snapshots are per agent: brokkr had no turn.
    assert_eq!(sim.affect("brokkr").await, (404, json!({"error": "no_snapshot"})));
    sim.assert_log_clean();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_leaves_mid_turn_does_not_lock_the_session() {
    let sim = sim().await;
    let session = sim.session("brokkr", "operator").await;
    let sid = session["session_id"].as_str().unwrap();
    let mut stream = sim.open_turn(sid, "/slow").await;
    assert_eq!(stream.next(Instant::now() + Duration::from_secs(5)).await.unwrap().event, "turn.started");
    drop(stream);
    // The host may end the instance at once, before any exit path runs; the running flag
    // then goes stale after STALE_BEAT_MS (5 s). Either way the session frees up soon.
    let left = Instant::now();
    loop {
        let response = sim
            .request(Method::POST, &format!("/v1/sessions/{sid}/turns"), &Auth::Consumer)
            .body(json!({"text": "back again"}).to_string())
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            200 => break,
            409 => {
                assert!(left.elapsed() < Duration::from_secs(8), "still 409 {:?} after the client left", left.elapsed())
            }
            other => panic!("unexpected {other}"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    sim.assert_log_clean();
}
