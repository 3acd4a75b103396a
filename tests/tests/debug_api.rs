//! The debug-api component (`/api/...`) through the real host and spin.toml,
//! against mock upstreams: the web debug-surface contract
//! (`_session_tools_endpoint`, `_session_bifrost_endpoint`,
//! `_admin_event_matches_web`, `_admin_events_endpoint`, INV-FILTER,
//! INV-FAIL-VISIBLE, INV-LIFECYCLE) and the rest of the issue-3 routes.
//! Test names carry the contract's postcondition ids. INV-ADMIN-KEY has its
//! own file, canary.rs.

#[path = "../fixtures/debug-support.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use component_tests::*;
use serde_json::{json, Value};
use support::*;

const SECOND: Duration = Duration::from_secs(1);

fn authorization(request: &ratatoskr_host::testing::RecordedRequest) -> Vec<String> {
    request.headers.get_all("authorization").iter().map(|v| v.to_str().unwrap().to_string()).collect()
}

// ---- _session_tools_endpoint -------------------------------------------------

const INVENTORY: &str = r#"{"session_id":"s_1","agent_id":"sindra","tools":[{"name":"web_search","description":"Search \u00e9 <b>the</b> web","input_schema":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}],"extra":[1,2.50,null]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn tools_post_001_success_is_the_upstream_inventory_verbatim() {
    let keys = Keys::random();
    let mock = json_mock(200, INVENTORY).await;
    let app = app_with(&keys, &mock).await;
    let answer = get(&app, "/api/sessions/s_1/tools").await;
    assert_eq!(answer.status, 200);
    assert!(answer.header("content-type").starts_with("application/json"));
    assert_eq!(answer.body, INVENTORY, "byte for byte, escapes and number forms included");
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, http::Method::GET);
    assert_eq!(seen[0].path_and_query, "/v1/sessions/s_1/tools");
    assert_eq!(authorization(&seen[0]), [format!("Bearer {}", keys.consumer)], "owner-scoped: the consumer bearer");
}

