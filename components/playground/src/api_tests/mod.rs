//! The whole API end to end, natively: real SQL on a bundled SQLite, a
//! clock the tests move, a deterministic "CSPRNG" and a scripted egress.
//! Every scenario of the Playground is here; the component tests
//! (tests/tests/playground) keep only what the wasm boundary adds.
//!
//! This file holds the world the tests share; the scenarios are its modules.

mod mint;
mod passwords;
mod search;
mod sessions;
mod setup;
mod sign_in_limits;
mod trace_reads;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Value};

use crate::api::handle;
use crate::auth::{self, SESSION_COOKIE};
use crate::context::{Config, Ctx, Random};
use crate::db::testing::MemDb;
use crate::db::Db;
use crate::egress::{Egress, Method, OutboundRequest, OutboundResponse, TransportFailure};
use crate::http::{Body, Request, Response};
use crate::util::{sha256_hex, BaseUrl};
use crate::{schema, seed, tokens, trace_pages, traces};

const DEMO_PASSWORD: &str = "demo-pass-3141";
const ROOT_EMAIL: &str = "root@ops.test";
const ROOT_PASSWORD: &str = "root-pass-2718";
const ORIGIN: &str = "http://console.test:3000";
const T0_MS: i64 = 1_750_000_000_000;

/// Distinct, deterministic bytes per call (the tests need uniqueness, not secrecy).
struct CountingRandom(AtomicU64);

impl Random for CountingRandom {
    fn fill(&self, buf: &mut [u8]) {
        use sha2::Digest;
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        let digest = sha2::Sha256::digest(n.to_le_bytes());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = digest[i % 32];
        }
    }
}

#[derive(Debug, Clone)]
struct Sent {
    method: Method,
    authority: String,
    path_and_query: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

type Script = Box<dyn Fn(&OutboundRequest) -> Result<OutboundResponse, TransportFailure>>;

struct FakeEgress {
    sent: RefCell<Vec<Sent>>,
    script: RefCell<Script>,
}

impl Egress for FakeEgress {
    fn send(&self, r: &OutboundRequest) -> Result<OutboundResponse, TransportFailure> {
        self.sent.borrow_mut().push(Sent {
            method: r.method,
            authority: r.authority.clone(),
            path_and_query: r.path_and_query.clone(),
            headers: r.headers.clone(),
            body: r.body.clone(),
        });
        (self.script.borrow())(r)
    }
}

fn ok_body(status: u16, body: Value) -> Result<OutboundResponse, TransportFailure> {
    Ok(OutboundResponse { status, retry_after: None, body: body.to_string().into_bytes() })
}

fn default_script(r: &OutboundRequest) -> Result<OutboundResponse, TransportFailure> {
    if r.authority.starts_with("brave") {
        ok_body(
            200,
            json!({ "web": { "results": [{ "title": "B", "url": "https://b.test/1", "description": "brave result" }] } }),
        )
    } else {
        ok_body(200, json!({ "results": [{ "name": "L", "url": "https://l.test/1", "content": "linkup result" }] }))
    }
}

struct World {
    db: MemDb,
    config: Config,
    now_ms: Cell<i64>,
    random: CountingRandom,
    egress: FakeEgress,
    /// Every response body and header value, for the leak checks.
    seen: RefCell<Vec<String>>,
    /// Every response body (a session token may be in `Set-Cookie`, never here).
    bodies: RefCell<Vec<String>>,
}

fn config() -> Config {
    Config {
        bootstrap_admin_email: ROOT_EMAIL.into(),
        bootstrap_admin_password: ROOT_PASSWORD.into(),
        seed_demo_data: true,
        demo_password: DEMO_PASSWORD.into(),
        brave_base_url: BaseUrl::parse("http://brave.test/b").unwrap(),
        linkup_base_url: BaseUrl::parse("https://linkup.test").unwrap(),
        provider_timeout_ms: 500,
        trusted_proxies: Vec::new(),
    }
}

impl World {
    fn with_config(config: Config) -> World {
        World {
            db: MemDb::new(),
            config,
            now_ms: Cell::new(T0_MS),
            random: CountingRandom(AtomicU64::new(1)),
            egress: FakeEgress { sent: RefCell::new(Vec::new()), script: RefCell::new(Box::new(default_script)) },
            seen: RefCell::new(Vec::new()),
            bodies: RefCell::new(Vec::new()),
        }
    }

    fn new() -> World {
        Self::with_config(config())
    }

    fn advance_s(&self, s: i64) {
        self.now_ms.set(self.now_ms.get() + s * 1000);
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            db: &self.db,
            config: &self.config,
            now_ms: self.now_ms.get(),
            random: &self.random,
            egress: &self.egress,
        }
    }

    fn script(&self, f: impl Fn(&OutboundRequest) -> Result<OutboundResponse, TransportFailure> + 'static) {
        *self.egress.script.borrow_mut() = Box::new(f);
    }

