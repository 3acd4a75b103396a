//! Server-side alerts (docs/alerts.md) through the real debug-api: a mock
//! upstream turn stream that stalls, errs or drops, and a mock webhook on the
//! host. Under `RATATOSKR_TEST_RUNTIME=spin` the same tests run against real
//! `spin up` (the webhook's origin reaches `allowed_outbound_hosts` through
//! `alert_webhook_origin`), and on the portable lanes against the portable
//! console (`RATATOSKR_ALERT_WEBHOOK_URL`, its own outbound check).

#[path = "../fixtures/debug-support.rs"]
mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use serde_json::{json, Value};
use support::*;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

const WEBHOOK: &str = "webhook.test:80";
/// The webhook URL's path holds a secret, as Slack's do: it must never be logged or echoed.
const HOOK_PATH: &str = "/services/T0/B0/hook-secret-4f1e9a";
const STALL_MS: u64 = 400;
const SECOND: Duration = Duration::from_secs(1);

fn options(keys: &Keys, mock: &MockUpstream, hook: &MockUpstream) -> TestAppOptions {
    app_options(keys)
        .redirect(UPSTREAM, mock)
        .redirect(AFFECT, mock)
        .redirect(WEBHOOK, hook)
        .variable("alert_webhook_url", &format!("http://webhook.test{HOOK_PATH}"))
        .variable("alert_webhook_origin", "http://webhook.test")
        .variable("alert_stall_ms", &STALL_MS.to_string())
}

/// A webhook that answers `status` after `delay`.
async fn webhook(status: u16, delay: Duration) -> MockUpstream {
    MockUpstream::start(move |_| async move {
        tokio::time::sleep(delay).await;
        respond(status, "text/plain", "ok")
    })
    .await
}

/// The alert POSTs the webhook has received, as JSON bodies.
fn alerts(hook: &MockUpstream) -> Vec<Value> {
    hook.requests()
        .iter()
        .map(|r| {
            assert_eq!((r.method.as_str(), r.path_and_query.as_str()), ("POST", HOOK_PATH));
            assert_eq!(r.headers["content-type"], "application/json");
            serde_json::from_slice(&r.body).unwrap()
        })
        .collect()
}

/// Waits until the webhook has `n` alerts (at most `within`).
async fn wait_for_alerts(hook: &MockUpstream, n: usize, within: Duration) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let got = alerts(hook);
        if got.len() >= n || Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A turn on session s_1 (agent sindra) and its upstream's sender.
