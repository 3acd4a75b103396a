//! Sign-in, the session cookie and bearer, sign-out, CSRF, impersonation and session hygiene.

use super::*;
use crate::db::{DbError, Row, Val};

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
    assert_eq!(json_of(&me)["user"]["id"], "usr_demo_acme_admin");
    // Stored only as a hash.
    let stored = w.db.query("SELECT token_hash FROM admin_sessions", &[]).unwrap();
    assert!(stored.iter().all(|r| r.text(0).unwrap() != token));
    assert!(stored.iter().any(|r| r.text(0).unwrap() == sha256_hex(&token)));
    // A scoped admin's scope is a list of gateway ids.
    let scoped = w.try_login("scoped-admin@acme.test", DEMO_PASSWORD);
    assert_eq!(json_of(&scoped)["user"]["memberships"][0]["gateway_scope"], json!(["gw_acme_second"]));
}

/// The memberships ride in the session query as JSON: every value survives
/// the trip (quotes, backslashes, non-ASCII), they come in SQLite's byte
/// order of slugs whatever order they were written in, and a user with
/// none has `[]`.
#[test]
fn memberships_come_with_the_session_in_slug_order_and_exact() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    let odd_id = "ten_\"q\\";
    let odd_scope = r#"["gw_\"x\\"]"#;
    for (id, slug) in [(odd_id, "zeta"), ("ten_b", "Zeta"), ("ten_c", "été"), ("ten_d", "acme-2")] {
        w.db.exec("INSERT INTO tenants (id, slug) VALUES (?, ?)", &[id.into(), slug.into()]).unwrap();
        let scope = if id == "ten_b" { odd_scope } else { "all" };
        w.db.exec(
            "INSERT INTO memberships (user_id, tenant_id, role, gateway_scope)
             VALUES ('usr_demo_acme_admin', ?, 'viewer', ?)",
            &[id.into(), scope.into()],
        )
        .unwrap();
    }
    let v = json_of(&w.get("/auth/me", &token));
    let got: Vec<(&str, &str)> = v["user"]["memberships"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["tenant_slug"].as_str().unwrap(), m["tenant_id"].as_str().unwrap()))
        .collect();
    let want = [("Zeta", "ten_b"), ("acme", "ten_acme"), ("acme-2", "ten_d"), ("zeta", odd_id), ("été", "ten_c")];
    assert_eq!(got, want);
    assert_eq!(v["user"]["memberships"][0]["gateway_scope"], json!(["gw_\"x\\"]));
    assert_eq!(v["user"]["memberships"][1]["role"], "admin");
    w.db.exec("DELETE FROM memberships WHERE user_id = 'usr_demo_acme_admin'", &[]).unwrap();
    assert_eq!(json_of(&w.get("/auth/me", &token))["user"]["memberships"], json!([]));
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
    // A form's type is what a cross-site page can send without a preflight.
    let r = post(&[("cookie", &cookie), ("content-type", "application/x-www-form-urlencoded"), ("origin", ORIGIN)]);
    assert_error(&r, 403, "csrf_rejected");
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
    assert_eq!(me["user"]["email"], "member@acme.test");
    // Stored with its impersonator, for 30 minutes.
    let stored =
        w.db.one(
            "SELECT impersonator_id, expires_at - created_at FROM admin_sessions WHERE token_hash = ?",
            &[sha256_hex(&imp).into()],
        )
        .unwrap()
        .unwrap();
    assert_eq!((stored.text(0).unwrap(), stored.int(1).unwrap()), ("usr_demo_platform".into(), 1800));
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

/// nginx in front, Host rewritten to the address it proxies to: the browser's
/// origin is what the trusted proxy forwarded.
#[test]
fn behind_a_host_rewriting_proxy_sign_in_and_cookie_writes_use_the_forwarded_origin() {
    let mut cfg = config();
    cfg.trusted_proxies = crate::net::parse_trusted("127.0.0.1").unwrap();
    let w = World::with_config(cfg);
    const PAGE: &str = "https://console.lan:8443";
    let nginx = |path: &str| -> Vec<(String, String)> {
        [
            ("spin-full-url", format!("http://127.0.0.1:3000/admin/v1{path}")),
            ("spin-client-addr", "127.0.0.1:41000".into()),
            ("x-forwarded-proto", "https".into()),
            ("x-forwarded-host", "console.lan:8443".into()),
            ("x-forwarded-for", "192.0.2.7".into()),
            ("content-type", "application/json".into()),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
    };
    let send = |path: &str, headers: &[(String, String)], body: Value| {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        w.request("POST", path, &headers, Some(&body.to_string()))
    };
    let credentials = json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD });
    let with = |mut headers: Vec<(String, String)>, extra: &[(&str, &str)]| {
        headers.retain(|(n, _)| !extra.iter().any(|(e, _)| e == n));
        headers.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        headers
    };

    let r = send("/auth/login", &with(nginx("/auth/login"), &[("origin", PAGE)]), credentials.clone());
    assert_eq!(r.status, 200, "{}", r.body);
    let cookie = header(&r, "set-cookie").unwrap().to_string();
    assert!(cookie.starts_with("__Host-ratatoskr_admin_session=sess_") && cookie.ends_with("; Secure"), "{cookie}");
    let token = token_from_cookie(&r);
    let jar = format!("{}={token}", auth::SECURE_SESSION_COOKIE);
    let mint = |extra: &[(&str, &str)]| {
        let headers = with(nginx("/playground/token"), &[&[("cookie", jar.as_str())][..], extra].concat());
        send("/playground/token", &headers, json!({ "gateway_id": "gw_acme_main" }))
    };
    assert_eq!(mint(&[("origin", PAGE)]).status, 200, "a cookie write from the page's own origin");
    // The RFC 7239 form says the same.
    let rfc = [
        ("x-forwarded-host", ""),
        ("x-forwarded-proto", ""),
        ("forwarded", r#"for=192.0.2.7;proto=https;host="console.lan:8443""#),
    ];
    let rfc_headers: Vec<(String, String)> =
        with(nginx("/playground/token"), &rfc).into_iter().filter(|(_, v)| !v.is_empty()).collect();
    let rfc_headers = with(rfc_headers, &[("cookie", jar.as_str()), ("origin", PAGE)]);
    assert_eq!(send("/playground/token", &rfc_headers, json!({ "gateway_id": "gw_acme_main" })).status, 200);

    // Refused, and nothing written: another site; the address the proxy used;
    // ambiguous or malformed forwarding (ignored whole, so the origin is this hop's).
    let before = w.db.query("SELECT 1 FROM gateway_tokens", &[]).unwrap().len();
    for extra in [
        &[("origin", "https://evil.example")][..],
        &[("origin", "http://127.0.0.1:3000")],
        &[("origin", PAGE), ("x-forwarded-host", "console.lan:8443, evil.example")],
        &[("origin", PAGE), ("x-forwarded-proto", "https, http")],
        &[("origin", PAGE), ("forwarded", "host=console.lan:8443;host=evil.example")],
        &[("origin", PAGE), ("forwarded", "proto=http")],
    ] {
        let r = mint(extra);
        assert_error(&r, 403, "csrf_rejected");
    }
    let after = w.db.query("SELECT 1 FROM gateway_tokens", &[]).unwrap().len();
    assert_eq!(before, after, "no token minted by a refused write");

    // A peer not in trusted_proxies forging the proxy's headers changes nothing:
    // the sign-in is judged against its own origin and refused, no cookie set.
    let forged = with(nginx("/auth/login"), &[("spin-client-addr", "192.0.2.9:5000"), ("origin", PAGE)]);
    let r = send("/auth/login", &forged, credentials);
    assert_error(&r, 403, "csrf_rejected");
    assert!(header(&r, "set-cookie").is_none());
}

