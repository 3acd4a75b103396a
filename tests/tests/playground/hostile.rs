//! Hostile input: injections, oversized and malformed requests.

use super::*;

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