/// A whole JSON answer, success or envelope, carries its length and is never
/// chunked: Spin keeps Nagle on, and a chunked body's last chunk can leave in
/// a write of its own that waits for the client's delayed ACK (40 ms).
#[tokio::test(flavor = "multi_thread")]
async fn json_answers_carry_their_length_not_chunked() {
    let mock = json_mock(200, INVENTORY).await;
    for (keys, path, status) in
        [(Keys::random(), "/api/sessions/s_1/tools", 200), (Keys::without_admin(), "/api/sessions/s_1/bifrost", 400)]
    {
        let app = app_with(&keys, &mock).await;
        let answer = get(&app, path).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.body);
        assert_eq!(answer.header("content-length"), answer.body.len().to_string(), "{path}: {:?}", answer.headers);
        assert!(answer.headers.get("transfer-encoding").is_none(), "{path}: {:?}", answer.headers);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_post_002_non_200_is_status_preserving() {
    for status in [401, 403, 404, 409, 500, 503] {
        let mock = json_mock(status, r#"{"error":"upstream words never reach the browser"}"#).await;
        let app = app_with(&Keys::random(), &mock).await;
        let answer = get(&app, "/api/sessions/s_1/tools").await;
        let v = answer.assert_error(status, "session_tools_unavailable");
        assert_eq!(v["status"], status);
        assert!(!answer.body.contains("upstream words"), "{}", answer.body);
    }
}

// ---- _session_bifrost_endpoint ------------------------------------------------

const BIFROST: &str = r#"{"session_id":"s_1","agent_id":"sindra","endpoint":"http://sindra.agents:8400/v1","model":"m","caps":{"max_tokens":4096,"parallel_tools":true},"tools":[{"name":"web_search","description":"d"}],"bound_at":"2025-01-01T00:00:00Z","inflight_turns":0,"last_dispatch":null}"#;

#[tokio::test(flavor = "multi_thread")]
async fn bifrost_pre_001_empty_admin_key_is_400_without_an_upstream_call() {
    let mock = json_mock(200, BIFROST).await;
    let app = app_with(&Keys::without_admin(), &mock).await;
    let answer = get(&app, "/api/sessions/s_1/bifrost").await;
    answer.assert_error(400, "admin_key_not_configured");
    assert_eq!(mock.requests().len(), 0, "never an upstream call with an empty bearer");
}

#[tokio::test(flavor = "multi_thread")]
async fn bifrost_post_001_admin_key_replaces_the_consumer_bearer_and_never_reaches_the_browser() {
    let keys = Keys::random();
    // An upstream that echoes the bearer it got: the key must still not leave.
    let mock = MockUpstream::start(|r| async move {
        let auth = r.headers["authorization"].to_str().unwrap().to_string();
        respond(200, "application/json", json!({ "session_id": "s_1", "echo": auth }).to_string())
    })
    .await;
    let app = app_with(&keys, &mock).await;
    let answer = get(&app, "/api/sessions/s_1/bifrost").await;
    assert_eq!(answer.status, 200);
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/v1/sessions/s_1/bifrost");
    assert_eq!(
        authorization(&seen[0]),
        [format!("Bearer {}", keys.admin)],
        "one Authorization: the admin key, no consumer key"
    );
    assert!(!answer.body.contains(&keys.admin), "{}", answer.body);
    assert_eq!(answer.json()["echo"], "Bearer [redacted]");
    for (name, value) in &answer.headers {
        assert!(!value.to_str().unwrap_or("").contains(&keys.admin), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bifrost_post_002_success_is_the_upstream_state_verbatim() {
    let mock = json_mock(200, BIFROST).await;
    let app = app_with(&Keys::random(), &mock).await;
    let answer = get(&app, "/api/sessions/s_1/bifrost").await;
    assert_eq!(answer.status, 200);
    assert!(answer.header("content-type").starts_with("application/json"));
    assert_eq!(answer.body, BIFROST);
}

#[tokio::test(flavor = "multi_thread")]
async fn bifrost_post_003_non_200_is_status_preserving() {
    // 404 not bound and 403 scope denied above all.
    for status in [404, 403, 401, 500] {
        let mock = json_mock(status, r#"{"error":{"code":"scope_denied"}}"#).await;
        let app = app_with(&Keys::random(), &mock).await;
        let answer = get(&app, "/api/sessions/s_1/bifrost").await;
        let v = answer.assert_error(status, "bifrost_state_unavailable");
        assert_eq!(v["status"], status);
    }
}

// ---- _admin_event_matches_web (through the proxy) -------------------------------

/// An upstream admin stream with every filter case; id 99 is a system
/// sentinel that always passes, so the reader knows it has seen everything.
const FIREHOSE: &str = concat!(
    ": upstream keepalive\n\n",
    "id: 1\nevent: system.heartbeat\ndata: {}\n\n",
    "id: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\",\"turn_id\":\"t_1\",\"timestamp\":\"2025-01-01T00:00:00Z\"}\n\n",
    "id: 3\nevent: turn.started\ndata: {\"session_id\":\"s_2\",\"turn_id\":\"t_9\"}\n\n",
    "id: 4\nevent: system.restart\ndata: {\"reason\":\"deploy\"}\n\n",
    "id: 5\nevent: key.rotated\ndata: {}\n\n",
    "id: 6\nevent: turn.completed\ndata: {\"session_id\":\"s_1\"}\n\n",
    "id: 7\nevent: session.created\ndata: {\"session_id\":1}\n\n",
    "id: 8\nevent: session.created\ndata: {\"session_id\":\"s_10\"}\n\n",
    "id: 9\nevent: system.heartbeat\ndata: {\"session_id\":\"s_1\"}\n\n",
    "id: 10\nevent: system.notice\ndata: {\"session_id\":\"s_2\"}\n\n",
    "id: 11\ndata: {\"session_id\":\"s_1\",\"note\":\"no event field: type message\"}\n\n",
    "id: 12\nevent: key.rotated\ndata: {\"session_id\":\"S_1\"}\n\n",
    "id: 99\nevent: system.sentinel\ndata: {}\n\n",
);

/// The admin events the browser gets for `query` while the upstream sends
/// [`FIREHOSE`], as (id, type) plus the frames.
async fn through_the_proxy(query: &str) -> (Vec<(u64, String)>, Vec<Frame>, String) {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, &format!("/api/admin/events{query}"), None).await;
    let upstream = next_sender(&mut senders).await;
    push(&upstream, FIREHOSE);
    let mut frames = Vec::new();
    loop {
        let frame = sse.next_event(3 * SECOND).await.expect("stream open");
        let done = frame.id.as_deref() == Some("99");
        frames.push(frame);
        if done {
            break;
        }
    }
    let ids = frames
        .iter()
        .map(|f| {
            let v = f.json();
            (v["id"].as_u64().unwrap(), v["type"].as_str().unwrap().to_string())
        })
        .collect();
    (ids, frames, sse.raw.clone())
}

fn types(ids: &[(u64, String)]) -> Vec<&str> {
    ids.iter().map(|(_, t)| t.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn filter_post_001_heartbeats_never_cross() {
    for query in ["?session_id=s_1", ""] {
        let (ids, _, raw) = through_the_proxy(query).await;
        assert!(!types(&ids).contains(&"system.heartbeat"), "{ids:?}");
        assert!(!ids.iter().any(|(id, _)| *id == 1 || *id == 9), "{ids:?}");
        assert!(!raw.contains("heartbeat"), "not even as text: {raw:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn filter_post_002_other_system_events_always_pass() {
    for query in ["?session_id=s_1", "?session_id=s_other", ""] {
        let (ids, _, _) = through_the_proxy(query).await;
        let system: Vec<_> = ids.iter().filter(|(_, t)| t.starts_with("system.")).map(|(id, _)| *id).collect();
        assert_eq!(system, [4, 10, 99], "{query}: {ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn filter_post_003_only_the_queried_sessions_events_pass() {
    let (ids, _, _) = through_the_proxy("?session_id=s_1").await;
    let got: Vec<u64> = ids.iter().map(|(id, _)| *id).collect();
    // Not 3 (s_2), 5 (no session_id), 7 (non-string), 8 (prefix), 12 (case).
    assert_eq!(got, [2, 4, 6, 10, 11, 99], "{ids:?}");
    let (ids, _, _) = through_the_proxy("?session_id=s_2").await;
    assert_eq!(ids.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [3, 4, 10, 99]);
}

#[tokio::test(flavor = "multi_thread")]
async fn filter_post_003_without_session_id_only_system_events_pass() {
    let (ids, _, _) = through_the_proxy("").await;
    assert_eq!(ids.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [4, 10, 99], "{ids:?}");
}

// ---- _admin_events_endpoint -------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_pre_001_empty_admin_key_is_400_before_any_stream() {
    let (mock, _senders) = sse_mock(200).await;
    let app = app_with(&Keys::without_admin(), &mock).await;
    for path in ["/api/admin/events", "/api/admin/events?session_id=s_1"] {
        let answer = get(&app, path).await;
        answer.assert_error(400, "admin_key_not_configured");
        assert!(!answer.header("content-type").contains("event-stream"));
    }
    assert_eq!(mock.requests().len(), 0, "no upstream stream opened");
    // The same fail-visible state, for the console to show (INV-FAIL-VISIBLE).
    let config = json_mock(200, r#"{"agents":[]}"#).await;
    let app = app_with(&Keys::without_admin(), &config).await;
    assert_eq!(get(&app, "/api/config").await.json()["admin_configured"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_001_is_an_sse_stream_whose_admin_key_stays_server_side() {
    let keys = Keys::random();
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&keys, &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    assert_eq!(sse.header("content-type"), "text/event-stream");
    assert_eq!(sse.header("cache-control"), "no-cache");
    assert_eq!(sse.header("x-accel-buffering"), "no");
    let upstream = next_sender(&mut senders).await;
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/v1/admin/events", "the session filter is ours, not the upstream's");
    assert_eq!(authorization(&seen[0]), [format!("Bearer {}", keys.admin)]);
    assert_eq!(seen[0].headers["accept"], "text/event-stream");
    assert!(seen[0].headers.get("last-event-id").is_none(), "a first connect replays nothing");
    push(&upstream, "id: 5\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\n");
    let frame = sse.next_event(2 * SECOND).await.unwrap();
    assert_eq!(frame.name(), "admin_event");
    for key in keys.all() {
        assert!(!sse.raw.contains(key));
        assert!(!format!("{:?}", sse.headers).contains(key));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_002_every_kept_event_is_admin_event_with_id_and_payload() {
    let (ids, frames, raw) = through_the_proxy("?session_id=s_1").await;
    assert!(!ids.is_empty());
    for frame in &frames {
        assert_eq!(frame.event.as_deref(), Some("admin_event"), "one fixed name: {raw:?}");
        let v = frame.json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["data", "id", "timestamp", "type"]);
        assert_eq!(frame.id.as_deref(), Some(v["id"].to_string().as_str()), "the id line carries the upstream id");
    }
    assert_eq!(
        frames[0].json(),
        json!({"id": 2, "type": "turn.started", "timestamp": "2025-01-01T00:00:00Z",
               "data": {"session_id": "s_1", "turn_id": "t_1", "timestamp": "2025-01-01T00:00:00Z"}})
    );
    assert_eq!(
        frames[1].json(),
        json!({"id": 4, "type": "system.restart", "timestamp": null, "data": {"reason": "deploy"}})
    );
    assert_eq!(frames[4].json()["type"], "message", "an event without a name keeps the SSE default type");
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_002_a_reconnect_forwards_last_event_id_upstream() {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    push(&upstream, "id: 1041\nevent: turn.started\ndata: {\"session_id\":\"s_2\"}\n\nid: 1042\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\n");
    let last = sse.next_event(2 * SECOND).await.unwrap();
    assert_eq!(last.id.as_deref(), Some("1042"));
    drop(sse);
    // What EventSource does after a drop: the same URL with Last-Event-ID.
    let mut again = Sse::open(&app, "/api/admin/events?session_id=s_1", last.id.as_deref()).await;
    let upstream2 = next_sender(&mut senders).await;
    let seen = mock.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].headers["last-event-id"], "1042");
    assert_eq!(seen[1].path_and_query, "/v1/admin/events");
    push(&upstream2, "id: 1043\nevent: turn.completed\ndata: {\"session_id\":\"s_1\"}\n\n");
    assert_eq!(again.next_event(2 * SECOND).await.unwrap().id.as_deref(), Some("1043"));
    drop(upstream);
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_002_a_malformed_last_event_id_is_refused_not_forwarded() {
    let (mock, _senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    for bad in ["abc", "-1", "1 2", "99999999999999999999999"] {
        let answer = client()
            .get(app.url("/api/admin/events?session_id=s_1"))
            .header("last-event-id", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{bad}");
        let v: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        assert_eq!(v["error_code"], "invalid_last_event_id");
    }
    assert_eq!(mock.requests().len(), 0);
}

/// Reads the rest of a stream and asserts it is exactly `kept` admin events
/// followed by one `stream_error` with `reason`, then the end.
async fn assert_ends_with_one_stream_error(sse: &mut Sse, kept: usize, reason: &str) -> Value {
    let frames = sse.rest(3 * SECOND).await;
    assert_eq!(frames.len(), kept + 1, "{:?}", sse.raw);
    assert!(frames[..kept].iter().all(|f| f.name() == "admin_event"), "{:?}", sse.raw);
    let last = &frames[kept];
    assert_eq!(last.name(), "stream_error", "{:?}", sse.raw);
    assert!(last.id.is_none());
    let v = last.json();
    assert_eq!(v["reason"], reason, "{v}");
    assert!(v["message"].is_string());
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_connect_failure_is_one_stream_error() {
    let app = start(redirect_all(app_options(&Keys::random()), closed_port())).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    assert_eq!(sse.header("content-type"), "text/event-stream");
    assert_ends_with_one_stream_error(&mut sse, 0, "connect_failed").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_upstream_timeout_is_one_stream_error() {
    let mock = slow_mock(Duration::from_millis(TIMEOUT_MS * 4)).await;
    let app = app_with(&Keys::random(), &mock).await;
    let started = Instant::now();
    let mut sse = Sse::open(&app, "/api/admin/events", None).await;
    assert_ends_with_one_stream_error(&mut sse, 0, "connect_failed").await;
    assert!(started.elapsed() < Duration::from_millis(TIMEOUT_MS * 3), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_upstream_refusal_is_one_stream_error_with_its_status() {
    for status in [401, 403, 500] {
        let mock = json_mock(status, r#"{"error":"no"}"#).await;
        let app = app_with(&Keys::random(), &mock).await;
        let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
        let v = assert_ends_with_one_stream_error(&mut sse, 0, "upstream_status").await;
        assert_eq!(v["status"], status);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_mid_stream_drop_is_one_stream_error() {
    if not_on_jco(JCO_DROPPED_BODY) {
        return;
    }
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    push(&upstream, "id: 1\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\nid: 2\nevent: turn.comp");
    drop(upstream);
    assert_ends_with_one_stream_error(&mut sse, 1, "connection_dropped").await;

    // A reset mid-body (the connection closes short of its content-length).
    let partial = "id: 1\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\n".to_string();
    let addr = dropping_server("text/event-stream", partial).await;
    let app = start(redirect_all(app_options(&Keys::random()), addr)).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    assert_ends_with_one_stream_error(&mut sse, 1, "connection_dropped").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_malformed_id_is_one_stream_error() {
    for bad_id in ["abc", "-3", "1.5", "", "99999999999999999999999"] {
        let (mock, mut senders) = sse_mock(200).await;
        let app = app_with(&Keys::random(), &mock).await;
        let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
        let upstream = next_sender(&mut senders).await;
        // Valid, then malformed (of ANOTHER session: validation precedes filtering),
        // then valid again: nothing after the error.
        push(
            &upstream,
            &format!(
                "id: 1\nevent: turn.started\ndata: {{\"session_id\":\"s_1\"}}\n\n\
                 id: {bad_id}\nevent: turn.started\ndata: {{\"session_id\":\"s_2\"}}\n\n\
                 id: 3\nevent: system.notice\ndata: {{}}\n\n"
            ),
        );
        assert_ends_with_one_stream_error(&mut sse, 1, "malformed_sse_id").await;
        // INV-LIFECYCLE: the upstream is let go although it is still open.
        assert!(mock.wait_for_open_connections(0, SECOND).await.is_some(), "{bad_id:?}");
        drop(upstream);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_003_malformed_data_is_one_stream_error() {
    for bad_data in ["not json", "[1,2]", "\"s_1\"", "{\"session_id\":", "null"] {
        let (mock, mut senders) = sse_mock(200).await;
        let app = app_with(&Keys::random(), &mock).await;
        let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
        let upstream = next_sender(&mut senders).await;
        push(
            &upstream,
            &format!("id: 1\nevent: system.notice\ndata: {bad_data}\n\nid: 2\nevent: system.notice\ndata: {{}}\n\n"),
        );
        assert_ends_with_one_stream_error(&mut sse, 0, "malformed_sse_data").await;
        assert!(mock.wait_for_open_connections(0, SECOND).await.is_some(), "{bad_data:?}");
        drop(upstream);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_post_004_client_disconnect_drops_the_upstream_within_1s() {
    if not_on_jco("jco serve does not pass a client's disconnect on to the request's worker") {
        return;
    }
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    push(&upstream, "id: 1\nevent: turn.started\ndata: {\"session_id\":\"s_1\"}\n\n");
    sse.next_event(2 * SECOND).await.unwrap();
    assert_eq!(mock.open_connections(), 1);
    // The upstream stays open and quiet: only the proxy can let it go.
    drop(sse);
    let closed = mock.wait_for_open_connections(0, SECOND).await;
    assert!(closed.is_some(), "upstream connection still open 1 s after the browser left");
    drop(upstream);
}

/// The first block of a relayed stream: its `: t0=<unix ms>` stamp, alone
/// (docs/console-api.md); keepalives follow it.
async fn expect_t0(sse: &mut Sse) {
    match sse.next(2 * SECOND).await {
        Next::Frame(frame) => {
            assert!(frame.is_comment(), "{frame:?}");
            let [t0] = frame.comments.as_slice() else { panic!("{frame:?}") };
            assert!(t0.strip_prefix("t0=").is_some_and(|ms| ms.parse::<u64>().is_ok()), "{frame:?}");
        }
        _ => panic!("no t0 block: {:?}", sse.raw),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_keepalive_comments_flow_and_no_heartbeat_event_crosses() {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    expect_t0(&mut sse).await;
    // The upstream chatters faster than the keepalive interval, but only with
    // events the filter drops: the browser still hears a keepalive per interval.
    let chatter = tokio::spawn(async move {
        for id in 1..=40u64 {
            let event = if id % 2 == 0 { "system.heartbeat" } else { "turn.started" };
            let text = format!("id: {id}\nevent: {event}\ndata: {{\"session_id\":\"s_other\"}}\n\n");
            if upstream.send(text.into()).is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(KEEPALIVE_MS / 4)).await;
        }
        upstream
    });
    let started = Instant::now();
    let mut keepalives = Vec::new();
    while started.elapsed() < Duration::from_millis(KEEPALIVE_MS * 5) {
        match sse.next(Duration::from_millis(KEEPALIVE_MS * 3)).await {
            Next::Frame(frame) => {
                assert!(frame.is_comment(), "nothing but keepalives may cross: {frame:?}");
                assert_eq!(frame.comments, ["keepalive"]);
                keepalives.push(started.elapsed());
            }
            Next::End => panic!("stream ended: {:?}", sse.raw),
            Next::Timeout => panic!("no keepalive within {}ms; got {keepalives:?}", KEEPALIVE_MS * 3),
        }
    }
    assert!(keepalives.len() >= 3, "{keepalives:?}");
    assert!(!sse.raw.contains("heartbeat"));
    drop(sse);
    drop(chatter.await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_keepalive_on_a_silent_upstream() {
    if not_on_jco(
        "jco's shim cuts an upstream body quiet for longer than the connect timeout, before the keepalive is due",
    ) {
        return;
    }
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events", None).await;
    let _upstream = next_sender(&mut senders).await;
    expect_t0(&mut sse).await;
    let started = Instant::now();
    for _ in 0..2 {
        match sse.next(Duration::from_millis(KEEPALIVE_MS * 4)).await {
            Next::Frame(frame) => assert_eq!(frame.comments, ["keepalive"], "{frame:?}"),
            _ => panic!("no keepalive: {:?}", sse.raw),
        }
    }
    assert!(started.elapsed() >= Duration::from_millis(KEEPALIVE_MS), "not sooner than the interval");
}

// ---- the other issue-3 routes -------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn config_lists_agents_and_admin_configured_never_a_key() {
    let keys = Keys::random();
    let mock = json_mock(
        200,
        r#"{"agents":[{"agent_id":"sindra","display_name":"Sindra"},{"agent_id":"brokkr","display_name":"Brokkr"}]}"#,
    )
    .await;
    let app =
        start(app_options(&keys).redirect(UPSTREAM, &mock).variable("bifrost_visible_host", "bifrost.example")).await;
    let answer = get(&app, "/api/config").await;
    assert_eq!(answer.status, 200);
    let v = answer.json();
    assert_eq!(v["bifrost_visible_host"], "bifrost.example");
    assert_eq!(v["admin_configured"], true);
    assert_eq!(
        v["agents"],
        json!([{"agent_id":"sindra","display_name":"Sindra"},{"agent_id":"brokkr","display_name":"Brokkr"}])
    );
    for key in keys.all() {
        assert!(!answer.body.contains(key));
    }
    let seen = mock.requests();
    assert_eq!(
        (seen[0].path_and_query.as_str(), authorization(&seen[0])),
        ("/v1/agents", vec![format!("Bearer {}", keys.consumer)])
    );
}

/// Spin keeps a client's own `spin-*` headers and appends its values after them:
/// the component must route by Spin's (the last), never by the client's.
#[tokio::test(flavor = "multi_thread")]
async fn a_clients_spin_headers_never_steer_the_routes() {
    let mock = json_mock(200, r#"{"agents":[]}"#).await;
    let app = app_with(&Keys::random(), &mock).await;
    let response = client()
        .get(app.url("/api/config"))
        .header("spin-path-info", "/sessions/s_forged/bifrost")
        .header("spin-full-url", "http://evil.test/api/sessions")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let v: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(v["agents"], json!([]), "the config route answered: {v}");
    assert_eq!(mock.requests()[0].path_and_query, "/v1/agents");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_says_why_when_the_agent_list_fails() {
    let mock = json_mock(503, "{}").await;
    let app = app_with(&Keys::random(), &mock).await;
    let v = get(&app, "/api/config").await.json();
    assert_eq!(v["agents"], json!([]));
    assert_eq!(v["agents_error"], json!({"error_code": "agents_unavailable", "status": 503}));
    let app = start(redirect_all(app_options(&Keys::random()), closed_port())).await;
    let answer = get(&app, "/api/config").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["agents_error"]["error_code"], "upstream_unreachable");
}

/// Bodies of known size go upstream with `content-length`, never chunked: some
/// upstreams, WAFs and proxies refuse chunked requests (411).
#[tokio::test(flavor = "multi_thread")]
async fn upstream_writes_carry_a_content_length_not_chunked() {
    let created = r#"{"session_id":"s_abc","agent_id":"sindra","created_at":"2025-01-01T00:00:00Z"}"#;
    let mock = json_mock(201, created).await;
    let app = app_with(&Keys::random(), &mock).await;
    assert_eq!(post_json(&app, "/api/sessions", r#"{"agent_id":"sindra"}"#).await.status, 201);
    let seen = &mock.requests()[0];
    assert_eq!(seen.headers["content-length"], seen.body.len().to_string());
    assert!(seen.headers.get("transfer-encoding").is_none(), "{:?}", seen.headers);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_session_sends_the_server_held_end_user_and_consumer_key() {
    let keys = Keys::random();
    let created = r#"{"session_id":"s_abc","agent_id":"sindra","created_at":"2025-01-01T00:00:00Z"}"#;
    let mock = json_mock(201, created).await;
    let app = start(app_options(&keys).redirect(UPSTREAM, &mock).variable("end_user_id", "operator-7")).await;
    // A browser-sent end_user_id is ignored: the server holds it.
    let answer = post_json(&app, "/api/sessions", r#"{"agent_id":"sindra","end_user_id":"mallory"}"#).await;
    assert_eq!(answer.status, 201);
    assert_eq!(answer.body, created);
    let seen = mock.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].method.as_str(), seen[0].path_and_query.as_str()), ("POST", "/v1/sessions"));
    assert_eq!(authorization(&seen[0]), [format!("Bearer {}", keys.consumer)]);
    assert!(seen[0].headers["content-type"].to_str().unwrap().starts_with("application/json"));
    let body: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body, json!({"agent_id": "sindra", "end_user_id": "operator-7"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn create_session_upstream_refusal_is_status_preserving() {
    for status in [400, 404] {
        let mock = json_mock(status, r#"{"error":"unknown agent"}"#).await;
        let app = app_with(&Keys::random(), &mock).await;
        let v = post_json(&app, "/api/sessions", r#"{"agent_id":"nobody"}"#)
            .await
            .assert_error(status, "session_create_failed");
        assert_eq!(v["status"], status);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_bodies_are_typed_4xx_without_an_upstream_call() {
    let mock = json_mock(201, "{}").await;
    let app = app_with(&Keys::random(), &mock).await;
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(70 * 1024));
    for path in ["/api/sessions", "/api/sessions/s_1/turns"] {
        // No content type, no body.
        let r = client().post(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 415, "{path}");
        let r = client().post(app.url(path)).header("content-type", "text/plain").body("{}").send().await.unwrap();
        assert_eq!(r.status(), 415, "{path}");
        post_json(&app, path, "").await.assert_error(400, "invalid_json");
        post_json(&app, path, "{not json").await.assert_error(400, "invalid_json");
        post_json(&app, path, "[1]").await.assert_error(400, "invalid_json");
        post_json(&app, path, &big).await.assert_error(413, "body_too_large");
    }
    post_json(&app, "/api/sessions", "{}").await.assert_error(400, "missing_agent_id");
    post_json(&app, "/api/sessions", r#"{"agent_id":7}"#).await.assert_error(400, "missing_agent_id");
    post_json(&app, "/api/sessions", r#"{"agent_id":"../admin"}"#).await.assert_error(400, "invalid_agent_id");
    post_json(&app, "/api/sessions/s_1/turns", "{}").await.assert_error(400, "missing_text");
    post_json(&app, "/api/sessions/s_1/turns", r#"{"text":"   "}"#).await.assert_error(400, "invalid_text");
    // 32,769 two-byte characters are 65,549 bytes: over the body limit first.
    let too_long = format!(r#"{{"text":"{}"}}"#, "é".repeat(32 * 1024 + 1));
    assert_eq!(too_long.len(), 65_549);
    post_json(&app, "/api/sessions/s_1/turns", &too_long).await.assert_error(413, "body_too_large");
    // The limits, pinned exactly: 64 KiB + 1 byte is 413 on both body routes ...
    for path in ["/api/sessions", "/api/sessions/s_1/turns"] {
        post_json(&app, path, &padded(r#"{"agent_id":"sindra","text":"hi"}"#, 64 * 1024 + 1))
            .await
            .assert_error(413, "body_too_large");
    }
    // ... and 32,769 characters (multi-byte ones count once) in a body under 64 KiB are invalid_text.
    let over = format!("{}{}", "é".repeat(16 * 1024 + 1), "x".repeat(16 * 1024));
    let body = format!(r#"{{"text":"{over}"}}"#);
    assert!(body.len() < 64 * 1024);
    post_json(&app, "/api/sessions/s_1/turns", &body).await.assert_error(400, "invalid_text");
    let over_ascii = format!(r#"{{"text":"{}"}}"#, "x".repeat(32 * 1024 + 1));
    post_json(&app, "/api/sessions/s_1/turns", &over_ascii).await.assert_error(400, "invalid_text");
    assert_eq!(mock.requests().len(), 0);

    // At the limits, the request goes upstream: a body of exactly 64 KiB ...
    let r = post_json(&app, "/api/sessions", &padded(r#"{"agent_id":"sindra"}"#, 64 * 1024)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(mock.requests().len(), 1);
    // ... and a text of exactly 32,768 characters, sent on whole.
    let at_limit = format!("{}{}", "é".repeat(16 * 1024), "x".repeat(16 * 1024));
    // (The mock answers 201 JSON, not a 200 stream: the turn cannot start, typed.)
    post_json(&app, "/api/sessions/s_1/turns", &format!(r#"{{"text":"{at_limit}"}}"#))
        .await
        .assert_error(502, "turn_unavailable");
    let seen = mock.requests();
    assert_eq!(seen.len(), 2);
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(sent["text"].as_str().map(|t| t.chars().count()), Some(32 * 1024));
}

/// `json` followed by spaces up to exactly `len` bytes (still one JSON object).
fn padded(json: &str, len: usize) -> String {
    let mut body = json.to_string();
    body.push_str(&" ".repeat(len - json.len()));
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_streams_delta_by_delta_with_the_consumer_key() {
    let keys = Keys::random();
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&keys, &mock).await;
    let response = client()
        .post(app.url("/api/sessions/s_1/turns"))
        .header("content-type", "application/json")
        .body(r#"{"text":"hello \"there\"\n"}"#)
        .send()
        .await
        .unwrap();
    let upstream = next_sender(&mut senders).await;
    let mut sse = Sse::new(response);
    assert_eq!(sse.status, 200);
    assert_eq!(sse.header("content-type"), "text/event-stream");
    assert_eq!(sse.header("cache-control"), "no-cache");
    assert_eq!(sse.header("x-accel-buffering"), "no");
    let seen = mock.requests();
    assert_eq!((seen[0].method.as_str(), seen[0].path_and_query.as_str()), ("POST", "/v1/sessions/s_1/turns"));
    assert_eq!(authorization(&seen[0]), [format!("Bearer {}", keys.consumer)]);
    assert_eq!(serde_json::from_slice::<Value>(&seen[0].body).unwrap(), json!({"text": "hello \"there\"\n"}));

    // Each delta reaches the browser while the upstream is still open.
    let script = [
        ("turn.started", json!({"turn_id": "t_1"})),
        ("thinking", json!({"delta": "hm"})),
        ("text", json!({"delta": "Hel"})),
        ("tool_call", json!({"call_id": "c1", "name": "web_search", "arguments": {"query": "q"}})),
        ("tool_result", json!({"call_id": "c1", "name": "web_search", "output": "r", "is_error": false})),
        ("text", json!({"delta": "lo"})),
    ];
    for (name, data) in &script {
        let sent = Instant::now();
        push(&upstream, &format!("event: {name}\ndata: {data}\n\n"));
        let frame = sse.next_event(2 * SECOND).await.expect("open");
        assert!(sent.elapsed() < Duration::from_millis(500), "{name} took {:?}", sent.elapsed());
        assert_eq!((frame.name(), frame.json()), (*name, data.clone()));
    }
    push(&upstream, ": upstream ping\n\nevent: done\ndata: {\"turn_id\":\"t_1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2},\"finish_reason\":\"stop\"}\n\nevent: text\ndata: {\"delta\":\"after the end\"}\n\n");
    // The terminal event ends the response although the upstream is still open.
    let rest = sse.rest(2 * SECOND).await;
    assert_eq!(rest.iter().map(Frame::name).collect::<Vec<_>>(), ["done"]);
    assert!(!sse.raw.contains("upstream ping") && !sse.raw.contains("after the end"));
    assert!(mock.wait_for_open_connections(0, SECOND).await.is_some());
    drop(upstream);
}

// ---- timing stamps on relayed streams (docs/console-api.md) -------------------

fn unix_ms_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A relayed stream's raw text split into its `: t0=` value, its `: t=`
/// stamps in order, and the rest without the stamps and keepalives. Asserts
/// the stream opens with `: t0=` and that every event block starts with its
/// one stamp.
fn stamps(raw: &str) -> (u64, Vec<u64>, String) {
    let (first, blocks) = raw.split_once("\n\n").expect("a first block");
    let t0 = first.strip_prefix(": t0=").unwrap_or_else(|| panic!("no t0 first: {raw:?}")).parse().unwrap();
    let mut ts = Vec::new();
    let mut rest = String::new();
    for block in blocks.split_inclusive("\n\n") {
        if block == ": keepalive\n\n" {
            continue;
        }
        let (stamp, frame) = block.split_once('\n').unwrap();
        let t = stamp.strip_prefix(": t=").unwrap_or_else(|| panic!("an unstamped block: {block:?}"));
        ts.push(t.parse().unwrap());
        assert!(!frame.contains(": t="), "{block:?}");
        rest.push_str(frame);
    }
    (t0, ts, rest)
}

fn assert_monotonic(ts: &[u64]) {
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "stamps go back: {ts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_events_carry_monotonic_receive_stamps_and_are_otherwise_unchanged() {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let before = unix_ms_now();
    let response = client()
        .post(app.url("/api/sessions/s_1/turns"))
        .header("content-type", "application/json")
        .body(r#"{"text":"hi"}"#)
        .send()
        .await
        .unwrap();
    let upstream = next_sender(&mut senders).await;
    let mut sse = Sse::new(response);
    let script = [
        "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n",
        "event: thinking\ndata: {\"delta\":\"hm\"}\n\n",
        "event: text\ndata: {\"delta\":\"Hel\"}\n\nevent: text\ndata: {\"delta\":\"lo\"}\ndata: second line\n\n",
        "event: tool_call\ndata: {\"call_id\":\"c1\",\"name\":\"web_search\",\"arguments\":{\"query\":\"q\"}}\n\n",
        "event: done\ndata: {\"turn_id\":\"t_1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2},\"finish_reason\":\"stop\"}\n\n",
    ];
    for (i, part) in script.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(120)).await;
        }
        push(&upstream, part);
    }
    assert_eq!(sse.rest(2 * SECOND).await.len(), 6);
    let after = unix_ms_now();
    let (t0, ts, events) = stamps(&sse.raw);
    assert!(t0 + 5_000 >= before && t0 <= after + 5_000, "t0 {t0} is the wall clock ({before}..{after})");
    assert_eq!(events, script.concat(), "the events, byte for byte, apart from the stamps");
    assert_eq!(ts.len(), 6);
    assert_monotonic(&ts);
    // The upstream's pauses (4 x 120 ms) show in the proxy's receive times.
    assert!(ts[5] - ts[0] >= 400, "{ts:?}");
    assert!(ts[5] <= after - before + 1_000, "{ts:?}");
    drop(upstream);
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_events_carry_monotonic_receive_stamps_and_are_otherwise_unchanged() {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let mut sse = Sse::open(&app, "/api/admin/events?session_id=s_1", None).await;
    let upstream = next_sender(&mut senders).await;
    let event = |id: u64, kind: &str, session: &str| {
        format!("id: {id}\nevent: {kind}\ndata: {{\"session_id\":\"{session}\",\"timestamp\":\"2025-01-01T00:00:0{id}Z\"}}\n\n")
    };
    let kept = |id: u64, kind: &str| {
        format!(
            "event: admin_event\nid: {id}\ndata: {{\"id\":{id},\"type\":\"{kind}\",\"timestamp\":\"2025-01-01T00:00:0{id}Z\",\"data\":{{\"session_id\":\"s_1\",\"timestamp\":\"2025-01-01T00:00:0{id}Z\"}}}}\n\n"
        )
    };
    let script = [
        format!("{}{}", event(1, "turn.started", "s_1"), "id: 2\nevent: system.heartbeat\ndata: {}\n\n"),
        event(3, "turn.started", "s_2"),
        format!("{}{}", event(4, "turn.completed", "s_1"), event(5, "key.rotated", "s_1")),
        event(6, "session.closed", "s_1"),
    ];
    for (i, part) in script.iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(120)).await;
        }
        push(&upstream, part);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(upstream); // a dropped firehose ends with its stream_error
    let frames = sse.rest(3 * SECOND).await;
    assert_eq!(frames.iter().map(Frame::name).collect::<Vec<_>>().last(), Some(&"stream_error"));
    let (_, ts, rest) = stamps(&sse.raw);
    let expected =
        [kept(1, "turn.started"), kept(4, "turn.completed"), kept(5, "key.rotated"), kept(6, "session.closed")];
    let tail = rest.strip_prefix(&expected.concat()).unwrap_or_else(|| panic!("{rest:?}"));
    assert!(tail.starts_with("event: stream_error\ndata: {") && tail.matches("\n\n").count() == 1, "{tail:?}");
    assert_eq!(ts.len(), 5, "four kept events and the stream_error");
    assert_monotonic(&ts);
    assert!(ts[3] - ts[0] >= 300, "{ts:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_dropped_stream_ends_with_one_typed_error_event() {
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let response = client()
        .post(app.url("/api/sessions/s_1/turns"))
        .header("content-type", "application/json")
        .body(r#"{"text":"hi"}"#)
        .send()
        .await
        .unwrap();
    let upstream = next_sender(&mut senders).await;
    let mut sse = Sse::new(response);
    push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\nevent: text\ndata: {\"delta\":\"par");
    drop(upstream);
    let frames = sse.rest(2 * SECOND).await;
    assert_eq!(frames.iter().map(Frame::name).collect::<Vec<_>>(), ["turn.started", "error"]);
    assert_eq!(frames[1].json()["code"], "upstream_stream_dropped");
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_upstream_refusal_is_status_preserving() {
    for status in [404, 409] {
        let mock = json_mock(status, r#"{"error":"turn already running"}"#).await;
        let app = app_with(&Keys::random(), &mock).await;
        let v = post_json(&app, "/api/sessions/s_1/turns", r#"{"text":"hi"}"#)
            .await
            .assert_error(status, "turn_unavailable");
        assert_eq!(v["status"], status);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn turn_client_disconnect_drops_the_upstream_within_1s() {
    if not_on_jco("jco serve does not pass a client's disconnect on to the request's worker") {
        return;
    }
    let (mock, mut senders) = sse_mock(200).await;
    let app = app_with(&Keys::random(), &mock).await;
    let response = client()
        .post(app.url("/api/sessions/s_1/turns"))
        .header("content-type", "application/json")
        .body(r#"{"text":"hi"}"#)
        .send()
        .await
        .unwrap();
    let upstream = next_sender(&mut senders).await;
    let mut sse = Sse::new(response);
    push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n");
    sse.next_event(2 * SECOND).await.unwrap();
    drop(sse);
    assert!(mock.wait_for_open_connections(0, SECOND).await.is_some());
    drop(upstream);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_is_forwarded_with_the_consumer_key_and_answers_202() {
    let keys = Keys::random();
    let mock = json_mock(202, "{}").await;
    let app = app_with(&keys, &mock).await;
    let answer = post_json(&app, "/api/sessions/s_1/turns/t_2/cancel", "").await;
    assert_eq!(answer.status, 202);
    assert_eq!(answer.json(), json!({}));
    let seen = mock.requests();
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path_and_query.as_str()),
        ("POST", "/v1/sessions/s_1/turns/t_2/cancel")
    );
    assert_eq!(authorization(&seen[0]), [format!("Bearer {}", keys.consumer)]);

    let mock = json_mock(404, "{}").await;
    let app = app_with(&keys, &mock).await;
    let v = post_json(&app, "/api/sessions/s_1/turns/t_2/cancel", "").await.assert_error(404, "cancel_unavailable");
    assert_eq!(v["status"], 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn affect_is_read_without_credentials_and_404_is_typed() {
    let keys = Keys::random();
    let snapshot = r#"{"agent_id":"sindra","emitted_at":"2025-01-01T00:00:05Z","pad":{"pleasure":0.1,"arousal":-0.2,"dominance":0.3},"relations":[]}"#;
    let affect = json_mock(200, snapshot).await;
    let upstream = json_mock(500, "{}").await;
    let app = start(app_options(&keys).redirect(UPSTREAM, &upstream).redirect(AFFECT, &affect)).await;
    let answer = get(&app, "/api/affect?agent_id=sindra").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, snapshot));
    let seen = affect.requests();
    assert_eq!(seen[0].path_and_query, "/worldtree/affect?agent_id=sindra");
    assert!(seen[0].headers.get("authorization").is_none(), "no key goes to Worldtree");
    assert_eq!(upstream.requests().len(), 0);

    let none = json_mock(404, r#"{"error":"none"}"#).await;
    let app = start(app_options(&keys).redirect(AFFECT, &none)).await;
    let v = get(&app, "/api/affect?agent_id=sindra").await.assert_error(404, "affect_not_found");
    assert_eq!(v["status"], 404);
    get(&app, "/api/affect").await.assert_error(400, "missing_agent_id");
    get(&app, "/api/affect?agent_id=..%2Fadmin").await.assert_error(400, "invalid_agent_id");
    get(&app, "/api/affect?agent_id=sindra%26x%3D1").await.assert_error(400, "invalid_agent_id");
    assert_eq!(none.requests().len(), 1);
}

// ---- durable affect history (GET /api/affect/history) ------------------------

/// `2025-01-01T00:00:00Z` plus `second` seconds.
fn emitted_at(second: u64) -> String {
    format!("2025-01-01T{:02}:{:02}:{:02}Z", second / 3600, second / 60 % 60, second % 60)
}

fn snapshot_at(second: u64) -> String {
    format!(
        r#"{{"agent_id":"sindra","emitted_at":"{}","pad":{{"pleasure":0.25,"arousal":-0.5,"dominance":0.125}},"relations":[]}}"#,
        emitted_at(second)
    )
}

/// An affect upstream answering the snapshot emitted at `clock` seconds; with
/// `advance` set, every request moves the clock on by one (distinct snapshots).
async fn affect_mock(clock: Arc<AtomicU64>, advance: Arc<AtomicBool>) -> MockUpstream {
    MockUpstream::start(move |_| {
        let second = if advance.load(SeqCst) { clock.fetch_add(1, SeqCst) } else { clock.load(SeqCst) };
        async move { respond(200, "application/json", snapshot_at(second)) }
    })
    .await
}

async fn history_app(clock: u64, advance: bool) -> (TestApp, MockUpstream, Arc<AtomicU64>, Arc<AtomicBool>) {
    let (clock, advance) = (Arc::new(AtomicU64::new(clock)), Arc::new(AtomicBool::new(advance)));
    let affect = affect_mock(clock.clone(), advance.clone()).await;
    let upstream = json_mock(500, "{}").await;
    let app = start(app_options(&Keys::random()).redirect(UPSTREAM, &upstream).redirect(AFFECT, &affect)).await;
    (app, affect, clock, advance)
}

/// The `emitted_at` of every snapshot in the agent's history, in order.
async fn history(app: &TestApp, agent_id: &str) -> Vec<String> {
    let answer = get(app, &format!("/api/affect/history?agent_id={agent_id}")).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.header("content-type").starts_with("application/json"));
    let v = answer.json();
    assert_eq!(v["agent_id"], agent_id);
    v["snapshots"].as_array().unwrap().iter().map(|s| s["emitted_at"].as_str().unwrap().to_string()).collect()
}

/// `count` affect reads of `sindra`, all in flight at once, each from its own task.
async fn concurrent_affect_reads(app: &TestApp, count: usize) {
    let url = app.url("/api/affect?agent_id=sindra");
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { client().get(url).send().await.unwrap().status().as_u16() })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn affect_history_survives_across_requests_deduped_by_emitted_at_newest_last() {
    if spin_app_only(NO_STORE) {
        return;
    }
    let (app, affect, clock, _) = history_app(100, false).await;
    assert!(history(&app, "sindra").await.is_empty());
    for _ in 0..3 {
        assert_eq!(get(&app, "/api/affect?agent_id=sindra").await.status, 200);
    }
    assert_eq!(history(&app, "sindra").await, [emitted_at(100)], "the same emitted_at three times is one snapshot");
    for second in [200, 50, 200] {
        clock.store(second, SeqCst);
        assert_eq!(get(&app, "/api/affect?agent_id=sindra").await.status, 200);
    }
    assert_eq!(history(&app, "sindra").await, [emitted_at(50), emitted_at(100), emitted_at(200)]);
    // Each snapshot is the text the browser got, byte for byte.
    let answer = get(&app, "/api/affect/history?agent_id=sindra").await;
    let expected = format!(
        r#"{{"agent_id":"sindra","snapshots":[{},{},{}]}}"#,
        snapshot_at(50),
        snapshot_at(100),
        snapshot_at(200)
    );
    assert_eq!(answer.body, expected);
    // Per agent; reads of the history never call the upstream.
    assert!(history(&app, "brokkr").await.is_empty());
    assert_eq!(affect.requests().len(), 6);
    // Typed errors.
    get(&app, "/api/affect/history").await.assert_error(400, "missing_agent_id");
    for bad in ["", "..%2Fsindra", "sindra%3Ax", "a%20b", &"a".repeat(65)] {
        get(&app, &format!("/api/affect/history?agent_id={bad}")).await.assert_error(400, "invalid_agent_id");
    }
    let answer = post_json(&app, "/api/affect/history?agent_id=sindra", "{}").await;
    answer.assert_error(405, "method_not_allowed");
    assert_eq!(answer.header("allow"), "GET");
}

#[tokio::test(flavor = "multi_thread")]
async fn affect_history_keeps_the_newest_500_snapshots_per_agent() {
    if spin_app_only(NO_STORE) {
        return;
    }
    let (app, _affect, _, _) = history_app(0, true).await;
    // 501 distinct snapshots, emitted at 0..=500 s, read 8 at a time.
    for _ in 0..(501 / 8) {
        concurrent_affect_reads(&app, 8).await;
    }
    concurrent_affect_reads(&app, 501 % 8).await;
    let got = history(&app, "sindra").await;
    assert_eq!(got.len(), 500);
    assert_eq!(got, (1..=500).map(emitted_at).collect::<Vec<_>>(), "the oldest was dropped, newest last");
}

#[tokio::test(flavor = "multi_thread")]
async fn affect_history_concurrent_pollers_lose_and_duplicate_nothing() {
    if spin_app_only(NO_STORE) {
        return;
    }
    let (app, _affect, clock, advance) = history_app(1_000, true).await;
    // Distinct snapshots from many tasks at once: every one is kept, once.
    concurrent_affect_reads(&app, 48).await;
    // Many pollers of one snapshot at once (two browsers, and more): one entry.
    advance.store(false, SeqCst);
    clock.store(2_000, SeqCst);
    concurrent_affect_reads(&app, 24).await;
    let mut expected: Vec<String> = (1_000..1_048).map(emitted_at).collect();
    expected.push(emitted_at(2_000));
    assert_eq!(history(&app, "sindra").await, expected);
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_ids_never_reach_an_upstream_path_or_query() {
    let mock = json_mock(200, "{}").await;
    let app = app_with(&Keys::random(), &mock).await;
    let long = "s".repeat(129);
    let attacks = [
        ("GET", "/api/sessions/%2e%2e/tools".to_string()),
        ("GET", "/api/sessions/s_1%2F..%2F..%2Fadmin%2Fevents/tools".into()),
        ("GET", "/api/sessions/s_1%3Fx=1/tools".into()),
        ("GET", "/api/sessions/s_1%23x/bifrost".into()),
        ("GET", "/api/sessions/s%201/tools".into()),
        ("GET", "/api/sessions/s_1%00/bifrost".into()),
        ("GET", "/api/sessions/s_1%0d%0aX-Evil:%201/tools".into()),
        ("GET", "/api/sessions/s_1;x=1/bifrost".into()),
        ("GET", "/api/sessions/%C3%A4/tools".into()),
        ("GET", format!("/api/sessions/{long}/tools")),
        ("POST", "/api/sessions/s_1/turns/t%2F..%2F1/cancel".into()),
        ("POST", "/api/sessions/..%2Fx/turns/t_1/cancel".into()),
        ("GET", "/api/admin/events?session_id=s_1%26x%3D1".into()),
        ("GET", "/api/admin/events?session_id=%zz".into()),
        ("GET", "/api/admin/events?session_id=".into()),
    ];
    for (method, path) in &attacks {
        let answer = raw_request(app.addr, method, path).await;
        assert!(answer.status == 400 || answer.status == 404, "{method} {path}: {}", answer.status);
        let v = answer.json();
        assert!(
            v["error_code"].as_str().unwrap().starts_with("invalid_") || v["error_code"] == "not_found",
            "{path}: {v}"
        );
    }
    assert_eq!(mock.requests().len(), 0, "{:?}", mock.requests().iter().map(|r| &r.path_and_query).collect::<Vec<_>>());
    // The widest valid id goes through exactly as given.
    let id = "s_AZaz09-_x";
    assert_eq!(raw_request(app.addr, "GET", &format!("/api/sessions/{id}/tools")).await.status, 200);
    assert_eq!(mock.requests()[0].path_and_query, format!("/v1/sessions/{id}/tools"));
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_methods_are_405_with_allow_and_unknown_routes_404_json() {
    let mock = json_mock(200, "{}").await;
    let app = app_with(&Keys::random(), &mock).await;
    let cases = [
        ("POST", "/api/config", "GET"),
        ("PUT", "/api/config", "GET"),
        ("GET", "/api/sessions", "POST"),
        ("DELETE", "/api/sessions/s_1/tools", "GET"),
        ("POST", "/api/sessions/s_1/bifrost", "GET"),
        ("GET", "/api/sessions/s_1/turns", "POST"),
        ("GET", "/api/sessions/s_1/turns/t_1/cancel", "POST"),
        ("POST", "/api/admin/events", "GET"),
        ("PATCH", "/api/affect?agent_id=sindra", "GET"),
    ];
    for (method, path, allow) in cases {
        let answer = raw_request(app.addr, method, path).await;
        let v = answer.assert_error(405, "method_not_allowed");
        assert_eq!(answer.header("allow"), allow, "{method} {path}");
        assert_eq!(v["allow"], allow);
    }
    for path in [
        "/api",
        "/api/",
        "/api/nope",
        "/api/sessions/s_1",
        "/api/sessions/s_1/tools/extra",
        "/api/admin",
        "/api/config/",
    ] {
        raw_request(app.addr, "GET", path).await.assert_error(404, "not_found");
    }
    assert_eq!(mock.requests().len(), 0);
}

/// Every upstream-calling route, as (method, path, JSON body).
const UPSTREAM_ROUTES: [(&str, &str, &str); 6] = [
    ("POST", "/api/sessions", r#"{"agent_id":"sindra"}"#),
    ("POST", "/api/sessions/s_1/turns", r#"{"text":"hi"}"#),
    ("POST", "/api/sessions/s_1/turns/t_1/cancel", ""),
    ("GET", "/api/sessions/s_1/tools", ""),
    ("GET", "/api/sessions/s_1/bifrost", ""),
    ("GET", "/api/affect?agent_id=sindra", ""),
];

async fn call(app: &TestApp, method: &str, path: &str, body: &str) -> Answer {
    match method {
        "GET" => get(app, path).await,
        _ => post_json(app, path, body).await,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_unreachable_is_502() {
    let app = start(redirect_all(app_options(&Keys::random()), closed_port())).await;
    for (method, path, body) in UPSTREAM_ROUTES {
        call(&app, method, path, body).await.assert_error(502, "upstream_unreachable");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_timeout_is_504() {
    let mock = slow_mock(Duration::from_millis(TIMEOUT_MS * 5)).await;
    let app = app_with(&Keys::random(), &mock).await;
    for (method, path, body) in UPSTREAM_ROUTES {
        let started = Instant::now();
        call(&app, method, path, body).await.assert_error(504, "upstream_timeout");
        let took = started.elapsed();
        // Well before the upstream would have answered.
        assert!(took < Duration::from_millis(TIMEOUT_MS * 3), "{path}: {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_stalling_mid_body_is_504() {
    let senders = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = senders.clone();
    let mock = MockUpstream::start(move |_| {
        let (sender, response) = streaming(200, "application/json");
        let _ = sender.send(bytes::Bytes::from_static(b"{\"session_id\":\"s_"));
        held.lock().unwrap().push(sender);
        async move { response }
    })
    .await;
    let app = app_with(&Keys::random(), &mock).await;
    for (method, path, body) in
        UPSTREAM_ROUTES.iter().filter(|(_, p, _)| !p.ends_with("/turns") && !p.ends_with("/cancel"))
    {
        call(&app, method, path, body).await.assert_error(504, "upstream_timeout");
    }
    drop(senders);
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_drop_mid_body_is_502_and_malformed_json_is_502() {
    if not_on_jco(JCO_DROPPED_BODY) {
        return;
    }
    let addr = dropping_server("application/json", r#"{"session_id":"s_1","to"#.into()).await;
    let app = start(redirect_all(app_options(&Keys::random()), addr)).await;
    for (method, path, body) in
        UPSTREAM_ROUTES.iter().filter(|(_, p, _)| !p.ends_with("/turns") && !p.ends_with("/cancel"))
    {
        call(&app, method, path, body).await.assert_error(502, "upstream_unreachable");
    }
    let mock = json_mock(200, "<html>not json</html>").await;
    let app = app_with(&Keys::random(), &mock).await;
    for (method, path, body) in
        UPSTREAM_ROUTES.iter().filter(|(_, p, _)| !p.ends_with("/turns") && !p.ends_with("/cancel"))
    {
        let answer = call(&app, method, path, body).await;
        answer.assert_error(502, "upstream_malformed");
        assert!(!answer.body.contains("<html>"));
    }
}

// ---- end to end against the simulator --------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn end_to_end_against_the_simulator() {
    if spin_app_only("the simulator is a component of the Spin app") {
        return;
    }
    let admin = random_key("adm_");
    let app = start(
        TestAppOptions::new(repo_root().join("spin.toml"))
            .variable("admin_key", &admin)
            .variable("sse_keepalive_ms", "500"),
    )
    .await;
    let config = get(&app, "/api/config").await;
    assert_eq!(config.status, 200);
    let config = config.json();
    assert_eq!(config["admin_configured"], true);
    let agents: Vec<&str> =
        config["agents"].as_array().unwrap().iter().map(|a| a["agent_id"].as_str().unwrap()).collect();
    assert!(agents.contains(&"sindra"), "{config}");

    // No affect before the first turn.
    get(&app, "/api/affect?agent_id=sindra").await.assert_error(404, "affect_not_found");

    let created = post_json(&app, "/api/sessions", r#"{"agent_id":"sindra"}"#).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let session_id = created.json()["session_id"].as_str().unwrap().to_string();

    // Watch the admin firehose for this session while the turn runs.
    let mut admin_events = Sse::open(&app, &format!("/api/admin/events?session_id={session_id}"), None).await;

    let started = Instant::now();
    let response = client()
        .post(app.url(&format!("/api/sessions/{session_id}/turns")))
        .header("content-type", "application/json")
        .body(r#"{"text":"hello there"}"#)
        .send()
        .await
        .unwrap();
    let mut turn = Sse::new(response);
    assert_eq!(turn.status, 200);
    let first = turn.next_event(5 * SECOND).await.unwrap();
    let first_at = started.elapsed();
    assert_eq!(first.name(), "turn.started");
    let mut names = vec![first.name().to_string()];
    let rest = turn.rest(10 * SECOND).await;
    let done_at = started.elapsed();
    names.extend(rest.iter().map(|f| f.name().to_string()));
    assert_eq!(names.last().map(String::as_str), Some("done"), "{names:?}");
    assert!(names.iter().filter(|n| *n == "text").count() >= 2, "delta by delta: {names:?}");
    assert!(first_at + Duration::from_millis(500) < done_at, "first event at {first_at:?}, done at {done_at:?}");

    let tools = get(&app, &format!("/api/sessions/{session_id}/tools")).await;
    assert_eq!(tools.status, 200);
    assert_eq!(tools.json()["session_id"], session_id.as_str());
    assert!(!tools.json()["tools"].as_array().unwrap().is_empty());
    let bifrost = get(&app, &format!("/api/sessions/{session_id}/bifrost")).await;
    assert_eq!(bifrost.status, 200, "{}", bifrost.body);
    assert_eq!(bifrost.json()["session_id"], session_id.as_str());

    // Admin events: only this session's (and system.*) arrive.
    let mut mine = 0;
    let deadline = Instant::now() + Duration::from_secs(8);
    while mine == 0 && Instant::now() < deadline {
        let frame = admin_events.next_event(4 * SECOND).await.expect("the firehose is endless");
        assert_eq!(frame.name(), "admin_event");
        let v = frame.json();
        let kind = v["type"].as_str().unwrap();
        assert_ne!(kind, "system.heartbeat");
        if !kind.starts_with("system.") {
            assert_eq!(v["data"]["session_id"], session_id.as_str(), "{v}");
            mine += 1;
        }
    }
    assert!(mine > 0, "no admin event for {session_id}: {:?}", admin_events.raw);
    drop(admin_events);

    // The affect snapshot is emitted 1-8 s after the turn.
    let deadline = Instant::now() + Duration::from_secs(10);
    let snapshot = loop {
        let answer = get(&app, "/api/affect?agent_id=sindra").await;
        if answer.status == 200 {
            break answer.json();
        }
        answer.assert_error(404, "affect_not_found");
        assert!(Instant::now() < deadline, "no affect 10 s after the turn");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(snapshot["agent_id"], "sindra");
    assert!(snapshot["pad"].is_object() && snapshot["emitted_at"].is_string(), "{snapshot}");
    assert!(!app.log().contains(&admin));
}
