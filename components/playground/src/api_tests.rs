//! The whole API end to end, natively: real SQL on a bundled SQLite, a
//! clock the tests move, a deterministic "CSPRNG" and a scripted egress.

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
        list.push(("spin-full-url".into(), format!("{ORIGIN}/admin/v1{target}")));
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

// ---- sign-in, sessions, CSRF ------------------------------------------------------------

#[test]
fn login_sets_a_strict_http_only_cookie_and_returns_the_profile() {
    let w = World::new();
    let r = w.try_login("Admin@Acme.test ", DEMO_PASSWORD);
    assert_eq!(r.status, 200, "{}", r.body);
    let cookie = header(&r, "set-cookie").unwrap();
    assert!(cookie.starts_with("ratatoskr_admin_session=sess_"), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Strict", "; Path=/;", "Max-Age=43200"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http");
    let token = token_from_cookie(&r);
    assert!(!r.body.contains(&token), "the session token is only in the cookie");
    let v = json_of(&r);
    assert_eq!(v["user"]["email"], "admin@acme.test");
    assert_eq!(v["user"]["id"], "usr_demo_acme_admin");
    assert_eq!(v["user"]["platform_admin"], false);
    assert_eq!(
        v["user"]["memberships"],
        json!([{ "tenant_id": "ten_acme", "tenant_slug": "acme", "role": "admin", "gateway_scope": "all" }])
    );
    assert!(v.get("impersonator").is_none());
    // Bearer and cookie both authenticate /auth/me.
    let me = w.get("/auth/me", &token);
    assert_eq!(json_of(&me)["user"]["email"], "admin@acme.test");
    let cookie = format!("{SESSION_COOKIE}={token}");
    let me = w.request("GET", "/auth/me", &[("cookie", &cookie)], None);
    assert_eq!(me.status, 200);
    // Stored only as a hash.
    let stored = w.db.query("SELECT token_hash FROM admin_sessions", &[]).unwrap();
    assert!(stored.iter().all(|r| r.text(0).unwrap() != token));
    assert!(stored.iter().any(|r| r.text(0).unwrap() == sha256_hex(&token)));
    // A scoped admin's scope is a list of gateway ids.
    let scoped = w.try_login("scoped-admin@acme.test", DEMO_PASSWORD);
    assert_eq!(json_of(&scoped)["user"]["memberships"][0]["gateway_scope"], json!(["gw_acme_second"]));
}

#[test]
fn the_cookie_is_secure_over_https() {
    let w = World::new();
    let req = Request {
        method: "POST".into(),
        path: "/auth/login".into(),
        query: String::new(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("spin-full-url".into(), "https://console.example/admin/v1/auth/login".into()),
        ],
        body: Body::Bytes(json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string().into_bytes()),
    };
    let r = handle(&w.ctx(), &req);
    assert!(header(&r, "set-cookie").unwrap().ends_with("; Secure"));
}

#[test]
fn wrong_passwords_and_unknown_emails_get_the_same_answer() {
    let w = World::new();
    let wrong = w.try_login("admin@acme.test", "nope");
    let unknown = w.try_login("nobody@acme.test", "nope");
    assert_error(&wrong, 401, "invalid_credentials");
    assert_eq!(wrong.body, unknown.body);
    assert_eq!(wrong.headers, unknown.headers);
    let injection = w.try_login("' OR '1'='1' --", "' OR '1'='1");
    assert_error(&injection, 401, "invalid_credentials");
    for (body, field) in [
        (json!({ "password": "x" }), "email"),
        (json!({ "email": "a@b", "password": 5 }), "password"),
        (json!({ "email": "a".repeat(255), "password": "x" }), "email"),
        (json!({ "email": "a@b", "password": "x".repeat(1025) }), "password"),
    ] {
        let r = w.request("POST", "/auth/login", &[("content-type", "application/json")], Some(&body.to_string()));
        assert_error(&r, 400, "invalid_request");
        assert_eq!(json_of(&r)["field"], field);
    }
    let r = w.request("POST", "/auth/login", &[("content-type", "text/plain")], Some("{}"));
    assert_error(&r, 415, "unsupported_media_type");
    let r = w.request("POST", "/auth/login", &[("content-type", "application/json")], Some("[1]"));
    assert_error(&r, 400, "invalid_json");
    let r = w.request(
        "POST",
        "/auth/login",
        &[("content-type", "application/json"), ("origin", "http://evil.test")],
        Some(&json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string()),
    );
    assert_error(&r, 403, "csrf_rejected");
}

#[test]
fn login_is_rate_limited_per_email_and_per_address() {
    let w = World::new();
    for _ in 0..5 {
        assert_error(&w.try_login("member@acme.test", "wrong"), 401, "invalid_credentials");
    }
    // Even the right password waits now, and the answer says how long.
    let limited = w.try_login("member@acme.test", DEMO_PASSWORD);
    assert_error(&limited, 429, "rate_limited");
    assert_eq!(header(&limited, "retry-after"), Some("900"));
    assert_eq!(json_of(&limited)["retry_after"], 900);
    // Unknown emails are limited the same way (no account oracle).
    for _ in 0..5 {
        w.try_login("ghost@acme.test", "wrong");
    }
    assert_error(&w.try_login("ghost@acme.test", "wrong"), 429, "rate_limited");
    // Another email from the same address still works (5+5 < 20 failures)...
    w.login("admin@acme.test");
    // ...and the window passes.
    w.advance_s(901);
    w.login("member@acme.test");

    // Per address: 20 failures over many emails block the address.
    let w = World::new();
    for i in 0..20 {
        w.try_login(&format!("user{i}@x.test"), "wrong");
    }
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    let other = w.request(
        "POST",
        "/auth/login",
        &[("content-type", "application/json"), ("spin-client-addr", "10.9.9.9:1")],
        Some(&json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string()),
    );
    assert_eq!(other.status, 200, "another address is not limited");
}

#[test]
fn logout_revokes_server_side_and_expiry_is_session_expired() {
    let w = World::new();
    assert_error(&w.request("GET", "/auth/me", &[], None), 401, "unauthenticated");
    assert_error(&w.request("GET", "/auth/me", &[("authorization", "Basic eDp5")], None), 401, "unauthenticated");
    assert_error(&w.get("/auth/me", "garbage"), 401, "session_expired");
    assert_error(&w.get("/auth/me", &format!("sess_{}", "0".repeat(64))), 401, "session_expired");

    let token = w.login("viewer@acme.test");
    let out = w.cookie_post("/auth/logout", &token, json!({}));
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(header(&out, "set-cookie").unwrap().contains("Max-Age=0"));
    assert_error(&w.get("/auth/me", &token), 401, "session_expired");
    let revoked =
        w.db.one("SELECT revoked FROM admin_sessions WHERE token_hash = ?", &[sha256_hex(&token).into()]).unwrap();
    assert_eq!(revoked.unwrap().int(0).unwrap(), 1);
    // An expired cookie is cleared.
    let cookie = format!("{SESSION_COOKIE}={token}");
    let r = w.request("GET", "/auth/me", &[("cookie", &cookie)], None);
    assert!(header(&r, "set-cookie").unwrap().contains("Max-Age=0"));

    // A session in use lives its 12 hours (a request at least every half hour).
    let token = w.login("viewer@acme.test");
    let mut left = auth::SESSION_TTL_S - 1;
    while left > 0 {
        let step = left.min(auth::IDLE_TIMEOUT_S - 1);
        w.advance_s(step);
        left -= step;
        assert_eq!(w.get("/auth/me", &token).status, 200);
    }
    w.advance_s(1);
    assert_error(&w.get("/auth/me", &token), 401, "session_expired");
    // Bearer logout with an empty body works too.
    let token = w.login("viewer@acme.test");
    let r = w.request("POST", "/auth/logout", &[("authorization", &format!("Bearer {token}"))], None);
    assert_eq!(r.status, 200);
    assert_error(&w.get("/auth/me", &token), 401, "session_expired");
}

