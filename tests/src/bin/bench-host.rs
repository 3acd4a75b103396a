//! Per-request cost on loopback, on the repo's host and (when `SPIN_BIN` names a
//! spin binary) on real Spin, every scenario in one run:
//!
//!   cargo run --profile host -p component-tests --bin bench-host [-- N]
//!
//! Each scenario is one keep-alive connection sending N (default 3000)
//! sequential requests after 200 warm-up requests. The scenarios take turns in
//! rounds of N/10 requests, so machine noise falls on all of them alike, and
//! every ratio compares numbers measured side by side. The static scenarios
//! serve a generated 32 KB index.html, precompressed as the build does.
//!
//! The portable console joins the proxied-GET scenarios on wasmtime serve
//! (`WASMTIME_BIN`) and on jco serve (the pinned jco in tests/runtimes) when
//! they are at hand; jco serve starts a worker per request, so it sends a
//! twentieth of the requests of the others in each round.
//!
//! `BENCH_BASELINE_WASM=<dir>` (with a spin binary) adds a second Spin app in
//! the same run whose components are the `.wasm` files in `<dir>` (a build
//! from before a change), so the change is measured against it side by side.
//! The run prints the machine's load average and the hypervisor's steal
//! during the measured rounds.
//!
//! With `wrk` on PATH and a spin binary, it then measures the runtime floor the
//! way the runtime-floor figures in docs/benchmarks/runs.md were taken: `wrk -t1 -c2` on the trivial
//! component, host and Spin alternating for WRK_ROUNDS rounds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

const ROUNDS: usize = 10;

