//! The Playground API (`/admin/v1/...`, seed 001) through the real
//! host, the repo's spin.toml and the built playground.wasm, with the demo
//! world seeded and the web-search providers pointed at scripted mocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use component_tests::*;
use ratatoskr_host::runtime_config::RuntimeConfig;
use ratatoskr_host::testing::RecordedRequest;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const DEMO_PASSWORD: &str = "demo-pw-7c1e9a";
const ROOT_EMAIL: &str = "root@ops.test";
const ROOT_PASSWORD: &str = "root-pw-55d0b2";
const PLATFORM_LINKUP_KEY: &str = "platform-linkup-canary-3f9d";
/// The demo world's stored provider keys (components/playground/src/seed.rs).
const DEMO_KEYS: [&str; 5] = [
    "demo-brave-key-acme-main",
    "demo-linkup-key-acme-second",
    "demo-linkup-key-euco",
    "demo-brave-key-euco",
    "demo-brave-key-frozen",
];
const COOKIE: &str = "ratatoskr_admin_session";

// ---- scripted providers ------------------------------------------------------------

#[derive(Clone)]
enum Mode {
    Ok,
    Status(u16),
    RateLimited(&'static str),
    Slow(Duration),
    Malformed,
}

type ModeCell = Arc<Mutex<Mode>>;

fn brave_results() -> Value {
    let results: Vec<Value> = (0..7)
        .map(|i| json!({ "title": format!("Brave {i}"), "url": format!("https://brave.example/{i}"), "description": format!("b{i}") }))
        .collect();
    json!({ "type": "search", "web": { "results": results } })
}

fn linkup_results() -> Value {
    let results: Vec<Value> = (0..7)
        .map(|i| json!({ "type": "text", "name": format!("Linkup {i}"), "url": format!("https://linkup.example/{i}"), "content": format!("l{i}") }))
        .collect();
    json!({ "results": results })
}

async fn provider(mode: ModeCell, ok_body: Value) -> MockUpstream {
    MockUpstream::start(move |_req| {
        let mode = mode.lock().unwrap().clone();
        let ok_body = ok_body.to_string();
        async move {
            match mode {
                Mode::Ok => respond(200, "application/json", ok_body),
                Mode::Status(status) => respond(status, "application/json", "{\"error\":\"provider words\"}"),
                Mode::RateLimited(after) => {
                    let mut r = respond(429, "application/json", "{}");
                    r.headers_mut().insert("retry-after", after.parse().unwrap());
                    r
                }
                Mode::Slow(delay) => {
                    tokio::time::sleep(delay).await;
                    respond(200, "application/json", ok_body)
                }
                Mode::Malformed => respond(200, "application/json", "<html>not json</html>"),
            }
        }
    })
    .await
}

// ---- the app ---------------------------------------------------------------------------

struct Playground {
    app: TestApp,
    brave: MockUpstream,
    linkup: MockUpstream,
    brave_mode: ModeCell,
    db_path: PathBuf,
}

fn temp_db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ratatoskr-playground-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("sqlite_db.db")
}

fn base_options(brave: &MockUpstream, linkup: &MockUpstream, db_path: &Path) -> TestAppOptions {
    let mut options = TestAppOptions::new(repo_root().join("spin.toml"))
        .variable("seed_demo_data", "true")
        .variable("demo_password", DEMO_PASSWORD)
        .variable("bootstrap_admin_email", ROOT_EMAIL)
        .variable("bootstrap_admin_password", ROOT_PASSWORD)
        .variable("brave_base_url", "http://brave.test/b")
        .variable("brave_origin", "http://brave.test")
        .variable("linkup_base_url", "http://linkup.test")
        .variable("linkup_origin", "http://linkup.test")
        .variable("provider_timeout_ms", "1500")
        .variable("platform_linkup_key", PLATFORM_LINKUP_KEY)
        .redirect("brave.test:80", brave)
        .redirect("linkup.test:80", linkup);
    // A file database, so the tests can look at what was stored.
    options.runtime_config = RuntimeConfig {
        key_value_stores: BTreeMap::from([("default".to_string(), StoreLocation::Memory)]),
        sqlite_databases: BTreeMap::from([("default".to_string(), StoreLocation::File(db_path.to_path_buf()))]),
        ..RuntimeConfig::in_memory()
    };
    options
}

impl Playground {
    async fn start(name: &str) -> Playground {
        Self::start_with(name, |o| o).await
    }

    async fn start_with(name: &str, tweak: impl FnOnce(TestAppOptions) -> TestAppOptions) -> Playground {
        require_wasm("playground.wasm");
        let brave_mode: ModeCell = Arc::new(Mutex::new(Mode::Ok));
        let brave = provider(brave_mode.clone(), brave_results()).await;
        let linkup = provider(Arc::new(Mutex::new(Mode::Ok)), linkup_results()).await;
        let db_path = temp_db(name);
        let options = tweak(base_options(&brave, &linkup, &db_path));
        let app = TestApp::start(options).await.expect("spin.toml boots with the playground");
        Playground { app, brave, linkup, brave_mode, db_path }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.app.addr)
    }

    fn set_brave(&self, mode: Mode) {
        *self.brave_mode.lock().unwrap() = mode;
    }

    /// Ends every admin session: on the host by moving its clock past their 12 hours,
    /// under real Spin (whose clock is the machine's) by moving their expiry into the past.
    fn expire_sessions(&self) {
        if Runtime::selected() == Runtime::Host {
            self.app.host().clock().advance(Duration::from_secs(12 * 3600 + 1));
        } else {
            self.sql("UPDATE admin_sessions SET expires_at = created_at - 1");
        }
    }

    /// Runs one SQL statement against the app's database file.
    fn sql(&self, statement: &str) -> Vec<Vec<SqlValue>> {
        let dbs = SqliteDatabases::open(&BTreeMap::from([(
            "default".to_string(),
            StoreLocation::File(self.db_path.clone()),
        )]))
        .unwrap();
        dbs.connect("default").unwrap().execute(statement, &[]).unwrap().rows
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap();
        Answer { status, headers, body }
    }

    async fn login_raw(&self, email: &str, password: &str) -> Answer {
        let body = json!({ "email": email, "password": password }).to_string();
        self.send(
            client().post(self.app.url("/admin/v1/auth/login")).header("content-type", "application/json").body(body),
        )
        .await
    }

    /// Signs in and returns the session token (from Set-Cookie).
    async fn login(&self, email: &str) -> String {
        let password = if email == ROOT_EMAIL { ROOT_PASSWORD } else { DEMO_PASSWORD };
        let answer = self.login_raw(email, password).await;
        assert_eq!(answer.status, 200, "{email}: {}", answer.body);
        answer.session_token()
    }

    async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut request = client().get(self.app.url(&format!("/admin/v1{path}")));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request).await
    }

    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> Answer {
        let mut request = client()
            .post(self.app.url(&format!("/admin/v1{path}")))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        self.send(request).await
    }

    /// A cookie-authenticated POST from the console's own origin.
    async fn cookie_post(&self, path: &str, token: &str, body: Value) -> Answer {
        let request = client()
            .post(self.app.url(&format!("/admin/v1{path}")))
            .header("cookie", format!("{COOKIE}={token}"))
            .header("content-type", "application/json")
            .header("origin", self.origin())
            .body(body.to_string());
        self.send(request).await
    }

    async fn impersonate(&self, admin: &str, user_id: &str) -> String {
        let answer = self.post("/auth/impersonate", Some(admin), json!({ "user_id": user_id })).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.session_token()
    }
}

struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.body))
    }

    fn code(&self) -> String {
        self.json()["error_code"].as_str().unwrap_or("").to_string()
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_string())
    }

    fn session_token(&self) -> String {
        let cookie = self.header("set-cookie").expect("a session cookie");
        let value = cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string();
        assert!(value.starts_with("sess_"), "{cookie}");
        value
    }

    #[track_caller]
    fn assert(&self, status: u16, error_code: &str) {
        if error_code.is_empty() {
            assert_eq!(self.status, status, "{}", self.body);
        } else {
            assert_eq!((self.status, self.code().as_str()), (status, error_code), "{}", self.body);
        }
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: &SqlValue) -> String {
    match v {
        SqlValue::Text(t) => t.clone(),
        SqlValue::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn int(v: &SqlValue) -> i64 {
    match v {
        SqlValue::Integer(i) => *i,
        other => panic!("not an integer: {other:?}"),
    }
}

// ---- sign-in, sessions, CSRF ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn login_me_logout_with_a_strict_http_only_cookie() {
    let p = Playground::start("login").await;
    let answer = p.login_raw("admin@acme.test", DEMO_PASSWORD).await;
    answer.assert(200, "");
    let cookie = answer.header("set-cookie").unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "; Path=/;", "Max-Age=43200"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "served over plain http: {cookie}");
    let token = answer.session_token();
    assert!(!answer.body.contains(&token), "the token is only in the cookie");
    let profile = answer.json();
    assert_eq!(profile["user"]["email"], "admin@acme.test");
    assert_eq!(profile["user"]["platform_admin"], false);
    assert_eq!(profile["user"]["memberships"][0]["role"], "admin");
    assert_eq!(answer.header("cache-control").as_deref(), Some("no-store"));

    // The cookie and the bearer header both authenticate.
    let me = p.send(client().get(p.app.url("/admin/v1/auth/me")).header("cookie", format!("{COOKIE}={token}"))).await;
    me.assert(200, "");
    assert_eq!(me.json()["user"]["id"], "usr_demo_acme_admin");
    p.get("/auth/me", Some(&token)).await.assert(200, "");

    // Wrong password and unknown email: one answer.
    let wrong = p.login_raw("admin@acme.test", "nope").await;
    let unknown = p.login_raw("nobody@acme.test", "nope").await;
    wrong.assert(401, "invalid_credentials");
    assert_eq!(wrong.body, unknown.body);

    // Logout revokes server-side: the same token is dead even as a bearer.
    let out = p.cookie_post("/auth/logout", &token, json!({})).await;
    out.assert(200, "");
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    p.get("/auth/me", Some(&token)).await.assert(401, "session_expired");
    p.get("/auth/me", None).await.assert(401, "unauthenticated");
    let stored = p.sql(&format!("SELECT revoked FROM admin_sessions WHERE token_hash = '{}'", sha256_hex(&token)));
    assert_eq!(int(&stored[0][0]), 1);
    let bootstrap = p.login(ROOT_EMAIL).await;
    assert_eq!(p.get("/auth/me", Some(&bootstrap)).await.json()["user"]["platform_admin"], true, "the bootstrap admin");
}

#[tokio::test(flavor = "multi_thread")]
async fn login_is_rate_limited_per_email_with_retry_after() {
    let p = Playground::start("ratelimit").await;
    for _ in 0..5 {
        p.login_raw("member@acme.test", "wrong").await.assert(401, "invalid_credentials");
    }
    let limited = p.login_raw("member@acme.test", DEMO_PASSWORD).await;
    limited.assert(429, "rate_limited");
    let retry: i64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((890..=900).contains(&retry), "{retry}");
    assert_eq!(limited.json()["retry_after"], retry);
    // Unknown emails are limited alike: no account oracle.
    for _ in 0..5 {
        p.login_raw("ghost@acme.test", "wrong").await;
    }
    p.login_raw("ghost@acme.test", "wrong").await.assert(429, "rate_limited");
    p.login("admin@acme.test").await;
    if host_only("moves the wall clock past the 15-minute window") {
        return;
    }
    p.app.host().clock().advance(Duration::from_secs(901));
    p.login("member@acme.test").await;
    // Per client address: 20 failures across emails block the address.
    for i in 0..20 {
        p.login_raw(&format!("user{i}@x.test"), "wrong").await;
    }
    p.login_raw("admin@acme.test", DEMO_PASSWORD).await.assert(429, "rate_limited");
}

#[tokio::test(flavor = "multi_thread")]
async fn cookie_writes_need_json_and_the_same_origin() {
    let p = Playground::start("csrf").await;
    let token = p.login("admin@acme.test").await;
    let url = p.app.url("/admin/v1/playground/token");
    let body = json!({ "gateway_id": "gw_acme_main" }).to_string();
    let cookie = format!("{COOKIE}={token}");
    let attempt = |content_type: &'static str, origin: Option<String>| {
        let mut request =
            client().post(&url).header("cookie", &cookie).header("content-type", content_type).body(body.clone());
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        p.send(request)
    };
    let r = attempt("application/json", None).await;
    r.assert(403, "csrf_rejected");
    assert_eq!(r.json()["reason"], "origin_missing");
    let r = attempt("application/json", Some("http://evil.test".into())).await;
    assert_eq!(r.json()["reason"], "origin_mismatch");
    let r = attempt("text/plain", Some(p.origin())).await;
    assert_eq!(r.json()["reason"], "content_type");
    let r = attempt("application/x-www-form-urlencoded", Some(p.origin())).await;
    r.assert(403, "csrf_rejected");
    attempt("application/json", Some(p.origin())).await.assert(200, "");
    // Bearer calls are exempt from the Origin rule.
    p.post("/playground/token", Some(&token), json!({ "gateway_id": "gw_acme_main" })).await.assert(200, "");
    assert_eq!(
        p.sql("SELECT count(*) FROM gateway_tokens")[0][0],
        SqlValue::Integer(2),
        "refused writes stored nothing"
    );
    // A cross-site login attempt is refused too.
    let login = client()
        .post(p.app.url("/admin/v1/auth/login"))
        .header("content-type", "application/json")
        .header("origin", "http://evil.test")
        .body(json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string());
    p.send(login).await.assert(403, "csrf_rejected");
}

/// Spin keeps a client's own `spin-client-addr` / `spin-full-url` and appends its
/// values after them: a client that rotates forged addresses is still limited by
/// its real one, and a forged https URL does not make the cookie `Secure`.
#[tokio::test(flavor = "multi_thread")]
async fn forged_spin_headers_neither_dodge_the_rate_limit_nor_change_the_cookie() {
    let p = Playground::start("forged").await;
    let login = |email: String, forged: usize| {
        let body = json!({ "email": email, "password": "wrong" }).to_string();
        p.send(
            client()
                .post(p.app.url("/admin/v1/auth/login"))
                .header("content-type", "application/json")
                .header("spin-client-addr", format!("10.0.{}.{}:1", forged / 256, forged % 256))
                .header("spin-full-url", "https://forged.test/admin/v1/auth/login")
                .body(body),
        )
    };
    for i in 0..20 {
        login(format!("user{i}@x.test"), i).await.assert(401, "invalid_credentials");
    }
    login("admin@acme.test".to_string(), 99).await.assert(429, "rate_limited");
    let fresh = Playground::start("forged-cookie").await;
    let ok = fresh
        .send(
            client()
                .post(fresh.app.url("/admin/v1/auth/login"))
                .header("content-type", "application/json")
                .header("spin-full-url", "https://forged.test/admin/v1/auth/login")
                .body(json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string()),
        )
        .await;
    ok.assert(200, "");
    assert!(!ok.header("set-cookie").unwrap().contains("Secure"), "served over http: {:?}", ok.header("set-cookie"));
}