    fn request(&self, method: &str, target: &str, headers: &[(&str, &str)], body: Option<&str>) -> Response {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut list: Vec<(String, String)> = headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        if !headers.iter().any(|(n, _)| *n == "spin-full-url") {
            list.push(("spin-full-url".into(), format!("{ORIGIN}/admin/v1{target}")));
        }
        if !headers.iter().any(|(n, _)| *n == "spin-client-addr") {
            list.push(("spin-client-addr".into(), "10.1.2.3:40000".into()));
        }
        let req = Request {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            headers: list,
            body: Body::Bytes(body.unwrap_or("").as_bytes().to_vec()),
        };
        let mut response = handle(&self.ctx(), &req);
        // A streamed body (a long trace) is drained here, as the handler writes it.
        if let Some(pages) = response.stream.take() {
            let mut rest = Vec::new();
            let end = trace_pages::drain(pages, &self.db, trace_pages::WRITE_AT, |chunk| {
                rest.extend_from_slice(chunk);
                true
            });
            assert_eq!(end, trace_pages::Drained::Complete);
            response.body.push_str(std::str::from_utf8(&rest).unwrap());
        }
        self.bodies.borrow_mut().push(response.body.clone());
        let mut seen = self.seen.borrow_mut();
        seen.push(response.body.clone());
        seen.extend(response.headers.iter().map(|(_, v)| v.clone()));
        response
    }

    fn get(&self, target: &str, token: &str) -> Response {
        self.request("GET", target, &[("authorization", &format!("Bearer {token}"))], None)
    }

    fn post(&self, target: &str, token: &str, body: Value) -> Response {
        let auth = format!("Bearer {token}");
        self.request(
            "POST",
            target,
            &[("authorization", &auth), ("content-type", "application/json")],
            Some(&body.to_string()),
        )
    }

    /// A cookie POST that passes the CSRF rules.
    fn cookie_post(&self, target: &str, token: &str, body: Value) -> Response {
        let cookie = format!("{SESSION_COOKIE}={token}");
        self.request(
            "POST",
            target,
            &[("cookie", &cookie), ("content-type", "application/json"), ("origin", ORIGIN)],
            Some(&body.to_string()),
        )
    }

    fn try_login(&self, email: &str, password: &str) -> Response {
        self.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json")],
            Some(&json!({ "email": email, "password": password }).to_string()),
        )
    }

    fn login(&self, email: &str) -> String {
        let password = if email == ROOT_EMAIL { ROOT_PASSWORD } else { DEMO_PASSWORD };
        let r = self.try_login(email, password);
        assert_eq!(r.status, 200, "{email}: {}", r.body);
        token_from_cookie(&r)
    }
}

fn json_of(r: &Response) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|_| panic!("not JSON: {}", r.body))
}

fn code(r: &Response) -> String {
    json_of(r)["error_code"].as_str().unwrap_or("").to_string()
}

fn header<'a>(r: &'a Response, name: &str) -> Option<&'a str> {
    r.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn token_from_cookie(r: &Response) -> String {
    let cookie = header(r, "set-cookie").expect("set-cookie");
    cookie.split(';').next().unwrap().split_once('=').unwrap().1.to_string()
}

fn assert_error(r: &Response, status: u16, error_code: &str) {
    assert_eq!((r.status, code(r).as_str()), (status, error_code), "{}", r.body);
}

/// A database file of one test, removed when dropped: racing requests need a
/// real file, each of their opens its own connection (as in Spin).
struct FileDb {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl FileDb {
    fn new(name: &str) -> FileDb {
        let dir = std::env::temp_dir().join(format!("playground-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("race.db");
        let _ = std::fs::remove_file(&path);
        FileDb { dir, path }
    }

    fn world(&self, mut w: World) -> World {
        w.db = MemDb::file(&self.path);
        w
    }

    /// `n` threads, each with its world from `world` on this file, run `each`
    /// at once (released together by a barrier).
    fn race<T: Send + 'static>(&self, n: usize, world: fn() -> World, each: fn(usize, World) -> T) -> Vec<T> {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (path, barrier) = (self.path.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut w = world();
                    w.db = MemDb::file(&path);
                    barrier.wait();
                    each(i, w)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }
}

impl Drop for FileDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn password_hashes(w: &World) -> Vec<(String, String)> {
    let rows = w.db.query("SELECT email, password_hash FROM users ORDER BY email", &[]).unwrap();
    rows.iter().map(|r| (r.text(0).unwrap(), r.text(1).unwrap())).collect()
}

const LOOPBACK: (&str, &str) = ("spin-client-addr", "127.0.0.1:50000");

fn generated() -> Option<String> {
    seed::GENERATED.with(|g| g.borrow_mut().take())
}

fn no_demo_password() -> Config {
    let mut cfg = config();
    cfg.demo_password = String::new();
    cfg
}

impl World {
    fn login_from(&self, addr: &str, email: &str, password: &str) -> Response {
        self.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json"), ("spin-client-addr", addr)],
            Some(&json!({ "email": email, "password": password }).to_string()),
        )
    }

    fn user_count(&self) -> usize {
        self.db.query("SELECT 1 FROM users", &[]).unwrap().len()
    }
}
