//! The portable console (`ratatoskr_console.wasm`): one wasi:http component
//! that imports only `wasi:*`, and that answers as the Spin app does. Runs in
//! every lane: on `wasmtime serve` or `jco serve` in the portable lanes, else
//! in the lane's runtime from a manifest of that one component (configured
//! by its environment all the same). The Spin app it is compared with runs on
//! the repo's host, or under `spin up` in the real-Spin lane.

#[path = "../fixtures/debug-support.rs"]
mod support;

use component_tests::*;
use serde_json::json;
use support::*;

/// The headers whose values must agree: what a browser, a cache or a proxy
/// acts on. Framing (`content-length`, `transfer-encoding`), `date` and
/// `connection` are each runtime's own.
const HEADERS_THAT_MATTER: [&str; 11] = [
    "content-type",
    "content-encoding",
    "cache-control",
    "etag",
    "vary",
    "allow",
    "content-security-policy",
    "x-content-type-options",
    "referrer-policy",
    "x-frame-options",
    "x-accel-buffering",
];

const SNAPSHOT: &str = r#"{"agent_id":"sindra","emitted_at":"2025-01-01T00:00:05Z","pad":{"pleasure":0.1,"arousal":0.2,"dominance":0.3},"relations":[]}"#;

const TURN: &str = concat!(
    "event: turn.started\ndata: {\"turn_id\":\"t_1\"}\n\n",
    "event: thinking\ndata: {\"delta\":\"hm\"}\n\n",
    "event: text\ndata: {\"delta\":\"hello\"}\n\n",
    "event: done\ndata: {\"turn_id\":\"t_1\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2},\"finish_reason\":\"stop\"}\n\n",
);

const FIREHOSE: &str = concat!(
    "id: 1\nevent: system.heartbeat\ndata: {}\n\n",
    "id: 2\nevent: turn.started\ndata: {\"session_id\":\"s_1\",\"turn_id\":\"t_1\"}\n\n",
    "id: 3\nevent: turn.started\ndata: {\"session_id\":\"s_2\"}\n\n",
    "id: 4\nevent: system.notice\ndata: {}\n\n",
);

