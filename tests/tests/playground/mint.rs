//! The gateway token mint on the real database file.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn tokens_live_1800_s_and_minting_deletes_only_expired_ones() {
    let p = Playground::start("ttl").await;
    let token = p.login("member@acme.test").await;
    let mint = || async {
        let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": "gw_acme_main" })).await;
        r.assert(200, "");
        r.json()
    };
    let first = mint().await;
    let a = first["token"].as_str().unwrap().to_string();
    assert!(a.starts_with("myra_") && a.len() == 69, "{a}");
    assert!(a[5..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{a}");
    assert_eq!((first["tenant_slug"].as_str(), first["gateway_slug"].as_str()), (Some("acme"), Some("main")));
    let row = p.sql(&format!(
        "SELECT created_at, expires_at, scopes, kind, gateway_id FROM gateway_tokens WHERE token_hash = '{}'",
        sha256_hex(&a)
    ));
    assert_eq!(row.len(), 1, "stored by hash");
    assert_eq!(int(&row[0][1]) - int(&row[0][0]), 1800);
    assert_eq!(
        row[0][2..].iter().map(text).collect::<Vec<_>>(),
        ["[\"playground\"]".to_string(), "playground".to_string(), "gw_acme_main".to_string()]
    );
    // expires_at is ISO 8601 of the stored expiry.
    let expires = first["expires_at"].as_str().unwrap();
    assert!(expires.len() == 20 && expires.ends_with('Z') && expires.as_bytes()[10] == b'T', "{expires}");
    assert_eq!(p.sql("SELECT count(*) FROM gateway_tokens WHERE token_hash LIKE 'myra_%'")[0][0], SqlValue::Integer(0));

    // (Margins of a few seconds: the real clock keeps running underneath.)
    if host_only("moves the wall clock past the token's 30 minutes") {
        return;
    }
    p.app.host().clock().advance(Duration::from_secs(1790));
    let b = mint().await["token"].as_str().unwrap().to_string();
    let hashes = || p.sql("SELECT token_hash FROM gateway_tokens").iter().map(|r| text(&r[0])).collect::<Vec<_>>();
    assert_eq!(hashes().len(), 2, "a is still valid, so it stays");
    p.app.host().clock().advance(Duration::from_secs(11));
    let c = mint().await["token"].as_str().unwrap().to_string();
    let left = hashes();
    assert!(!left.contains(&sha256_hex(&a)), "the expired token was cleaned up");
    assert!(left.contains(&sha256_hex(&b)) && left.contains(&sha256_hex(&c)), "valid tokens stay");
    // Not gated by playground_enabled: a frozen tenant's gateway still mints.
    let platform = p.login("platform@demo.test").await;
    let frozen = p.post("/playground/token", Some(&platform), json!({ "gateway_id": "gw_frozen_main" })).await;
    frozen.assert(200, "");
    assert_eq!(frozen.json()["tenant_slug"], "frozen");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_mints_keep_all_valid_tokens() {
    let p = Arc::new(Playground::start("concurrent").await);
    let token = p.login("admin@acme.test").await;
    let handles: Vec<_> = (0..10)
        .map(|_| {
            let (p, token) = (p.clone(), token.clone());
            tokio::spawn(async move {
                let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": "gw_acme_main" })).await;
                r.assert(200, "");
                r.json()["token"].as_str().unwrap().to_string()
            })
        })
        .collect();
    let mut minted = Vec::new();
    for h in handles {
        minted.push(h.await.unwrap());
    }
    minted.sort();
    minted.dedup();
    assert_eq!(minted.len(), 10, "ten distinct tokens");
    let stored: Vec<String> = p
        .sql("SELECT token_hash FROM gateway_tokens WHERE gateway_id = 'gw_acme_main'")
        .iter()
        .map(|r| text(&r[0]))
        .collect();
    assert_eq!(stored.len(), 10);
    for t in &minted {
        assert!(stored.contains(&sha256_hex(t)));
    }
}
