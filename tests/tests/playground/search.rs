//! The web-search probe against scripted providers.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn the_eu_gate_through_the_route_for_each_demo_gateway() {
    let p = Playground::start("eugate").await;
    let token = p.login("platform@demo.test").await;
    let search = |gw: &'static str| {
        let (p, token) = (&p, token.clone());
        async move { p.get(&format!("/playground/search?q=fjord+weather&gateway_id={gw}"), Some(&token)).await }
    };

    let r = search("gw_acme_main").await;
    r.assert(200, "");
    let v = r.json();
    assert_eq!(
        (v["query"].as_str(), v["provider"].as_str(), v["eu_region_routing"].as_bool()),
        (Some("fjord weather"), Some("brave"), Some(false))
    );
    assert_eq!(v["results"].as_array().unwrap().len(), 5, "at most five");
    assert_eq!(v["results"][0], json!({ "title": "Brave 0", "url": "https://brave.example/0", "snippet": "b0" }));
    let seen = p.brave.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, http::Method::GET);
    assert_eq!(seen[0].path_and_query, "/b/res/v1/web/search?q=fjord%20weather&count=5");
    assert_eq!(header_of(&seen[0], "x-subscription-token").as_deref(), Some("demo-brave-key-acme-main"));

    let r = search("gw_acme_second").await;
    r.assert(200, "");
    assert_eq!(r.json()["provider"], "linkup");
    assert_eq!(r.json()["results"][4]["snippet"], "l4");
    let r = search("gw_euco_eu-linkup").await;
    r.assert(200, "");
    assert_eq!(r.json()["eu_region_routing"], true, "the tenant's EU floor");
    let seen = p.linkup.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].method.as_str(), seen[0].path_and_query.as_str()), ("POST", "/v1/search"));
    assert_eq!(header_of(&seen[0], "authorization").as_deref(), Some("Bearer demo-linkup-key-acme-second"));
    assert_eq!(header_of(&seen[1], "authorization").as_deref(), Some("Bearer demo-linkup-key-euco"));
    let body: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(body, json!({ "q": "fjord weather", "depth": "standard", "outputType": "searchResults" }));

    let refused = search("gw_euco_eu-brave").await;
    refused.assert(403, "eu_gate_refused");
    let reason = refused.json()["reason"].as_str().unwrap().to_string();
    assert!(reason.contains("eu_region_routing") && reason.contains("brave"), "{reason}");
    search("gw_acme_nokey").await.assert(503, "search_key_missing");
    search("gw_frozen_main").await.assert(403, "feature_disabled");
    assert_eq!(p.brave.requests().len(), 1, "no refused probe reached Brave");
    assert_eq!(p.linkup.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_probe_ignores_the_platform_linkup_key() {
    let p = Playground::start("platformkey").await;
    let token = p.login("admin@acme.test").await;
    let r = p.get("/playground/search?q=anything&gateway_id=gw_acme_nokey", Some(&token)).await;
    r.assert(503, "search_key_missing");
    assert!(r.json()["message"].as_str().unwrap().contains("platform Linkup key"), "{}", r.body);
    assert!(p.brave.requests().is_empty() && p.linkup.requests().is_empty(), "the probe sent nothing anywhere");
    assert!(!r.body.contains(PLATFORM_LINKUP_KEY));
    assert!(!p.app.log().contains(PLATFORM_LINKUP_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_errors_are_classified_against_scripted_mocks() {
    let p = Playground::start("providers").await;
    let token = p.login("admin@acme.test").await;
    let search = || p.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token));
    for (mode, status, code) in [
        (Mode::Status(401), 502, "provider_auth_failed"),
        (Mode::Status(403), 502, "provider_auth_failed"),
        (Mode::Status(500), 502, "provider_unavailable"),
        (Mode::Status(503), 502, "provider_unavailable"),
        (Mode::Malformed, 502, "provider_malformed"),
        (Mode::Slow(Duration::from_secs(5)), 504, "provider_timeout"),
    ] {
        p.set_brave(mode);
        let r = search().await;
        r.assert(status, code);
        assert_eq!(r.json()["provider"], "brave");
        assert!(!r.body.contains("provider words"), "provider text never passes: {}", r.body);
    }
    p.set_brave(Mode::Status(503));
    assert_eq!(search().await.json()["status"], 503);
    p.set_brave(Mode::RateLimited("17"));
    let r = search().await;
    r.assert(429, "provider_rate_limited");
    assert_eq!(r.header("retry-after").as_deref(), Some("17"));
    assert_eq!(r.json()["retry_after"], 17);
    p.set_brave(Mode::Ok);
    search().await.assert(200, "");

    // Unreachable: the provider's address refuses connections.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dead = Playground::start_with("unreachable", |mut o| {
        o.redirects.insert("brave.test:80".into(), closed);
        o
    })
    .await;
    let token = dead.login("admin@acme.test").await;
    dead.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token)).await.assert(502, "provider_unreachable");
    // A base URL moved without its origin is refused by the allow-list, typed.
    let moved = Playground::start_with("notallowed", |o| o.variable("brave_base_url", "http://elsewhere.test")).await;
    let token = moved.login("admin@acme.test").await;
    moved.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token)).await.assert(502, "provider_not_allowed");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_linkup_probe_sends_its_body_with_a_content_length() {
    let strict = MockUpstream::start(|seen| async move {
        match length_missing(&seen) {
            true => respond(411, "application/json", "{\"error\":\"length required\"}"),
            false => respond(200, "application/json", linkup_results().to_string()),
        }
    })
    .await;
    let p = Playground::start_with("linkup-length", |mut o| {
        o.redirects.insert("linkup.test:80".into(), strict.addr);
        o
    })
    .await;
    let token = p.login("admin@acme.test").await;
    let r = p.get("/playground/search?q=fjord+weather&gateway_id=gw_acme_second", Some(&token)).await;
    r.assert(200, "");
    assert_eq!(r.json()["provider"], "linkup");
    let seen = strict.requests();
    assert_eq!(seen.len(), 1);
    assert_sized(&seen[0]);
}
