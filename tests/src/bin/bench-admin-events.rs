//! The admin-events proxy under load, against the same upstream read directly,
//! in one run:
//!
//!   cargo run --profile host -p component-tests --bin bench-admin-events
//!
//! 1. Added latency per event at 1,000 events/s (p50/p99 of send->receive,
//!    through /api/admin/events vs reading the mock upstream directly), five
//!    runs, the two readers taking turns within each run.
//! 2. Sustained events/s through one proxied stream (upstream as fast as it
//!    can), three rounds alternating with the direct read.
//! 3. Memory: host RSS growth per open admin stream, 200 streams held open.
//!
//! `-- versus <spin.toml> [rounds]`: only (2), this app against another copy
//! (e.g. one whose debug_api.wasm is built at an older commit), the two and
//! the direct read alternating in every round, with the ratio new / baseline.
//!
//! `-- runtimes [rounds]`: only (2), through every runtime at hand in one run:
//! the Spin app on the repo's host and (with `SPIN_BIN`) under Spin, and the
//! portable console on wasmtime serve (`WASMTIME_BIN`) and on jco serve (the
//! pinned jco in tests/runtimes), all and the direct read alternating in every
//! round, with each one's ratio to the host and to the direct read. On the
//! host and Spin the same stream also goes through a guest that only copies
//! it (the probe's `/fetch`): the ceiling of any filter's ratio there. With
//! `BENCH_BASELINE_MANIFEST=<spin.toml>`, another copy of the app (a baseline
//! build) joins the rounds on the host and under Spin, with this / baseline.
//!
//! Each latency run also reports the hypervisor's steal during it: on a shared
//! VM that, not the proxy, is what moves a p99 by milliseconds.
//!
//! Everything (mock upstream, host, client) runs in this process on loopback.
//! The client bypasses the tests' OpenAPI conformance proxy (`bench_client`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use futures::StreamExt;
use ratatoskr_host::testing::MockBody;

const ADMIN_KEY: &str = "bench-admin-key-0123456789";

fn frame(id: u64) -> String {
    format!(
        "id: {id}\nevent: turn.started\ndata: {{\"session_id\":\"s_bench\",\"turn_id\":\"t_{id:08x}\",\"timestamp\":\"2026-12-02T10:00:00Z\",\"agent_id\":\"sindra\",\"model\":\"sim-large\"}}\n\n"
    )
}

/// What the mock does for each admin-stream request.
#[derive(Clone)]
enum Script {
    /// `n` events at `per_sec`, recording each send time by id.
    Paced { n: u64, per_sec: u64, sent: Arc<Mutex<Vec<Option<Instant>>>> },
    /// `n` events as fast as the connection takes them (64 KiB writes).
    Flood { n: u64 },
    /// Nothing, forever (memory test).
    Quiet,
}

async fn upstream(script: Arc<Mutex<Script>>) -> MockUpstream {
    MockUpstream::start(move |_| {
        let script = script.lock().unwrap().clone();
        async move {
            let (tx, response) = streaming(200, "text/event-stream");
            tokio::spawn(async move {
                match script {
                    Script::Paced { n, per_sec, sent } => {
                        let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / per_sec));
                        for id in 0..n {
                            tick.tick().await;
                            sent.lock().unwrap()[id as usize] = Some(Instant::now());
                            if tx.send(Bytes::from(frame(id))).is_err() {
                                return;
                            }
                        }
                    }
                    Script::Flood { n } => {
                        let mut chunk = String::new();
                        for id in 0..n {
                            chunk.push_str(&frame(id));
                            if chunk.len() > 64 * 1024 {
                                if tx.send(Bytes::from(std::mem::take(&mut chunk))).is_err() {
                                    return;
                                }
                                tokio::task::yield_now().await;
                            }
                        }
                        let _ = tx.send(Bytes::from(chunk));
                    }
                    Script::Quiet => {
                        std::future::pending::<()>().await;
                        drop(tx);
                    }
                }
                // Keep the stream open a moment so the proxy sees events, not a drop.
                tokio::time::sleep(Duration::from_millis(200)).await;
            });
            let response: http::Response<MockBody> = response;
            response
        }
    })
    .await
}