#[test]
fn cookie_writes_need_json_and_the_same_origin() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    let cookie = format!("{SESSION_COOKIE}={token}");
    let body = json!({ "gateway_id": "gw_acme_main" }).to_string();
    let post = |headers: &[(&str, &str)]| w.request("POST", "/playground/token", headers, Some(&body));
    let r = post(&[("cookie", &cookie), ("content-type", "application/json")]);
    assert_error(&r, 403, "csrf_rejected");
    assert_eq!(json_of(&r)["reason"], "origin_missing");
    let r = post(&[("cookie", &cookie), ("content-type", "text/plain"), ("origin", ORIGIN)]);
    assert_eq!(json_of(&r)["reason"], "content_type");
    let r = post(&[("cookie", &cookie), ("content-type", "application/json"), ("origin", "http://evil.test")]);
    assert_eq!(json_of(&r)["reason"], "origin_mismatch");
    assert_eq!(post(&[("cookie", &cookie), ("content-type", "application/json"), ("origin", ORIGIN)]).status, 200);
    // Bearer calls are exempt from Origin, but still need JSON (415).
    let bearer = format!("Bearer {token}");
    assert_eq!(post(&[("authorization", &bearer), ("content-type", "application/json")]).status, 200);
    assert_error(&post(&[("authorization", &bearer), ("content-type", "text/plain")]), 415, "unsupported_media_type");
    assert_eq!(w.db.query("SELECT 1 FROM gateway_tokens", &[]).unwrap().len(), 2, "refused writes wrote nothing");
}

#[test]
fn impersonation_is_platform_admin_only_short_recorded_and_cannot_mint() {
    let w = World::new();
    let admin = w.login("platform@demo.test");
    let r = w.cookie_post("/auth/impersonate", &admin, json!({ "user_id": "usr_demo_acme_member" }));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(header(&r, "set-cookie").unwrap().contains("Max-Age=1800"));
    let imp = token_from_cookie(&r);
    let v = json_of(&r);
    assert_eq!(v["user"]["email"], "member@acme.test");
    assert_eq!(v["impersonator"], json!({ "id": "usr_demo_platform", "email": "platform@demo.test" }));
    let me = json_of(&w.get("/auth/me", &imp));
    assert_eq!(me["impersonator"]["email"], "platform@demo.test");
    let audit = w.db.query("SELECT actor_id, action, target_id FROM audit", &[]).unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].text(0).unwrap(), audit[0].text(1).unwrap(), audit[0].text(2).unwrap()),
        ("usr_demo_platform".into(), "impersonate".into(), "usr_demo_acme_member".into())
    );
    // The impersonated session reads as the member but never mints.
    assert_eq!(w.get("/gateways", &imp).status, 200);
    assert_error(
        &w.post("/playground/token", &imp, json!({ "gateway_id": "gw_acme_main" })),
        403,
        "impersonation_forbidden",
    );
    assert_error(
        &w.post("/auth/impersonate", &imp, json!({ "user_id": "usr_demo_acme_viewer" })),
        403,
        "impersonation_forbidden",
    );
    // Short-lived: gone after 30 minutes, and it takes the session that started it along
    // (the browser's cookie held only the impersonation: nothing is left behind).
    w.advance_s(auth::IMPERSONATION_TTL_S - 1);
    assert_eq!(w.get("/auth/me", &imp).status, 200);
    w.advance_s(1);
    assert_error(&w.get("/auth/me", &imp), 401, "session_expired");
    assert_error(&w.get("/auth/me", &admin), 401, "session_expired");
    let admin = w.login("platform@demo.test");

    assert_error(&w.post("/auth/impersonate", &admin, json!({ "user_id": "usr_nobody" })), 404, "user_not_found");
    assert_error(&w.post("/auth/impersonate", &admin, json!({ "user_id": "x' OR 1=1--" })), 400, "invalid_user_id");
    assert_error(&w.post("/auth/impersonate", &admin, json!({})), 400, "invalid_user_id");
    let root_id =
        w.db.one("SELECT id FROM users WHERE email = ?", &[ROOT_EMAIL.into()]).unwrap().unwrap().text(0).unwrap();
    assert_error(&w.post("/auth/impersonate", &admin, json!({ "user_id": root_id })), 403, "impersonation_forbidden");
    let tenant_admin = w.login("admin@acme.test");
    assert_error(
        &w.post("/auth/impersonate", &tenant_admin, json!({ "user_id": "usr_demo_acme_member" })),
        403,
        "insufficient_role",
    );
}

// ---- the mint ----------------------------------------------------------------------------------

#[test]
fn mint_returns_a_myra_token_bound_to_the_gateway() {
    let w = World::new();
    let token = w.login("member@acme.test");
    let r = w.post("/playground/token", &token, json!({ "gateway_id": "gw_acme_main" }));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json_of(&r);
    let minted = v["token"].as_str().unwrap();
    assert!(tokens::is_token(minted), "{minted}");
    assert_eq!(v["tenant_slug"], "acme");
    assert_eq!(v["gateway_slug"], "main");
    let expected = crate::util::iso8601(T0_MS / 1000 + 1800);
    assert_eq!(v["expires_at"], expected);
    let row =
        w.db.one(
            "SELECT gateway_id, scopes, kind, expires_at FROM gateway_tokens WHERE token_hash = ?",
            &[sha256_hex(minted).into()],
        )
        .unwrap()
        .unwrap();
    assert_eq!(row.text(0).unwrap(), "gw_acme_main");
    assert_eq!(row.text(1).unwrap(), "[\"playground\"]");
    assert_eq!(row.text(2).unwrap(), "playground");
    assert_eq!(row.int(3).unwrap(), T0_MS / 1000 + 1800);
}

#[test]
fn mint_is_not_gated_by_playground_enabled_but_search_is() {
    let w = World::new();
    let token = w.login("platform@demo.test");
    let r = w.post("/playground/token", &token, json!({ "gateway_id": "gw_frozen_main" }));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(json_of(&r)["tenant_slug"], "frozen");
    assert_error(&w.get("/playground/search?q=x&gateway_id=gw_frozen_main", &token), 403, "feature_disabled");
    assert!(w.egress.sent.borrow().is_empty());
}

