//! The console on a LAN host, as an attacker on the open web meets it: a DNS
//! rebinding page (a foreign `Host`), a cross-site form, and, with
//! `console_access = "signed-in"`, a visitor without a Playground session.
//! Every refusal comes before any upstream call or password check.

#[path = "../fixtures/debug-support.rs"]
mod support;

use component_tests::*;
use support::*;

const REBIND: &str = "rebind.attacker.example";
const ROOT_EMAIL: &str = "root@lan.test";
const ROOT_PASSWORD: &str = "a-long-operator-password";

fn lan_options(keys: &Keys) -> TestAppOptions {
    app_options(keys).variable("bootstrap_admin_email", ROOT_EMAIL).variable("bootstrap_admin_password", ROOT_PASSWORD)
}

const JSON: (&str, &str) = ("content-type", "application/json");

#[tokio::test(flavor = "multi_thread")]
async fn a_rebinding_host_is_refused_by_every_component_before_anything_else() {
    if spin_app_only("it signs in to the Playground, a component of the Spin app") {
        return;
    }
    let keys = Keys::random();
    let mock = json_mock(200, r#"{"agents":[]}"#).await;
    let app = start(lan_options(&keys).redirect(UPSTREAM, &mock).redirect(AFFECT, &mock)).await;
    let login = format!(r#"{{"email":"{ROOT_EMAIL}","password":"wrong"}}"#);
    let requests: [(&str, &str, &str); 6] = [
        ("GET", "/", ""),
        ("GET", "/openapi.yaml", ""),
        ("GET", "/api/config", ""),
        ("POST", "/api/sessions", r#"{"agent_id":"sindra"}"#),
        ("GET", "/admin/v1/auth/me", ""),
        ("POST", "/admin/v1/auth/login", &login),
    ];
    for host in [REBIND.to_string(), format!("{REBIND}:{}", app.addr.port()), "localhost.attacker.example".into()] {
        let origin = format!("http://{host}");
        for (method, path, body) in requests {
            let answer = with_host(app.addr, &host, method, path, &[JSON, ("origin", &origin)], body).await;
            answer.assert_error(421, "host_not_allowed");
            assert!(!answer.body.contains(&host), "the refusal never echoes the name: {}", answer.body);
        }
    }
    assert!(mock.requests().is_empty(), "no upstream call for a refused Host");
    // None of the refused sign-ins was evaluated or counted: five wrong
    // guesses on a good Host are still answered 401, not 429.
    let own = app.addr.to_string();
    for _ in 0..5 {
        with_host(app.addr, &own, "POST", "/admin/v1/auth/login", &[JSON], &login)
            .await
            .assert_error(401, "invalid_credentials");
    }
    // IP literals and loopback names pass.
    let port = app.addr.port();
    for host in [own.clone(), format!("localhost:{port}"), format!("console.localhost:{port}"), format!("[::1]:{port}")]
    {
        let answer = with_host(app.addr, &host, "GET", "/api/config", &[], "").await;
        assert_eq!(answer.status, 200, "{host}: {}", answer.body);
        assert_eq!(with_host(app.addr, &host, "GET", "/", &[], "").await.status, 200, "{host}");
    }
    // A missing Host is refused too (HTTP/1.0 style).
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /api/config HTTP/1.0\r\n\r\n").await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    // The server refuses it before any component (the repo's host: 400; Spin
    // 4.0.2 closes the connection), or a component does (421).
    let status = raw.split(' ').nth(1).unwrap_or_default();
    assert!(["400", "421", ""].contains(&status), "{raw}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_the_operator_lists_in_allowed_hosts_is_served() {
    let keys = Keys::random();
    let mock = json_mock(200, r#"{"agents":[]}"#).await;
    let options = lan_options(&keys).variable("allowed_hosts", "console.lan, *.ops.example");
    let app = start(options.redirect(UPSTREAM, &mock).redirect(AFFECT, &mock)).await;
    let port = app.addr.port();
    for host in [format!("console.lan:{port}"), "CONSOLE.LAN".to_string(), format!("a.ops.example:{port}")] {
        for path in ["/", "/api/config", "/admin/v1/gateways"] {
            let answer = with_host(app.addr, &host, "GET", path, &[], "").await;
            assert_ne!(answer.status, 421, "{host} {path}: {}", answer.body);
        }
    }
    for host in ["evil-console.lan", "ops.example", REBIND] {
        with_host(app.addr, host, "GET", "/", &[], "").await.assert_error(421, "host_not_allowed");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cross_site_form_cannot_cancel_a_turn_or_write_anything() {
    let keys = Keys::random();
    let mock = json_mock(202, "{}").await;
    let app = app_with(&keys, &mock).await;
    let own = app.addr.to_string();
    let cancel = "/api/sessions/s_1/turns/t_1/cancel";
    let form = ("content-type", "application/x-www-form-urlencoded");
    // What a form on another site sends: its own Origin, a form type.
    let foreign = ("origin", "http://attacker.example");
    for path in [cancel, "/api/sessions", "/api/sessions/s_1/turns"] {
        with_host(app.addr, &own, "POST", path, &[form, foreign], "a=b")
            .await
            .assert_error(403, "cross_origin_rejected");
    }
    // No Origin (an old browser's form, a script): the type must be JSON.
    with_host(app.addr, &own, "POST", cancel, &[form], "a=b").await.assert_error(415, "unsupported_media_type");
    with_host(app.addr, &own, "POST", cancel, &[], "").await.assert_error(415, "unsupported_media_type");
    assert!(mock.requests().is_empty(), "nothing reached the upstream");
    // A cross-site script that sets the JSON type must ask first (CORS
    // preflight), and nothing here grants it.
    let preflight =
        [foreign, ("access-control-request-method", "POST"), ("access-control-request-headers", "content-type")];
    for path in [cancel, "/api/sessions"] {
        let answer = with_host(app.addr, &own, "OPTIONS", path, &preflight, "").await;
        assert!(answer.status >= 400, "{path}: {}", answer.status);
        assert!(answer.headers.keys().all(|h| !h.as_str().starts_with("access-control-")), "{:?}", answer.headers);
    }
    // The console's own page: its Origin, or the JSON type.
    let origin = format!("http://{own}");
    assert_eq!(with_host(app.addr, &own, "POST", cancel, &[("origin", &origin)], "").await.status, 202);
    assert_eq!(with_host(app.addr, &own, "POST", cancel, &[JSON], "{}").await.status, 202);
    assert_eq!(mock.requests().len(), 2);
}

/// A TLS proxy in front that rewrites Host (nginx's default `proxy_pass`):
/// with it in `trusted_proxies`, the host it forwards is the one the
/// allow-list checks and a same-site write is compared with; from a peer
/// not listed, the same headers change nothing.
#[tokio::test(flavor = "multi_thread")]
async fn behind_a_trusted_proxy_the_forwarded_host_is_checked_and_compared() {
    if spin_app_only("trusted_proxies believes Spin's spin-client-addr, which the portable console has not") {
        return;
    }
    let keys = Keys::random();
    let mock = json_mock(202, "{}").await;
    let options = || lan_options(&keys).variable("allowed_hosts", "console.lan").redirect(UPSTREAM, &mock);
    let proxied = start(options().variable("trusted_proxies", "127.0.0.1, ::1").redirect(AFFECT, &mock)).await;
    let direct = start(options().redirect(AFFECT, &mock)).await;
    let cancel = "/api/sessions/s_1/turns/t_1/cancel";
    let page = ("origin", "https://console.lan:8443");
    let nginx = |host: &'static str| {
        [("x-forwarded-proto", "https"), ("x-forwarded-host", host), ("x-forwarded-for", "192.0.2.7")]
    };

    let own = proxied.addr.to_string();
    for path in ["/", "/api/config", "/admin/v1/auth/me"] {
        let answer = with_host(proxied.addr, &own, "GET", path, &nginx("console.lan:8443"), "").await;
        assert_ne!(answer.status, 421, "{path}: {}", answer.body);
        for forwarded in [
            &nginx("rebind.attacker.example")[..],
            &[("x-forwarded-host", "console.lan, rebind.attacker.example")],
            &[("forwarded", "host=rebind.attacker.example")],
        ] {
            with_host(proxied.addr, &own, "GET", path, forwarded, "").await.assert_error(421, "host_not_allowed");
        }
    }
    // The cancel (a write without a body) from the page the browser shows.
    let ok =
        with_host(proxied.addr, &own, "POST", cancel, &[&nginx("console.lan:8443")[..], &[page]].concat(), "").await;
    assert_eq!(ok.status, 202, "{}", ok.body);
    let foreign = [&nginx("console.lan:8443")[..], &[("origin", "https://attacker.example")]].concat();
    with_host(proxied.addr, &own, "POST", cancel, &foreign, "").await.assert_error(403, "cross_origin_rejected");
    let cancels = || mock.requests().iter().filter(|r| r.path_and_query.ends_with("/cancel")).count();
    assert_eq!(cancels(), 1, "only the same-site cancel reached the upstream");

    // Not a trusted peer: the forwarded name is neither checked nor believed.
    let own = direct.addr.to_string();
    let answer = with_host(direct.addr, &own, "GET", "/api/config", &nginx("rebind.attacker.example"), "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let forged = [&nginx("console.lan:8443")[..], &[page]].concat();
    with_host(direct.addr, &own, "POST", cancel, &forged, "").await.assert_error(403, "cross_origin_rejected");
    assert_eq!(cancels(), 1, "the forged one did not reach the upstream");
}

async fn session_token(app: &TestApp) -> String {
    let body = format!(r#"{{"email":"{ROOT_EMAIL}","password":"{ROOT_PASSWORD}"}}"#);
    let answer = with_host(app.addr, &app.addr.to_string(), "POST", "/admin/v1/auth/login", &[JSON], &body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let cookie = answer.header("set-cookie");
    let start = cookie.find("sess_").expect("a session cookie");
    cookie[start..].split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_in_console_access_needs_a_playground_session_with_the_role() {
    if spin_app_only("it signs in to the Playground, a component of the Spin app") {
        return;
    }
    let keys = Keys::random();
    let mock = json_mock(200, r#"{"agents":[]}"#).await;
    let options = lan_options(&keys).variable("console_access", "signed-in").variable("console_role", "platform_admin");
    let app = start(options.redirect(UPSTREAM, &mock).redirect(AFFECT, &mock)).await;
    let own = app.addr.to_string();
    for path in ["/api/config", "/api/sessions/s_1/tools", "/api/admin/events", "/api/affect/history?agent_id=a"] {
        with_host(app.addr, &own, "GET", path, &[], "").await.assert_error(401, "console_sign_in_required");
        let forged =
            [("authorization", "Bearer sess_0000000000000000000000000000000000000000000000000000000000000000")];
        with_host(app.addr, &own, "GET", path, &forged, "").await.assert_error(401, "console_sign_in_required");
    }
    assert!(mock.requests().is_empty(), "no upstream call without a session");
    // The site itself stays public: the sign-in lives there.
    assert_eq!(with_host(app.addr, &own, "GET", "/", &[], "").await.status, 200);
    let token = session_token(&app).await;
    let bearer = format!("Bearer {token}");
    let answer = with_host(app.addr, &own, "GET", "/api/config", &[("authorization", &bearer)], "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    for name in ["ratatoskr_admin_session", "__Host-ratatoskr_admin_session"] {
        let cookie = format!("{name}={token}");
        let answer = with_host(app.addr, &own, "GET", "/api/config", &[("cookie", &cookie)], "").await;
        assert_eq!(answer.status, 200, "{name}: {}", answer.body);
    }
    assert_eq!(mock.requests().len(), 3);
    // Signed out, the same credential no longer opens the console.
    let logout =
        with_host(app.addr, &own, "POST", "/admin/v1/auth/logout", &[("authorization", &bearer), JSON], "{}").await;
    assert!(logout.status < 300, "{}", logout.body);
    with_host(app.addr, &own, "GET", "/api/config", &[("authorization", &bearer)], "")
        .await
        .assert_error(401, "console_sign_in_required");
}