/// One upstream for both apps: every route of the contract, scripted, each
/// echoing the keys it was sent (which must not come back).
async fn upstream() -> MockUpstream {
    MockUpstream::start(|r| async move {
        let auth = r.headers.get("authorization").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let path = r.path_and_query.as_str();
        match (r.method.as_str(), path) {
            ("GET", "/v1/agents") => {
                let body = json!({ "agents": [{ "agent_id": "sindra", "display_name": "Sindra" }], "echo": auth });
                respond(200, "application/json", body.to_string())
            }
            ("POST", "/v1/sessions") => {
                respond(201, "application/json", r#"{"session_id":"s_1","agent_id":"sindra","created_at":"x"}"#)
            }
            ("GET", "/v1/sessions/s_1/tools") => {
                respond(200, "application/json", json!({ "tools": [], "echo": auth }).to_string())
            }
            ("GET", "/v1/sessions/s_1/bifrost") => respond(403, "application/json", r#"{"error":"scope"}"#),
            ("POST", "/v1/sessions/s_1/turns") => respond(200, "text/event-stream", TURN),
            ("POST", "/v1/sessions/s_1/turns/t_1/cancel") => respond(202, "application/json", "{}"),
            ("GET", "/v1/admin/events") => respond(200, "text/event-stream", FIREHOSE),
            ("GET", "/worldtree/affect?agent_id=sindra") => respond(200, "application/json", SNAPSHOT),
            _ => respond(404, "application/json", r#"{"error":"not found"}"#),
        }
    })
    .await
}

/// A request as a browser (or anyone) may send it.
struct Ask {
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
}

const fn ask(method: &'static str, path: &'static str) -> Ask {
    Ask { method, path, headers: &[], body: "" }
}

const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

/// Every kind of answer both apps give: the site (encodings, validators,
/// errors), every console route with its failures, and both streams.
const ASKS: &[Ask] = &[
    ask("GET", "/"),
    Ask { headers: &[("accept-encoding", "br")], ..ask("GET", "/") },
    Ask { headers: &[("accept-encoding", "gzip")], ..ask("GET", "/index.html") },
    Ask { headers: &[("accept-encoding", "br;q=0, gzip;q=0")], ..ask("GET", "/") },
    ask("HEAD", "/"),
    ask("GET", "/openapi.yaml"),
    ask("GET", "/nope.js"),
    ask("GET", "/%2e%2e/spin.toml"),
    ask("POST", "/"),
    ask("GET", "/api/config"),
    Ask { body: r#"{"agent_id":"sindra"}"#, headers: JSON, ..ask("POST", "/api/sessions") },
    Ask { body: r#"{"agent_id":"../x"}"#, headers: JSON, ..ask("POST", "/api/sessions") },
    Ask {
        body: "agent_id=sindra",
        headers: &[("content-type", "application/x-www-form-urlencoded")],
        ..ask("POST", "/api/sessions")
    },
    ask("GET", "/api/sessions/s_1/tools"),
    ask("GET", "/api/sessions/s_1/bifrost"),
    ask("GET", "/api/sessions/s_9/tools"),
    ask("GET", "/api/sessions/s%2F1/tools"),
    Ask { body: r#"{"text":"hi"}"#, headers: JSON, ..ask("POST", "/api/sessions/s_1/turns") },
    Ask { headers: &[("origin", "http://evil.example")], ..ask("POST", "/api/sessions/s_1/turns/t_1/cancel") },
    Ask { body: "{}", headers: JSON, ..ask("POST", "/api/sessions/s_1/turns/t_1/cancel") },
    ask("GET", "/api/admin/events?session_id=s_1"),
    ask("GET", "/api/affect?agent_id=sindra"),
    ask("GET", "/api/affect?agent_id=brokkr"),
    ask("DELETE", "/api/config"),
    ask("GET", "/api"),
    ask("GET", "/api/nope"),
    Ask { headers: &[("host", "rebind.attacker.example")], ..ask("GET", "/") },
    Ask { headers: &[("host", "rebind.attacker.example")], ..ask("GET", "/api/config") },
    Ask { headers: &[("spin-path-info", "/sessions/s_1/bifrost")], ..ask("GET", "/api/config") },
];

/// An answer reduced to what must agree: status, the headers that matter,
/// and the body; of an event stream, its events without the relays'
/// comments (receive-time stamps and keepalives, which are timing).
async fn observe(app: &TestApp, ask: &Ask) -> (u16, Vec<(String, String)>, String) {
    let host = ask.headers.iter().find(|(n, _)| *n == "host").map_or(app.addr.to_string(), |(_, v)| v.to_string());
    let headers: Vec<(&str, &str)> = ask.headers.iter().filter(|(n, _)| *n != "host").copied().collect();
    let answer = with_host(app.addr, &host, ask.method, ask.path, &headers, ask.body).await;
    let matter = HEADERS_THAT_MATTER
        .iter()
        .filter_map(|name| Some((name.to_string(), answer.headers.get(*name)?.to_str().unwrap().to_string())))
        .collect();
    let body = match answer.header("content-type") {
        "text/event-stream" => answer
            .body
            .split("\n\n")
            .map(|block| block.lines().filter(|l| !l.starts_with(':')).collect::<Vec<_>>().join("\n"))
            .filter(|block| !block.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => answer.body,
    };
    (answer.status, matter, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_portable_console_answers_as_the_spin_app() {
    let keys = Keys::random();
    let mock = upstream().await;
    let options = || app_options(&keys).redirect(UPSTREAM, &mock).redirect(AFFECT, &mock);
    let spin_runtime = match Runtime::selected() {
        portable if portable.is_portable() => Runtime::Host,
        other => other,
    };
    let spin_app = TestApp::start_on(&spin_runtime, options()).await.expect("the Spin app starts");
    let console = TestApp::start_portable(options()).await.expect("the portable console starts");
    for ask in ASKS {
        let (spin, portable) = (observe(&spin_app, ask).await, observe(&console, ask).await);
        assert_eq!(portable, spin, "{} {} {:?}", ask.method, ask.path, ask.headers);
        for key in keys.all() {
            assert!(!spin.2.contains(key), "{} {}", ask.method, ask.path);
        }
    }
    // Both apps sent the upstream the same calls (the Spin app's first: the asks alternate).
    let calls: Vec<String> = mock.requests().iter().map(|r| format!("{} {}", r.method, r.path_and_query)).collect();
    let (spins, portables): (Vec<_>, Vec<_>) = calls.chunks(2).map(|pair| (pair[0].clone(), pair[1].clone())).unzip();
    assert_eq!(portables, spins);
    // The one difference: no key-value store on a runtime without one, said with the typed 503.
    let history = "/api/affect/history?agent_id=sindra";
    let stored = get(&spin_app, history).await;
    assert_eq!(
        (stored.status, stored.json()["snapshots"][0]["emitted_at"].as_str()),
        (200, Some("2025-01-01T00:00:05Z"))
    );
    get(&console, history).await.assert_error(503, "affect_history_unavailable");
    for key in keys.all() {
        assert!(!console.log().contains(key), "a key was logged");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_portable_console_calls_only_the_origins_of_its_urls() {
    let keys = Keys::random();
    let mock = upstream().await;
    // The affect read moves to another origin: only the upstream's and that one may be called.
    let options = app_options(&keys)
        .variable("affect_read_url", &format!("http://{}/worldtree/affect", mock.addr))
        .redirect(UPSTREAM, &mock);
    let console = TestApp::start_portable(options).await.unwrap();
    assert_eq!(get(&console, "/api/affect?agent_id=sindra").await.status, 200);
    assert_eq!(get(&console, "/api/sessions/s_1/tools").await.status, 200);
    // signed-in access asks the Playground, which is not an origin of the console's URLs.
    let options = app_options(&keys).variable("console_access", "signed-in").redirect(UPSTREAM, &mock);
    let console = TestApp::start_portable(options).await.unwrap();
    let before = mock.requests().len();
    let cookie = [("cookie", "ratatoskr_admin_session=sess_1")];
    let answer = with_host(console.addr, &console.addr.to_string(), "GET", "/api/config", &cookie, "").await;
    answer.assert_error(503, "console_access_unavailable");
    assert_eq!(mock.requests().len(), before, "nothing left the component");
}

/// The component's own import list: `wasi:*` only, so any WASI 0.2 runtime
/// with wasi:http (and wasi:cli for its environment) instantiates it.
#[test]
fn the_portable_console_imports_only_wasi() {
    let names = component_imports(&std::fs::read(require_wasm("ratatoskr_console.wasm")).unwrap());
    assert!(names.iter().any(|n| n.starts_with("wasi:http/outgoing-handler@")), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("wasi:")), "{names:?}");
    // The Spin component it packages again needs Spin's interfaces: why it exists.
    let spin = component_imports(&std::fs::read(require_wasm("debug_api.wasm")).unwrap());
    assert!(spin.iter().any(|n| n.starts_with("fermyon:spin/variables@")), "{spin:?}");
}

/// The top-level imports of a component.
fn component_imports(bytes: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.unwrap() {
            wasmparser::Payload::ModuleSection { .. } | wasmparser::Payload::ComponentSection { .. } => depth += 1,
            wasmparser::Payload::End(_) => depth -= 1,
            wasmparser::Payload::ComponentImportSection(imports) if depth == 0 => {
                names.extend(imports.into_iter().map(|i| i.unwrap().name.name.to_string()));
            }
            _ => {}
        }
    }
    names
}