#[tokio::test(flavor = "multi_thread")]
async fn impersonation_is_short_recorded_and_cannot_mint() {
    let p = Playground::start("impersonate").await;
    let admin = p.login("platform@demo.test").await;
    let r = p.cookie_post("/auth/impersonate", &admin, json!({ "user_id": "usr_demo_acme_member" })).await;
    r.assert(200, "");
    assert!(r.header("set-cookie").unwrap().contains("Max-Age=1800"));
    assert_eq!(r.json()["impersonator"], json!({ "id": "usr_demo_platform", "email": "platform@demo.test" }));
    let imp = r.session_token();
    assert_eq!(p.get("/auth/me", Some(&imp)).await.json()["user"]["email"], "member@acme.test");
    p.post("/playground/token", Some(&imp), json!({ "gateway_id": "gw_acme_main" }))
        .await
        .assert(403, "impersonation_forbidden");
    let audit = p.sql("SELECT actor_id, action, target_id FROM audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(
        audit[0].iter().map(text).collect::<Vec<_>>(),
        ["usr_demo_platform", "impersonate", "usr_demo_acme_member"]
    );
    let sessions =
        p.sql("SELECT impersonator_id, expires_at - created_at FROM admin_sessions WHERE impersonator_id IS NOT NULL");
    assert_eq!((text(&sessions[0][0]), int(&sessions[0][1])), ("usr_demo_platform".to_string(), 1800));
    p.post("/auth/impersonate", Some(&admin), json!({ "user_id": "usr_nobody" })).await.assert(404, "user_not_found");
    if host_only("moves the wall clock past the impersonation's 30 minutes") {
        return;
    }
    p.app.host().clock().advance(Duration::from_secs(1800));
    p.get("/auth/me", Some(&imp)).await.assert(401, "session_expired");
    // The session that started it ends with it: the browser's cookie held only the impersonation.
    p.get("/auth/me", Some(&admin)).await.assert(401, "session_expired");
}

// ---- the role matrix ------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Who {
    Platform,
    TenantAdmin,
    ScopedAdmin,
    Member,
    Viewer,
    OtherTenantAdmin,
    Impersonated,
    Anonymous,
    Expired,
}

const ROUTES: [&str; 10] =
    ["me", "logout", "impersonate", "token", "search", "trace", "trace_alias", "gateways", "traces", "login"];

/// Expected (status, error_code) of a route for a caller; "" = success.
fn expected(who: Who, route: &str) -> (u16, &'static str) {
    use Who::*;
    match (who, route) {
        (_, "login") => (401, "invalid_credentials"),
        (Anonymous, _) => (401, "unauthenticated"),
        (Expired, _) => (401, "session_expired"),
        (_, "me" | "logout" | "gateways") => (200, ""),
        (Platform, _) => (200, ""),
        (Impersonated, "impersonate" | "token") => (403, "impersonation_forbidden"),
        (_, "impersonate") => (403, "insufficient_role"),
        // acme/main and its traces do not exist for these two.
        (ScopedAdmin | OtherTenantAdmin, "token" | "search" | "traces") => (404, "gateway_not_found"),
        (ScopedAdmin | OtherTenantAdmin, "trace" | "trace_alias") => (404, "trace_not_found"),
        (TenantAdmin | Impersonated, _) => (200, ""),
        (Member, "token" | "search") => (200, ""),
        (Member, _) => (403, "insufficient_role"),
        (Viewer, _) => (403, "insufficient_role"),
        _ => unreachable!("{who:?} {route}"),
    }
}

/// `email` is whose password the login cell gets wrong (each caller its own,
/// so the per-email rate limit never kicks in).
async fn call(p: &Playground, route: &str, token: Option<&str>, email: &str) -> Answer {
    match route {
        "me" => p.get("/auth/me", token).await,
        "logout" => p.post("/auth/logout", token, json!({})).await,
        "impersonate" => p.post("/auth/impersonate", token, json!({ "user_id": "usr_demo_acme_member" })).await,
        "token" => p.post("/playground/token", token, json!({ "gateway_id": "gw_acme_main" })).await,
        "search" => p.get("/playground/search?q=matrix&gateway_id=gw_acme_main", token).await,
        "trace" => p.get("/playground/trace/trc_acme_main_1", token).await,
        "trace_alias" => p.get("/traces/trc_acme_main_1", token).await,
        "gateways" => p.get("/gateways", token).await,
        "traces" => p.get("/playground/traces?gateway_id=gw_acme_main&limit=5", token).await,
        "login" => p.login_raw(email, "not-the-password").await,
        other => unreachable!("{other}"),
    }
}

