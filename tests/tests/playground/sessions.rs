//! The session cookie as a browser sees it, forged Spin headers, and the role matrix.

use super::*;

/// The session cookie as a browser gets and sends it over real HTTP (what it
/// says and how sign-in, sign-out and roles work: `api_tests::sessions`).
#[tokio::test(flavor = "multi_thread")]
async fn the_session_cookie_as_a_browser_gets_and_sends_it() {
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
    assert_eq!(answer.header("cache-control").as_deref(), Some("no-store"));

    // The Cookie header authenticates.
    let me = p.send(client().get(p.app.url("/admin/v1/auth/me")).header("cookie", format!("{COOKIE}={token}"))).await;
    me.assert(200, "");
    assert_eq!(me.json()["user"]["id"], "usr_demo_acme_admin");
    // A cookie write is this page's own only with the Origin the host's URL has.
    let elsewhere = p
        .send(
            client()
                .post(p.app.url("/admin/v1/auth/logout"))
                .header("cookie", format!("{COOKIE}={token}"))
                .header("content-type", "application/json")
                .header("origin", "http://evil.test")
                .body("{}"),
        )
        .await;
    elsewhere.assert(403, "csrf_rejected");
    assert_eq!(elsewhere.json()["reason"], "origin_mismatch");
    let out = p.cookie_post("/auth/logout", &token, json!({})).await;
    out.assert(200, "");
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
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
    let limited = login("admin@acme.test".to_string(), 99).await;
    limited.assert(429, "rate_limited");
    // The wait reaches the client as Retry-After, as the body says.
    let retry: i64 = limited.header("retry-after").unwrap().parse().unwrap();
    assert!((890..=900).contains(&retry), "{retry}");
    assert_eq!(limited.json()["retry_after"], retry);
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
