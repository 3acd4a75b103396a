//! The Playground API through the real host, the repo's spin.toml
//! and the built playground.wasm, every scenario against a baseline measured
//! in the same run:
//!
//!   cargo run --profile host -p component-tests --bin bench-playground [-- N [traces]]
//!
//! 1. Mint: N (default 1000) sequential `POST /admin/v1/playground/token` with
//!    a tenant admin's bearer session; baseline `GET /admin/v1/auth/me` (the
//!    same component, the same session lookup, nothing written); and the same
//!    mint against a second app whose database file is on tmpfs, to show what
//!    the commits' fsyncs cost.
//! 2. Trace read: `GET /admin/v1/traces/{id}` of traces of 10, 1,000, 10,000
//!    and 100,000 steps (time, time per step, response size, and the peak
//!    linear memory of the playground's instances, read from the host's
//!    per-component gauge). Only the inference path writes
//!    traces, so this bench writes them itself into the SAME SQLite file the
//!    host serves, through the documented table contract
//!    (components/playground/src/schema.rs), after the component created its
//!    schema; the read path measured is the component's own.
//!
//! `-- N traces` runs only the trace reads (and their `/auth/me` baseline);
//! `-- N spin` (with `SPIN_BIN`) only the JSON GET `/auth/me` on the host and
//! under Spin, the two taking turns in rounds, and with
//! `BENCH_BASELINE_MANIFEST=<spin.toml>` a baseline build under Spin too;
//! `BENCH_DECILES=1` adds each scenario's latency deciles on stderr;
//! `BENCH_MANIFEST=<spin.toml>` runs another copy of the app (before/after a change).
//! 3. Search probe: `GET /admin/v1/playground/search` for `gw_acme_main`
//!    (Brave) whose provider is a mock answering a fixed Brave-shaped body,
//!    vs the same request sent to that mock directly.
//!
//! Each scenario runs on its own keep-alive HTTP/1.1 connection, sequentially,
//! after a warm-up. Everything (mock, host, client) is in this process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use ratatoskr_host::runtime_config::{RuntimeConfig, StoreLocation};
use ratatoskr_host::sqlite::{SqlValue, SqliteDatabases};
use serde_json::{json, Value};

const DEMO_PASSWORD: &str = "bench-demo-pw";
const GATEWAY: &str = "gw_acme_main";
/// The demo world's stored Brave key of `gw_acme_main` (components/playground/src/seed.rs).
const BRAVE_KEY: &str = "demo-brave-key-acme-main";
const QUERY: &str = "fjord%20weather";

/// One request, replayed.
#[derive(Clone)]
struct Call {
    method: http::Method,
    path: String,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    expect: u16,
}