#[test]
fn mint_cleans_up_expired_tokens_and_keeps_valid_ones() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    let mint = || {
        json_of(&w.post("/playground/token", &token, json!({ "gateway_id": "gw_acme_main" })))["token"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let count = || w.db.query("SELECT 1 FROM gateway_tokens WHERE gateway_id = 'gw_acme_main'", &[]).unwrap().len();
    let a = mint();
    w.advance_s(600);
    let b = mint();
    assert_eq!(count(), 2, "both valid: concurrent sessions keep theirs");
    w.advance_s(1200); // a expires exactly now (T0 + 1800)
    let c = mint();
    let hashes: Vec<String> =
        w.db.query("SELECT token_hash FROM gateway_tokens", &[]).unwrap().iter().map(|r| r.text(0).unwrap()).collect();
    assert!(!hashes.contains(&sha256_hex(&a)));
    assert!(hashes.contains(&sha256_hex(&b)) && hashes.contains(&sha256_hex(&c)));
    assert_ne!(b, c);
}

#[test]
fn mint_validates_its_input() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    for body in [
        json!({}),
        json!({ "gateway_id": 5 }),
        json!({ "gateway_id": "" }),
        json!({ "gateway_id": "gw'; DROP TABLE gateways;--" }),
    ] {
        assert_error(&w.post("/playground/token", &token, body), 400, "invalid_gateway_id");
    }
    assert_error(&w.post("/playground/token", &token, json!({ "gateway_id": "gw_nope" })), 404, "gateway_not_found");
    let auth = format!("Bearer {token}");
    let r = w.request(
        "POST",
        "/playground/token",
        &[("authorization", &auth), ("content-type", "application/json")],
        Some("{not json"),
    );
    assert_error(&r, 400, "invalid_json");
    let req = Request {
        method: "POST".into(),
        path: "/playground/token".into(),
        query: String::new(),
        headers: vec![("authorization".into(), auth.clone()), ("content-type".into(), "application/json".into())],
        body: Body::TooLarge,
    };
    assert_error(&handle(&w.ctx(), &req), 413, "body_too_large");
    // The gateways table survived the injection attempt.
    assert_eq!(w.db.query("SELECT 1 FROM gateways", &[]).unwrap().len(), 6);
}

// ---- search ------------------------------------------------------------------------------------

#[test]
fn search_through_every_demo_gateway() {
    let w = World::new();
    let token = w.login("platform@demo.test");
    let search = |gw: &str| w.get(&format!("/playground/search?q=rust+wasm&gateway_id={gw}"), &token);

    let r = search("gw_acme_main");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        json_of(&r),
        json!({ "results": [{ "title": "B", "url": "https://b.test/1", "snippet": "brave result" }], "query": "rust wasm", "provider": "brave", "eu_region_routing": false })
    );
    let sent = w.egress.sent.borrow().last().cloned().unwrap();
    assert_eq!((sent.method, sent.authority.as_str()), (Method::Get, "brave.test"));
    assert_eq!(sent.path_and_query, "/b/res/v1/web/search?q=rust%20wasm&count=5");
    assert!(sent.headers.contains(&("x-subscription-token".into(), "demo-brave-key-acme-main".into())));

    let r = search("gw_acme_second");
    assert_eq!(json_of(&r)["provider"], "linkup");
    let sent = w.egress.sent.borrow().last().cloned().unwrap();
    assert_eq!(
        (sent.method, sent.authority.as_str(), sent.path_and_query.as_str()),
        (Method::Post, "linkup.test", "/v1/search")
    );
    assert!(sent.headers.contains(&("authorization".into(), "Bearer demo-linkup-key-acme-second".into())));
    assert_eq!(
        serde_json::from_str::<Value>(sent.body.as_deref().unwrap()).unwrap(),
        json!({ "q": "rust wasm", "depth": "standard", "outputType": "searchResults" })
    );

    let r = search("gw_euco_eu-linkup");
    assert_eq!(r.status, 200);
    assert_eq!(json_of(&r)["eu_region_routing"], true, "the tenant floor applies");

    let before = w.egress.sent.borrow().len();
    let refused = search("gw_euco_eu-brave");
    assert_error(&refused, 403, "eu_gate_refused");
    assert!(json_of(&refused)["reason"].as_str().unwrap().contains("brave"));
    assert_error(&search("gw_acme_nokey"), 503, "search_key_missing");
    assert!(json_of(&search("gw_acme_nokey"))["message"].as_str().unwrap().contains("platform Linkup key"));
    assert_error(&search("gw_frozen_main"), 403, "feature_disabled");
    assert_eq!(w.egress.sent.borrow().len(), before, "refusals never egress");
}

#[test]
fn a_linkup_gateway_without_a_stored_key_never_egresses() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    // The seed ran at login; now remove the key.
    w.db.exec("UPDATE gateways SET web_search_api_key = NULL WHERE id = 'gw_acme_second'", &[]).unwrap();
    let r = w.get("/playground/search?q=x&gateway_id=gw_acme_second", &token);
    assert_error(&r, 503, "search_key_missing");
    assert_eq!(json_of(&r)["provider"], "linkup");
    assert!(w.egress.sent.borrow().is_empty());
}

#[test]
fn provider_failures_are_classified() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    let search = || w.get("/playground/search?q=x&gateway_id=gw_acme_main", &token);
    w.script(|_| ok_body(401, json!({})));
    assert_error(&search(), 502, "provider_auth_failed");
    w.script(|_| Ok(OutboundResponse { status: 429, retry_after: Some("12".into()), body: vec![] }));
    let r = search();
    assert_error(&r, 429, "provider_rate_limited");
    assert_eq!(header(&r, "retry-after"), Some("12"));
    assert_eq!(json_of(&r)["retry_after"], 12);
    w.script(|_| ok_body(500, json!({})));
    let r = search();
    assert_error(&r, 502, "provider_unavailable");
    assert_eq!(json_of(&r)["status"], 500);
    w.script(|_| Err(TransportFailure::Timeout));
    assert_error(&search(), 504, "provider_timeout");
    w.script(|_| Err(TransportFailure::Unreachable));
    assert_error(&search(), 502, "provider_unreachable");
    w.script(|_| Ok(OutboundResponse { status: 200, retry_after: None, body: b"<html>".to_vec() }));
    assert_error(&search(), 502, "provider_malformed");
    w.script(|_| Err(TransportFailure::NotAllowed));
    assert_error(&search(), 502, "provider_not_allowed");
    for body in w.seen.borrow().iter() {
        assert!(!body.contains("demo-brave-key"), "{body}");
    }
}

