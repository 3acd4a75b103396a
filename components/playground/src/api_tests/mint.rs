//! The gateway token mint.

use super::*;

#[test]
fn mint_returns_a_myra_token_bound_to_the_gateway() {
    let w = World::new();
    let token = w.login("member@acme.test");
    let r = w.post("/playground/token", &token, json!({ "gateway_id": "gw_acme_main" }));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json_of(&r);
    let minted = v["token"].as_str().unwrap();
    assert!(tokens::is_token(minted), "{minted}");
    assert!(minted.len() == 69 && minted[5..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{minted}");
    assert_eq!(v["tenant_slug"], "acme");
    assert_eq!(v["gateway_slug"], "main");
    let expected = crate::util::iso8601(T0_MS / 1000 + 1800);
    assert_eq!(v["expires_at"], expected);
    let row =
        w.db.one(
            "SELECT gateway_id, scopes, kind, expires_at, created_at FROM gateway_tokens WHERE token_hash = ?",
            &[sha256_hex(minted).into()],
        )
        .unwrap()
        .unwrap();
    assert_eq!(row.text(0).unwrap(), "gw_acme_main");
    assert_eq!(row.text(1).unwrap(), "[\"playground\"]");
    assert_eq!(row.text(2).unwrap(), "playground");
    assert_eq!(row.int(3).unwrap(), T0_MS / 1000 + 1800);
    assert_eq!(row.int(3).unwrap() - row.int(4).unwrap(), 1800, "30 minutes from the mint");
    // Only the hash is stored.
    assert!(w.db.query("SELECT 1 FROM gateway_tokens WHERE token_hash LIKE 'myra_%'", &[]).unwrap().is_empty());
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