async fn session_for(p: &Playground, who: Who, platform: &str) -> Option<String> {
    let email = match who {
        Who::Platform => "platform@demo.test",
        Who::TenantAdmin | Who::Expired => "admin@acme.test",
        Who::ScopedAdmin => "scoped-admin@acme.test",
        Who::Member => "member@acme.test",
        Who::Viewer => "viewer@acme.test",
        Who::OtherTenantAdmin => "admin@euco.test",
        Who::Impersonated => return Some(p.impersonate(platform, "usr_demo_acme_admin").await),
        Who::Anonymous => return None,
    };
    Some(p.login(email).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn role_matrix_every_caller_times_every_route() {
    use Who::*;
    let p = Playground::start("matrix").await;
    let platform = p.login("platform@demo.test").await;
    let mut cells = 0;
    for who in [Platform, TenantAdmin, ScopedAdmin, Member, Viewer, OtherTenantAdmin, Impersonated, Anonymous] {
        let token = session_for(&p, who, &platform).await;
        for route in ROUTES {
            // Logout ends the session it is given (and an impersonation's parent): give it its own.
            let token = match route {
                "logout" => session_for(&p, who, &p.login("platform@demo.test").await).await,
                _ => token.clone(),
            };
            let answer = call(&p, route, token.as_deref(), &format!("{who:?}@matrix.test")).await;
            let (status, code) = expected(who, route);
            assert_eq!(
                (answer.status, if code.is_empty() { String::new() } else { answer.code() }),
                (status, code.to_string()),
                "{who:?} × {route}: {}",
                answer.body
            );
            cells += 1;
        }
    }
    // What the successful cells saw is the caller's own view.
    let gateways = |token: String| {
        let p = &p;
        async move { p.get("/gateways", Some(&token)).await.json()["gateways"].as_array().unwrap().len() }
    };
    assert_eq!(gateways(platform.clone()).await, 6);
    assert_eq!(gateways(p.login("admin@acme.test").await).await, 3);
    assert_eq!(gateways(p.login("scoped-admin@acme.test").await).await, 1);
    assert_eq!(gateways(p.login("admin@euco.test").await).await, 2);
    let scoped = p.login("scoped-admin@acme.test").await;
    p.post("/playground/token", Some(&scoped), json!({ "gateway_id": "gw_acme_second" })).await.assert(200, "");
    p.get("/traces/trc_acme_second_2", Some(&scoped)).await.assert(200, "");

    // The expired column: every session ends when the clock passes 12 hours.
    let expired = session_for(&p, Expired, &platform).await;
    p.expire_sessions();
    for route in ROUTES {
        let answer = call(&p, route, expired.as_deref(), "expired@matrix.test").await;
        let (status, code) = expected(Expired, route);
        assert_eq!((answer.status, answer.code()), (status, code.to_string()), "Expired × {route}: {}", answer.body);
        cells += 1;
    }
    assert_eq!(cells, 9 * ROUTES.len());
}

// ---- the mint -------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn tokens_live_1800_s_and_minting_deletes_only_expired_ones() {
    let p = Playground::start("ttl").await;
    let token = p.login("member@acme.test").await;
    let mint = || async {
        let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": "gw_acme_main" })).await;
        r.assert(200, "");
        r.json()
    };
    let first = mint().await;
    let a = first["token"].as_str().unwrap().to_string();
    assert!(a.starts_with("myra_") && a.len() == 69, "{a}");
    assert!(a[5..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{a}");
    assert_eq!((first["tenant_slug"].as_str(), first["gateway_slug"].as_str()), (Some("acme"), Some("main")));
    let row = p.sql(&format!(
        "SELECT created_at, expires_at, scopes, kind, gateway_id FROM gateway_tokens WHERE token_hash = '{}'",
        sha256_hex(&a)
    ));
    assert_eq!(row.len(), 1, "stored by hash");
    assert_eq!(int(&row[0][1]) - int(&row[0][0]), 1800);
    assert_eq!(
        row[0][2..].iter().map(text).collect::<Vec<_>>(),
        ["[\"playground\"]".to_string(), "playground".to_string(), "gw_acme_main".to_string()]
    );
    // expires_at is ISO 8601 of the stored expiry.
    let expires = first["expires_at"].as_str().unwrap();
    assert!(expires.len() == 20 && expires.ends_with('Z') && expires.as_bytes()[10] == b'T', "{expires}");
    assert_eq!(p.sql("SELECT count(*) FROM gateway_tokens WHERE token_hash LIKE 'myra_%'")[0][0], SqlValue::Integer(0));

    // (Margins of a few seconds: the real clock keeps running underneath.)
    if host_only("moves the wall clock past the token's 30 minutes") {
        return;
    }
    p.app.host().clock().advance(Duration::from_secs(1790));
    let b = mint().await["token"].as_str().unwrap().to_string();
    let hashes = || p.sql("SELECT token_hash FROM gateway_tokens").iter().map(|r| text(&r[0])).collect::<Vec<_>>();
    assert_eq!(hashes().len(), 2, "a is still valid, so it stays");
    p.app.host().clock().advance(Duration::from_secs(11));
    let c = mint().await["token"].as_str().unwrap().to_string();
    let left = hashes();
    assert!(!left.contains(&sha256_hex(&a)), "the expired token was cleaned up");
    assert!(left.contains(&sha256_hex(&b)) && left.contains(&sha256_hex(&c)), "valid tokens stay");
    // Not gated by playground_enabled: a frozen tenant's gateway still mints.
    let platform = p.login("platform@demo.test").await;
    let frozen = p.post("/playground/token", Some(&platform), json!({ "gateway_id": "gw_frozen_main" })).await;
    frozen.assert(200, "");
    assert_eq!(frozen.json()["tenant_slug"], "frozen");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_mints_keep_all_valid_tokens() {
    let p = Arc::new(Playground::start("concurrent").await);
    let token = p.login("admin@acme.test").await;
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let (p, token) = (p.clone(), token.clone());
            tokio::spawn(async move {
                let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": "gw_acme_main" })).await;
                r.assert(200, "");
                r.json()["token"].as_str().unwrap().to_string()
            })
        })
        .collect();
    let mut minted = Vec::new();
    for h in handles {
        minted.push(h.await.unwrap());
    }
    minted.sort();
    minted.dedup();
    assert_eq!(minted.len(), 10, "ten distinct tokens");
    let stored: Vec<String> = p
        .sql("SELECT token_hash FROM gateway_tokens WHERE gateway_id = 'gw_acme_main'")
        .iter()
        .map(|r| text(&r[0]))
        .collect();
    assert_eq!(stored.len(), 10);
    for t in &minted {
        assert!(stored.contains(&sha256_hex(t)));
    }
}

// ---- search ------------------------------------------------------------------------------------

fn header_of(r: &RecordedRequest, name: &str) -> Option<String> {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_eu_gate_through_the_route_for_each_demo_gateway() {
    let p = Playground::start("eugate").await;
    let token = p.login("platform@demo.test").await;
    let search = |gw: &'static str| {
        let (p, token) = (&p, token.clone());
        async move { p.get(&format!("/playground/search?q=fjord+weather&gateway_id={gw}"), Some(&token)).await }
    };

    let r = search("gw_acme_main").await;
    r.assert(200, "");
    let v = r.json();
    assert_eq!(
        (v["query"].as_str(), v["provider"].as_str(), v["eu_region_routing"].as_bool()),
        (Some("fjord weather"), Some("brave"), Some(false))
    );
    assert_eq!(v["results"].as_array().unwrap().len(), 5, "at most five");
    assert_eq!(v["results"][0], json!({ "title": "Brave 0", "url": "https://brave.example/0", "snippet": "b0" }));
    let seen = p.brave.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, http::Method::GET);
    assert_eq!(seen[0].path_and_query, "/b/res/v1/web/search?q=fjord%20weather&count=5");
    assert_eq!(header_of(&seen[0], "x-subscription-token").as_deref(), Some("demo-brave-key-acme-main"));

    let r = search("gw_acme_second").await;
    r.assert(200, "");
    assert_eq!(r.json()["provider"], "linkup");
    assert_eq!(r.json()["results"][4]["snippet"], "l4");
    let r = search("gw_euco_eu-linkup").await;
    r.assert(200, "");
    assert_eq!(r.json()["eu_region_routing"], true, "the tenant's EU floor");
    let seen = p.linkup.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].method.as_str(), seen[0].path_and_query.as_str()), ("POST", "/v1/search"));
    assert_eq!(header_of(&seen[0], "authorization").as_deref(), Some("Bearer demo-linkup-key-acme-second"));
    assert_eq!(header_of(&seen[1], "authorization").as_deref(), Some("Bearer demo-linkup-key-euco"));
    let body: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(body, json!({ "q": "fjord weather", "depth": "standard", "outputType": "searchResults" }));

    let refused = search("gw_euco_eu-brave").await;
    refused.assert(403, "eu_gate_refused");
    let reason = refused.json()["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("eu_region_routing") && reason.contains("brave"), "{reason}");
    search("gw_acme_nokey").await.assert(503, "search_key_missing");
    search("gw_frozen_main").await.assert(403, "feature_disabled");
    assert_eq!(p.brave.requests().len(), 1, "no refused probe reached Brave");
    assert_eq!(p.linkup.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_probe_ignores_the_platform_linkup_key() {
    let p = Playground::start("platformkey").await;
    let token = p.login("admin@acme.test").await;
    let r = p.get("/playground/search?q=anything&gateway_id=gw_acme_nokey", Some(&token)).await;
    r.assert(503, "search_key_missing");
    assert!(r.json()["message"].as_str().unwrap().contains("platform Linkup key"), "{}", r.body);
    assert!(p.brave.requests().is_empty() && p.linkup.requests().is_empty(), "the probe sent nothing anywhere");
    assert!(!r.body.contains(PLATFORM_LINKUP_KEY));
    assert!(!p.app.log().contains(PLATFORM_LINKUP_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_errors_are_classified_against_scripted_mocks() {
    let p = Playground::start("providers").await;
    let token = p.login("admin@acme.test").await;
    let search = || p.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token));
    for (mode, status, code) in [
        (Mode::Status(401), 502, "provider_auth_failed"),
        (Mode::Status(403), 502, "provider_auth_failed"),
        (Mode::Status(500), 502, "provider_unavailable"),
        (Mode::Status(503), 502, "provider_unavailable"),
        (Mode::Malformed, 502, "provider_malformed"),
        (Mode::Slow(Duration::from_secs(5)), 504, "provider_timeout"),
    ] {
        p.set_brave(mode);
        let r = search().await;
        r.assert(status, code);
        assert_eq!(r.json()["provider"], "brave");
        assert!(!r.body.contains("provider words"), "provider text never passes: {}", r.body);
    }
    p.set_brave(Mode::Status(503));
    assert_eq!(search().await.json()["status"], 503);
    p.set_brave(Mode::RateLimited("17"));
    let r = search().await;
    r.assert(429, "provider_rate_limited");
    assert_eq!(r.header("retry-after").as_deref(), Some("17"));
    assert_eq!(r.json()["retry_after"], 17);
    p.set_brave(Mode::Ok);
    search().await.assert(200, "");

    // Unreachable: the provider's address refuses connections.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dead = Playground::start_with("unreachable", |mut o| {
        o.redirects.insert("brave.test:80".into(), closed);
        o
    })
    .await;
    let token = dead.login("admin@acme.test").await;
    dead.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token)).await.assert(502, "provider_unreachable");
    // A base URL moved without its origin is refused by the allow-list, typed.
    let moved = Playground::start_with("notallowed", |o| o.variable("brave_base_url", "http://elsewhere.test")).await;
    let token = moved.login("admin@acme.test").await;
    moved.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token)).await.assert(502, "provider_not_allowed");
}

