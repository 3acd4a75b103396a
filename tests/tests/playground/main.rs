//! The Playground API (`/admin/v1/...`, seed 001) through the real
//! host, the repo's spin.toml and the built playground.wasm, with the demo
//! world seeded and the web-search providers pointed at scripted mocks.
//!
//! This file holds the app and the client the tests share; the scenarios
//! are its modules.

mod hostile;
mod inference;
mod mint;
mod search;
mod secrets;
mod sessions;
mod traces;

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

fn header_of(r: &RecordedRequest, name: &str) -> Option<String> {
    r.headers.get(name).map(|v| v.to_str().unwrap().to_string())
}

/// What an upstream, WAF or proxy that refuses chunked requests answers 411 to: a body
/// without `content-length`, or one sent with `transfer-encoding`.
fn length_missing(seen: &RecordedRequest) -> bool {
    seen.headers.contains_key("transfer-encoding") || !seen.headers.contains_key("content-length")
}

fn assert_sized(seen: &RecordedRequest) {
    assert_eq!(header_of(seen, "content-length"), Some(seen.body.len().to_string()), "{:?}", seen.headers);
    assert!(!seen.headers.contains_key("transfer-encoding"), "{:?}", seen.headers);
}