/// Reads `n` events from `url`, calling `on_event(id, received_at)`; with
/// `to_end`, then the rest of the body until the server ends it (jco serve
/// keeps a stream's worker while its client is gone: see docs/runtimes.md).
async fn read_events(url: &str, n: u64, admin: bool, to_end: bool, mut on_event: impl FnMut(u64, Instant)) {
    let mut request = bench_client().get(url);
    if admin {
        request = request.header("authorization", format!("Bearer {ADMIN_KEY}"));
    }
    let mut body = request.send().await.unwrap().bytes_stream();
    let mut parser = sse::Parser::new();
    let mut items = Vec::new();
    let mut seen = 0;
    while seen < n {
        let Some(chunk) = body.next().await else { break };
        let now = Instant::now();
        parser.feed(&chunk.unwrap(), &mut items).unwrap();
        for item in items.drain(..) {
            if let sse::Item::Event(e) = item {
                if e.event == "stream_error" {
                    panic!("stream_error: {}", e.data);
                }
                if let Some(id) = e.id.as_deref().and_then(|i| i.parse().ok()) {
                    on_event(id, now);
                    seen += 1;
                }
            }
        }
    }
    assert_eq!(seen, n, "{url}: stream ended early");
    if to_end {
        let rest = async { while body.next().await.is_some() {} };
        let _ = tokio::time::timeout(Duration::from_secs(5), rest).await;
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Steal since `before` (a `steal_ms()` reading), for a table cell.
fn steal_since(before: Option<u64>) -> String {
    before.zip(steal_ms()).map_or("n/a".into(), |(a, b)| (b - a).to_string())
}

/// Send->receive time of each of `n` events paced at 1,000/s.
async fn latency(url: &str, admin: bool, script: &Arc<Mutex<Script>>, n: u64) -> Vec<Duration> {
    let sent = Arc::new(Mutex::new(vec![None; n as usize]));
    *script.lock().unwrap() = Script::Paced { n, per_sec: 1000, sent: sent.clone() };
    let mut latencies = Vec::with_capacity(n as usize);
    read_events(url, n, admin, false, |id, at| {
        let sent_at = sent.lock().unwrap()[id as usize].expect("received before sent");
        latencies.push(at - sent_at);
    })
    .await;
    latencies
}

fn p50_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (percentile(&samples, 50), percentile(&samples, 99))
}

async fn throughput(url: &str, admin: bool, script: &Arc<Mutex<Script>>, n: u64) -> f64 {
    throughput_then(url, admin, script, n, false).await
}

/// [`throughput`], then the body read to its end when `to_end` (untimed).
async fn throughput_then(url: &str, admin: bool, script: &Arc<Mutex<Script>>, n: u64, to_end: bool) -> f64 {
    *script.lock().unwrap() = Script::Flood { n };
    let started = Instant::now();
    let mut last = started;
    read_events(url, n, admin, to_end, |_, at| last = at).await;
    n as f64 / (last - started).as_secs_f64()
}

fn app_options(manifest: std::path::PathBuf, mock: &MockUpstream) -> TestAppOptions {
    TestAppOptions::new(manifest)
        .variable("upstream_url", "http://upstream.test")
        .variable("upstream_origin", "http://upstream.test")
        .variable("admin_key", ADMIN_KEY)
        .redirect("upstream.test:80", mock)
}

async fn start_app(manifest: std::path::PathBuf, mock: &MockUpstream) -> TestApp {
    TestApp::start(app_options(manifest, mock)).await.unwrap()
}

/// One stream's throughput through every runtime at hand, alternating with
/// the direct read in every round (the order of the runtimes rotates).
async fn runtimes(rounds: usize, direct: &str, script: &Arc<Mutex<Script>>, mock: &MockUpstream) {
    let manifest = || repo_root().join("spin.toml");
    let mut at_hand = vec![("host (Spin app)", Runtime::Host)];
    at_hand.extend(spin_bin().map(|bin| ("spin 4.0.2 (Spin app)", Runtime::Spin(bin))));
    at_hand.extend(portable::wasmtime_bin().map(|bin| ("wasmtime serve (portable)", Runtime::WasmtimeServe(bin))));
    at_hand.extend(portable::jco_bin().map(|bin| ("jco serve (portable)", Runtime::Jco(bin))));
    let baseline = std::env::var_os("BENCH_BASELINE_MANIFEST").map(std::path::PathBuf::from);
    let mut apps = Vec::new();
    let ceiling = ceiling_site();
    for (name, runtime) in at_hand {
        let spin_app = matches!(runtime, Runtime::Host | Runtime::Spin(_));
        let builds = std::iter::once((name.to_string(), manifest()))
            .chain(baseline.clone().filter(|_| spin_app).map(|b| (format!("{name}, baseline build"), b)));
        for (name, manifest) in builds {
            let app = TestApp::start_on(&runtime, app_options(manifest, mock)).await.unwrap();
            let url = app.url("/api/admin/events?session_id=s_bench");
            throughput_then(&url, false, script, 200, true).await;
            apps.push(Reader { name, _app: app, url, rates: Vec::new(), upstream_form: false });
        }
        // The same stream through a guest that only copies it, on the same
        // runtime: what any filter's ratio to the direct read is bounded by.
        if spin_app {
            let origin = format!("http://{}", mock.addr);
            let options = TestAppOptions::new(ceiling.join("spin.toml")).variable("origin", &origin);
            let app = TestApp::start_on(&runtime, options).await.unwrap();
            let url = app.url(&format!("/probe/fetch?{origin}/v1/admin/events"));
            throughput_then(&url, true, script, 200, true).await;
            let name = format!("{name}: copying guest (probe /fetch)");
            apps.push(Reader { name, _app: app, url, rates: Vec::new(), upstream_form: true });
        }
    }
    let flood = 100_000;
    println!("### Sustained throughput of one admin stream on every runtime ({flood} events per reading)\n");
    let names: Vec<&str> = apps.iter().map(|r| r.name.as_str()).collect();
    println!(
        "| round | direct events/s | {} |\n|---|---|{}",
        names.join(" events/s | ") + " events/s",
        "---|".repeat(names.len())
    );
    let mut direct_rates = Vec::new();
    let stolen_before = steal_ms();
    for round in 0..rounds {
        let direct_rate = throughput(direct, true, script, flood).await;
        direct_rates.push(direct_rate);
        let len = apps.len();
        for i in 0..len {
            let reader = &mut apps[(i + round) % len];
            let rate = throughput_then(&reader.url, reader.upstream_form, script, flood, true).await;
            reader.rates.push(rate);
        }
        let cells: Vec<String> = apps.iter().map(|r| format!("{:.0}", r.rates[round])).collect();
        println!("| {} | {direct_rate:.0} | {} |", round + 1, cells.join(" | "));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("\nsteal during the rounds: {} ms", steal_since(stolen_before));
    println!();
    let host = apps[0].rates.clone();
    for Reader { name, rates, .. } in &apps {
        let to_host = median(rates.iter().zip(&host).map(|(r, h)| r / h).collect());
        let to_direct = median(rates.iter().zip(&direct_rates).map(|(r, d)| r / d).collect());
        println!(
            "- {name}: median {:.0} events/s; {to_host:.3} of the host's, {to_direct:.3} of the direct read (medians of the per-round ratios)",
            median(rates.clone())
        );
    }
    for this in &apps {
        let Some(base) = apps.iter().find(|b| b.name == format!("{}, baseline build", this.name)) else { continue };
        let ratios: Vec<f64> = this.rates.iter().zip(&base.rates).map(|(t, b)| t / b).collect();
        println!("- {}: this build / baseline build, median of the per-round ratios {:.3}", this.name, median(ratios));
    }
}

/// One stream read in every round of [`runtimes`].
struct Reader {
    name: String,
    /// Kept running for the rounds.
    _app: TestApp,
    url: String,
    rates: Vec<f64>,
    /// The upstream's own frames (a copying guest), not the console's.
    upstream_form: bool,
}

/// A temp app of the probe alone, whose `/probe/fetch` streams an upstream
/// body to the client untouched (it may reach the `origin` variable).
fn ceiling_site() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ratatoskr-bench-ceiling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = format!(
        r#"spin_manifest_version = 2
[application]
name = "copying-guest"
[variables]
origin = {{ required = true }}
[[trigger.http]]
route = "/probe/..."
component = "probe"
[component.probe]
source = "{}"
allowed_outbound_hosts = ["{{{{ origin }}}}"]
"#,
        require_wasm("probe.wasm").display()
    );
    std::fs::write(dir.join("spin.toml"), manifest).unwrap();
    dir
}

/// Throughput of this app against a baseline copy, alternating in each round.
async fn versus(
    baseline: &str,
    rounds: usize,
    direct: &str,
    proxied: &str,
    script: &Arc<Mutex<Script>>,
    mock: &MockUpstream,
) {
    let other = start_app(baseline.into(), mock).await;
    let base = other.url("/api/admin/events?session_id=s_bench");
    latency(&base, false, script, 200).await;
    let flood = 200_000;
    println!("### Sustained throughput, this build against {baseline} ({flood} events per reading)\n");
    println!("| round | direct events/s | this build events/s | baseline events/s | this / baseline |\n|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        let direct_rate = throughput(direct, true, script, flood).await;
        // The order of the two builds alternates too.
        let (new_rate, base_rate) = if round % 2 == 1 {
            let n = throughput(proxied, false, script, flood).await;
            (n, throughput(&base, false, script, flood).await)
        } else {
            let b = throughput(&base, false, script, flood).await;
            (throughput(proxied, false, script, flood).await, b)
        };
        ratios.push(new_rate / base_rate);
        println!("| {round} | {direct_rate:.0} | {new_rate:.0} | {base_rate:.0} | {:.3} |", new_rate / base_rate);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "\n- this / baseline: median {:.3}, min {:.3}, max {:.3}\n",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1]
    );
}