// ---- traces ------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn traces_read_in_step_order_with_data_inline() {
    let p = Playground::start("traces").await;
    let token = p.login("admin@acme.test").await;
    let list = p.get("/playground/traces?gateway_id=gw_acme_main", Some(&token)).await;
    list.assert(200, "");
    let traces = list.json()["traces"].as_array().unwrap().clone();
    assert_eq!(traces.len(), 3);
    for t in &traces {
        assert!(
            t["id"].is_string() && t["started_at"].is_i64() && t["model"].is_string() && t["status"].is_string(),
            "{t}"
        );
    }
    let newest = traces[0]["id"].as_str().unwrap();
    let r = p.get(&format!("/playground/trace/{newest}"), Some(&token)).await;
    r.assert(200, "");
    let v = r.json();
    assert_eq!(v["trace"]["gateway_id"], "gw_acme_main");
    assert_eq!((v["trace"]["tenant_slug"].as_str(), v["trace"]["gateway_slug"].as_str()), (Some("acme"), Some("main")));
    let steps = v["steps"].as_array().unwrap();
    assert!((3..=12).contains(&steps.len()));
    assert_eq!(steps.last().unwrap()["name"], "response.done");
    assert!(steps.iter().all(|s| s["data"].is_object()), "data decoded inline");
    let starts: Vec<i64> = steps.iter().map(|s| s["started_at"].as_i64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(p.get(&format!("/traces/{newest}"), Some(&token)).await.body, r.body);
    // Every demo gateway has a few traces of 3-12 steps.
    let platform = p.login("platform@demo.test").await;
    for gw in
        ["gw_acme_main", "gw_acme_nokey", "gw_acme_second", "gw_euco_eu-linkup", "gw_euco_eu-brave", "gw_frozen_main"]
    {
        let list = p.get(&format!("/playground/traces?gateway_id={gw}"), Some(&platform)).await.json();
        let ids: Vec<String> =
            list["traces"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect();
        assert!(ids.len() >= 2, "{gw}");
        for id in ids {
            let n = p.get(&format!("/traces/{id}"), Some(&platform)).await.json()["steps"].as_array().unwrap().len();
            assert!((3..=12).contains(&n), "{id}: {n}");
        }
    }
    // Unknown and other-tenant traces answer alike.
    let euco = p.login("admin@euco.test").await;
    let other = p.get(&format!("/traces/{newest}"), Some(&euco)).await;
    other.assert(404, "trace_not_found");
    assert_eq!(other.body, p.get("/traces/trc_does_not_exist", Some(&euco)).await.body);
}

/// Writes trace `id` of `steps` steps into the app's database file in one
/// statement, with every kind of stored `data` the read must re-emit as it
/// did before streaming: canonical JSON (copied through), unsorted keys,
/// whitespace, text that is not JSON, `\u` escapes, floats, duplicate keys.
fn write_long_trace(p: &Playground, id: &str, steps: usize) {
    p.sql(&format!(
        "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status)
         VALUES ('{id}', 'gw_acme_main', 1796000000000, NULL, 'ratatoskr-large', 'ok')"
    ));
    let data = r#"CASE i % 12
        WHEN 0 THEN '{"model":"ratatoskr-large","output":"A streamed chunk.","tokens":' || i || '}'
        WHEN 1 THEN '{"tokens":1,"model":"unsorted"}'
        WHEN 2 THEN '{ "a" : [ 1 , 2 ] }'
        WHEN 3 THEN 'not json at all'
        WHEN 4 THEN '{"u":"\u00e5\ud83d\ude00 å ✓"}'
        WHEN 5 THEN '[1.0,1e5,-0,0.5,12345678901234567890]'
        WHEN 6 THEN '{"a":1,"a":2}'
        WHEN 7 THEN '"a \/ b"'
        WHEN 8 THEN ''
        WHEN 9 THEN '{"q":"\"quoted\" \\ \n"}'
        WHEN 10 THEN '42'
        ELSE '{"seq":' || i || '}' END"#;
    p.sql(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {steps})
         INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data)
         SELECT '{id}', i, CASE i % 3 WHEN 0 THEN 'llm.call' WHEN 1 THEN 'tool \"q\"' || char(10) ELSE 'résumé' END,
                1796000000000 + i * 15, CASE WHEN i % 5 = 0 THEN NULL ELSE 1796000000012 + i * 15 END, {data}
           FROM n"
    ));
}

/// The body as the playground built it before streaming, from the rows the
/// test wrote: one `Value` (data decoded, or kept as a string), serialized once.
fn trace_body_as_before(p: &Playground, id: &str) -> String {
    let opt_int = |v: &SqlValue| match v {
        SqlValue::Null => Value::Null,
        v => json!(int(v)),
    };
    let tr = p.sql(&format!(
        "SELECT tr.id, tr.gateway_id, tr.started_at, tr.ended_at, tr.model, tr.status, g.slug, t.slug
           FROM traces tr JOIN gateways g ON g.id = tr.gateway_id JOIN tenants t ON t.id = g.tenant_id
          WHERE tr.id = '{id}'"
    ));
    let tr = &tr[0];
    let steps: Vec<Value> = p
        .sql(&format!("SELECT name, started_at, ended_at, data FROM trace_steps WHERE trace_id = '{id}' ORDER BY seq"))
        .iter()
        .map(|r| {
            let data = text(&r[3]);
            json!({
                "name": text(&r[0]),
                "started_at": opt_int(&r[1]),
                "ended_at": opt_int(&r[2]),
                "data": serde_json::from_str::<Value>(&data).unwrap_or(Value::String(data)),
            })
        })
        .collect();
    let trace = json!({
        "id": text(&tr[0]),
        "gateway_id": text(&tr[1]),
        "tenant_slug": text(&tr[7]),
        "gateway_slug": text(&tr[6]),
        "started_at": opt_int(&tr[2]),
        "ended_at": opt_int(&tr[3]),
        "model": text(&tr[4]),
        "status": text(&tr[5]),
        "step_count": steps.len(),
    });
    json!({ "trace": trace, "steps": steps }).to_string()
}

