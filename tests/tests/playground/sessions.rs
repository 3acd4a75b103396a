//! Sign-in, the session cookie, CSRF, forged Spin headers, impersonation, and the role matrix.

use super::*;

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