#[tokio::main]
async fn main() {
    require_wasm("debug_api.wasm");
    let script = Arc::new(Mutex::new(Script::Quiet));
    let mock = upstream(script.clone()).await;
    // `BENCH_MANIFEST=<spin.toml>`: another copy of the app (e.g. one whose
    // debug_api.wasm keeps its names, for `perf report`).
    let manifest = std::env::var_os("BENCH_MANIFEST").map_or_else(|| repo_root().join("spin.toml"), Into::into);
    let app = start_app(manifest, &mock).await;
    let direct = format!("http://{}/v1/admin/events", mock.addr);
    let proxied = app.url("/api/admin/events?session_id=s_bench");

    // Warm-up: compile caches, connection paths.
    latency(&proxied, false, &script, 200).await;

    // `-- profile N`: only N events through the proxy, for `perf record`
    // (RATATOSKR_WASM_PROFILE=perfmap names the guest's functions).
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("profile-latency") {
        let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(5_000);
        let stolen_before = steal_ms();
        let (p50, p99) = p50_p99(latency(&proxied, false, &script, n).await);
        let stolen = steal_since(stolen_before);
        println!("proxied at 1,000 events/s: p50 {} ms, p99 {} ms ({n} events), steal {stolen} ms", ms(p50), ms(p99));
        return;
    }
    if let (Some("versus"), Some(baseline)) = (args.get(1).map(String::as_str), args.get(2)) {
        let rounds = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(7);
        return versus(baseline, rounds, &direct, &proxied, &script, &mock).await;
    }
    if args.get(1).map(String::as_str) == Some("runtimes") {
        let rounds = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(5);
        return runtimes(rounds, &direct, &script, &mock).await;
    }
    if args.get(1).map(String::as_str) == Some("profile") {
        let n = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
        let rate = throughput(&proxied, false, &script, n).await;
        println!("proxied: {rate:.0} events/s ({n} events)");
        return;
    }

    // Latency: five runs; in each, the direct and the proxied reader take
    // turns in blocks of 500 events, so machine noise hits both paths alike.
    let (runs, blocks, block) = (5, 2, 500);
    println!(
        "### Per-event latency at 1,000 events/s ({runs} runs, each {blocks}x{block} events per path, interleaved)\n"
    );
    println!(
        "| run | direct p50 / p99 ms | proxied p50 / p99 ms | added p50 / p99 ms | steal ms |\n|---|---|---|---|---|"
    );
    let mut met = 0;
    for run in 1..=runs {
        let stolen_before = steal_ms();
        let (mut direct_samples, mut proxied_samples) = (Vec::new(), Vec::new());
        for _ in 0..blocks {
            direct_samples.extend(latency(&direct, true, &script, block).await);
            proxied_samples.extend(latency(&proxied, false, &script, block).await);
        }
        let ((d50, d99), (p50, p99)) = (p50_p99(direct_samples), p50_p99(proxied_samples));
        let (a50, a99) = (p50.saturating_sub(d50), p99.saturating_sub(d99));
        met += usize::from(a99 <= Duration::from_micros(300) && a50 <= Duration::from_micros(100));
        let stolen = steal_since(stolen_before);
        println!(
            "| {run} | {} / {} | {} / {} | {} / {} | {stolen} |",
            ms(d50),
            ms(d99),
            ms(p50),
            ms(p99),
            ms(a50),
            ms(a99)
        );
    }
    println!("\n- runs with added p99 <= 0.3 ms and added p50 <= 0.1 ms: {met} of {runs}\n");

    // Throughput: three rounds, direct and proxied alternating.
    let flood = 200_000;
    println!("### Sustained throughput, one stream ({flood} events per reading)\n");
    println!("| round | direct events/s | proxied events/s | proxied / direct |\n|---|---|---|---|");
    for round in 1..=3 {
        let direct_rate = throughput(&direct, true, &script, flood).await;
        let proxied_rate = throughput(&proxied, false, &script, flood).await;
        println!("| {round} | {direct_rate:.0} | {proxied_rate:.0} | {:.2} |", proxied_rate / direct_rate);
    }
    println!("\n- target: >= 250,000 events/s proxied and >= 0.20 of direct\n");

    *script.lock().unwrap() = Script::Quiet;
    let streams = 200;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib();
    let mut open = Vec::new();
    for _ in 0..streams {
        let response = bench_client().get(&proxied).send().await.unwrap();
        assert_eq!(response.status(), 200);
        open.push(response);
    }
    // Every stream has reached the upstream (each holds one mock connection).
    assert!(mock.wait_for_open_connections(streams, Duration::from_secs(20)).await.is_some());
    let after = rss_kib();
    println!("### Memory, {streams} concurrently open admin streams\n");
    println!(
        "- process RSS {} MiB -> {} MiB: {:.0} KiB per open stream (host instance + its upstream connection + the client's)\n",
        before / 1024,
        after / 1024,
        (after.saturating_sub(before)) as f64 / streams as f64
    );
    drop(open);
    // A guest learns its client left at its next write: with the upstream quiet
    // that is the keepalive (`sse_keepalive_ms`, 15 s by default), as in Spin.
    let closed = mock.wait_for_open_connections(0, Duration::from_secs(20)).await;
    println!(
        "- all {streams} upstream connections closed {} after the clients left (quiet upstream: at the next keepalive)",
        closed.map(|d| format!("{} ms", d.as_millis())).unwrap_or("NOT within 20 s".into())
    );
}