#[test]
fn search_validates_q_and_gateway_id_and_keeps_injection_literal() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    for target in [
        "/playground/search?gateway_id=gw_acme_main",
        "/playground/search?q=&gateway_id=gw_acme_main",
        "/playground/search?q=%20%20&gateway_id=gw_acme_main",
        &format!("/playground/search?q={}&gateway_id=gw_acme_main", "a".repeat(401)),
        "/playground/search?q=%ZZ&gateway_id=gw_acme_main",
    ] {
        assert_error(&w.get(target, &token), 400, "invalid_query");
    }
    for target in [
        "/playground/search?q=x",
        "/playground/search?q=x&gateway_id=%27%20OR%201%3D1",
        "/playground/search?q=x&gateway_id=a&gateway_id=b",
    ] {
        assert_error(&w.get(target, &token), 400, "invalid_gateway_id");
    }
    let r = w.get("/playground/search?q=%27%3B%20DROP%20TABLE%20users%3B--&gateway_id=gw_acme_main", &token);
    assert_eq!(r.status, 200);
    assert_eq!(json_of(&r)["query"], "'; DROP TABLE users;--");
    assert!(w
        .egress
        .sent
        .borrow()
        .last()
        .unwrap()
        .path_and_query
        .contains("q=%27%3B%20DROP%20TABLE%20users%3B--&count=5"));
    assert_eq!(w.db.query("SELECT 1 FROM users", &[]).unwrap().len(), 7);
}

// ---- traces and gateways -------------------------------------------------------------------

#[test]
fn trace_reads_follow_the_role_rule_and_return_ordered_decoded_steps() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let r = w.get("/playground/trace/trc_acme_main_3", &admin);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json_of(&r);
    assert_eq!(v["trace"]["id"], "trc_acme_main_3");
    assert_eq!(v["trace"]["gateway_id"], "gw_acme_main");
    assert_eq!(v["trace"]["tenant_slug"], "acme");
    assert_eq!(v["trace"]["gateway_slug"], "main");
    assert_eq!(v["trace"]["status"], "error");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12);
    assert_eq!(steps[0]["name"], "request.received");
    assert_eq!(steps[11]["name"], "response.done");
    assert!(steps[0]["data"].is_object(), "data decoded inline");
    let starts: Vec<i64> = steps.iter().map(|s| s["started_at"].as_i64().unwrap()).collect();
    assert!(starts.windows(2).all(|p| p[0] < p[1]), "in step order");
    assert_eq!(w.get("/traces/trc_acme_main_3", &admin).body, r.body, "the alias answers the same");

    let scoped = w.login("scoped-admin@acme.test");
    assert_error(&w.get("/traces/trc_acme_main_1", &scoped), 404, "trace_not_found");
    assert_eq!(w.get("/traces/trc_acme_second_1", &scoped).status, 200);
    assert_error(&w.get("/traces/trc_acme_main_1", &w.login("member@acme.test")), 403, "insufficient_role");
    assert_error(&w.get("/traces/trc_acme_main_1", &w.login("viewer@acme.test")), 403, "insufficient_role");
    let euco = w.login("admin@euco.test");
    assert_error(&w.get("/traces/trc_acme_main_1", &euco), 404, "trace_not_found");
    assert_eq!(
        w.get("/traces/trc_acme_main_1", &euco).body,
        w.get("/traces/trc_nope", &euco).body,
        "no existence leak"
    );
    assert_eq!(w.get("/traces/trc_acme_main_1", &w.login("platform@demo.test")).status, 200);
    assert_error(&w.get("/traces/x'%20OR%201=1", &admin), 400, "invalid_trace_id");
}

#[test]
fn a_long_trace_reads_as_one_document_across_pages() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let steps = 3 * traces::PAGE + 7;
    w.db.exec(
        "INSERT INTO traces (id, gateway_id, started_at, model, status) VALUES ('trc_long', 'gw_acme_main', 1, 'm', 'ok')",
        &[],
    )
    .unwrap();
    for seq in 0..steps {
        // ~300 bytes a step: more than trace_pages::WRITE_AT in all, so the trace is streamed.
        let data = if seq % 3 == 0 {
            format!("{{\"b\":\"{}\",\"a\":[1.0]}}", "x".repeat(250))
        } else {
            format!("{{\"seq\":\"{}\"}}", "y".repeat(250))
        };
        w.db.exec(
            "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES ('trc_long', ?, 'llm.call', ?, ?, ?)",
            &[seq.into(), seq.into(), (seq + 1).into(), data.as_str().into()],
        )
        .unwrap();
    }
    // As the handler gets it: the first pages as the body, the rest as a stream.
    let undrained = |path: &str| {
        let req = Request {
            method: "GET".into(),
            path: path.into(),
            query: String::new(),
            headers: vec![("authorization".into(), format!("Bearer {admin}"))],
            body: Body::Bytes(Vec::new()),
        };
        handle(&w.ctx(), &req)
    };
    let first = undrained("/traces/trc_long");
    assert_eq!(first.status, 200);
    assert!(first.stream.is_some(), "more than a page: the rest is streamed");
    assert!(first.body.starts_with("{\"steps\":[{\"data\":{\"a\":[1.0],\"b\":\"xxx"), "{}", &first.body[..60]);
    assert!(first.body.len() >= trace_pages::WRITE_AT, "the head leaves with a full first write");
    let r = w.get("/traces/trc_long", &admin);
    assert_eq!(r.body, traces::tests::reference_body(&w.db, "trc_long"));
    assert_eq!(json_of(&r)["trace"]["step_count"], steps);
    // A short trace is one body, nothing streamed.
    let short = undrained("/traces/trc_acme_main_3");
    assert!(short.stream.is_none());
    assert_eq!(short.body, traces::tests::reference_body(&w.db, "trc_acme_main_3"));
}

#[test]
fn trace_lists_are_recent_first_and_limited() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let r = w.get("/playground/traces?gateway_id=gw_acme_main", &admin);
    assert_eq!(r.status, 200, "{}", r.body);
    let list = json_of(&r)["traces"].as_array().unwrap().clone();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["id"], "trc_acme_main_3");
    assert_eq!(list[0].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["id", "model", "started_at", "status"]);
    let r = w.get("/playground/traces?gateway_id=gw_acme_main&limit=1", &admin);
    assert_eq!(json_of(&r)["traces"].as_array().unwrap().len(), 1);
    assert_error(&w.get("/playground/traces?gateway_id=gw_acme_main&limit=0", &admin), 400, "invalid_limit");
    assert_error(&w.get("/playground/traces?gateway_id=gw_acme_main&limit=101", &admin), 400, "invalid_limit");
    assert_error(&w.get("/playground/traces", &admin), 400, "invalid_gateway_id");
    assert_error(&w.get("/playground/traces?gateway_id=gw_euco_eu-linkup", &admin), 404, "gateway_not_found");
    assert_error(
        &w.get("/playground/traces?gateway_id=gw_acme_main", &w.login("member@acme.test")),
        403,
        "insufficient_role",
    );
}

