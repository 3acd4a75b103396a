//! Per-request cost of the host on loopback, every scenario in one run so the
//! ratios hold on a noisy machine:
//!
//!   cargo run --profile host -p component-tests --bin bench-host [-- N]
//!
//! Each scenario: 200 warm-up requests, then N (default 3000) sequential
//! requests on one keep-alive connection; p50/p99 latency and requests/s.
//! The static scenarios serve a generated 32 KB index.html (the size the
//! spin-fileserver comparison was measured at), precompressed as the build does.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

struct Stats {
    name: &'static str,
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

async fn connect(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

async fn run(
    name: &'static str,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    expect_status: u16,
    n: usize,
) -> Stats {
    let mut sender = connect(addr).await;
    let once = async |sender: &mut SendRequest<Empty<Bytes>>| {
        let mut request = http::Request::get(path).header("host", addr.to_string());
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        sender.ready().await.unwrap();
        let response = sender.send_request(request.body(Empty::new()).unwrap()).await.unwrap();
        assert_eq!(response.status().as_u16(), expect_status, "{name}");
        response.into_body().collect().await.unwrap();
    };
    for _ in 0..200 {
        once(&mut sender).await;
    }
    let mut latencies = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        once(&mut sender).await;
        latencies.push(t.elapsed());
    }
    let total = started.elapsed();
    latencies.sort();
    Stats {
        name,
        p50: latencies[n / 2],
        p99: latencies[n * 99 / 100],
        per_sec: n as f64 / total.as_secs_f64(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().expect("N")).unwrap_or(3000);
    require_wasm("static_files.wasm");
    require_wasm("probe.wasm");
    let upstream = MockUpstream::start(|_| async { respond(200, "text/plain", "ok") }).await;
    let site = bench_site();
    let app = TestApp::start(TestAppOptions::new(site.join("spin.toml")).redirect("upstream.test:80", &upstream))
        .await
        .unwrap();

    // The ETag the 304 scenario revalidates with: the brotli variant's.
    let probe = client()
        .get(app.url("/"))
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();
    assert_eq!(probe.headers()["content-encoding"], "br", "run scripts/test.sh first: no precompressed variant");
    let etag = probe.headers()["etag"].to_str().unwrap().to_string();

    let direct = run("upstream hit directly (baseline)", upstream.addr, "/", &[], 200, n).await;
    let trivial = run("trivial component (probe /var)", app.addr, "/probe/var?x", &[], 404, n).await;
    let proxied = run("proxied GET (probe /fetch -> upstream)", app.addr, "/probe/fetch?http://upstream.test/", &[], 200, n).await;
    let static_br = run("static GET / (brotli)", app.addr, "/", &[("accept-encoding", "br")], 200, n).await;
    let revalidate = run("static GET / If-None-Match (304)", app.addr, "/", &[("accept-encoding", "br"), ("if-none-match", &etag)], 304, n).await;

    println!("| scenario | p50 ms | p99 ms | req/s |");
    println!("|---|---|---|---|");
    for s in [&direct, &trivial, &proxied, &static_br, &revalidate] {
        println!("| {} | {} | {} | {:.0} |", s.name, ms(s.p50), ms(s.p99), s.per_sec);
    }
    println!();
    let added = proxied.p50.saturating_sub(direct.p50);
    println!("- proxied GET adds p50 {} ms over the direct upstream hit (target <= 1 ms)", ms(added));
    println!(
        "- brotli GET of index.html: {:.0}% of the trivial-component rate (target >= 40%)",
        100.0 * static_br.per_sec / trivial.per_sec
    );
    println!(
        "- 304 revalidation: {:.0}% of the trivial-component rate (target >= 60%)",
        100.0 * revalidate.per_sec / trivial.per_sec
    );
}

/// A temp app: the static component over a 32 KB page, and the probe.
fn bench_site() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ratatoskr-bench-{}", std::process::id()));
    let static_dir = dir.join("static");
    std::fs::create_dir_all(&static_dir).unwrap();
    let mut page = String::from("<!doctype html><html><head><title>bench</title><style>body{font:14px sans-serif}</style></head><body>\n");
    let mut i = 0;
    while page.len() < 32 * 1024 - 200 {
        page.push_str(&format!("<div class=\"row\" id=\"r{i}\"><span>session s_{i:08x}</span> <em>turn t_{:08x}</em></div>\n", i * 7919));
        i += 1;
    }
    page.push_str("<script>document.title = 'bench';</script></body></html>\n");
    std::fs::write(static_dir.join("index.html"), page).unwrap();
    static_core::precompress::precompress_dir(&static_dir, &dir.join("precompressed")).unwrap();
    let wasm = |name: &str| require_wasm(name).display().to_string();
    let manifest = format!(
        r#"spin_manifest_version = 2
[application]
name = "host-bench"
[[trigger.http]]
route = "/..."
component = "static-files"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[component.static-files]
source = "{static_wasm}"
files = [{{ source = "static", destination = "/site" }}, {{ source = "precompressed", destination = "/precompressed" }}]
[component.probe]
source = "{probe_wasm}"
allowed_outbound_hosts = ["http://upstream.test"]
"#,
        static_wasm = wasm("static_files.wasm"),
        probe_wasm = wasm("probe.wasm"),
    );
    std::fs::write(dir.join("spin.toml"), manifest).unwrap();
    dir
}
