//! The simulator's Playground upstreams (upstream.md section 3) through the real host and
//! .wasm: the fake Brave and Linkup providers with every failure switch
//! (tests/fixtures/simulator.toml puts the simulator on a public route), and the inference
//! endpoint against the Playground's own database — tests/fixtures/simulator-playground.toml
//! mounts the real `playground` component (`/admin/v1/...`, demo world seeded) and the
//! simulator (`/...`) in one app sharing the in-memory SQLite database `default`, so tokens
//! are minted through `POST /admin/v1/playground/token` and traces read back through
//! `GET /admin/v1/traces/{id}`.

use std::time::{Duration, Instant};

use component_tests::*;
use futures::StreamExt;
use serde_json::{json, Value};

const BRAVE_KEY: &str = "canary-brave-key-5e1f0a";
const LINKUP_KEY: &str = "canary-linkup-key-c04d7b";
const DEMO_PASSWORD: &str = "canary-demo-password-91ab";
const BOOTSTRAP_PASSWORD: &str = "canary-bootstrap-password-27cd";

async fn sim() -> TestApp {
    require_wasm("simulator.wasm");
    let options = TestAppOptions::new(fixture("simulator.toml"))
        .variable("consumer_key", "test-consumer")
        .variable("admin_key", "test-admin");
    TestApp::start(options).await.expect("the simulator app starts")
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

async fn answer(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    for secret in [BRAVE_KEY, LINKUP_KEY, DEMO_PASSWORD, BOOTSTRAP_PASSWORD] {
        assert!(!text.contains(secret), "a secret leaked into a body: {text}");
    }
    Answer { status, headers, text }
}

async fn brave(app: &TestApp, query: &str, key: Option<&str>) -> Answer {
    let mut request = client().get(app.url(&format!("/brave/res/v1/web/search?{query}")));
    if let Some(key) = key {
        request = request.header("X-Subscription-Token", key);
    }
    answer(request).await
}

async fn linkup(app: &TestApp, body: &str, key: Option<&str>) -> Answer {
    let mut request =
        client().post(app.url("/linkup/v1/search")).header("content-type", "application/json").body(body.to_owned());
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    answer(request).await
}

fn linkup_body(q: &str) -> String {
    json!({ "q": q, "depth": "standard", "outputType": "searchResults" }).to_string()
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> =
        value.as_object().unwrap_or_else(|| panic!("not an object: {value}")).keys().map(String::as_str).collect();
    keys.sort();
    keys
}

fn assert_log_clean(app: &TestApp, secrets: &[&str]) {
    let log = app.log();
    for secret in secrets {
        assert!(!log.contains(secret), "{secret} leaked into the host log");
    }
}

// ---------------------------------------------------------------- Brave ----

#[tokio::test(flavor = "multi_thread")]
async fn brave_returns_results_derived_from_the_query() {
    let app = sim().await;
    let a = brave(&app, "q=tokio+runtime&count=5", Some(BRAVE_KEY)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert!(a.header("content-type").unwrap().starts_with("application/json"));
    let body = a.json();
    let results = body["web"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    for r in results {
        for field in ["title", "url", "description"] {
            assert!(r[field].as_str().is_some_and(|s| !s.is_empty()), "{field}: {r}");
        }
        assert!(r["url"].as_str().unwrap().starts_with("https://"), "{r}");
    }
    assert!(results[0]["description"].as_str().unwrap().contains("tokio runtime"));
    // Stable for a query, different for another.
    assert_eq!(brave(&app, "q=tokio+runtime&count=5", Some("another-key")).await.json(), body);
    let other = brave(&app, "q=serde+derive&count=5", Some(BRAVE_KEY)).await.json();
    assert_ne!(other["web"]["results"], body["web"]["results"]);

    // One result carries HTML-ish text, to exercise escaping downstream.
    let html = results.iter().find(|r| r["title"].as_str().unwrap().contains("<script>")).expect("an HTML-ish result");
    assert!(html["description"].as_str().unwrap().contains("<img src=x onerror="));
    assert!(html["url"].as_str().unwrap().contains('&'));

    // count: default and cap 10; out of Brave's range is 422.
    assert_eq!(brave(&app, "q=x", Some(BRAVE_KEY)).await.json()["web"]["results"].as_array().unwrap().len(), 10);
    assert_eq!(
        brave(&app, "q=x&count=20", Some(BRAVE_KEY)).await.json()["web"]["results"].as_array().unwrap().len(),
        10
    );
    assert_eq!(brave(&app, "q=x&count=1", Some(BRAVE_KEY)).await.json()["web"]["results"].as_array().unwrap().len(), 1);
    for bad in ["q=x&count=0", "q=x&count=21", "q=x&count=five", "q=", "count=3", ""] {
        let a = brave(&app, bad, Some(BRAVE_KEY)).await;
        assert_eq!(a.status, 422, "{bad}: {}", a.text);
        assert_eq!(a.json()["error"]["code"], "VALIDATION");
    }
    // Only GET.
    let post = client()
        .post(app.url("/brave/res/v1/web/search?q=x"))
        .header("X-Subscription-Token", BRAVE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
    assert_log_clean(&app, &[BRAVE_KEY]);
}

#[tokio::test(flavor = "multi_thread")]
async fn brave_keys_and_failure_switches() {
    let app = sim().await;
    let missing = brave(&app, "q=x", None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json()["type"], "ErrorResponse");
    assert_eq!(brave(&app, "q=x", Some("")).await.status, 401);
    let revoked = brave(&app, "q=x", Some("brave-revoked-key")).await;
    assert_eq!(revoked.status, 403, "{}", revoked.text);
    assert_eq!(revoked.json()["error"]["status"], 403);
    // Authentication comes first.
    assert_eq!(brave(&app, "q=sim:500", None).await.status, 401);

    assert_eq!(brave(&app, "q=rust+sim:401", Some(BRAVE_KEY)).await.status, 401);
    let limited = brave(&app, "q=sim%3A429+rust", Some(BRAVE_KEY)).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("7"));
    assert_eq!(limited.json()["error"]["code"], "RATE_LIMITED");
    assert_eq!(brave(&app, "q=sim:500", Some(BRAVE_KEY)).await.status, 500);
    let malformed = brave(&app, "q=sim:malformed", Some(BRAVE_KEY)).await;
    assert_eq!(malformed.status, 200);
    assert!(malformed.header("content-type").unwrap().starts_with("application/json"));
    assert!(serde_json::from_str::<Value>(&malformed.text).is_err(), "{}", malformed.text);
    let empty = brave(&app, "q=sim:empty", Some(BRAVE_KEY)).await;
    assert_eq!(empty.json()["web"]["results"], json!([]));
    assert_log_clean(&app, &[BRAVE_KEY]);
}

// --------------------------------------------------------------- Linkup ----

#[tokio::test(flavor = "multi_thread")]
async fn linkup_returns_results_for_the_search_results_shape_only() {
    let app = sim().await;
    let a = linkup(&app, &linkup_body("tokio runtime"), Some(LINKUP_KEY)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let body = a.json();
    assert_eq!(keys(&body), ["results"]);
    let results = body["results"].as_array().unwrap();
    assert!(results.len() > 5, "more than the five the Playground keeps: {}", results.len());
    for r in results {
        for field in ["name", "url", "content"] {
            assert!(r[field].as_str().is_some_and(|s| !s.is_empty()), "{field}: {r}");
        }
    }
    assert!(results.iter().any(|r| r["name"].as_str().unwrap().contains("<script>")));
    assert!(results[0]["content"].as_str().unwrap().contains("tokio runtime"));

    for bad in [
        json!({ "q": "x", "depth": "standard" }),
        json!({ "q": "x", "outputType": "searchResults" }),
        json!({ "depth": "standard", "outputType": "searchResults" }),
        json!({ "q": "", "depth": "standard", "outputType": "searchResults" }),
        json!({ "q": "x", "depth": "standard", "outputType": "sourcedAnswer" }),
        json!({ "q": ["x"], "depth": "standard", "outputType": "searchResults" }),
        json!(["x"]),
    ] {
        let a = linkup(&app, &bad.to_string(), Some(LINKUP_KEY)).await;
        assert_eq!(a.status, 400, "{bad}: {}", a.text);
        assert_eq!(a.json()["error"]["code"], "VALIDATION_ERROR");
    }
    assert_eq!(linkup(&app, "{not json", Some(LINKUP_KEY)).await.status, 400);
    let get = client().get(app.url("/linkup/v1/search")).bearer_auth(LINKUP_KEY).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_log_clean(&app, &[LINKUP_KEY]);
}

#[tokio::test(flavor = "multi_thread")]
async fn linkup_keys_and_failure_switches() {
    let app = sim().await;
    let missing = linkup(&app, &linkup_body("x"), None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json()["statusCode"], 401);
    let basic =
        answer(client().post(app.url("/linkup/v1/search")).header("authorization", "Basic abc").body(linkup_body("x")))
            .await;
    assert_eq!(basic.status, 401);
    assert_eq!(linkup(&app, &linkup_body("x"), Some("linkup-revoked-key")).await.status, 403);
    assert_eq!(linkup(&app, "nope", None).await.status, 401, "authentication before validation");

    assert_eq!(linkup(&app, &linkup_body("sim:401"), Some(LINKUP_KEY)).await.status, 401);
    let limited = linkup(&app, &linkup_body("rust sim:429"), Some(LINKUP_KEY)).await;
    assert_eq!((limited.status, limited.header("retry-after")), (429, Some("7")));
    assert_eq!(linkup(&app, &linkup_body("sim:500"), Some(LINKUP_KEY)).await.status, 500);
    let malformed = linkup(&app, &linkup_body("sim:malformed"), Some(LINKUP_KEY)).await;
    assert_eq!(malformed.status, 200);
    assert!(serde_json::from_str::<Value>(&malformed.text).is_err());
    assert_eq!(linkup(&app, &linkup_body("sim:empty"), Some(LINKUP_KEY)).await.json()["results"], json!([]));
    assert_log_clean(&app, &[LINKUP_KEY]);
}

#[tokio::test(flavor = "multi_thread")]
async fn sim_slow_holds_either_provider_for_ten_seconds() {
    let app = sim().await;
    let started = Instant::now();
    let (b, l, quick) = tokio::join!(
        async { (brave(&app, "q=rust+sim:slow&count=3", Some(BRAVE_KEY)).await, started.elapsed()) },
        async { (linkup(&app, &linkup_body("sim:slow sim:429"), Some(LINKUP_KEY)).await, started.elapsed()) },
        async { (brave(&app, "q=rust", Some(BRAVE_KEY)).await, started.elapsed()) },
    );
    assert_eq!(b.0.status, 200);
    assert_eq!(b.0.json()["web"]["results"].as_array().unwrap().len(), 3);
    assert!(b.1 >= Duration::from_secs(10), "{:?}", b.1);
    assert_eq!(l.0.status, 429, "sim:slow combines with a failure");
    assert!(l.1 >= Duration::from_secs(10), "{:?}", l.1);
    assert!(l.1 < Duration::from_secs(20), "{:?}", l.1);
    assert_eq!(quick.0.status, 200);
    assert!(quick.1 < Duration::from_secs(5), "other requests are not held: {:?}", quick.1);
}

// ------------------------------------------------------------ Inference ----

const SOME_TOKEN: &str = "myra_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn chat_body(prompt: &str, stream: bool) -> String {
    json!({
        "model": "sim-chat-1",
        "messages": [
            { "role": "system", "content": "You are terse." },
            { "role": "user", "content": prompt },
        ],
        "stream": stream,
    })
    .to_string()
}

async fn infer(app: &TestApp, tenant: &str, gateway: &str, auth: Option<&str>, body: &str) -> reqwest::Response {
    post_chat(app, &format!("/inference/{tenant}/{gateway}/v1/chat/completions"), auth, body).await
}

/// A chat request's POST to `path`, with `auth` as its `Authorization`.
async fn post_chat(app: &TestApp, path: &str, auth: Option<&str>, body: &str) -> reqwest::Response {
    let mut request = client().post(app.url(path)).header("content-type", "application/json").body(body.to_owned());
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    request.send().await.unwrap()
}

/// A refusal: the status, a JSON error body and nothing streamed.
async fn assert_refused(response: reqwest::Response, status: u16, code: &str) {
    assert_eq!(response.status().as_u16(), status);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("application/json"), "{content_type}");
    assert!(response.headers().get("x-trace-id").is_none());
    let text = response.text().await.unwrap();
    assert!(!text.contains("data:"), "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(keys(&body), ["error"]);
    assert_eq!(keys(&body["error"]), ["code", "message"]);
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(!text.contains("myra_"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn inference_refuses_tokens_before_the_playground_has_a_database() {
    // The simulator alone: no Playground tables, so no token can be valid.
    let app = sim().await;
    let bearer = format!("Bearer {SOME_TOKEN}");
    assert_refused(infer(&app, "acme", "main", Some(&bearer), &chat_body("hi", true)).await, 401, "invalid_token")
        .await;
    for auth in [None, Some("Bearer"), Some("Bearer sk-not-a-gateway-token"), Some("Basic abc"), Some(SOME_TOKEN)] {
        assert_refused(infer(&app, "acme", "main", auth, &chat_body("hi", true)).await, 401, "invalid_token").await;
    }
    let get = client().get(app.url("/inference/acme/main/v1/chat/completions")).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_log_clean(&app, &[SOME_TOKEN]);
}

/// The Playground and the simulator in one app, sharing the database, with the demo world.
struct World {
    app: TestApp,
    session: String,
}

async fn world() -> World {
    require_wasm("simulator.wasm");
    require_wasm("playground.wasm");
    let options = TestAppOptions::new(fixture("simulator-playground.toml"))
        .variable("seed_demo_data", "true")
        .variable("demo_password", DEMO_PASSWORD)
        .variable("bootstrap_admin_email", "root@bootstrap.test")
        .variable("bootstrap_admin_password", BOOTSTRAP_PASSWORD);
    let app = TestApp::start(options).await.expect("the playground + simulator app starts");
    let session = login(&app, "admin@acme.test").await;
    World { app, session }
}

/// Signs in; returns the session token from `Set-Cookie`, used as a bearer.
async fn login(app: &TestApp, email: &str) -> String {
    let response = client()
        .post(app.url("/admin/v1/auth/login"))
        .header("content-type", "application/json")
        .header("origin", app.url(""))
        .body(json!({ "email": email, "password": DEMO_PASSWORD }).to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let cookie = response.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()).find_map(|c| {
        c.split(';').next().and_then(|kv| kv.trim().strip_prefix("ratatoskr_admin_session=")).map(str::to_owned)
    });
    let text = response.text().await.unwrap();
    assert_eq!(status, 200, "login {email}: {text}");
    cookie.filter(|c| !c.is_empty()).unwrap_or_else(|| panic!("no session cookie for {email}"))
}

impl World {
    /// Every gateway token lapses: on the host by moving its clock past the 30
    /// minutes, under real Spin by moving the stored expiry into the past.
    fn expire_tokens(&self) {
        if Runtime::selected() == Runtime::Host {
            self.app.host().clock().advance(Duration::from_secs(1801));
            // The admin sessions were in use meanwhile (no idle timeout).
            self.app.sql("default", "UPDATE admin_sessions SET last_seen = COALESCE(last_seen, created_at) + 1801");
        } else {
            self.app.sql("default", "UPDATE gateway_tokens SET expires_at = created_at - 1");
        }
    }

    async fn admin_get(&self, path: &str, session: &str) -> (u16, Value) {
        let response = client().get(self.app.url(path)).bearer_auth(session).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}")))
    }

    async fn gateway_id(&self, session: &str, tenant: &str, slug: &str) -> String {
        let (status, body) = self.admin_get("/admin/v1/gateways", session).await;
        assert_eq!(status, 200, "{body}");
        body["gateways"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["tenant_slug"] == tenant && g["slug"] == slug)
            .unwrap_or_else(|| panic!("no gateway {tenant}/{slug} in {body}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Mints a playground token for `tenant/slug`; returns it (asserting the response shape).
    async fn mint(&self, session: &str, tenant: &str, slug: &str) -> String {
        let gateway_id = self.gateway_id(session, tenant, slug).await;
        let response = client()
            .post(self.app.url("/admin/v1/playground/token"))
            .bearer_auth(session)
            .header("content-type", "application/json")
            .body(json!({ "gateway_id": gateway_id }).to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(status, 200, "{body}");
        assert_eq!((body["tenant_slug"].as_str(), body["gateway_slug"].as_str()), (Some(tenant), Some(slug)));
        let token = body["token"].as_str().unwrap().to_owned();
        assert!(token.starts_with("myra_") && token.len() == 69, "{token}");
        token
    }
}

/// A whole OpenAI chunk stream: the chunks (as JSON), the arrival time of each, whether it
/// ended with `[DONE]`, and the response's `x-trace-id`.
struct Streamed {
    chunks: Vec<Value>,
    arrivals: Vec<Instant>,
    done: bool,
    trace_id: String,
}

impl Streamed {
    fn text(&self) -> String {
        self.chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect()
    }
}

async fn stream(response: reqwest::Response) -> Streamed {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let trace_id = response.headers()["x-trace-id"].to_str().unwrap().to_owned();
    let mut body = response.bytes_stream();
    let (mut buf, mut chunks, mut arrivals, mut done) = (Vec::<u8>::new(), Vec::new(), Vec::new(), false);
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Some(piece) =
        tokio::time::timeout_at(deadline.into(), body.next()).await.expect("the stream ends within 20 s")
    {
        let piece = piece.expect("the stream broke");
        assert!(!String::from_utf8_lossy(&piece).contains("myra_"));
        buf.extend_from_slice(&piece);
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let frame = String::from_utf8(buf.drain(..end + 2).collect()).unwrap();
            let data = frame.trim_end().strip_prefix("data: ").unwrap_or_else(|| panic!("not a data frame: {frame:?}"));
            assert!(!data.contains('\n'), "{frame:?}");
            assert!(!done, "a frame after [DONE]: {frame:?}");
            if data == "[DONE]" {
                done = true;
            } else {
                chunks.push(serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")));
                arrivals.push(Instant::now());
            }
        }
    }
    assert!(buf.is_empty(), "the stream ended inside a frame: {buf:?}");
    Streamed { chunks, arrivals, done, trace_id }
}

fn check_chunks(s: &Streamed, model: &str) {
    assert!(s.done, "no [DONE]");
    assert!(s.chunks.len() >= 5, "{} chunks", s.chunks.len());
    let id = s.chunks[0]["id"].as_str().unwrap();
    assert!(id.starts_with("chatcmpl-"), "{id}");
    for (i, c) in s.chunks.iter().enumerate() {
        assert_eq!(keys(c), ["choices", "created", "id", "model", "object"], "{c}");
        assert_eq!(c["id"], id);
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], model);
        assert!(c["created"].as_u64().is_some());
        let choice = &c["choices"][0];
        assert_eq!(choice["index"], 0);
        if i + 1 < s.chunks.len() {
            assert!(choice["delta"]["content"].is_string(), "{c}");
            assert_eq!(choice["finish_reason"], Value::Null, "{c}");
        } else {
            assert_eq!(choice["finish_reason"], "stop", "{c}");
            assert_eq!(choice["delta"], json!({}));
        }
    }
    assert_eq!(s.chunks[0]["choices"][0]["delta"]["role"], "assistant");
    // Small real delays: the chunks do not arrive all at once.
    let spread = *s.arrivals.last().unwrap() - s.arrivals[0];
    assert!(spread >= Duration::from_millis(100), "{spread:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_minted_token_streams_a_reply_and_records_a_readable_trace() {
    let w = world().await;
    let token = w.mint(&w.session, "acme", "main").await;
    let prompt = "What is <b>Rust</b>? \"quote\" & more";
    let started = Instant::now();
    let response = infer(&w.app, "acme", "main", Some(&format!("Bearer {token}")), &chat_body(prompt, true)).await;
    let s = stream(response).await;
    check_chunks(&s, "sim-chat-1");
    let reply = s.text();
    assert!(reply.contains(prompt), "the reply quotes the prompt: {reply}");
    assert!(s.arrivals[0] - started < Duration::from_secs(5));

    // The trace is complete once [DONE] was seen, and readable by the tenant admin.
    let (status, trace) = w.admin_get(&format!("/admin/v1/traces/{}", s.trace_id), &w.session).await;
    assert_eq!(status, 200, "{trace}");
    let gateway_id = w.gateway_id(&w.session, "acme", "main").await;
    assert_eq!(trace["trace"]["id"], s.trace_id);
    assert_eq!(trace["trace"]["gateway_id"], gateway_id);
    let steps = trace["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["auth", "route", "model.request", "stream", "complete"]);
    let mut last_start = 0;
    for step in steps {
        let (start, end) = (step["started_at"].as_i64().unwrap(), step["ended_at"].as_i64().unwrap());
        assert!(start >= last_start && end >= start, "{step}");
        last_start = start;
        assert!(step["data"].is_object(), "{step}");
    }
    assert_eq!(steps[2]["data"]["prompt"], prompt);
    assert_eq!(steps[2]["data"]["model"], "sim-chat-1");
    assert_eq!(steps[3]["data"]["response"], reply);
    assert_eq!(steps[3]["data"]["finished"], true);
    assert_eq!(steps[4]["data"]["finish_reason"], "stop");
    assert!(!trace.to_string().contains(&token), "the token is never in a trace");
    // The same page through the Playground route and in the gateway's trace list.
    let (status, again) = w.admin_get(&format!("/admin/v1/playground/trace/{}", s.trace_id), &w.session).await;
    assert_eq!((status, &again["steps"]), (200, &trace["steps"]));
    let (status, list) = w.admin_get(&format!("/admin/v1/playground/traces?gateway_id={gateway_id}"), &w.session).await;
    assert_eq!(status, 200, "{list}");
    let listed = list["traces"].as_array().unwrap().iter().find(|t| t["id"] == s.trace_id).expect("listed");
    assert_eq!((listed["model"].as_str(), listed["status"].as_str()), (Some("sim-chat-1"), Some("ok")));

    // A second token for the same gateway works alongside the first (concurrent sessions).
    let second = w.mint(&w.session, "acme", "main").await;
    let (a, b) = tokio::join!(
        async {
            stream(infer(&w.app, "acme", "main", Some(&format!("Bearer {token}")), &chat_body("one", true)).await).await
        },
        async {
            stream(infer(&w.app, "acme", "main", Some(&format!("Bearer {second}")), &chat_body("two", true)).await)
                .await
        },
    );
    assert!(a.done && b.done && a.trace_id != b.trace_id);

    // Not streaming: one chat.completion, traced too.
    let response = infer(&w.app, "acme", "main", Some(&format!("Bearer {token}")), &chat_body("plain", false)).await;
    assert_eq!(response.status(), 200);
    let trace_id = response.headers()["x-trace-id"].to_str().unwrap().to_owned();
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert!(body["choices"][0]["message"]["content"].as_str().unwrap().contains("plain"));
    let (status, trace) = w.admin_get(&format!("/admin/v1/traces/{trace_id}"), &w.session).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = trace["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["auth", "route", "model.request", "generate", "complete"]);

    // A valid token with a bad body: 400, nothing streamed.
    assert_refused(
        infer(&w.app, "acme", "main", Some(&format!("Bearer {token}")), "{\"messages\":[]}").await,
        400,
        "invalid_request",
    )
    .await;
    assert_log_clean(&w.app, &[&token, &second, DEMO_PASSWORD]);
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_other_gateway_and_expired_tokens_are_refused_before_any_byte() {
    let w = world().await;
    let main = w.mint(&w.session, "acme", "main").await;
    let second = w.mint(&w.session, "acme", "second").await;
    let bearer = |t: &str| format!("Bearer {t}");
    // Refused with 401 `code` on tenant/gateway, before any byte of a reply.
    let refused = |tenant: &'static str, gateway: &'static str, auth: Option<String>, code: &'static str| {
        let app = &w.app;
        async move {
            assert_refused(infer(app, tenant, gateway, auth.as_deref(), &chat_body("hi", true)).await, 401, code).await
        }
    };

    // Unknown (well-formed) token.
    refused("acme", "main", Some(bearer(SOME_TOKEN)), "invalid_token").await;
    // A token of another gateway: same tenant, and another tenant's gateway.
    refused("acme", "main", Some(bearer(&second)), "invalid_token").await;
    refused("acme", "second", Some(bearer(&main)), "invalid_token").await;
    refused("euco", "main", Some(bearer(&main)), "invalid_token").await;
    refused("euco", "eu-linkup", Some(bearer(&main)), "invalid_token").await;
    // Not a gateway token at all, or no bearer.
    refused("acme", "main", Some(format!("Bearer {}", w.session)), "invalid_token").await;
    refused("acme", "main", None, "invalid_token").await;
    // Both tokens still work on their own gateways.
    assert!(stream(infer(&w.app, "acme", "second", Some(&bearer(&second)), &chat_body("hi", true)).await).await.done);

    // 1801 s later the token has lapsed: token_expired, before any byte.
    w.expire_tokens();
    refused("acme", "main", Some(bearer(&main)), "token_expired").await;
    // Expiry is only reported for the token's own gateway.
    refused("acme", "second", Some(bearer(&main)), "invalid_token").await;
    // A fresh mint (which deletes the expired ones) works again; the old token is now unknown.
    let fresh = w.mint(&w.session, "acme", "main").await;
    assert!(stream(infer(&w.app, "acme", "main", Some(&bearer(&fresh)), &chat_body("hi", true)).await).await.done);
    refused("acme", "main", Some(bearer(&main)), "invalid_token").await;
    assert_log_clean(&w.app, &[&main, &second, &fresh]);
}

#[tokio::test(flavor = "multi_thread")]
async fn inference_is_not_gated_by_playground_enabled() {
    // `frozen` has the Playground switched off; minting and inference still work.
    let w = world().await;
    let platform = login(&w.app, "platform@demo.test").await;
    let token = w.mint(&platform, "frozen", "main").await;
    let s =
        stream(infer(&w.app, "frozen", "main", Some(&format!("Bearer {token}")), &chat_body("still on?", true)).await)
            .await;
    check_chunks(&s, "sim-chat-1");
    let (status, trace) = w.admin_get(&format!("/admin/v1/traces/{}", s.trace_id), &platform).await;
    assert_eq!(status, 200, "{trace}");
    // Another tenant's admin cannot read it (no existence leak).
    let (status, _) = w.admin_get(&format!("/admin/v1/traces/{}", s.trace_id), &w.session).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_playground_search_probe_reads_both_fake_providers() {
    // The Playground's probe reaches the fake providers by service chaining (its default
    // base URLs) and maps them to {title, url, snippet}, at most five.
    let w = world().await;
    for (slug, provider) in [("main", "brave"), ("second", "linkup")] {
        let gateway_id = w.gateway_id(&w.session, "acme", slug).await;
        let (status, body) = w
            .admin_get(&format!("/admin/v1/playground/search?q=tokio+runtime&gateway_id={gateway_id}"), &w.session)
            .await;
        assert_eq!(status, 200, "{provider}: {body}");
        assert_eq!(body["query"], "tokio runtime");
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), 5, "{provider}: {body}");
        for r in results {
            assert_eq!(keys(r), ["snippet", "title", "url"], "{provider}: {r}");
        }
        // Provider markup and entities arrive as plain text: the hostile
        // result's tags are gone, its entities decoded, its escaped text kept as text.
        let text = |r: &Value, k: &str| r[k].as_str().unwrap().to_owned();
        for r in results {
            for k in ["title", "snippet"] {
                let t = text(r, k);
                assert!(!t.contains("<script") && !t.contains("<strong>") && !t.contains("&amp;"), "{provider}: {t}");
            }
        }
        assert!(results.iter().any(|r| text(r, "title").contains("Q&A & \"discussion\"")), "{provider}: {body}");
        // A scripted provider failure is not a 200.
        let (status, body) =
            w.admin_get(&format!("/admin/v1/playground/search?q=sim:429&gateway_id={gateway_id}"), &w.session).await;
        assert_ne!(status, 200, "{provider}: {body}");
    }
}

/// `POST /admin/v1/gw/{tenant}/{gateway}/v1/chat/completions`: the Playground's same-origin
/// pass-through to the inference endpoint.
async fn infer_via_playground(
    app: &TestApp,
    tenant: &str,
    gateway: &str,
    auth: Option<&str>,
    body: &str,
) -> reqwest::Response {
    post_chat(app, &format!("/admin/v1/gw/{tenant}/{gateway}/v1/chat/completions"), auth, body).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_playground_pass_through_streams_inference_and_passes_refusals_through() {
    let w = world().await;
    let token = w.mint(&w.session, "acme", "main").await;
    let bearer = format!("Bearer {token}");
    // Streams chunk by chunk, with the trace id; no admin session needed.
    let response =
        infer_via_playground(&w.app, "acme", "main", Some(&bearer), &chat_body("through the pass-through", true)).await;
    assert_eq!(response.headers()["cache-control"], "no-store");
    let s = stream(response).await;
    check_chunks(&s, "sim-chat-1");
    assert!(s.text().contains("through the pass-through"), "{}", s.text());
    let (status, trace) = w.admin_get(&format!("/admin/v1/traces/{}", s.trace_id), &w.session).await;
    assert_eq!(status, 200, "{trace}");

    // The upstream's refusals reach the browser unchanged, before any byte.
    assert_refused(
        infer_via_playground(&w.app, "acme", "main", None, &chat_body("hi", true)).await,
        401,
        "invalid_token",
    )
    .await;
    assert_refused(
        infer_via_playground(&w.app, "acme", "second", Some(&bearer), &chat_body("hi", true)).await,
        401,
        "invalid_token",
    )
    .await;
    w.expire_tokens();
    assert_refused(
        infer_via_playground(&w.app, "acme", "main", Some(&bearer), &chat_body("hi", true)).await,
        401,
        "token_expired",
    )
    .await;

    // Its own validation: slugs, shape, method.
    for (path, status, code) in [
        ("/admin/v1/gw/ac.me/main/v1/chat/completions", 400, "invalid_slug"),
        ("/admin/v1/gw/acme/ma%2Fin/v1/chat/completions", 400, "invalid_slug"),
        ("/admin/v1/gw/acme/main/v1/chat", 404, "not_found"),
    ] {
        let response = client().post(w.app.url(path)).bearer_auth(&token).body("{}").send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{path}");
        let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(body["error_code"], code, "{path}");
    }
    let get = client().get(w.app.url("/admin/v1/gw/acme/main/v1/chat/completions")).send().await.unwrap();
    assert_eq!(get.status(), 405);
    assert_log_clean(&w.app, &[&token]);
}