async fn turn(
    app: &TestApp,
    senders: &mut UnboundedReceiver<UnboundedSender<Bytes>>,
    text: &str,
) -> (Sse, UnboundedSender<Bytes>) {
    let body = json!({ "text": text, "agent_id": "sindra" }).to_string();
    let response = client()
        .post(app.url("/api/sessions/s_1/turns"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let upstream = next_sender(senders).await;
    let sse = Sse::new(response);
    assert_eq!(sse.status, 200);
    (sse, upstream)
}

fn kinds(alerts: &[Value]) -> Vec<&str> {
    alerts.iter().map(|a| a["alert"]["kind"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stall_then_an_error_is_one_alert_each_with_the_documented_body() {
    let keys = Keys::random();
    let (mock, mut senders) = sse_mock(200).await;
    let hook = webhook(200, Duration::ZERO).await;
    let app = start(options(&keys, &mock, &hook)).await;
    let (mut sse, upstream) = turn(&app, &mut senders, "what is my secret plan?").await;
    push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n");
    assert_eq!(sse.next_event(2 * SECOND).await.unwrap().name(), "turn.started");
    // The upstream goes quiet: the stall alert leaves while the turn is still open.
    let stalled = wait_for_alerts(&hook, 1, 5 * SECOND).await;
    assert_eq!(kinds(&stalled), ["stall"]);
    let a = &stalled[0]["alert"];
    assert_eq!(
        (&a["format"], &a["version"], &a["session_id"], &a["agent_id"], &a["turn_id"]),
        (&json!("ratatoskr-alert"), &json!(1), &json!("s_1"), &json!("sindra"), &json!("t_1"))
    );
    let silent = a["durations"]["silent_ms"].as_u64().unwrap();
    assert!(silent >= STALL_MS && a["durations"]["stall_threshold_ms"] == STALL_MS, "{a}");
    let text = stalled[0]["text"].as_str().unwrap();
    assert!(text.starts_with("[ratatoskr] turn t_1 (session s_1, agent sindra) stalled"), "{text}");
    // Another silence of the same turn is no second stall alert.
    // ("z": no key starts with it, so the relay holds none of it back)
    push(&upstream, "event: text\ndata: {\"delta\":\"z\"}\n\n");
    assert_eq!(sse.next_event(2 * SECOND).await.unwrap().json()["delta"], "z");
    tokio::time::sleep(Duration::from_millis(3 * STALL_MS)).await;
    assert_eq!(alerts(&hook).len(), 1, "one stall alert per turn");
    push(&upstream, "event: error\ndata: {\"code\":\"model_overloaded\",\"message\":\"secret plan failed\"}\n\n");
    let rest = sse.rest(2 * SECOND).await;
    assert_eq!(rest.iter().map(Frame::name).collect::<Vec<_>>(), ["error"]);
    let all = wait_for_alerts(&hook, 2, 5 * SECOND).await;
    assert_eq!(kinds(&all), ["stall", "error"]);
    assert_eq!(all[1]["alert"]["error_code"], "model_overloaded");
    // No user text, no error message, no key, without alert_include_text.
    for body in hook.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()) {
        for never in ["secret plan", keys.admin.as_str(), keys.consumer.as_str(), "hook-secret"] {
            assert!(!body.contains(never), "{never:?} in {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_turn_is_one_dropped_alert_and_a_done_turn_none() {
    let (mock, mut senders) = sse_mock(200).await;
    let hook = webhook(200, Duration::ZERO).await;
    let app = start(options(&Keys::random(), &mock, &hook)).await;
    let (mut sse, upstream) = turn(&app, &mut senders, "hi").await;
    push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_2\"}\n\nevent: text\ndata: {\"delta\":\"par\"}\n\n");
    drop(upstream);
    let frames = sse.rest(3 * SECOND).await;
    assert_eq!(frames.last().unwrap().json()["code"], "upstream_stream_dropped");
    let got = wait_for_alerts(&hook, 1, 5 * SECOND).await;
    assert_eq!(kinds(&got), ["dropped"]);
    assert_eq!(got[0]["alert"]["turn_id"], "t_2");
    // A turn that ends well, quickly, sends nothing.
    let (mut sse, upstream) = turn(&app, &mut senders, "again").await;
    push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_3\"}\n\nevent: done\ndata: {\"turn_id\":\"t_3\"}\n\n");
    sse.rest(2 * SECOND).await;
    tokio::time::sleep(Duration::from_millis(2 * STALL_MS)).await;
    assert_eq!(alerts(&hook).len(), 1, "done is no alert, and an ended turn cannot stall");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_or_failing_webhook_never_delays_or_breaks_the_relayed_turn() {
    let logged = !not_on_jco(
        "jco serve ends a request's worker once its response is complete: a POST still out then is sent but its \
         answer is not waited for, so its failure is not logged",
    );
    for (status, delay, why) in [
        (200, Duration::from_secs(20), "the webhook did not answer in time"),
        (500, Duration::ZERO, "the webhook answered 500"),
    ] {
        let (mock, mut senders) = sse_mock(200).await;
        let hook = webhook(status, delay).await;
        let app = start(options(&Keys::random(), &mock, &hook)).await;
        let (mut sse, upstream) = turn(&app, &mut senders, "hi").await;
        push(&upstream, "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n");
        sse.next_event(2 * SECOND).await.unwrap();
        assert_eq!(kinds(&wait_for_alerts(&hook, 1, 5 * SECOND).await), ["stall"]);
        // With the stall's POST out (hanging, or refused), every event still goes through at once.
        for delta in ["x", "y", "z"] {
            let sent = Instant::now();
            push(&upstream, &format!("event: text\ndata: {{\"delta\":\"{delta}\"}}\n\n"));
            assert_eq!(sse.next_event(2 * SECOND).await.unwrap().json()["delta"], delta);
            assert!(sent.elapsed() < Duration::from_millis(800), "{why}: {:?}", sent.elapsed());
        }
        // The error alert's POST is out too when the turn ends: the browser's stream ends at once.
        let sent = Instant::now();
        push(&upstream, "event: error\ndata: {\"code\":\"x\"}\n\n");
        assert_eq!(sse.rest(3 * SECOND).await.len(), 1);
        assert!(sent.elapsed() < Duration::from_millis(800), "{why}: the end took {:?}", sent.elapsed());
        assert_eq!(kinds(&wait_for_alerts(&hook, 2, 5 * SECOND).await), ["stall", "error"], "no retry");
        assert_eq!(hook.requests().len(), 2, "{why}: never retried");
        if !logged {
            continue;
        }
        // Each failure is one line, without the URL (its path is a secret) or a header value.
        // (Spin writes component output both to its log files and its own output: lines are counted once.)
        let lines = |log: &str| -> std::collections::BTreeSet<String> {
            log.lines().filter_map(|l| l.find("alert webhook:").map(|at| l[at..].to_string())).collect()
        };
        let deadline = Instant::now() + 5 * SECOND;
        while lines(&app.log()).len() < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let log = app.log();
        let expected: std::collections::BTreeSet<String> = ["stall", "error"]
            .iter()
            .map(|kind| format!("alert webhook: the {kind} alert was not delivered: {why} (not retried)"))
            .collect();
        assert_eq!(lines(&log), expected, "{log}");
        if Runtime::selected() == Runtime::Host {
            assert_eq!(log.matches("alert webhook:").count(), 2, "one line per failure: {log}");
        }
        assert!(!log.contains("hook-secret") && !log.contains("webhook.test"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_alert_include_text_the_body_carries_the_redacted_text() {
    let keys = Keys::random();
    let (mock, mut senders) = sse_mock(200).await;
    let hook = webhook(200, Duration::ZERO).await;
    let app = start(options(&keys, &mock, &hook).variable("alert_include_text", "true")).await;
    let text = format!("please use {} now", keys.admin);
    let (mut sse, upstream) = turn(&app, &mut senders, &text).await;
    push(&upstream, &format!("event: error\ndata: {{\"code\":\"bad\",\"message\":\"echo {}\"}}\n\n", keys.consumer));
    sse.rest(2 * SECOND).await;
    let got = wait_for_alerts(&hook, 1, 5 * SECOND).await;
    let a = &got[0]["alert"];
    assert_eq!(
        (&a["user_text"], &a["error_message"]),
        (&json!("please use [redacted] now"), &json!("echo [redacted]"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_webhook_url_nothing_is_sent() {
    let (mock, mut senders) = sse_mock(200).await;
    let hook = webhook(200, Duration::ZERO).await;
    let options = options(&Keys::random(), &mock, &hook).variable("alert_webhook_url", "");
    let app = start(options).await;
    let (mut sse, upstream) = turn(&app, &mut senders, "hi").await;
    tokio::time::sleep(Duration::from_millis(2 * STALL_MS)).await;
    drop(upstream);
    sse.rest(3 * SECOND).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(hook.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_agent_id_is_refused_before_any_upstream_call() {
    let (mock, _senders) = sse_mock(200).await;
    let hook = webhook(200, Duration::ZERO).await;
    let app = start(options(&Keys::random(), &mock, &hook)).await;
    for agent in [json!("../x"), json!(7), json!("a".repeat(65))] {
        let body = json!({ "text": "hi", "agent_id": agent }).to_string();
        post_json(&app, "/api/sessions/s_1/turns", &body).await.assert_error(400, "invalid_agent_id");
    }
    assert!(mock.requests().is_empty() && hook.requests().is_empty());
}