impl Call {
    fn get(path: impl Into<String>) -> Call {
        Call { method: http::Method::GET, path: path.into(), headers: Vec::new(), body: Bytes::new(), expect: 200 }
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Call {
        self.headers.push((name, value.into()));
        self
    }
}

struct Stats {
    name: String,
    p50: Duration,
    p99: Duration,
    per_sec: f64,
    bytes: usize,
}

async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

/// `warmup` then `n` sequential requests on one connection; the response size
/// is the last body's.
async fn run(name: impl Into<String>, addr: SocketAddr, call: &Call, warmup: usize, n: usize) -> Stats {
    let name = name.into();
    let mut sender = connect(addr).await;
    let mut once = async || send(&mut sender, addr, call, &name).await.len();
    for _ in 0..warmup {
        once().await;
    }
    let mut latencies = Vec::with_capacity(n);
    let mut bytes = 0;
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        bytes = once().await;
        latencies.push(t.elapsed());
    }
    let total = started.elapsed();
    latencies.sort();
    // `BENCH_DECILES=1`: each scenario's latency deciles (ms) on stderr, to tell a
    // shifted distribution from a tail (e.g. ~40 ms delayed-ACK stalls).
    if std::env::var_os("BENCH_DECILES").is_some() {
        let deciles: Vec<String> =
            (0..10).map(|i| format!("{:.1}", latencies[i * n / 10].as_secs_f64() * 1e3)).collect();
        eprintln!("{name}: deciles ms [{}]", deciles.join(", "));
    }
    Stats {
        name,
        p50: latencies[n / 2],
        p99: latencies[(n * 99 / 100).min(n - 1)],
        per_sec: n as f64 / total.as_secs_f64(),
        bytes,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn brave_body() -> String {
    let results: Vec<Value> = (0..7)
        .map(|i| json!({ "title": format!("Brave {i}"), "url": format!("https://brave.example/{i}"), "description": format!("result {i} about fjord weather") }))
        .collect();
    json!({ "type": "search", "web": { "results": results } }).to_string()
}

const STEP_NAMES: [&str; 6] =
    ["request.received", "prompt.build", "llm.call", "tool.web_search", "tool.result", "llm.stream"];

/// Writes one trace of `steps` steps the way the schema contract says the
/// inference endpoint does (trace row first, then one row per step), in one
/// transaction.
fn write_trace(db: &SqliteDatabases, id: &str, steps: usize) {
    let mut conn = db.connect("default").unwrap();
    let started: i64 = 1_796_000_000_000;
    conn.execute("BEGIN", &[]).unwrap();
    conn.execute(
        "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status) VALUES (?, ?, ?, ?, ?, ?)",
        &[
            SqlValue::Text(id.into()),
            SqlValue::Text(GATEWAY.into()),
            SqlValue::Integer(started),
            SqlValue::Integer(started + steps as i64 * 15),
            SqlValue::Text("ratatoskr-large".into()),
            SqlValue::Text("ok".into()),
        ],
    )
    .unwrap();
    for seq in 0..steps {
        let (name, data) = if seq + 1 == steps {
            ("response.done", json!({ "status": "ok", "finish_reason": "stop" }))
        } else {
            let name = STEP_NAMES[seq % STEP_NAMES.len()];
            let data = match name {
                "llm.call" | "llm.stream" => {
                    json!({ "model": "ratatoskr-large", "output": "A streamed chunk of the answer.", "tokens": 40 + seq })
                }
                "tool.web_search" => json!({ "provider": "brave", "q": "fjord weather" }),
                _ => json!({ "seq": seq }),
            };
            (name, data)
        };
        let at = started + seq as i64 * 15;
        conn.execute(
            "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES (?, ?, ?, ?, ?, ?)",
            &[
                SqlValue::Text(id.into()),
                SqlValue::Integer(seq as i64),
                SqlValue::Text(name.into()),
                SqlValue::Integer(at),
                SqlValue::Integer(at + 12),
                SqlValue::Text(data.to_string()),
            ],
        )
        .unwrap();
    }
    conn.execute("COMMIT", &[]).unwrap();
}

/// p50 of the component's steps query run natively through the host's own
/// SQLite layer (same file, same statement, no component, no HTTP).
fn native_select(db: &SqliteDatabases, id: &str, steps: usize, n: usize) -> Duration {
    let mut conn = db.connect("default").unwrap();
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n + 5 {
        let t = Instant::now();
        let rows = conn
            .execute(
                "SELECT name, started_at, ended_at, data FROM trace_steps WHERE trace_id = ? ORDER BY seq",
                &[SqlValue::Text(id.into())],
            )
            .unwrap()
            .rows;
        if i >= 5 {
            latencies.push(t.elapsed());
        }
        assert_eq!(rows.len(), steps);
    }
    latencies.sort();
    latencies[n / 2]
}

fn table(rows: &[&Stats], with_bytes: bool) {
    if with_bytes {
        println!("| scenario | p50 ms | p99 ms | req/s | response bytes |\n|---|---|---|---|---|");
    } else {
        println!("| scenario | p50 ms | p99 ms | req/s |\n|---|---|---|---|");
    }
    for s in rows {
        if with_bytes {
            println!("| {} | {} | {} | {:.0} | {} |", s.name, ms(s.p50), ms(s.p99), s.per_sec, s.bytes);
        } else {
            println!("| {} | {} | {} | {:.0} |", s.name, ms(s.p50), ms(s.p99), s.per_sec);
        }
    }
    println!();
}

/// The repo's spin.toml with the demo world seeded, Brave redirected to `brave`
/// and the `default` database at `db` (a file: Spin's default, and what the
/// trace rows are written into).
fn playground_options(brave: &MockUpstream, db: StoreLocation) -> TestAppOptions {
    // `BENCH_MANIFEST`: another copy of the app, e.g. one whose playground.wasm is an
    // older build, to compare two builds on the same machine state.
    let manifest = std::env::var_os("BENCH_MANIFEST").map_or_else(|| repo_root().join("spin.toml"), PathBuf::from);
    let mut options = TestAppOptions::new(manifest)
        .variable("seed_demo_data", "true")
        .variable("demo_password", DEMO_PASSWORD)
        .variable("brave_base_url", "http://brave.test/b")
        .variable("brave_origin", "http://brave.test")
        .redirect("brave.test:80", brave);
    options.runtime_config = RuntimeConfig {
        key_value_stores: BTreeMap::from([("default".to_string(), StoreLocation::Memory)]),
        sqlite_databases: BTreeMap::from([("default".to_string(), db)]),
        ..RuntimeConfig::in_memory()
    };
    options
}

/// Signs in as the acme tenant admin (the first request also migrates and
/// seeds the demo world) and returns the session token.
async fn login(app: &TestApp) -> String {
    let login = client()
        .post(app.url("/admin/v1/auth/login"))
        .header("content-type", "application/json")
        .body(json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap();
    cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string()
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().expect("N")).unwrap_or(1000);
    let only_traces = std::env::args().nth(2).as_deref() == Some("traces");
    if std::env::args().nth(2).as_deref() == Some("spin") {
        return json_under_spin(n).await;
    }
    require_wasm("playground.wasm");
    let brave = MockUpstream::start(|_| async { respond(200, "application/json", brave_body()) }).await;
    let dir = std::env::temp_dir().join(format!("ratatoskr-bench-playground-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db_path = dir.join("sqlite_db.db");
    let app = TestApp::start(playground_options(&brave, StoreLocation::File(db_path.clone())))
        .await
        .expect("spin.toml boots with the playground");
    let bearer = format!("Bearer {}", login(&app).await);

    // 1. Mint vs an authenticated trivial route.
    let me = Call::get("/admin/v1/auth/me").header("authorization", bearer.clone());
    let warmup = 100;
    // The sign-in's argon2 hash grew an instance to ~20 MiB: not this route's.
    app.host().take_memory_peak("playground");
    let me_stats = run("GET /auth/me (baseline)", app.addr, &me, warmup, n).await;
    let me_memory = app.host().take_memory_peak("playground").unwrap();
    if !only_traces {
        mint_and_search(&app, &brave, &bearer, &me_stats, n, warmup).await;
    }
    traces(&app, &db_path, &bearer, &me_stats, me_memory).await;
    drop(app);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Scenarios 1 (mint) and 3 (search probe).
async fn mint_and_search(app: &TestApp, brave: &MockUpstream, bearer: &str, me_stats: &Stats, n: usize, warmup: usize) {
    let mint = Call {
        method: http::Method::POST,
        path: "/admin/v1/playground/token".into(),
        headers: vec![("authorization", bearer.to_string()), ("content-type", "application/json".into())],
        body: Bytes::from(json!({ "gateway_id": GATEWAY }).to_string()),
        expect: 200,
    };
    let mint_stats = run("POST /playground/token (mint)", app.addr, &mint, warmup, n).await;
    // The same mint with the database file on tmpfs, where fsync is free: what the
    // commits' durability costs. (Not in memory: Spin's in-memory SQLite is new per open.)
    let shm = tempfile::Builder::new().prefix("ratatoskr-bench-").tempdir_in("/dev/shm").expect("/dev/shm (tmpfs)");
    let mem_app =
        TestApp::start(playground_options(brave, StoreLocation::File(shm.path().join("sqlite_db.db")))).await.unwrap();
    let mem_bearer = format!("Bearer {}", login(&mem_app).await);
    let mem_mint = Call {
        headers: vec![("authorization", mem_bearer), ("content-type", "application/json".into())],
        ..mint.clone()
    };
    let mem_stats = run("POST /playground/token (mint), database on tmpfs", mem_app.addr, &mem_mint, warmup, n).await;
    drop(mem_app);
    println!("### Mint ({n} sequential requests after {warmup} warm-up, tenant admin bearer session)\n");
    table(&[me_stats, &mint_stats, &mem_stats], false);
    println!(
        "- mint: {:.0} mints/s; p50 {:.2}x, p99 {:.2}x the authenticated trivial route (+{} ms p50)\n",
        mint_stats.per_sec,
        mint_stats.p50.as_secs_f64() / me_stats.p50.as_secs_f64(),
        mint_stats.p99.as_secs_f64() / me_stats.p99.as_secs_f64(),
        ms(mint_stats.p50.saturating_sub(me_stats.p50)),
    );
    println!(
        "- on tmpfs: {:.0} mints/s, p50 {:.2}x /auth/me: fsync of the file database's commits is {} ms of the p50\n",
        mem_stats.per_sec,
        mem_stats.p50.as_secs_f64() / me_stats.p50.as_secs_f64(),
        ms(mint_stats.p50.saturating_sub(mem_stats.p50)),
    );

    // 3. Search probe vs the same provider called directly.
    let direct = Call::get(format!("/b/res/v1/web/search?q={QUERY}&count=5"))
        .header("accept", "application/json")
        .header("x-subscription-token", BRAVE_KEY);
    let probe = Call::get(format!("/admin/v1/playground/search?q={QUERY}&gateway_id={GATEWAY}"))
        .header("authorization", bearer);
    let direct_stats = run("fake Brave called directly (baseline)", brave.addr, &direct, warmup, n).await;
    let probe_stats = run("GET /playground/search (probe -> fake Brave)", app.addr, &probe, warmup, n).await;
    let seen = brave.requests();
    let last = seen.last().unwrap();
    assert_eq!(
        last.path_and_query,
        format!("/b/res/v1/web/search?q={QUERY}&count=5"),
        "the probe sent the same request"
    );
    assert_eq!(last.headers["x-subscription-token"], BRAVE_KEY);
    println!("### Search probe ({n} sequential requests after {warmup} warm-up)\n");
    table(&[&direct_stats, me_stats, &probe_stats], false);
    println!(
        "- probe overhead over the direct call: p50 +{} ms, p99 +{} ms; over /auth/me: p50 +{} ms (the outbound call and result mapping)",
        ms(probe_stats.p50.saturating_sub(direct_stats.p50)),
        ms(probe_stats.p99.saturating_sub(direct_stats.p99)),
        ms(probe_stats.p50.saturating_sub(me_stats.p50)),
    );
    println!();
}

/// Scenario 2: trace reads of 10 to 100,000 steps.
async fn traces(app: &TestApp, db_path: &Path, bearer: &str, me_stats: &Stats, me_memory: usize) {
    let db =
        SqliteDatabases::open(&BTreeMap::from([("default".to_string(), StoreLocation::File(db_path.to_path_buf()))]))
            .unwrap();
    let sizes = [10usize, 1_000, 10_000, 100_000];
    let mut trace_stats = Vec::new();
    let mut native = Vec::new();
    let mut memory = Vec::new();
    for steps in sizes {
        // The 100,000-step read is slow before streaming: fewer reads of it.
        let (warmup, reads) = if steps >= 100_000 { (2, 20) } else { (5, 100) };
        let id = format!("trc_bench_{steps}");
        let started = Instant::now();
        write_trace(&db, &id, steps);
        let written = started.elapsed();
        // The read returns every step, decoded.
        let check = client()
            .get(app.url(&format!("/admin/v1/traces/{id}")))
            .header("authorization", bearer)
            .send()
            .await
            .unwrap();
        assert_eq!(check.status(), 200);
        let body: Value = serde_json::from_str(&check.text().await.unwrap()).unwrap();
        assert_eq!(body["trace"]["step_count"], steps);
        assert_eq!(body["steps"].as_array().unwrap().len(), steps);
        eprintln!("wrote {id} in {} ms", written.as_millis());
        let call = Call::get(format!("/admin/v1/traces/{id}")).header("authorization", bearer.to_string());
        app.host().take_memory_peak("playground");
        let name = format!("GET /traces/{{id}}, {steps} steps ({reads} reads)");
        trace_stats.push(run(name, app.addr, &call, warmup, reads).await);
        memory.push(app.host().take_memory_peak("playground").unwrap());
        native.push(native_select(&db, &id, steps, reads));
    }
    println!("### Trace read (sequential reads per trace after a warm-up; p99 = the slowest of 100, or of 20)\n");
    println!("| scenario | p50 ms | p99 ms | req/s | response bytes | us/step (p50) | peak guest memory |");
    println!("|---|---|---|---|---|---|---|");
    let mib = |bytes: usize| format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64);
    println!(
        "| {} | {} | {} | {:.0} | {} | | {} |",
        me_stats.name,
        ms(me_stats.p50),
        ms(me_stats.p99),
        me_stats.per_sec,
        me_stats.bytes,
        mib(me_memory)
    );
    for ((s, steps), peak) in trace_stats.iter().zip(sizes).zip(&memory) {
        println!(
            "| {} | {} | {} | {:.1} | {} | {:.2} | {} |",
            s.name,
            ms(s.p50),
            ms(s.p99),
            s.per_sec,
            s.bytes,
            s.p50.as_secs_f64() * 1e6 / steps as f64,
            mib(*peak)
        );
    }
    println!();
    for ((s, steps), select) in trace_stats.iter().zip(sizes).zip(&native) {
        println!(
            "- {steps} steps: p50 {:.2}x /auth/me, {:.2} us per step ({:.2} us over /auth/me), {:.0} bytes per step; the steps SELECT alone, natively through the host's SQLite layer: p50 {} ms",
            s.p50.as_secs_f64() / me_stats.p50.as_secs_f64(),
            s.p50.as_secs_f64() * 1e6 / steps as f64,
            s.p50.saturating_sub(me_stats.p50).as_secs_f64() * 1e6 / steps as f64,
            s.bytes as f64 / steps as f64,
            ms(*select),
        );
    }
    println!(
        "- peak guest memory: 1,000 steps {}, 100,000 steps {} ({:.2}x); /auth/me {}",
        mib(memory[1]),
        mib(memory[3]),
        memory[3] as f64 / memory[1] as f64,
        mib(me_memory)
    );
    println!();
}

/// The Playground's JSON GET (`/auth/me`, a signed-in tenant admin) on the
/// host, under Spin and (`BENCH_BASELINE_MANIFEST`) a baseline build under
/// Spin, in rounds of n/10 requests taking turns on one keep-alive
/// connection each, with the load average and steal of the rounds.
async fn json_under_spin(n: usize) {
    let bin = spin_bin().expect("`-- N spin` needs SPIN_BIN");
    let brave = MockUpstream::start(|_| async { respond(200, "application/json", brave_body()) }).await;
    let dir = tempfile::tempdir().unwrap();
    let mut runs: Vec<(String, TestApp)> = Vec::new();
    let mut runtimes =
        vec![("host".to_string(), Runtime::Host, None), ("spin 4.0.2".into(), Runtime::Spin(bin.clone()), None)];
    if let Some(manifest) = std::env::var_os("BENCH_BASELINE_MANIFEST") {
        runtimes.push(("spin 4.0.2, baseline build".into(), Runtime::Spin(bin), Some(PathBuf::from(manifest))));
    }
    for (i, (name, runtime, manifest)) in runtimes.into_iter().enumerate() {
        let mut options = playground_options(&brave, StoreLocation::File(dir.path().join(format!("db{i}.db"))));
        if let Some(manifest) = manifest {
            options.manifest = manifest;
        }
        runs.push((name, TestApp::start_on(&runtime, options).await.expect("the playground starts")));
    }
    let mut clients = Vec::new();
    for (name, app) in &runs {
        let bearer = format!("Bearer {}", login(app).await);
        let call = Call::get("/admin/v1/auth/me").header("authorization", bearer);
        clients.push((name.clone(), app.addr, call, connect(app.addr).await, Vec::new()));
    }
    for (name, addr, call, sender, _) in &mut clients {
        for _ in 0..100 {
            send(sender, *addr, call, name).await;
        }
    }
    let (load, steal) = (std::fs::read_to_string("/proc/loadavg").unwrap_or_default(), steal_ms());
    for round in 0..10 {
        let len = clients.len();
        for i in 0..len {
            let (name, addr, call, sender, latencies) = &mut clients[(i + round) % len];
            for _ in 0..n / 10 {
                let t = Instant::now();
                send(sender, *addr, call, name).await;
                latencies.push(t.elapsed());
            }
        }
    }
    let steal = steal.zip(steal_ms()).map_or("n/a".into(), |(a, b)| (b - a).to_string());
    let load_now = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let first = |s: &str| s.split_whitespace().next().unwrap_or("n/a").to_string();
    println!("### The Playground's JSON GET on the host and under Spin ({n} requests each, in 10 rounds)\n");
    println!(
        "load average {} before the rounds, {} after; steal during them {steal} ms\n",
        first(&load),
        first(&load_now)
    );
    println!("| scenario | p50 ms | p99 ms |\n|---|---|---|");
    let mut stats = Vec::new();
    for (name, _, _, _, latencies) in &mut clients {
        latencies.sort();
        let (p50, p99) = (latencies[latencies.len() / 2], latencies[latencies.len() * 99 / 100]);
        println!("| {name}: GET /admin/v1/auth/me | {} | {} |", ms(p50), ms(p99));
        stats.push((name.clone(), p50, p99));
    }
    println!();
    let (_, host_p50, host_p99) = stats[0].clone();
    for (name, p50, p99) in &stats[1..] {
        println!(
            "- {name}: p99 {} ms, {:.2}x the host's p99; p50 {:.2}x the host's (+{} ms)",
            ms(*p99),
            p99.as_secs_f64() / host_p99.as_secs_f64(),
            p50.as_secs_f64() / host_p50.as_secs_f64(),
            ms(p50.saturating_sub(host_p50))
        );
    }
}

/// One request of `call` on `sender`, its status checked (`name` says whose, with
/// the body's start); its body, read to the end.
async fn send(sender: &mut SendRequest<Full<Bytes>>, addr: SocketAddr, call: &Call, name: &str) -> Bytes {
    let mut request =
        http::Request::builder().method(call.method.clone()).uri(&call.path).header("host", addr.to_string());
    for (k, v) in &call.headers {
        request = request.header(*k, v);
    }
    sender.ready().await.unwrap();
    let response = sender.send_request(request.body(Full::new(call.body.clone())).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(status, call.expect, "{name}: {}", String::from_utf8_lossy(&body[..body.len().min(300)]));
    body
}