struct Scenario {
    name: String,
    addr: SocketAddr,
    path: String,
    headers: Vec<(&'static str, String)>,
    expect: u16,
    sender: SendRequest<Empty<Bytes>>,
    latencies: Vec<Duration>,
    busy: Duration,
    /// Sends 1/share of each round's and the warm-up's requests.
    share: usize,
}

impl Scenario {
    async fn new(
        name: impl Into<String>,
        addr: SocketAddr,
        path: &str,
        headers: Vec<(&'static str, String)>,
        expect: u16,
    ) -> Self {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        Scenario {
            name: name.into(),
            addr,
            path: path.to_string(),
            headers,
            expect,
            sender,
            latencies: Vec::new(),
            busy: Duration::ZERO,
            share: 1,
        }
    }

    fn share(mut self, share: usize) -> Self {
        self.share = share;
        self
    }

    async fn once(&mut self) -> Duration {
        let started = Instant::now();
        let mut request = http::Request::get(&self.path).header("host", self.addr.to_string());
        for (k, v) in &self.headers {
            request = request.header(*k, v);
        }
        self.sender.ready().await.unwrap();
        let response = self.sender.send_request(request.body(Empty::new()).unwrap()).await.unwrap();
        assert_eq!(response.status().as_u16(), self.expect, "{}", self.name);
        response.into_body().collect().await.unwrap();
        started.elapsed()
    }

    async fn batch(&mut self, n: usize) {
        for _ in 0..n {
            let took = self.once().await;
            self.latencies.push(took);
            self.busy += took;
        }
    }

    fn p(&self, q: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
    }

    fn per_sec(&self) -> f64 {
        self.latencies.len() as f64 / self.busy.as_secs_f64()
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// The five scenarios of one runtime serving the bench site.
async fn scenarios(runtime: &str, app: &TestApp, upstream: &MockUpstream) -> Vec<Scenario> {
    // The ETag the 304 scenario revalidates with: the brotli variant's.
    let probe = client().get(app.url("/")).header("accept-encoding", "br").send().await.unwrap();
    assert_eq!(probe.headers()["content-encoding"], "br", "{runtime}: no precompressed variant served");
    let etag = probe.headers()["etag"].to_str().unwrap().to_string();
    let br = || vec![("accept-encoding", "br".to_string())];
    vec![
        Scenario::new(format!("{runtime}: trivial component (probe /var)"), app.addr, TRIVIAL, vec![], 404).await,
        // The least a guest does to proxy a small answer: one outbound GET,
        // its whole body answered at once (streamed, the probe's `/fetch` would
        // send the head and body in two writes, which Nagle holds ~40 ms under Spin).
        Scenario::new(
            format!("{runtime}: proxied GET (probe /fetch-whole -> upstream)"),
            app.addr,
            &format!("/probe/fetch-whole?http://{}/", upstream.addr),
            vec![],
            200,
        )
        .await,
        Scenario::new(
            format!("{runtime}: console GET /api/sessions/s_1/tools (debug-api -> upstream)"),
            app.addr,
            "/api/sessions/s_1/tools",
            vec![],
            200,
        )
        .await,
        Scenario::new(format!("{runtime}: static GET / (brotli)"), app.addr, "/", br(), 200).await,
        Scenario::new(
            format!("{runtime}: static GET / If-None-Match (304)"),
            app.addr,
            "/",
            vec![("accept-encoding", "br".to_string()), ("if-none-match", etag)],
            304,
        )
        .await,
    ]
}

#[tokio::main]
async fn main() {
    let arg = std::env::args().nth(1);
    require_wasm("static_files.wasm");
    require_wasm("probe.wasm");
    require_wasm("debug_api.wasm");
    // A tool inventory for the console's route (the probe takes any body).
    let inventory = r#"{"session_id":"s_1","agent_id":"sindra","tools":[{"name":"web_search","description":"Searches the web.","input_schema":{"type":"object"}}]}"#;
    let upstream = MockUpstream::start(move |_| async move { respond(200, "application/json", inventory) }).await;
    let site = bench_site(&|name| require_wasm(name));
    let options = || {
        TestAppOptions::new(site.join("spin.toml"))
            .variable("upstream_origin", &format!("http://{}", upstream.addr))
            .variable("upstream_url", &format!("http://{}", upstream.addr))
    };
    let host = TestApp::start_on(&Runtime::Host, options()).await.unwrap();
    // `-- profile [PATH]`: only wrk on the host (the trivial component, or PATH
    // asked for with `accept-encoding: br`), for `perf record`.
    if arg.as_deref() == Some("profile") {
        let (path, header) = match std::env::args().nth(2) {
            Some(path) => (path, Some("accept-encoding: br")),
            None => (TRIVIAL.to_string(), None),
        };
        let (rate, p50) = tokio::task::block_in_place(|| wrk(&host, &path, header)).expect("wrk on PATH");
        println!("host: {rate:.0} req/s, p50 {p50:.2} ms");
        return;
    }
    let n: usize = arg.map(|s| s.parse().expect("N")).unwrap_or(3000);
    let spin = match spin_bin() {
        Some(bin) => Some(TestApp::start_on(&Runtime::Spin(bin), options()).await.unwrap()),
        None => {
            eprintln!("SPIN_BIN is not set: measuring the repo's host only");
            None
        }
    };

    let baseline = match (spin_bin(), std::env::var_os("BENCH_BASELINE_WASM")) {
        (Some(bin), Some(dir)) => {
            let dir = std::path::PathBuf::from(dir);
            let site = bench_site(&|name| dir.join(name));
            let options = TestAppOptions::new(site.join("spin.toml"))
                .variable("upstream_origin", &format!("http://{}", upstream.addr))
                .variable("upstream_url", &format!("http://{}", upstream.addr));
            Some(TestApp::start_on(&Runtime::Spin(bin), options).await.unwrap())
        }
        _ => None,
    };

    // The same host with `[outbound_http] connection_pooling = false`: a new
    // upstream connection per request, the host's behaviour before it pooled.
    let mut unpooled = options();
    unpooled.runtime_config.connection_pooling = false;
    let unpooled = TestApp::start_on(&Runtime::Host, unpooled).await.unwrap();

    let mut all = vec![Scenario::new("upstream hit directly (baseline)", upstream.addr, "/", vec![], 200).await];
    all.extend(scenarios("host", &host, &upstream).await);
    if let Some(spin) = &spin {
        all.extend(scenarios("spin 4.0.2", spin, &upstream).await);
    }
    all.push(
        Scenario::new(
            "host, pooling off: console GET /api/sessions/s_1/tools",
            unpooled.addr,
            "/api/sessions/s_1/tools",
            vec![],
            200,
        )
        .await,
    );
    // The portable console's tools GET on the other WASI runtimes at hand.
    let mut portable = Vec::new();
    for (runtime, bin, share) in [
        ("wasmtime serve", portable::wasmtime_bin().map(Runtime::WasmtimeServe), 1),
        ("jco serve", portable::jco_bin().map(Runtime::Jco), 20),
    ] {
        let Some(runtime_bin) = bin else {
            eprintln!("{runtime} is not at hand: not measured (WASMTIME_BIN; npm ci in tests/runtimes)");
            continue;
        };
        let app = TestApp::start_on(&runtime_bin, options()).await.unwrap();
        let name = format!("{runtime}: portable console GET /api/sessions/s_1/tools");
        all.push(Scenario::new(name, app.addr, "/api/sessions/s_1/tools", vec![], 200).await.share(share));
        portable.push(app);
    }
    if let Some(app) = &baseline {
        all.extend(scenarios("spin 4.0.2, baseline build", app, &upstream).await);
    }
    for s in &mut all {
        for _ in 0..200 / s.share {
            s.once().await;
        }
    }
    let (load, steal) = (load_average(), steal_ms());
    for round in 0..ROUNDS {
        // Rotate who goes first, so no scenario always follows the same neighbour.
        let len = all.len();
        for i in 0..len {
            let share = all[(i + round) % len].share;
            all[(i + round) % len].batch(n / ROUNDS / share).await;
        }
    }

    let steal = steal.zip(steal_ms()).map_or("n/a".into(), |(a, b)| (b - a).to_string());
    println!("load average {load} before the rounds, {} after; steal during them {steal} ms", load_average());
    println!();
    println!("| scenario | p50 ms | p99 ms | req/s |");
    println!("|---|---|---|---|");
    for s in &all {
        println!("| {} | {} | {} | {:.0} |", s.name, ms(s.p(0.5)), ms(s.p(0.99)), s.per_sec());
    }
    println!();
    let direct = &all[0];
    let report = |label: &str, set: &[Scenario]| {
        let [trivial, proxied, tools, br, revalidate] = set else { unreachable!() };
        println!(
            "- {label}: proxied GET adds p50 {} ms over the direct upstream hit (target <= 1 ms)",
            ms(proxied.p(0.5).saturating_sub(direct.p(0.5)))
        );
        println!(
            "- {label}: the console's tools GET adds p50 {} ms over the direct upstream hit (target <= 0.3 ms on the host); {:.2}x the direct p50",
            ms(tools.p(0.5).saturating_sub(direct.p(0.5))),
            tools.p(0.5).as_secs_f64() / direct.p(0.5).as_secs_f64()
        );
        // What a runtime adds to any answer (the trivial component over the
        // direct hit) and what the console adds on top of that floor.
        println!(
            "- {label}: the runtime's floor, the trivial component, adds p50 {} ms over the direct upstream hit; the console's tools GET adds p50 {} ms over that floor",
            ms(trivial.p(0.5).saturating_sub(direct.p(0.5))),
            ms(tools.p(0.5).saturating_sub(trivial.p(0.5)))
        );
        println!(
            "- {label}: brotli GET at {:.0}% of the trivial-component rate (target >= 70%)",
            100.0 * br.per_sec() / trivial.per_sec()
        );
        println!(
            "- {label}: 304 at {:.0}% of the trivial-component rate (target >= 80%)",
            100.0 * revalidate.per_sec() / trivial.per_sec()
        );
    };
    report("host", &all[1..6]);
    let added = |s: &Scenario| s.p(0.5).saturating_sub(direct.p(0.5));
    let unpooled_tools = all.iter().find(|s| s.name.starts_with("host, pooling off")).expect("pushed above");
    println!(
        "- host: the console's tools GET adds p50 {} ms with pooling off; pooled / unpooled added p50 = {:.2}",
        ms(added(unpooled_tools)),
        added(&all[3]).as_secs_f64() / added(unpooled_tools).as_secs_f64()
    );
    if spin.is_some() {
        report("spin 4.0.2", &all[6..11]);
        for i in 0..5 {
            println!(
                "- {}: host at {:.2}x the rate of spin 4.0.2",
                all[1 + i].name.trim_start_matches("host: "),
                all[1 + i].per_sec() / all[6 + i].per_sec()
            );
        }
    }
    // The same route, the console's tools GET, on every runtime measured.
    for s in all.iter().filter(|s| s.name.contains("/api/sessions/s_1/tools") && !s.name.starts_with("host:")) {
        println!(
            "- {}: adds p50 {} ms over the direct upstream hit; p50 {:.2}x the host's, rate {:.2} of the host's",
            s.name,
            ms(added(s)),
            s.p(0.5).as_secs_f64() / all[3].p(0.5).as_secs_f64(),
            s.per_sec() / all[3].per_sec()
        );
    }
    // Under Spin, the small answers' tails against the direct hit's, and against
    // the baseline build's in the same run.
    let direct_p99 = direct.p(0.99).as_secs_f64();
    for s in all.iter().filter(|s| s.name.starts_with("spin 4.0.2") && !s.name.contains("trivial")) {
        println!(
            "- {}: p99 {} ms ({:.1}x the direct hit's p99), added p50 {} ms",
            s.name,
            ms(s.p(0.99)),
            s.p(0.99).as_secs_f64() / direct_p99,
            ms(added(s))
        );
    }
    if baseline.is_some() {
        let by = |name: &str| all.iter().find(|s| s.name == name).expect("measured");
        for route in [
            "console GET /api/sessions/s_1/tools (debug-api -> upstream)",
            "proxied GET (probe /fetch-whole -> upstream)",
        ] {
            let (this, before) =
                (by(&format!("spin 4.0.2: {route}")), by(&format!("spin 4.0.2, baseline build: {route}")));
            println!(
                "- spin 4.0.2, {route}: this build / baseline build: p99 {:.3}, p50 {:.3}",
                this.p(0.99).as_secs_f64() / before.p(0.99).as_secs_f64(),
                this.p(0.5).as_secs_f64() / before.p(0.5).as_secs_f64()
            );
        }
    }
    if let Some(spin) = &spin {
        wrk_floor(&host, spin);
    }
}

/// The 1-minute load average, as /proc/loadavg has it.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("n/a").to_string()
}

const WRK_ROUNDS: usize = 3;

const TRIVIAL: &str = "/probe/var?x";

/// `wrk -t1 -c2 -d3s --latency` on `path`, with one extra request header if
/// given: (req/s, p50 ms).
fn wrk(app: &TestApp, path: &str, header: Option<&str>) -> Option<(f64, f64)> {
    let out = std::process::Command::new("wrk")
        .args(["-t1", "-c2", "-d3s", "--latency"])
        .args(header.into_iter().flat_map(|h| ["-H", h]))
        .arg(app.url(path))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|v| v.split_whitespace().next().map(str::to_owned))
    };
    let rate: f64 = field("Requests/sec:")?.parse().ok()?;
    let p50 = field("50%")?;
    let p50_ms = match (p50.strip_suffix("us"), p50.strip_suffix("ms")) {
        (Some(us), _) => us.parse::<f64>().ok()? / 1e3,
        (_, Some(ms)) => ms.parse().ok()?,
        _ => p50.strip_suffix('s')?.parse::<f64>().ok()? * 1e3,
    };
    Some((rate, p50_ms))
}

fn wrk_floor(host: &TestApp, spin: &TestApp) {
    if wrk(host, TRIVIAL, None).is_none() {
        eprintln!("wrk is not on PATH: skipping the wrk floor (apt-get install wrk)");
        return;
    }
    println!();
    println!("wrk -t1 -c2 -d3s on the trivial component (probe /var), alternating:");
    println!();
    println!("| round | host req/s | host p50 ms | spin 4.0.2 req/s | spin p50 ms | host / spin |");
    println!("|---|---|---|---|---|---|");
    for round in 1..=WRK_ROUNDS {
        let (Some((h, hp)), Some((s, sp))) = (wrk(host, TRIVIAL, None), wrk(spin, TRIVIAL, None)) else { return };
        println!("| {round} | {h:.0} | {hp:.2} | {s:.0} | {sp:.2} | {:.2}x |", h / s);
    }
}

/// A temp app: the static component over a 32 KB page, the probe, and the
/// console's debug-api against the mock upstream; `wasm` names each
/// component's file.
fn bench_site(wasm: &dyn Fn(&str) -> std::path::PathBuf) -> std::path::PathBuf {
    static SITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let site = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ratatoskr-bench-{}-{site}", std::process::id()));
    let static_dir = dir.join("static");
    std::fs::create_dir_all(&static_dir).unwrap();
    let mut page = String::from(
        "<!doctype html><html><head><title>bench</title><style>body{font:14px sans-serif}</style></head><body>\n",
    );
    let mut i = 0;
    while page.len() < 32 * 1024 - 200 {
        page.push_str(&format!(
            "<div class=\"row\" id=\"r{i}\"><span>session s_{i:08x}</span> <em>turn t_{:08x}</em></div>\n",
            i * 7919
        ));
        i += 1;
    }
    page.push_str("<script>document.title = 'bench';</script></body></html>\n");
    std::fs::write(static_dir.join("index.html"), page).unwrap();
    static_core::precompress::precompress_dir(&static_dir, &dir.join("precompressed")).unwrap();
    let wasm = |name: &str| wasm(name).display().to_string();
    let manifest = format!(
        r#"spin_manifest_version = 2
[application]
name = "host-bench"
[variables]
upstream_origin = {{ required = true }}
upstream_url = {{ required = true }}
[[trigger.http]]
route = "/..."
component = "static-files"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[component.static-files]
source = "{static_wasm}"
files = [{{ source = "static", destination = "/site" }}, {{ source = "precompressed", destination = "/precompressed" }}]
[component.static-files.variables]
allowed_hosts = ""
[component.probe]
source = "{probe_wasm}"
allowed_outbound_hosts = ["{{{{ upstream_origin }}}}"]
[[trigger.http]]
route = "/api/..."
component = "debug-api"
[component.debug-api]
source = "{debug_api_wasm}"
allowed_outbound_hosts = ["{{{{ upstream_origin }}}}"]
[component.debug-api.variables]
upstream_url = "{{{{ upstream_url }}}}"
affect_read_url = "{{{{ upstream_url }}}}/affect"
consumer_key = "bench-consumer-key"
admin_key = ""
end_user_id = "operator"
bifrost_visible_host = "bifrost.local"
upstream_timeout_ms = "10000"
sse_keepalive_ms = "15000"
"#,
        static_wasm = wasm("static_files.wasm"),
        // The probe is the bench's fixture, not the build under test: always this one.
        probe_wasm = require_wasm("probe.wasm").display(),
        debug_api_wasm = wasm("debug_api.wasm"),
    );
    std::fs::write(dir.join("spin.toml"), manifest).unwrap();
    dir
}
