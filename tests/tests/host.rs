//! The host runs spin.toml as Spin does: proven through the real probe .wasm.

use std::time::{Duration, Instant};

use bytes::Bytes;
use component_tests::*;
use futures::StreamExt;
use ratatoskr_host::{App, AppOptions, LogSink};

const SECRET: &str = "canary-secret-value-7f3a";

async fn probe_app(upstream: Option<&MockUpstream>) -> TestApp {
    require_wasm("probe.wasm");
    let mut options = TestAppOptions::new(fixture("probe.toml")).variable("secret_key", SECRET);
    if let Some(mock) = upstream {
        // The mock's real address, allowed by name: the same on the host and under Spin.
        options = options.variable("upstream_host", &mock.addr.to_string());
    }
    TestApp::start(options).await.expect("probe app starts")
}

async fn get_json(url: &str) -> serde_json::Value {
    let response = client().get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.json_value().await
}

trait JsonValue {
    async fn json_value(self) -> serde_json::Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> serde_json::Value {
        serde_json::from_slice(&self.bytes().await.unwrap()).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn routes_follow_spin_precedence_through_real_components() {
    let app = probe_app(None).await;
    let route_of = |h: &serde_json::Value| h["spin-component-route"].as_str().unwrap().to_string();

    let probe = get_json(&app.url("/probe/headers")).await;
    assert_eq!(route_of(&probe), "/probe");
    // The longer wildcard prefix wins over /probe/...
    let deeper = get_json(&app.url("/probe/deeper/headers")).await;
    assert_eq!(route_of(&deeper), "/probe/deeper");
    assert_eq!(deeper["spin-path-info"], "/headers");
    // An exact route matches itself only.
    let exact = client().get(app.url("/exact")).send().await.unwrap();
    assert_eq!(exact.status(), 404, "the probe answers 404 for an empty path-info, but it was reached");
    assert_eq!(exact.text().await.unwrap(), "unknown probe");
    let below_exact = client().get(app.url("/exact/more")).send().await.unwrap();
    assert_eq!(below_exact.status(), 404);
    assert_eq!(below_exact.text().await.unwrap(), "", "no component matched: Spin's bare 404");
    // `:id` captures one segment.
    let users = get_json(&app.url("/users/42/headers")).await;
    assert_eq!(users["spin-path-match-id"], "42");
    assert_eq!(users["spin-path-info"], "/headers");
    // A private component has no route at all.
    assert_eq!(client().get(app.url("/hidden/headers")).send().await.unwrap().status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn spin_headers_are_appended_after_the_clients_own_copies() {
    let app = probe_app(None).await;
    let response = client()
        .get(app.url("/probe/headers?x=1&y=2"))
        .header("spin-path-info", "/forged")
        .header("spin-client-addr", "6.6.6.6:1")
        .send()
        .await
        .unwrap();
    let h = response.json_value().await;
    assert_eq!(h["spin-full-url"], format!("http://{}/probe/headers?x=1&y=2", app.addr));
    assert_eq!(h["spin-path-info"], "/headers");
    assert_eq!(h["spin-matched-route"], "/probe/...");
    assert_eq!(h["spin-raw-component-route"], "/probe/...");
    assert_eq!(h["spin-component-route"], "/probe");
    assert_eq!(h["spin-base-path"], "/");
    let client_addr = h["spin-client-addr"].as_str().unwrap();
    assert!(client_addr.starts_with("127.0.0.1:"), "{client_addr}");
    // As Spin 4.0.2: the client's copy stays, first; Spin's value is the last.
    let values = client()
        .get(app.url("/probe/header-values?spin-path-info"))
        .header("spin-path-info", "/forged")
        .send()
        .await
        .unwrap()
        .json_value()
        .await;
    assert_eq!(values, serde_json::json!(["/forged", "/header-values"]));
    // Spin's own answers: health, app info, and a bare 404 for anything else reserved.
    let health = client().get(app.url("/.well-known/spin/health")).send().await.unwrap();
    assert_eq!((health.status().as_u16(), health.text().await.unwrap()), (200, "OK".to_string()));
    let info = get_json(&app.url("/.well-known/spin/info")).await;
    assert_eq!(info, serde_json::json!({ "name": "host-probe" }));
    let other = client().get(app.url("/.well-known/spin/other")).send().await.unwrap();
    assert_eq!((other.status().as_u16(), other.text().await.unwrap()), (404, String::new()));
}

#[tokio::test(flavor = "multi_thread")]
async fn variables_resolve_from_templates_and_stay_scoped() {
    let app = probe_app(None).await;
    let text = |path: &'static str| {
        let url = app.url(path);
        async move {
            let r = client().get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(text("/probe/var?message").await, (200, "hello, world".to_string()));
    assert_eq!(text("/probe/var?key").await, (200, SECRET.to_string()));
    // App variables are not visible unless the component declares them.
    let (status, body) = text("/probe/var?greeting").await;
    assert_eq!(status, 404);
    assert!(body.contains("Undefined"), "{body}");
    let (_, body) = text("/probe/var?Not-Valid").await;
    assert!(body.contains("InvalidName"), "{body}");
    // A component that declares nothing sees nothing.
    let (status, _) = text("/probe/deeper/var?message").await;
    assert_eq!(status, 404);

    let overridden = TestApp::start(
        TestAppOptions::new(fixture("probe.toml")).variable("secret_key", "s").variable("greeting", "hej"),
    )
    .await
    .unwrap();
    let body = client().get(overridden.url("/probe/var?message")).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "hej, world");
}

#[test]
fn a_required_variable_without_value_stops_start_up_naming_it() {
    require_wasm("probe.wasm");
    let err = App::load(AppOptions {
        manifest: fixture("probe.toml"),
        runtime_config: ratatoskr_host::runtime_config::RuntimeConfig::in_memory(),
        variables: Default::default(),
        redirects: Default::default(),
        log: LogSink::memory(),
        files: Default::default(),
    })
    .err()
    .expect("load must fail")
    .to_string();
    assert!(err.contains("'secret_key'") && err.contains("SPIN_VARIABLE_SECRET_KEY"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn files_are_mounted_read_only_and_nothing_else_is_visible() {
    let app = probe_app(None).await;
    let fetch = |q: &str| {
        let url = app.url(&format!("/probe/file?{q}"));
        async move {
            let r = client().get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(fetch("/data/hello.txt").await, (200, "hello from a mounted file\n".to_string()));
    for outside in
        ["/etc/passwd", "/data/../probe.toml", "/data/%2e%2e/probe.toml", "../Cargo.toml", "/proc/self/environ"]
    {
        let (status, _) = fetch(outside).await;
        assert_eq!(status, 404, "{outside} must not be readable");
    }
    // A component without `files` sees no filesystem at all.
    let r = client().get(app.url("/probe/deeper/file?/data/hello.txt")).send().await.unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn key_value_persists_across_instances_and_labels_are_checked() {
    let app = probe_app(None).await;
    let get = |q: &str| {
        let url = app.url(&format!("/probe/kv?{q}"));
        async move { client().get(url).send().await.unwrap().text().await.unwrap() }
    };
    assert_eq!(get("get&color").await, "<none>");
    assert_eq!(get("set&color&teal").await, "ok");
    assert_eq!(get("get&color").await, "teal", "a fresh instance sees the stored value");
    assert!(get("open&other").await.contains("AccessDenied"), "undeclared label is access-denied");
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_runs_parameterised_statements_and_checks_labels() {
    let app = probe_app(None).await;
    let sql = |q: &str| {
        let url = app.url(&format!("/probe/sqlite?{q}"));
        async move {
            let r = client().get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(sql("default&CREATE%20TABLE%20t%20(name%20TEXT)").await.0, 200);
    let evil = "x%27);%20DROP%20TABLE%20t;--";
    assert_eq!(sql(&format!("default&INSERT%20INTO%20t%20VALUES%20(?)&{evil}")).await.0, 200);
    let (status, body) = sql("default&SELECT%20name%20FROM%20t").await;
    assert_eq!(status, 200);
    assert!(body.contains("DROP TABLE t"), "the parameter was stored as text: {body}");
    // A fresh instance sees the same database.
    let (_, count) = sql("default&SELECT%20count(*)%20FROM%20t").await;
    assert!(count.contains("Integer(1)"), "{count}");
    let (status, body) = sql("other&SELECT%201").await;
    assert_eq!(status, 500);
    assert!(body.contains("AccessDenied"), "{body}");
    // The deeper component lists no database at all.
    let r = client().get(app.url("/probe/deeper/sqlite?default&SELECT%201")).send().await.unwrap();
    assert!(r.text().await.unwrap().contains("AccessDenied"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tests_can_move_the_guests_wall_clock() {
    if host_only("moves the host's clock") {
        return;
    }
    let app = probe_app(None).await;
    let now = || async {
        client().get(app.url("/probe/now")).send().await.unwrap().text().await.unwrap().parse::<u64>().unwrap()
    };
    let before = now().await;
    app.host().clock().advance(Duration::from_secs(1801));
    let after = now().await;
    assert!((1801..1805).contains(&(after - before)), "{before} -> {after}");
}

#[tokio::test(flavor = "multi_thread")]
async fn outbound_requests_obey_the_allow_list() {
    let mock = MockUpstream::start(|_| async { respond(200, "text/plain", "from upstream") }).await;
    let other = MockUpstream::start(|_| async { respond(200, "text/plain", "from elsewhere") }).await;
    let app = probe_app(Some(&mock)).await;

    let allowed = client().get(app.url(&format!("/probe/fetch?http://{}/data", mock.addr))).send().await.unwrap();
    assert_eq!(allowed.status(), 200);
    assert_eq!(allowed.text().await.unwrap(), "from upstream");
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.requests()[0].path_and_query, "/data");
    assert_eq!(mock.requests()[0].headers["host"], mock.addr.to_string(), "Host keeps the name the guest used");
    // The benches' floor for a proxied answer: the same, answered whole.
    let whole = client().get(app.url(&format!("/probe/fetch-whole?http://{}/w", mock.addr))).send().await.unwrap();
    assert_eq!((whole.status().as_u16(), whole.text().await.unwrap()), (200, "from upstream".to_string()));
    assert_eq!(mock.requests()[1].path_and_query, "/w");

    // The same host on another port is another origin: refused before any byte leaves.
    let denied = client().get(app.url(&format!("/probe/fetch?http://{}/data", other.addr))).send().await.unwrap();
    assert_eq!(denied.status(), 502);
    assert!(denied.text().await.unwrap().contains("HttpRequestDenied"));
    assert!(other.requests().is_empty(), "denied requests never reached the network");
    if !host_only("reads the host's log line for the refusal") {
        assert!(app.log().contains("denied: not in allowed_outbound_hosts"));
    }
}

/// Five proxied GETs, one after another; what the upstream saw.
async fn five_fetches(app: &TestApp, mock: &MockUpstream) {
    for i in 0..5 {
        let r = client().get(app.url(&format!("/probe/fetch?http://{}/n/{i}", mock.addr))).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "pong");
    }
    let paths: Vec<_> = mock.requests().into_iter().map(|r| r.path_and_query).collect();
    assert_eq!(paths, ["/n/0", "/n/1", "/n/2", "/n/3", "/n/4"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_connections_are_kept_alive_between_requests_as_in_spin() {
    let mock = MockUpstream::start(|_| async { respond(200, "text/plain", "pong") }).await;
    let app = probe_app(Some(&mock)).await;
    five_fetches(&app, &mock).await;
    assert_eq!(mock.accepted_connections(), 1, "each request reused the first connection");

    // A body the guest stops reading mid-stream closes its connection: the
    // next request must not inherit a half-read response.
    let (sender, streamed) = streaming(200, "text/event-stream");
    let streamed = std::sync::Mutex::new(Some(streamed));
    let stream_mock = MockUpstream::start(move |r| {
        let response = match r.path_and_query.as_str() {
            "/events" => streamed.lock().unwrap().take().expect("one stream"),
            _ => respond(200, "text/plain", "after"),
        };
        async move { response }
    })
    .await;
    let app = probe_app(Some(&stream_mock)).await;
    let mut body = client()
        .get(app.url(&format!("/probe/fetch?http://{}/events", stream_mock.addr)))
        .send()
        .await
        .unwrap()
        .bytes_stream();
    sender.send(Bytes::from_static(b": one\n\n")).unwrap();
    body.next().await.unwrap().unwrap();
    drop(body);
    // The guest notices at its first write after the host saw the client
    // leave, then lets go of the upstream body mid-stream.
    let mut closed = false;
    for _ in 0..50 {
        sender.send(Bytes::from_static(b": more\n\n")).unwrap();
        if stream_mock.wait_for_open_connections(0, Duration::from_millis(100)).await.is_some() {
            closed = true;
            break;
        }
    }
    assert!(closed, "the half-read connection stayed open");
    let after = client().get(app.url(&format!("/probe/fetch?http://{}/after", stream_mock.addr))).send().await.unwrap();
    assert_eq!(after.text().await.unwrap(), "after");
    assert_eq!(stream_mock.accepted_connections(), 2, "a new connection after the abandoned stream");
}

#[tokio::test(flavor = "multi_thread")]
async fn runtime_config_can_turn_connection_pooling_off_as_in_spin() {
    let mock = MockUpstream::start(|_| async { respond(200, "text/plain", "pong") }).await;
    require_wasm("probe.wasm");
    let mut options = TestAppOptions::new(fixture("probe.toml"))
        .variable("secret_key", SECRET)
        .variable("upstream_host", &mock.addr.to_string());
    options.runtime_config.connection_pooling = false;
    let app = TestApp::start(options).await.expect("probe app starts");
    five_fetches(&app, &mock).await;
    assert_eq!(mock.accepted_connections(), 5, "one connection per request");
}

#[tokio::test(flavor = "multi_thread")]
async fn service_chaining_reaches_a_private_component_in_process() {
    let app = probe_app(None).await;
    let chained = get_json(&app.url("/probe/fetch?http://hidden.spin.internal/headers")).await;
    assert_eq!(chained["spin-path-info"], "/headers");
    assert_eq!(chained["spin-raw-component-route"], "/...");
    assert!(chained.get("host").is_none(), "Spin strips Host on chained requests");
    // Chaining is an outbound request like any other: it needs the allow-list entry.
    let r = client().get(app.url("/probe/deeper/fetch?http://hidden.spin.internal/headers")).send().await.unwrap();
    assert_eq!(r.status(), 502);
    assert!(r.text().await.unwrap().contains("HttpRequestDenied"));
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_stream_event_by_event() {
    let (sender, response) = streaming(200, "text/event-stream");
    let response = std::sync::Mutex::new(Some(response));
    let mock = MockUpstream::start(move |_| {
        let r = response.lock().unwrap().take().expect("one request");
        async move { r }
    })
    .await;
    let app = probe_app(Some(&mock)).await;
    let mut body = client()
        .get(app.url(&format!("/probe/fetch?http://{}/events", mock.addr)))
        .send()
        .await
        .unwrap()
        .bytes_stream();

    sender.send(Bytes::from_static(b"data: one\n\n")).unwrap();
    let sent = Instant::now();
    let first = tokio::time::timeout(Duration::from_secs(5), body.next()).await.unwrap().unwrap().unwrap();
    let first_latency = sent.elapsed();
    assert_eq!(&first[..], b"data: one\n\n");
    tokio::time::sleep(Duration::from_millis(300)).await;
    sender.send(Bytes::from_static(b"data: two\n\n")).unwrap();
    drop(sender);
    let mut rest = Vec::new();
    while let Some(chunk) = body.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, b"data: two\n\n");
    // The first event arrived while the upstream was still open, well before the second.
    assert!(first_latency < Duration::from_millis(150), "first event took {first_latency:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_outlives_its_client_until_its_next_write_as_in_spin() {
    let (sender, response) = streaming(200, "text/event-stream");
    let response = std::sync::Mutex::new(Some(response));
    let mock = MockUpstream::start(move |_| {
        let r = response.lock().unwrap().take().expect("one request");
        async move { r }
    })
    .await;
    let app = probe_app(Some(&mock)).await;
    let mut body = client()
        .get(app.url(&format!("/probe/fetch?http://{}/events", mock.addr)))
        .send()
        .await
        .unwrap()
        .bytes_stream();
    sender.send(Bytes::from_static(b": hello\n\n")).unwrap();
    body.next().await.unwrap().unwrap();
    assert_eq!(mock.open_connections(), 1);

    // Spin 4.0.2 runs the guest detached: leaving does not end it, so a quiet
    // upstream stays open (why the debug-api writes keepalives)...
    drop(body);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(mock.open_connections(), 1, "the instance lives on while it has nothing to write");
    // ...until its next write fails; then it ends and its upstream closes.
    sender.send(Bytes::from_static(b": more\n\n")).unwrap();
    let closed_after = mock.wait_for_open_connections(0, Duration::from_secs(2)).await;
    assert!(closed_after.is_some(), "upstream connection still open 2 s after the guest's failed write");
    drop(sender);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_works_on_after_its_response_has_ended_as_in_spin() {
    let app = probe_app(None).await;
    let response = client().get(app.url("/probe/after?later")).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "sent");
    let kv = app.url("/probe/kv?get&later");
    assert_eq!(client().get(&kv).send().await.unwrap().text().await.unwrap(), "<none>", "the work waits 200 ms");
    // The client has its whole response; the instance still runs to its own end.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let value = client().get(&kv).send().await.unwrap().text().await.unwrap();
        if value == "done" {
            break;
        }
        assert!(Instant::now() < deadline, "the guest's work after its response never happened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn request_bodies_stream_into_the_guest() {
    let app = probe_app(None).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, std::io::Error>>();
    let request_body = reqwest::Body::wrap_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    tx.send(Ok(Bytes::from_static(b"first "))).unwrap();
    let response = client().post(app.url("/probe/echo")).body(request_body).send().await.unwrap();
    let mut echoed = response.bytes_stream();
    // The echo of the first chunk arrives while the request body is still open.
    let first = tokio::time::timeout(Duration::from_secs(5), echoed.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(&first[..], b"first ");
    tx.send(Ok(Bytes::from_static(b"second"))).unwrap();
    drop(tx);
    let mut rest = Vec::new();
    while let Some(chunk) = echoed.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, b"second");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_log_line_per_request_without_header_values_or_queries() {
    if host_only("reads the host's request log (Spin logs no requests)") {
        return;
    }
    let app = probe_app(None).await;
    client()
        .get(app.url("/probe/var?key"))
        .header("authorization", "Bearer header-canary-91")
        .header("cookie", "session=cookie-canary-92")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    client().get(app.url("/nowhere?token=query-canary-93")).send().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let log = app.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.starts_with("GET ")).collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].starts_with("GET /probe/var -> probe 200 "), "{}", lines[0]);
    assert!(lines[0].ends_with("ms"));
    assert!(lines[1].starts_with("GET /nowhere -> - 404 "), "{}", lines[1]);
    for canary in ["header-canary-91", "cookie-canary-92", "query-canary-93", SECRET] {
        assert!(!log.contains(canary), "{canary} leaked into the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_app_boots_from_spin_toml_and_serves_the_console() {
    require_wasm("static_files.wasm");
    require_wasm("simulator.wasm");
    let app = TestApp::start(TestAppOptions::new(repo_root().join("spin.toml"))).await.unwrap();
    let index = client().get(app.url("/")).send().await.unwrap();
    assert_eq!(index.status(), 200);
    assert!(index.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(index.text().await.unwrap().contains("ratatoskr"));
    let health = client().get(app.url("/.well-known/spin/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    // The simulator is private: not reachable from outside, whatever the path.
    let agents = client().get(app.url("/v1/agents")).send().await.unwrap();
    assert_eq!(agents.status(), 404, "only the static component's 404 answers");
    assert!(!agents.text().await.unwrap().contains("agent_id"));
}