#[test]
fn gateway_lists_show_only_accessible_gateways_and_never_a_key() {
    let w = World::new();
    let ids = |email: &str| -> Vec<String> {
        let r = w.get("/gateways", &w.login(email));
        assert_eq!(r.status, 200);
        json_of(&r)["gateways"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids("platform@demo.test").len(), 6);
    assert_eq!(ids("admin@acme.test"), vec!["gw_acme_main", "gw_acme_nokey", "gw_acme_second"]);
    assert_eq!(ids("scoped-admin@acme.test"), vec!["gw_acme_second"]);
    assert_eq!(ids("viewer@acme.test").len(), 3);
    assert_eq!(ids("admin@euco.test"), vec!["gw_euco_eu-brave", "gw_euco_eu-linkup"]);
    let r = w.get("/gateways", &w.login("admin@euco.test"));
    let first = &json_of(&r)["gateways"][0];
    assert_eq!(
        first,
        &json!({ "id": "gw_euco_eu-brave", "slug": "eu-brave", "tenant_slug": "euco", "playground_enabled": true, "eu_region_routing": true, "web_search": { "provider": "brave" } })
    );
}

// ---- routing, setup, secrets ------------------------------------------------------------------

#[test]
fn unknown_routes_and_methods_are_typed() {
    let w = World::new();
    assert_error(&w.request("GET", "/nope", &[], None), 404, "not_found");
    let r = w.request("DELETE", "/gateways", &[], None);
    assert_error(&r, 405, "method_not_allowed");
    assert_eq!(header(&r, "allow"), Some("GET"));
    assert_error(&w.request("GET", "/auth/login", &[], None), 405, "method_not_allowed");
}

#[test]
fn setup_is_lazy_idempotent_and_bootstraps_the_admin() {
    let w = World::new();
    assert_eq!(schema::state(&w.db).version, 0);
    w.request("GET", "/auth/me", &[], None);
    let state = schema::state(&w.db);
    assert_eq!(state.version, schema::SCHEMA_VERSION);
    assert_eq!(state.bootstrap_admin.as_deref(), Some(ROOT_EMAIL));
    assert_eq!(state.demo_seed.as_deref(), Some(seed::DEMO_SEED_VERSION));
    let counts = |w: &World| {
        ["users", "tenants", "gateways", "memberships", "traces", "trace_steps"]
            .map(|t| w.db.query(&format!("SELECT 1 FROM {t}"), &[]).unwrap().len())
    };
    assert_eq!(counts(&w), [7, 3, 6, 5, 18, 6 * 22]);
    // Running everything again (a racing request) changes nothing.
    schema::migrate(&w.db, 0, 0).unwrap();
    w.db.exec("DELETE FROM settings", &[]).unwrap();
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(counts(&w), [7, 3, 6, 5, 18, 6 * 22]);
    let root = json_of(&w.get("/auth/me", &w.login(ROOT_EMAIL)));
    assert_eq!(root["user"]["platform_admin"], true);
    // Without seed_demo_data only the bootstrap admin exists.
    let mut cfg = config();
    cfg.seed_demo_data = false;
    let w = World::with_config(cfg);
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(counts(&w), [1, 0, 0, 0, 0, 0]);
}

#[test]
fn a_bootstrap_email_with_quotes_is_stored_literally() {
    let mut cfg = config();
    cfg.bootstrap_admin_email = "o'neil\"; drop table users;--@ops.test".into();
    cfg.seed_demo_data = false;
    let w = World::with_config(cfg);
    let r = w.try_login("o'neil\"; drop table users;--@ops.test", ROOT_PASSWORD);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(json_of(&r)["user"]["email"], "o'neil\"; drop table users;--@ops.test");
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

#[test]
fn racing_first_requests_set_up_the_database_once() {
    let file = FileDb::new("race");
    file.race(3, World::new, |i, mut w| {
        w.random = CountingRandom(AtomicU64::new(1000 * (i as u64 + 1)));
        assert_error(&w.request("GET", "/auth/me", &[], None), 401, "unauthenticated");
    });
    let db = MemDb::file(&file.path);
    assert_eq!(db.query("SELECT 1 FROM users", &[]).unwrap().len(), 7);
    assert_eq!(db.query("SELECT 1 FROM schema_version", &[]).unwrap().len(), schema::SCHEMA_VERSION as usize);
    assert_eq!(db.query("SELECT 1 FROM trace_steps", &[]).unwrap().len(), 6 * 22);
}

#[test]
fn no_password_hash_key_or_token_hash_in_any_response() {
    let w = World::new();
    let mut minted = Vec::new();
    let mut sessions = Vec::new();
    for email in [
        "platform@demo.test",
        "admin@acme.test",
        "scoped-admin@acme.test",
        "member@acme.test",
        "viewer@acme.test",
        "admin@euco.test",
    ] {
        let t = w.login(email);
        w.get("/auth/me", &t);
        w.get("/gateways", &t);
        for gw in [
            "gw_acme_main",
            "gw_acme_nokey",
            "gw_acme_second",
            "gw_euco_eu-linkup",
            "gw_euco_eu-brave",
            "gw_frozen_main",
        ] {
            let r = w.post("/playground/token", &t, json!({ "gateway_id": gw }));
            if let Some(tok) = json_of(&r)["token"].as_str() {
                minted.push(tok.to_string());
            }
            w.get(&format!("/playground/search?q=x&gateway_id={gw}"), &t);
            w.get(&format!("/playground/traces?gateway_id={gw}"), &t);
        }
        w.get("/traces/trc_acme_main_1", &t);
        sessions.push(t);
    }
    w.try_login("admin@acme.test", "wrong");
    let seen = w.seen.borrow().join("\n");
    let mut secrets: Vec<String> = vec![DEMO_PASSWORD.into(), ROOT_PASSWORD.into(), "$argon2".into()];
    secrets.extend(seed::DEMO_GATEWAYS.iter().filter_map(|g| g.key.map(String::from)));
    secrets.extend(minted.iter().chain(&sessions).map(|t| sha256_hex(t)));
    for secret in &secrets {
        assert!(!seen.contains(secret.as_str()), "{secret} leaked");
    }
    assert!(!minted.is_empty());
}

// ---- the demo password ---------------------------------------------------------------------

fn password_hashes(w: &World) -> Vec<(String, String)> {
    let rows = w.db.query("SELECT email, password_hash FROM users ORDER BY email", &[]).unwrap();
    rows.iter().map(|r| (r.text(0).unwrap(), r.text(1).unwrap())).collect()
}

#[test]
fn a_changed_demo_password_reaches_the_seeded_demo_users_once_and_no_one_else() {
    let mut w = World::new();
    assert_eq!(w.try_login("admin@acme.test", DEMO_PASSWORD).status, 200);
    // A real account that happens to share the demo password.
    let real_hash = auth::hash_password(DEMO_PASSWORD, &[9; 16]);
    w.db.exec(
        "INSERT INTO users (id, email, platform_admin, password_hash, created_at) VALUES ('usr_real', 'real@acme.test', 0, ?, 0)",
        &[real_hash.into()],
    )
    .unwrap();
    let before = password_hashes(&w);

    w.config.demo_password = "changed-demo-pass-2026".into();
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 401, "invalid_credentials");
    for email in ["admin@acme.test", "platform@demo.test", "viewer@acme.test"] {
        assert_eq!(w.try_login(email, "changed-demo-pass-2026").status, 200, "{email}");
    }
    assert_eq!(w.try_login("real@acme.test", DEMO_PASSWORD).status, 200, "a real account keeps its password");
    assert_eq!(w.try_login(ROOT_EMAIL, ROOT_PASSWORD).status, 200, "so does the bootstrap admin");
    let after = password_hashes(&w);
    for ((email, old), (_, new)) in before.iter().zip(&after) {
        let demo = seed::demo_users().iter().any(|u| u.email == email);
        assert_eq!(old != new, demo, "{email}: re-hashed only if a demo user");
    }
    // Unchanged variable: no re-hash on later requests.
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(password_hashes(&w), after);
    // The marker is a salted fingerprint, never the password.
    let settings = w.db.query("SELECT key, value FROM settings", &[]).unwrap();
    let marker = settings.iter().find(|r| r.text(0).unwrap() == "demo_password").expect("a marker").text(1).unwrap();
    assert!(seed::is_demo_password(Some(&marker), "changed-demo-pass-2026"));
    assert!(!seed::is_demo_password(Some(&marker), DEMO_PASSWORD));
    assert!(!marker.contains("changed-demo-pass-2026") && !marker.contains(&sha256_hex("changed-demo-pass-2026")));
}

#[test]
fn a_bootstrap_admin_on_a_demo_email_keeps_its_own_password() {
    let mut cfg = config();
    cfg.bootstrap_admin_email = "platform@demo.test".into();
    let mut w = World::with_config(cfg);
    assert_eq!(w.try_login("platform@demo.test", ROOT_PASSWORD).status, 200);
    w.config.demo_password = "changed-demo-pass-2026".into();
    assert_eq!(w.try_login("admin@acme.test", "changed-demo-pass-2026").status, 200);
    assert_eq!(w.try_login("platform@demo.test", ROOT_PASSWORD).status, 200);
    assert_error(&w.try_login("platform@demo.test", "changed-demo-pass-2026"), 401, "invalid_credentials");
}

// ---- no known credential ------------------------------------------------------------------

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

#[test]
fn without_a_demo_password_seeding_draws_a_random_one_and_only_for_loopback() {
    let w = World::with_config(no_demo_password());
    generated();
    // From the LAN: nothing seeded, no 500, the published password opens nothing.
    assert_error(&w.try_login("platform@demo.test", seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    assert_error(&w.try_login("platform@demo.test", ""), 400, "invalid_request");
    assert_eq!(w.user_count(), 1, "only the bootstrap admin");
    assert_eq!(generated(), None);
    // From loopback: seeded with a fresh random password, shown once.
    assert_error(&w.request("GET", "/auth/me", &[LOOPBACK], None), 401, "unauthenticated");
    assert_eq!(w.user_count(), 7);
    let password = generated().expect("a password was generated and shown");
    assert!(password.len() >= 20 && password != seed::PUBLISHED_DEMO_PASSWORD, "{password}");
    for u in seed::demo_users() {
        assert_eq!(w.try_login(u.email, &password).status, 200, "{}", u.email);
        assert_error(&w.try_login(u.email, seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    }
    // Stored as argon2 only, and never generated again for this database.
    let hashes = password_hashes(&w);
    assert!(hashes.iter().all(|(_, h)| h.starts_with("$argon2id$") && !h.contains(&password)));
    w.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_eq!(generated(), None);
    assert_eq!(password_hashes(&w), hashes);
    // Another database gets another password.
    let mut other = World::with_config(no_demo_password());
    other.random = CountingRandom(AtomicU64::new(1 << 40));
    other.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_ne!(generated().unwrap(), password);
}

#[test]
fn a_trusted_proxy_on_loopback_does_not_make_its_clients_loopback() {
    let mut cfg = no_demo_password();
    cfg.trusted_proxies = crate::net::parse_trusted("127.0.0.1").unwrap();
    let w = World::with_config(cfg);
    w.request("GET", "/auth/me", &[LOOPBACK, ("x-forwarded-for", "192.168.1.20")], None);
    assert_eq!(w.user_count(), 1);
    w.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_eq!(w.user_count(), 7);
}

#[test]
fn a_short_or_published_demo_password_seeds_nothing() {
    for bad in ["short-pass1", seed::PUBLISHED_DEMO_PASSWORD] {
        let mut cfg = config();
        cfg.demo_password = bad.into();
        let w = World::with_config(cfg);
        assert_error(&w.request("GET", "/auth/me", &[LOOPBACK], None), 401, "unauthenticated");
        assert_eq!(w.user_count(), 1, "{bad}");
        assert_error(&w.try_login("platform@demo.test", bad), 401, "invalid_credentials");
    }
}

#[test]
fn demo_users_left_with_the_published_password_get_a_random_one() {
    // A database an earlier version seeded with the published default.
    let mut w = World::new();
    w.login("admin@acme.test");
    let old = auth::hash_password(seed::PUBLISHED_DEMO_PASSWORD, &[3; 16]);
    w.db.exec("UPDATE users SET password_hash = ? WHERE id LIKE 'usr_demo_%'", &[old.into()]).unwrap();
    schema::set_marker(&w.db, "demo_password", &seed::demo_password_marker(seed::PUBLISHED_DEMO_PASSWORD, "ab"))
        .unwrap();
    // The new default (no demo_password): the next request replaces it, from any address.
    w.config.demo_password = String::new();
    generated();
    assert_error(&w.try_login("viewer@acme.test", seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    let password = generated().expect("replaced and shown");
    assert_eq!(w.try_login("viewer@acme.test", &password).status, 200);
    assert_eq!(w.try_login(ROOT_EMAIL, ROOT_PASSWORD).status, 200, "the bootstrap admin is untouched");
}

#[test]
fn racing_first_requests_generate_one_password_the_one_that_works() {
    let file = FileDb::new("gen-race");
    let shown = file.race(
        3,
        || World::with_config(no_demo_password()),
        |i, mut w| {
            w.random = CountingRandom(AtomicU64::new(1000 * (i as u64 + 1)));
            w.request("GET", "/auth/me", &[LOOPBACK], None);
            generated()
        },
    );
    let shown: Vec<String> = shown.into_iter().flatten().collect();
    assert_eq!(shown.len(), 1, "one password shown: {shown:?}");
    let w = file.world(World::with_config(no_demo_password()));
    for u in seed::demo_users() {
        assert_eq!(w.try_login(u.email, &shown[0]).status, 200, "{}", u.email);
    }
}

#[test]
fn a_changed_bootstrap_password_takes_effect_and_ends_its_sessions() {
    let mut w = World::new();
    let root = w.login(ROOT_EMAIL);
    let hash = password_hashes(&w);
    // Unchanged: no re-hash on later requests.
    w.get("/auth/me", &root);
    assert_eq!(password_hashes(&w), hash);
    w.config.bootstrap_admin_password = "a-new-root-password-1".into();
    assert_error(&w.get("/auth/me", &root), 401, "session_expired");
    assert_error(&w.try_login(ROOT_EMAIL, ROOT_PASSWORD), 401, "invalid_credentials");
    let fresh = w.try_login(ROOT_EMAIL, "a-new-root-password-1");
    assert_eq!(fresh.status, 200);
    let fresh = token_from_cookie(&fresh);
    // Once per change: the next requests neither re-hash nor sign out.
    let after = password_hashes(&w);
    assert_eq!(w.get("/auth/me", &fresh).status, 200);
    assert_eq!(password_hashes(&w), after);
    assert_eq!(w.try_login("admin@acme.test", DEMO_PASSWORD).status, 200, "demo users untouched");
}

#[test]
fn a_user_changes_their_password_and_their_other_sessions_end() {
    let w = World::new();
    let here = w.login("admin@acme.test");
    let elsewhere = w.login("admin@acme.test");
    let other_user = w.login("member@acme.test");
    let change = |current: &str, new: &str| {
        w.cookie_post("/auth/password", &here, json!({ "current_password": current, "new_password": new }))
    };
    assert_error(&change("wrong-password", "brand-new-password-9"), 403, "wrong_password");
    let short = change(DEMO_PASSWORD, "short");
    assert_error(&short, 400, "password_too_short");
    assert_eq!(json_of(&short)["min_length"], 12);
    assert_error(&w.cookie_post("/auth/password", &here, json!({ "new_password": "x" })), 400, "invalid_request");
    // A cookie write without the same Origin is refused like every other.
    let r = w.request(
        "POST",
        "/auth/password",
        &[("cookie", &format!("{SESSION_COOKIE}={here}")), ("content-type", "application/json")],
        Some(&json!({ "current_password": DEMO_PASSWORD, "new_password": "brand-new-password-9" }).to_string()),
    );
    assert_error(&r, 403, "csrf_rejected");
    let ok = change(DEMO_PASSWORD, "brand-new-password-9");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(json_of(&ok), json!({ "password_changed": true, "sessions_revoked": 1 }));
    assert_eq!(w.get("/auth/me", &here).status, 200, "this session goes on");
    assert_error(&w.get("/auth/me", &elsewhere), 401, "session_expired");
    assert_eq!(w.get("/auth/me", &other_user).status, 200);
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 401, "invalid_credentials");
    assert_eq!(w.try_login("admin@acme.test", "brand-new-password-9").status, 200);
    // Wrong current passwords count like failed sign-ins.
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        assert_error(&change("wrong-password", "brand-new-password-0"), 403, "wrong_password");
    }
    assert_error(&change("wrong-password", "brand-new-password-0"), 429, "rate_limited");
    // Never while impersonating.
    let platform = w.login("platform@demo.test");
    let imp =
        token_from_cookie(&w.cookie_post("/auth/impersonate", &platform, json!({ "user_id": "usr_demo_acme_viewer" })));
    let r =
        w.post("/auth/password", &imp, json!({ "current_password": DEMO_PASSWORD, "new_password": "x".repeat(12) }));
    assert_error(&r, 403, "impersonation_forbidden");
}

// ---- sign-in limits --------------------------------------------------------------------------

#[test]
fn parallel_guesses_are_each_counted_before_any_is_checked() {
    let file = FileDb::new("guess-race");
    file.world(World::new()).request("GET", "/auth/me", &[], None);
    let mut statuses = file.race(10, World::new, |i, w| w.try_login("member@acme.test", &format!("guess-{i}")).status);
    statuses.sort();
    let evaluated = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(evaluated, auth::MAX_FAILURES_PER_PAIR, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 10 - auth::MAX_FAILURES_PER_PAIR);
}

#[test]
fn wrong_guesses_from_one_address_do_not_lock_out_the_others() {
    let w = World::new();
    let attacker = "10.66.0.1:1000";
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        assert_error(&w.login_from(attacker, "member@acme.test", "wrong"), 401, "invalid_credentials");
    }
    assert_error(&w.login_from(attacker, "member@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    // The rightful user, elsewhere, signs in.
    assert_eq!(w.login_from("10.77.0.2:2000", "member@acme.test", DEMO_PASSWORD).status, 200);
    // A success does not count, and forgives the pair's failures.
    let user = "10.77.0.3:2000";
    for _ in 0..auth::MAX_FAILURES_PER_PAIR - 1 {
        w.login_from(user, "viewer@acme.test", "typo");
    }
    assert_eq!(w.login_from(user, "viewer@acme.test", DEMO_PASSWORD).status, 200);
    for _ in 0..auth::MAX_FAILURES_PER_PAIR - 1 {
        assert_error(&w.login_from(user, "viewer@acme.test", "typo"), 401, "invalid_credentials");
    }
    assert_eq!(w.login_from(user, "viewer@acme.test", DEMO_PASSWORD).status, 200);
}

#[test]
fn ipv6_clients_are_limited_per_64() {
    let w = World::new();
    for i in 0..auth::MAX_FAILURES_PER_ADDR {
        let addr = format!("[2001:db8:aa:bb::{:x}]:443", i + 1);
        assert_error(&w.login_from(&addr, &format!("user{i}@x.test"), "wrong"), 401, "invalid_credentials");
    }
    // Another address in the same /64 is the same client.
    assert_error(&w.login_from("[2001:db8:aa:bb:ffff::1]:443", "admin@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    assert_eq!(w.login_from("[2001:db8:aa:bc::1]:443", "admin@acme.test", DEMO_PASSWORD).status, 200);
}

#[test]
fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
    let mut cfg = config();
    cfg.trusted_proxies = crate::net::parse_trusted("10.0.0.2").unwrap();
    let w = World::with_config(cfg);
    let via_proxy = |client: &str, password: &str| {
        w.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json"), ("spin-client-addr", "10.0.0.2:443"), ("x-forwarded-for", client)],
            Some(&json!({ "email": "member@acme.test", "password": password }).to_string()),
        )
    };
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        via_proxy("198.51.100.7", "wrong");
    }
    assert_error(&via_proxy("198.51.100.7", DEMO_PASSWORD), 429, "rate_limited");
    assert_eq!(via_proxy("198.51.100.8", DEMO_PASSWORD).status, 200, "another client behind the proxy");
    // A client cannot pick its own address: the left-most hop is its own writing.
    assert_error(&via_proxy("203.0.113.1, 198.51.100.7", DEMO_PASSWORD), 429, "rate_limited");
    // From an untrusted peer the header is ignored: rotating it changes nothing.
    for i in 0..auth::MAX_FAILURES_PER_PAIR {
        let xff = format!("192.0.2.{i}");
        w.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json"), ("spin-client-addr", "10.5.5.5:1"), ("x-forwarded-for", &xff)],
            Some(&json!({ "email": "viewer@acme.test", "password": "wrong" }).to_string()),
        );
    }
    assert_error(&w.login_from("10.5.5.5:1", "viewer@acme.test", DEMO_PASSWORD), 429, "rate_limited");
}

// ---- session hygiene -------------------------------------------------------------------------

fn impersonating(w: &World) -> (String, String) {
    let admin = w.login("platform@demo.test");
    let r = w.cookie_post("/auth/impersonate", &admin, json!({ "user_id": "usr_demo_acme_member" }));
    assert_eq!(r.status, 200, "{}", r.body);
    (admin, token_from_cookie(&r))
}

#[test]
fn signing_out_of_an_impersonation_signs_out_the_session_that_started_it_and_back() {
    let w = World::new();
    let (admin, imp) = impersonating(&w);
    assert_eq!(w.cookie_post("/auth/logout", &imp, json!({})).status, 200);
    assert_error(&w.get("/auth/me", &imp), 401, "session_expired");
    assert_error(&w.get("/auth/me", &admin), 401, "session_expired");

    let (admin, imp) = impersonating(&w);
    assert_eq!(w.post("/auth/logout", &admin, json!({})).status, 200);
    assert_error(&w.get("/auth/me", &imp), 401, "session_expired");
}

#[test]
fn an_impersonation_ends_when_its_impersonator_is_no_longer_a_platform_admin() {
    let w = World::new();
    let (admin, imp) = impersonating(&w);
    w.db.exec("UPDATE users SET platform_admin = 0 WHERE id = 'usr_demo_platform'", &[]).unwrap();
    assert_error(&w.get("/auth/me", &imp), 401, "session_expired");
    assert_eq!(json_of(&w.get("/auth/me", &admin))["user"]["platform_admin"], false);
}

#[test]
fn an_impersonation_in_use_keeps_the_session_that_started_it_alive() {
    let w = World::new();
    let admin = w.login("platform@demo.test");
    // The admin's last_seen stays at T0 (written at most once a minute).
    w.advance_s(59);
    let r = w.cookie_post("/auth/impersonate", &admin, json!({ "user_id": "usr_demo_acme_member" }));
    let imp = token_from_cookie(&r);
    w.advance_s(900);
    assert_eq!(w.get("/auth/me", &imp).status, 200);
    // 1839 s after the admin's own last request, but the impersonation was in use.
    w.advance_s(880);
    assert_eq!(w.get("/auth/me", &imp).status, 200);
}

#[test]
fn sign_out_everywhere_ends_every_session_and_impersonation_of_the_user() {
    let w = World::new();
    let (admin, imp) = impersonating(&w);
    let second = w.login("platform@demo.test");
    let bystander = w.login("member@acme.test");
    let r = w.cookie_post("/auth/logout-all", &second, json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(json_of(&r), json!({ "signed_out": true, "sessions_revoked": 3 }));
    assert!(header(&r, "set-cookie").unwrap().contains("Max-Age=0"));
    for token in [&admin, &imp, &second] {
        assert_error(&w.get("/auth/me", token), 401, "session_expired");
    }
    assert_eq!(w.get("/auth/me", &bystander).status, 200, "the impersonated user's own session is theirs");
    // From an impersonation it signs out the impersonator, who is the one acting.
    let (admin, imp) = impersonating(&w);
    assert_eq!(w.post("/auth/logout-all", &imp, json!({})).status, 200);
    assert_error(&w.get("/auth/me", &admin), 401, "session_expired");
    assert_eq!(w.get("/auth/me", &bystander).status, 200);
    // A cookie write: the CSRF rules hold.
    let r = w.request("POST", "/auth/logout-all", &[("cookie", &format!("{SESSION_COOKIE}={bystander}"))], None);
    assert_error(&r, 403, "csrf_rejected");
}

#[test]
fn a_session_ends_after_30_idle_minutes_and_last_seen_is_written_at_most_once_a_minute() {
    let w = World::new();
    let token = w.login("viewer@acme.test");
    let last_seen = || {
        w.db.one("SELECT last_seen FROM admin_sessions WHERE token_hash = ?", &[sha256_hex(&token).into()])
            .unwrap()
            .unwrap()
            .int(0)
            .unwrap()
    };
    let t0 = last_seen();
    w.advance_s(59);
    assert_eq!(w.get("/auth/me", &token).status, 200);
    assert_eq!(last_seen(), t0, "not rewritten within the minute");
    w.advance_s(auth::IDLE_TIMEOUT_S - 1 - 59);
    assert_eq!(w.get("/auth/me", &token).status, 200);
    assert_eq!(last_seen(), t0 + auth::IDLE_TIMEOUT_S - 1);
    w.advance_s(auth::IDLE_TIMEOUT_S);
    assert_error(&w.get("/auth/me", &token), 401, "session_expired");
}

#[test]
fn the_cookie_is_host_prefixed_and_secure_over_https_also_behind_a_trusted_proxy() {
    let mut cfg = config();
    cfg.trusted_proxies = crate::net::parse_trusted("10.0.0.2").unwrap();
    let w = World::with_config(cfg);
    let login = |headers: &[(&str, &str)]| {
        let mut list = vec![("content-type", "application/json")];
        list.extend_from_slice(headers);
        w.request(
            "POST",
            "/auth/login",
            &list,
            Some(&json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string()),
        )
    };
    let proxied = [("spin-client-addr", "10.0.0.2:1"), ("x-forwarded-proto", "https")];
    let r = login(&proxied);
    let cookie = header(&r, "set-cookie").unwrap().to_string();
    assert!(cookie.starts_with("__Host-ratatoskr_admin_session=sess_"), "{cookie}");
    assert!(cookie.ends_with("; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200; Secure"), "{cookie}");
    // The __Host- cookie authenticates, and an https Origin is this page's own.
    let token = token_from_cookie(&r);
    let host_cookie = format!("{}={token}", auth::SECURE_SESSION_COOKIE);
    let mut headers = vec![("cookie", host_cookie.as_str()), ("content-type", "application/json")];
    headers.extend_from_slice(&proxied);
    headers.push(("origin", "https://console.test:3000"));
    let mint =
        w.request("POST", "/playground/token", &headers, Some(&json!({ "gateway_id": "gw_acme_main" }).to_string()));
    assert_eq!(mint.status, 200, "{}", mint.body);
    // From an untrusted peer X-Forwarded-Proto is ignored.
    let r = login(&[("spin-client-addr", "10.0.0.9:1"), ("x-forwarded-proto", "https")]);
    let cookie = header(&r, "set-cookie").unwrap();
    assert!(cookie.starts_with("ratatoskr_admin_session=sess_") && !cookie.contains("Secure"), "{cookie}");
}

#[test]
fn a_stale_cookie_next_to_a_live_one_does_not_lock_the_browser_out() {
    let w = World::new();
    let stale = w.login("viewer@acme.test");
    w.post("/auth/logout", &stale, json!({}));
    let live = w.login("viewer@acme.test");
    // An older Path=/admin cookie comes first in the header.
    let cookies = format!("{SESSION_COOKIE}={stale}; {SESSION_COOKIE}={live}");
    assert_eq!(w.request("GET", "/auth/me", &[("cookie", &cookies)], None).status, 200);
}
