//! The web-search probe against scripted providers, over real connections.

use super::*;

/// What each provider receives over the wire (what the probe decides, and the
/// EU gate before it: `api_tests::search`).
#[tokio::test(flavor = "multi_thread")]
async fn the_probe_sends_each_provider_its_request_on_the_wire() {
    let p = Playground::start("wire").await;
    let token = p.login("admin@acme.test").await;
    let search = |gw: &'static str| {
        let (p, token) = (&p, token.clone());
        async move { p.get(&format!("/playground/search?q=fjord+weather&gateway_id={gw}"), Some(&token)).await }
    };
    let r = search("gw_acme_main").await;
    r.assert(200, "");
    assert_eq!(
        r.json()["results"][0],
        json!({ "title": "Brave 0", "url": "https://brave.example/0", "snippet": "b0" })
    );
    let seen = p.brave.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, http::Method::GET);
    assert_eq!(seen[0].path_and_query, "/b/res/v1/web/search?q=fjord%20weather&count=5");
    assert_eq!(header_of(&seen[0], "x-subscription-token").as_deref(), Some("demo-brave-key-acme-main"));

    let r = search("gw_acme_second").await;
    r.assert(200, "");
    assert_eq!(r.json()["provider"], "linkup");
    let seen = p.linkup.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].method.as_str(), seen[0].path_and_query.as_str()), ("POST", "/v1/search"));
    assert_eq!(header_of(&seen[0], "authorization").as_deref(), Some("Bearer demo-linkup-key-acme-second"));
    let body: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(body, json!({ "q": "fjord weather", "depth": "standard", "outputType": "searchResults" }));
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

/// What only a real connection has: a provider's status and words, a provider
/// slower than the timeout, its Retry-After, a closed port, an origin outside
/// the allow-list (every class and its fields: `api_tests::search`).
#[tokio::test(flavor = "multi_thread")]
async fn provider_failures_on_the_wire_are_typed() {
    let p = Playground::start("providers").await;
    let token = p.login("admin@acme.test").await;
    let search = || p.get("/playground/search?q=x&gateway_id=gw_acme_main", Some(&token));
    p.set_brave(Mode::Status(503));
    let r = search().await;
    r.assert(502, "provider_unavailable");
    assert_eq!((r.json()["provider"].as_str(), r.json()["status"].as_i64()), (Some("brave"), Some(503)));
    assert!(!r.body.contains("provider words"), "provider text never passes: {}", r.body);
    p.set_brave(Mode::Slow(Duration::from_secs(5)));
    search().await.assert(504, "provider_timeout");
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
