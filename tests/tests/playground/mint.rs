//! The gateway token mint on the real database file.

use super::*;

/// Ten mints at once on the real database file (what a mint stores and
/// deletes: `api_tests::mint`).
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
