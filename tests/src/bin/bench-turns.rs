//! A turn stream through the debug-api with server-side alerts on (a webhook
//! set: every event goes through the alert rules and the pump carries the
//! stall timer beside the stream) against the same app with alerts off, and
//! the upstream read directly, alternating in every round:
//!
//!   cargo run --profile host -p component-tests --bin bench-turns [-- rounds]
//!
//! Each reading is one turn of 100,000 `text` deltas sent as fast as the
//! connection takes them; the figure is deltas/s from the request to `done`.
//! Everything (mock upstream, webhook, host, client) runs in this process on
//! loopback; the client bypasses the tests' OpenAPI conformance proxy.

use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use futures::StreamExt;

const DELTAS: usize = 100_000;
const CONSUMER_KEY: &str = "bench-consumer-key-0123456789";

/// Each turn request: `turn.started`, the deltas in 64 KiB writes, `done`.
async fn upstream() -> MockUpstream {
    MockUpstream::start(|_| async {
        let (tx, response) = streaming(200, "text/event-stream");
        tokio::spawn(async move {
            let mut chunk = String::from("event: turn.started\ndata: {\"turn_id\":\"t_bench\"}\n\n");
            for _ in 0..DELTAS {
                chunk.push_str("event: text\ndata: {\"delta\":\"word \"}\n\n");
                if chunk.len() > 64 * 1024 {
                    if tx.send(Bytes::from(std::mem::take(&mut chunk))).is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            }
            chunk.push_str("event: done\ndata: {\"turn_id\":\"t_bench\"}\n\n");
            let _ = tx.send(Bytes::from(chunk));
        });
        response
    })
    .await
}

async fn app(mock: &MockUpstream, hook: Option<&MockUpstream>) -> TestApp {
    let mut options = TestAppOptions::new(repo_root().join("spin.toml"))
        .variable("upstream_url", "http://upstream.test")
        .variable("upstream_origin", "http://upstream.test")
        .variable("bifrost_consumer_key", CONSUMER_KEY)
        .redirect("upstream.test:80", mock);
    if let Some(hook) = hook {
        options = options
            .variable("alert_webhook_url", "http://webhook.test/hook")
            .variable("alert_webhook_origin", "http://webhook.test")
            .variable("alert_stall_ms", "60000")
            .redirect("webhook.test:80", hook);
    }
    TestApp::start(options).await.unwrap()
}

/// Deltas/s of one turn read from `url` (to its `done`).
async fn turn(url: &str) -> f64 {
    let started = Instant::now();
    let response = bench_client()
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {CONSUMER_KEY}"))
        .body(r#"{"text":"go"}"#)
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let (mut parser, mut items, mut deltas) = (sse::Parser::new(), Vec::new(), 0);
    'read: while let Some(chunk) = body.next().await {
        parser.feed(&chunk.unwrap(), &mut items).unwrap();
        for item in items.drain(..) {
            if let sse::Item::Event(e) = item {
                match e.event.as_str() {
                    "text" => deltas += 1,
                    "done" => break 'read,
                    "error" => panic!("{url}: error {}", e.data),
                    _ => {}
                }
            }
        }
    }
    assert_eq!(deltas, DELTAS, "{url}: every delta");
    DELTAS as f64 / started.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|r| r.parse().ok()).unwrap_or(7);
    require_wasm("debug_api.wasm");
    let mock = upstream().await;
    let hook = MockUpstream::start(|_| async { respond(200, "text/plain", "ok") }).await;
    let off = app(&mock, None).await;
    let on = app(&mock, Some(&hook)).await;
    let path = "/api/sessions/s_bench/turns";
    let direct = format!("http://{}/v1/sessions/s_bench/turns", mock.addr);
    let (off_url, on_url) = (off.url(path), on.url(path));
    // A warm-up turn each: compiled, instantiated, connections open.
    for url in [&direct, &off_url, &on_url] {
        turn(url).await;
    }
    println!("| round | direct deltas/s | alerts off deltas/s | alerts on deltas/s | on / off |");
    println!("|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        // The two apps' order alternates, so neither always runs second.
        let direct_rate = turn(&direct).await;
        let (off_rate, on_rate) = if round % 2 == 0 {
            let on_rate = turn(&on_url).await;
            (turn(&off_url).await, on_rate)
        } else {
            let off_rate = turn(&off_url).await;
            (off_rate, turn(&on_url).await)
        };
        ratios.push(on_rate / off_rate);
        println!("| {round} | {direct_rate:.0} | {off_rate:.0} | {on_rate:.0} | {:.3} |", on_rate / off_rate);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!("\nalerts on / off: median {:.3} (range {lo:.3}-{hi:.3}) over {rounds} rounds", median(ratios));
    assert!(hook.requests().is_empty(), "no turn stalled, erred or dropped: nothing was POSTed");
}
