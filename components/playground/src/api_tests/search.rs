//! The web-search probe: the EU gate, the stored key, provider requests and failures, input validation.

use super::*;

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
    let sent = w.egress.sent.borrow().last().cloned().unwrap();
    assert!(sent.headers.contains(&("authorization".into(), "Bearer demo-linkup-key-euco".into())));

    let before = w.egress.sent.borrow().len();
    let refused = search("gw_euco_eu-brave");
    assert_error(&refused, 403, "eu_gate_refused");
    let reason = json_of(&refused)["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("eu_region_routing") && reason.contains("brave"), "{reason}");
    assert_error(&search("gw_acme_nokey"), 503, "search_key_missing");
    assert!(json_of(&search("gw_acme_nokey"))["message"].as_str().unwrap().contains("platform Linkup key"));
    assert_error(&search("gw_frozen_main"), 403, "feature_disabled");
    assert_eq!(w.egress.sent.borrow().len(), before, "refusals never egress");

    // Seven results from the provider: the first five, mapped.
    w.script(|_| {
        let results: Vec<Value> = (0..7)
            .map(|i| json!({ "type": "text", "name": format!("L{i}"), "url": format!("https://l.test/{i}"), "content": format!("l{i}") }))
            .collect();
        ok_body(200, json!({ "results": results }))
    });
    let results = json_of(&search("gw_acme_second"))["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 5, "at most five");
    assert_eq!(results[4], json!({ "title": "L4", "url": "https://l.test/4", "snippet": "l4" }));
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
    // Each class names the provider and its status; the provider's own words never pass.
    for (status, code) in [
        (401, "provider_auth_failed"),
        (403, "provider_auth_failed"),
        (500, "provider_unavailable"),
        (503, "provider_unavailable"),
    ] {
        w.script(move |_| ok_body(status, json!({ "error": "provider words" })));
        let r = search();
        assert_error(&r, 502, code);
        assert_eq!((&json_of(&r)["provider"], &json_of(&r)["status"]), (&json!("brave"), &json!(status)));
        assert!(!r.body.contains("provider words"), "{}", r.body);
    }
    w.script(|_| Ok(OutboundResponse { status: 429, retry_after: Some("12".into()), body: vec![] }));
    let r = search();
    assert_error(&r, 429, "provider_rate_limited");
    assert_eq!(header(&r, "retry-after"), Some("12"));
    assert_eq!(json_of(&r)["retry_after"], 12);
    let failures: [(Script, u16, &str); 4] = [
        (Box::new(|_| Err(TransportFailure::Timeout)), 504, "provider_timeout"),
        (Box::new(|_| Err(TransportFailure::Unreachable)), 502, "provider_unreachable"),
        (
            Box::new(|_| {
                Ok(OutboundResponse { status: 200, retry_after: None, body: b"<html>provider words".to_vec() })
            }),
            502,
            "provider_malformed",
        ),
        (Box::new(|_| Err(TransportFailure::NotAllowed)), 502, "provider_not_allowed"),
    ];
    for (script, status, code) in failures {
        *w.egress.script.borrow_mut() = script;
        let r = search();
        assert_error(&r, status, code);
        assert_eq!(json_of(&r)["provider"], "brave");
        assert!(!r.body.contains("provider words"), "{}", r.body);
    }
    for body in w.seen.borrow().iter() {
        assert!(!body.contains("demo-brave-key"), "{body}");
    }
    // A provider that recovers answers again.
    w.script(default_script);
    assert_eq!(search().status, 200);
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