/// Every statement a request runs, in order.
struct Recorded<'a> {
    db: &'a dyn Db,
    sql: RefCell<Vec<String>>,
}

impl Db for Recorded<'_> {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        self.sql.borrow_mut().push(sql.split_whitespace().collect::<Vec<_>>().join(" "));
        self.db.query(sql, params)
    }
}

/// What `GET /auth/me` with these headers answers, and the statements it ran.
fn me_with_statements(w: &World, headers: &[(&str, String)]) -> (u16, Vec<String>) {
    let recorded = Recorded { db: &w.db, sql: RefCell::new(Vec::new()) };
    let req = Request {
        method: "GET".into(),
        path: "/auth/me".into(),
        query: String::new(),
        headers: headers.iter().map(|(n, v)| (n.to_string(), v.clone())).collect(),
        body: Body::Bytes(Vec::new()),
    };
    let status = handle(&Ctx { db: &recorded, ..w.ctx() }, &req).status;
    (status, recorded.sql.into_inner())
}

/// Under Spin every statement is a host call: on a set-up database a
/// signed-in read is one, the set-up markers and the session (with its
/// memberships) together; more only when more is presented or to do.
#[test]
fn a_signed_in_read_is_one_statement() {
    let w = World::new();
    let token = w.login("admin@acme.test");
    let bearer = ("authorization", format!("Bearer {token}"));
    let (status, sql) = me_with_statements(&w, std::slice::from_ref(&bearer));
    assert_eq!((status, sql.len()), (200, 1), "{sql:?}");
    assert!(sql[0].contains("schema_version") && sql[0].contains("admin_sessions") && sql[0].contains("memberships"));
    // No session-shaped credential: the set-up markers alone.
    let (status, sql) = me_with_statements(&w, &[("authorization", "Bearer not-a-session".into())]);
    assert_eq!((status, sql.len()), (401, 1), "{sql:?}");
    let (status, sql) = me_with_statements(&w, &[]);
    assert_eq!((status, sql.len()), (401, 1), "{sql:?}");
    // A dead cookie ahead of a live one: the second is looked up on its own.
    let dead = format!("{SESSION_COOKIE}=sess_{}", "0".repeat(64));
    let live = format!("{SESSION_COOKIE}={token}");
    let (status, sql) = me_with_statements(&w, &[("cookie", format!("{dead}; {live}"))]);
    assert_eq!((status, sql.len()), (200, 2), "{sql:?}");
    // A minute on, the session's last_seen is written as well.
    w.advance_s(auth::TOUCH_EVERY_S);
    let (status, sql) = me_with_statements(&w, std::slice::from_ref(&bearer));
    assert_eq!((status, sql.len()), (200, 2), "{sql:?}");
    assert!(sql[1].starts_with("UPDATE admin_sessions SET last_seen"), "{sql:?}");
}

/// The first request on an empty database may carry a session: the joint
/// read fails on the missing tables, the set-up runs, and the lookup runs
/// again on the new schema.
#[test]
fn a_session_on_an_empty_database_sets_it_up_and_is_refused() {
    let w = World::new();
    let stale = format!("Bearer sess_{}", "a".repeat(64));
    let (status, sql) = me_with_statements(&w, &[("authorization", stale.clone())]);
    assert_eq!(status, 401);
    assert_eq!(schema::state(&w.db).version, schema::SCHEMA_VERSION);
    assert!(sql.last().unwrap().contains("admin_sessions s JOIN users u"), "looked up again: {sql:?}");
    assert_eq!(me_with_statements(&w, &[("authorization", stale)]).1.len(), 1, "then one statement");
}