#[track_caller]
fn assert_same_bytes(got: &str, want: &str) {
    if got != want {
        let at = got.bytes().zip(want.bytes()).take_while(|(a, b)| a == b).count();
        let around = |s: &str| s.get(at.saturating_sub(80)..(at + 80).min(s.len())).unwrap_or("").to_string();
        panic!(
            "bodies differ at byte {at} (lengths {} / {}):\n got: {}\nwant: {}",
            got.len(),
            want.len(),
            around(got),
            around(want)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_trace_streams_the_bytes_it_read_as_before_in_bounded_memory() {
    let p = Playground::start("longtrace").await;
    let token = p.login("admin@acme.test").await;
    write_long_trace(&p, "trc_long_1k", 1_000);
    write_long_trace(&p, "trc_long_100k", 100_000);
    let host = Runtime::selected() == Runtime::Host;
    if host {
        // The sign-in's argon2 hash grew that instance to ~20 MiB: not a trace read's.
        p.app.host().take_memory_peak("playground");
    }
    let small = p.get("/traces/trc_long_1k", Some(&token)).await;
    small.assert(200, "");
    assert_same_bytes(&small.body, &trace_body_as_before(&p, "trc_long_1k"));
    let peak_1k = if host { p.app.host().take_memory_peak("playground").unwrap() } else { 0 };
    let large = p.get("/traces/trc_long_100k", Some(&token)).await;
    large.assert(200, "");
    assert_eq!(large.header("content-type").as_deref(), Some("application/json; charset=utf-8"));
    assert_eq!(large.header("cache-control").as_deref(), Some("no-store"));
    assert_same_bytes(&large.body, &trace_body_as_before(&p, "trc_long_100k"));
    assert!(large.body.len() > 10_000_000, "{}", large.body.len());
    if host_only("peak guest memory is read from the repo's host") {
        return;
    }
    let peak_100k = p.app.host().take_memory_peak("playground").unwrap();
    eprintln!("peak guest memory: 1,000 steps {peak_1k} B, 100,000 steps {peak_100k} B");
    // Before streaming: 3.3 MiB and 230 MiB (the whole trace as rows, values and one body).
    assert!(peak_1k > 0 && peak_1k < 4 << 20, "{peak_1k}");
    assert!(peak_100k <= 2 * peak_1k, "100 times the steps, at most twice the memory: {peak_100k} vs {peak_1k}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trace_that_fails_after_its_head_is_aborted_never_cut_short() {
    let p = Playground::start("aborted").await;
    let token = p.login("admin@acme.test").await;
    write_long_trace(&p, "trc_broken", 20_000);
    // A step the reader cannot take (a blob as data), far past the first write.
    p.sql("UPDATE trace_steps SET data = x'00ff' WHERE trace_id = 'trc_broken' AND seq = 15000");
    // Straight to the app: the conformance proxy would answer a broken body with its own 502.
    let response =
        reqwest::Client::new().get(p.app.url("/admin/v1/traces/trc_broken")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200, "the head left before the failure");
    let body = response.bytes().await;
    assert!(body.is_err(), "the body is aborted, not ended: got {} bytes", body.map(|b| b.len()).unwrap_or(0));
    // The same failure within the first write is still a typed 500.
    write_long_trace(&p, "trc_early", 20_000);
    p.sql("UPDATE trace_steps SET data = x'00ff' WHERE trace_id = 'trc_early' AND seq = 3");
    p.get("/traces/trc_early", Some(&token)).await.assert(500, "storage_error");
}

// ---- hostile input ---------------------------------------------------------------------------

const INJECTIONS: [&str; 6] = [
    "' OR '1'='1",
    "x'; DROP TABLE users;--",
    "\" OR 1=1 --",
    "1; DELETE FROM gateway_tokens",
    "gw_acme_main' --",
    "%27%3B--",
];

#[tokio::test(flavor = "multi_thread")]
async fn injection_and_oversized_inputs_are_typed_4xx_or_literal_never_500() {
    let p = Playground::start("hostile").await;
    let token = p.login("admin@acme.test").await;
    let platform = p.login("platform@demo.test").await;
    let mut answers = Vec::new();
    let long = "x".repeat(5000);
    let enc = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();

    for evil in INJECTIONS.iter().copied().chain([long.as_str()]) {
        // Sign-in fields: a literal lookup that finds nobody.
        let r = p.login_raw(evil, evil).await;
        assert!(matches!(r.status, 400 | 401), "{}", r.body);
        answers.push(r);
        let r = p.login_raw(&format!("{evil}@acme.test"), DEMO_PASSWORD).await;
        assert!(matches!(r.status, 400 | 401 | 429), "{}", r.body);
        answers.push(r);
        // Ids: refused by their format before any SQL.
        let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": evil })).await;
        r.assert(400, "invalid_gateway_id");
        answers.push(r);
        let r = p.post("/auth/impersonate", Some(&platform), json!({ "user_id": evil })).await;
        r.assert(400, "invalid_user_id");
        answers.push(r);
        let r = p.get(&format!("/playground/search?q=x&gateway_id={}", enc(evil)), Some(&token)).await;
        r.assert(400, "invalid_gateway_id");
        answers.push(r);
        let r = p.get(&format!("/playground/traces?gateway_id={}", enc(evil)), Some(&token)).await;
        r.assert(400, "invalid_gateway_id");
        answers.push(r);
        let r = p.get(&format!("/playground/traces?gateway_id=gw_acme_main&limit={}", enc(evil)), Some(&token)).await;
        r.assert(400, "invalid_limit");
        answers.push(r);
        let r = p.get(&format!("/traces/{}", enc(evil)), Some(&token)).await;
        assert!(matches!(r.status, 400 | 404), "{}", r.body);
        answers.push(r);
        // A bogus session credential is just not a session.
        let r = p.get("/auth/me", Some(&evil.replace(['\n', '\r'], ""))).await;
        assert!(r.status == 401, "{}", r.body);
        answers.push(r);
    }
    // q is data: injection strings go to the provider literally (URL-encoded).
    for evil in INJECTIONS {
        let r = p.get(&format!("/playground/search?q={}&gateway_id=gw_acme_main", enc(evil)), Some(&token)).await;
        r.assert(200, "");
        assert_eq!(r.json()["query"], evil.trim());
        answers.push(r);
    }
    let sent = p.brave.requests();
    assert_eq!(sent.len(), INJECTIONS.len());
    assert!(
        sent[1].path_and_query.ends_with("?q=x%27%3B%20DROP%20TABLE%20users%3B--&count=5"),
        "{}",
        sent[1].path_and_query
    );
    assert!(sent[5].path_and_query.ends_with("?q=%2527%253B--&count=5"), "{}", sent[5].path_and_query);
    // Oversized and malformed input.
    p.get(&format!("/playground/search?q={}&gateway_id=gw_acme_main", "a".repeat(401)), Some(&token))
        .await
        .assert(400, "invalid_query");
    p.get(&format!("/playground/search?q={}&gateway_id=gw_acme_main", "a".repeat(20_000)), Some(&token))
        .await
        .assert(400, "invalid_query");
    p.get(&format!("/playground/search?q={}&gateway_id=gw_acme_main", "é".repeat(400)), Some(&token))
        .await
        .assert(200, "");
    p.get("/playground/search?q=%FF&gateway_id=gw_acme_main", Some(&token)).await.assert(400, "invalid_query");
    let big = json!({ "gateway_id": "gw_acme_main", "pad": "x".repeat(20_000) });
    p.post("/playground/token", Some(&token), big).await.assert(413, "body_too_large");
    let raw = |body: &'static str, content_type: &'static str| {
        p.send(
            client()
                .post(p.app.url("/admin/v1/playground/token"))
                .bearer_auth(&token)
                .header("content-type", content_type)
                .body(body),
        )
    };
    raw("{nope", "application/json").await.assert(400, "invalid_json");
    raw("[\"gw_acme_main\"]", "application/json").await.assert(400, "invalid_json");
    raw("gateway_id=gw_acme_main", "application/x-www-form-urlencoded").await.assert(415, "unsupported_media_type");
    let r = p.send(client().delete(p.app.url("/admin/v1/playground/token")).bearer_auth(&token)).await;
    r.assert(405, "method_not_allowed");
    assert_eq!(r.header("allow").as_deref(), Some("POST"));
    p.get("/playground/nothing", Some(&token)).await.assert(404, "not_found");
    p.get("/playground/trace/a/b", Some(&token)).await.assert(404, "not_found");

    for a in &answers {
        assert!(a.status < 500, "{}: {}", a.status, a.body);
        if a.status >= 400 {
            assert!(!a.code().is_empty(), "typed: {}", a.body);
        }
    }
    // Nothing was dropped or altered.
    assert_eq!(p.sql("SELECT count(*) FROM users")[0][0], SqlValue::Integer(7));
    assert_eq!(p.sql("SELECT count(*) FROM gateways")[0][0], SqlValue::Integer(6));
}

// ---- secrets ------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn no_token_password_or_key_where_it_should_not_be() {
    let p = Playground::start("secrets").await;
    let mut bodies = Vec::new();
    let mut sessions = Vec::new();
    let mut minted = Vec::new();
    for email in [
        "platform@demo.test",
        "admin@acme.test",
        "scoped-admin@acme.test",
        "member@acme.test",
        "viewer@acme.test",
        "admin@euco.test",
    ] {
        let login = p.login_raw(email, DEMO_PASSWORD).await;
        let token = login.session_token();
        bodies.push(login.body.clone());
        for path in ["/auth/me", "/gateways", "/traces/trc_acme_main_1"] {
            bodies.push(p.get(path, Some(&token)).await.body);
        }
        for gw in [
            "gw_acme_main",
            "gw_acme_nokey",
            "gw_acme_second",
            "gw_euco_eu-linkup",
            "gw_euco_eu-brave",
            "gw_frozen_main",
        ] {
            let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": gw })).await;
            if let Some(t) = r.json()["token"].as_str() {
                minted.push(t.to_string());
            }
            bodies.push(p.get(&format!("/playground/search?q=x&gateway_id={gw}"), Some(&token)).await.body);
            bodies.push(p.get(&format!("/playground/traces?gateway_id={gw}"), Some(&token)).await.body);
        }
        sessions.push(token);
    }
    bodies.push(p.login_raw("admin@acme.test", "a-wrong-password-canary").await.body);
    let responses = bodies.join("\n");
    let log = p.app.log();
    assert!(!minted.is_empty());
    // Never in a response body: passwords, hashes, keys, session tokens.
    let mut never: Vec<String> =
        vec![DEMO_PASSWORD.into(), ROOT_PASSWORD.into(), PLATFORM_LINKUP_KEY.into(), "$argon2".into()];
    never.extend(DEMO_KEYS.iter().map(|k| k.to_string()));
    never.extend(sessions.iter().chain(&minted).map(|t| sha256_hex(t)));
    never.extend(sessions.iter().cloned());
    for secret in &never {
        assert!(!responses.contains(secret.as_str()), "{secret} is in a response");
    }
    // Never in the log: any of that, nor a minted token or a tried password.
    never.extend(minted.iter().cloned());
    never.push("a-wrong-password-canary".into());
    for secret in &never {
        assert!(!log.contains(secret.as_str()), "{secret} is in the log:\n{log}");
    }
    // At rest: no token in the clear, passwords only as argon2id.
    let hashes = p.sql("SELECT password_hash FROM users");
    assert!(hashes.iter().all(|r| text(&r[0]).starts_with("$argon2id$v=19$m=19456,t=2,p=1$")));
    let stored: String = p
        .sql("SELECT token_hash FROM gateway_tokens")
        .iter()
        .chain(&p.sql("SELECT token_hash FROM admin_sessions"))
        .map(|r| text(&r[0]))
        .collect();
    for t in sessions.iter().chain(&minted) {
        assert!(!stored.contains(t.as_str()));
    }
}

// ---- outgoing bodies: content-length, early answers ---------------------------------------------

/// What an upstream, WAF or proxy that refuses chunked requests answers 411 to: a body
/// without `content-length`, or one sent with `transfer-encoding`.
fn length_missing(seen: &RecordedRequest) -> bool {
    seen.headers.contains_key("transfer-encoding") || !seen.headers.contains_key("content-length")
}

fn assert_sized(seen: &RecordedRequest) {
    assert_eq!(header_of(seen, "content-length"), Some(seen.body.len().to_string()), "{:?}", seen.headers);
    assert!(!seen.headers.contains_key("transfer-encoding"), "{:?}", seen.headers);
}

async fn inference_via_playground(p: &Playground, body: String) -> Answer {
    let url = p.app.url("/admin/v1/gw/acme/main/v1/chat/completions");
    p.send(
        client().post(url).bearer_auth("myra_from_the_browser").header("content-type", "application/json").body(body),
    )
    .await
}

fn chat_request(text: &str) -> String {
    json!({ "model": "ratatoskr-small", "stream": true, "messages": [{ "role": "user", "content": text }] }).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_linkup_probe_sends_its_body_with_a_content_length() {
    let strict = MockUpstream::start(|seen| async move {
        match length_missing(&seen) {
            true => respond(411, "application/json", "{\"error\":\"length required\"}"),
            false => respond(200, "application/json", linkup_results().to_string()),
        }
    })
    .await;
    let p = Playground::start_with("linkup-length", |mut o| {
        o.redirects.insert("linkup.test:80".into(), strict.addr);
        o
    })
    .await;
    let token = p.login("admin@acme.test").await;
    let r = p.get("/playground/search?q=fjord+weather&gateway_id=gw_acme_second", Some(&token)).await;
    r.assert(200, "");
    assert_eq!(r.json()["provider"], "linkup");
    let seen = strict.requests();
    assert_eq!(seen.len(), 1);
    assert_sized(&seen[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_sends_the_chat_body_with_a_content_length() {
    const STREAM: &str = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fjord ÆØÅ\"}}]}\n\n",
        "data: [DONE]\n\n"
    );
    let strict = MockUpstream::start(|seen| async move {
        if length_missing(&seen) {
            return respond(411, "application/json", "{\"error\":\"length required\"}");
        }
        let mut r = respond(200, "text/event-stream", STREAM);
        r.headers_mut().insert("x-trace-id", "trc_sized".parse().unwrap());
        r
    })
    .await;
    let p = Playground::start_with("inference-length", |o| {
        o.variable("inference_base_url", "http://inference.test/v")
            .variable("inference_origin", "http://inference.test")
            .redirect("inference.test:80", &strict)
    })
    .await;
    let body = chat_request("hvordan er været?");
    let r = inference_via_playground(&p, body.clone()).await;
    r.assert(200, "");
    assert_eq!(r.body, STREAM);
    assert_eq!(r.header("x-trace-id").as_deref(), Some("trc_sized"));
    let seen = strict.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path_and_query.as_str()),
        ("POST", "/v/acme/main/v1/chat/completions")
    );
    assert_eq!(header_of(&seen[0], "authorization").as_deref(), Some("Bearer myra_from_the_browser"));
    assert_eq!(seen[0].body, body.as_bytes());
    assert_sized(&seen[0]);
}

/// An upstream that answers as soon as it has a request's head, never reads the body, and
/// drops the connection a moment later (as a server refusing a request early does). Returns
/// its address and the heads it read.
async fn early_answerer(answer: String) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let _ = socket.write_all(answer.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                // Dropped with the body unread: the sender's next writes fail.
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_relays_an_answer_that_came_before_the_body_was_read() {
    // The inference endpoint's own refusal shape (the simulator's), passed on unchanged.
    let refusal = r#"{"error":{"code":"invalid_token","message":"the token is not valid for this gateway"}}"#;
    let answer = format!(
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nx-trace-id: trc_early\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{refusal}",
        refusal.len()
    );
    let (addr, heads) = early_answerer(answer).await;
    let p = Playground::start_with("inference-early", |mut o| {
        o = o
            .variable("inference_base_url", "http://inference.test")
            .variable("inference_origin", "http://inference.test");
        o.redirects.insert("inference.test:80".into(), addr);
        o
    })
    .await;
    // Larger than the sockets buffer: the upstream hangs up with most of it unread. (The
    // host's outgoing pipe, 2 MiB in wasmtime and in Spin, takes all of a chat body, so the
    // guest's own writes end before that: this pins the relay, it could not fail before.)
    let r = inference_via_playground(&p, chat_request(&"x".repeat(900_000))).await;
    r.assert(401, "");
    assert_eq!(r.body, refusal);
    assert_eq!(r.header("x-trace-id").as_deref(), Some("trc_early"));
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert!(heads[0].to_ascii_lowercase().contains("content-length: "), "{}", heads[0]);
    // A small body the upstream never reads is relayed the same way.
    let r = inference_via_playground(&p, chat_request("hi")).await;
    r.assert(401, "");
    assert_eq!(r.json()["error"]["code"], "invalid_token");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_never_relays_html_or_an_untyped_answer() {
    for (head, upstream_status) in [
        ("HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8", 200),
        ("HTTP/1.1 200 OK", 200),
        ("HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/html", 503),
    ] {
        let page = "<script>alert(document.cookie)</script>";
        let answer = format!("{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}", page.len());
        let (addr, _) = early_answerer(answer).await;
        let p = Playground::start_with("inference-html", |mut o| {
            o = o
                .variable("inference_base_url", "http://inference.test")
                .variable("inference_origin", "http://inference.test");
            o.redirects.insert("inference.test:80".into(), addr);
            o
        })
        .await;
        let r = inference_via_playground(&p, chat_request("hi")).await;
        r.assert(502, "upstream_content_type");
        assert_eq!(r.json()["status"], upstream_status, "{head}");
        assert!(!r.body.contains("<script>"), "{}", r.body);
        assert!(r.header("content-type").unwrap().starts_with("application/json"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_demo_password_the_demo_users_get_a_random_one_shown_once_in_the_log() {
    // spin.toml's default: no demo password. Our requests come from loopback.
    let p = Playground::start_with("generated", |o| o.variable("demo_password", "")).await;
    p.login_raw("platform@demo.test", "ratatoskr-demo").await.assert(401, "invalid_credentials");
    let log = p.app.log();
    let shown: Vec<&str> = log.match_indices("sign in with the password ").map(|(i, m)| &log[i + m.len()..]).collect();
    // Spin writes a component's stderr to its terminal and to its log file:
    // one line in each, the same password.
    let sinks = if Runtime::selected() == Runtime::Host { 1 } else { 2 };
    assert_eq!(shown.len(), sinks, "shown once: {log}");
    assert!(shown.iter().all(|s| s.split_whitespace().next() == shown[0].split_whitespace().next()));
    let password = shown[0].split_whitespace().next().unwrap().to_string();
    assert!(password.len() >= 20, "{password}");
    p.login_raw("platform@demo.test", &password).await.assert(200, "");
    p.login_raw("viewer@acme.test", &password).await.assert(200, "");
    assert!(!p.app.log()[log.len()..].contains(&password), "never again");
}

// ---- the demo password --------------------------------------------------------------------------

fn password_hashes(p: &Playground) -> Vec<(String, String)> {
    let rows = p.sql("SELECT email, password_hash FROM users ORDER BY email");
    rows.iter().map(|r| (text(&r[0]), text(&r[1]))).collect()
}

/// The same database file under a new app with `demo_password` set to `password`.
async fn restart(p: Playground, password: &str) -> Playground {
    let Playground { app, brave, linkup, brave_mode, db_path } = p;
    drop(app);
    let options = base_options(&brave, &linkup, &db_path).variable("demo_password", password);
    let app = TestApp::start(options).await.expect("the playground restarts on the same database");
    Playground { app, brave, linkup, brave_mode, db_path }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_demo_password_reaches_the_demo_users_after_a_restart_and_no_one_else() {
    const CHANGED: &str = "demo-pw-changed-4b2f";
    let p = Playground::start("demo-password").await;
    p.login("admin@acme.test").await;
    // A real account outside the demo world (it shares the root's password).
    p.sql(
        "INSERT INTO users (id, email, platform_admin, password_hash, created_at)
         SELECT 'usr_real_ops', 'real@ops.test', 0, password_hash, 0 FROM users WHERE email = 'root@ops.test'",
    );
    let before = password_hashes(&p);

    let p = restart(p, CHANGED).await;
    p.login_raw("admin@acme.test", DEMO_PASSWORD).await.assert(401, "invalid_credentials");
    for email in ["admin@acme.test", "platform@demo.test", "member@acme.test"] {
        p.login_raw(email, CHANGED).await.assert(200, "");
    }
    p.login_raw("real@ops.test", ROOT_PASSWORD).await.assert(200, "");
    p.login_raw(ROOT_EMAIL, ROOT_PASSWORD).await.assert(200, "");
    let after = password_hashes(&p);
    for ((email, old), (_, new)) in before.iter().zip(&after) {
        let demo = !["real@ops.test", ROOT_EMAIL].contains(&email.as_str());
        assert_eq!(old != new, demo, "{email}: re-hashed only if a demo user");
    }
    let markers = p.sql("SELECT value FROM settings");
    assert!(markers.iter().all(|r| !text(&r[0]).contains(CHANGED) && !text(&r[0]).contains(DEMO_PASSWORD)));

    // The same password again: nothing is re-hashed.
    let p = restart(p, CHANGED).await;
    p.login_raw("viewer@acme.test", CHANGED).await.assert(200, "");
    assert_eq!(password_hashes(&p), after);
}
