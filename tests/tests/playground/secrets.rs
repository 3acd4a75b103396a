//! What never leaves: tokens, passwords and keys in responses, the log and at rest.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn no_token_password_or_key_where_it_should_not_be() {
    let p = Playground::start("secrets").await;
    let mut bodies = Vec::new();
    let mut sessions = Vec::new();
    let mut minted = Vec::new();
    for email in [
        "platform@demo.test",
        "admin@acme.test",
        "scoped-admin@acme.test",
        "member@acme.test",
        "viewer@acme.test",
        "admin@euco.test",
    ] {
        let login = p.login_raw(email, DEMO_PASSWORD).await;
        let token = login.session_token();
        bodies.push(login.body.clone());
        for path in ["/auth/me", "/gateways", "/traces/trc_acme_main_1"] {
            bodies.push(p.get(path, Some(&token)).await.body);
        }
        for gw in [
            "gw_acme_main",
            "gw_acme_nokey",
            "gw_acme_second",
            "gw_euco_eu-linkup",
            "gw_euco_eu-brave",
            "gw_frozen_main",
        ] {
            let r = p.post("/playground/token", Some(&token), json!({ "gateway_id": gw })).await;
            if let Some(t) = r.json()["token"].as_str() {
                minted.push(t.to_string());
            }
            bodies.push(p.get(&format!("/playground/search?q=x&gateway_id={gw}"), Some(&token)).await.body);
            bodies.push(p.get(&format!("/playground/traces?gateway_id={gw}"), Some(&token)).await.body);
        }
        sessions.push(token);
    }
    bodies.push(p.login_raw("admin@acme.test", "a-wrong-password-canary").await.body);
    let responses = bodies.join("\n");
    let log = p.app.log();
    assert!(!minted.is_empty());
    // Never in a response body: passwords, hashes, keys, session tokens.
    let mut never: Vec<String> =
        vec![DEMO_PASSWORD.into(), ROOT_PASSWORD.into(), PLATFORM_LINKUP_KEY.into(), "$argon2".into()];
    never.extend(DEMO_KEYS.iter().map(|k| k.to_string()));
    never.extend(sessions.iter().chain(&minted).map(|t| sha256_hex(t)));
    never.extend(sessions.iter().cloned());
    for secret in &never {
        assert!(!responses.contains(secret.as_str()), "{secret} is in a response");
    }
    // Never in the log: any of that, nor a minted token or a tried password.
    never.extend(minted.iter().cloned());
    never.push("a-wrong-password-canary".into());
    for secret in &never {
        assert!(!log.contains(secret.as_str()), "{secret} is in the log:\n{log}");
    }
    // At rest: no token in the clear, passwords only as argon2id.
    let hashes = p.sql("SELECT password_hash FROM users");
    assert!(hashes.iter().all(|r| text(&r[0]).starts_with("$argon2id$v=19$m=19456,t=2,p=1$")));
    let stored: String = p
        .sql("SELECT token_hash FROM gateway_tokens")
        .iter()
        .chain(&p.sql("SELECT token_hash FROM admin_sessions"))
        .map(|r| text(&r[0]))
        .collect();
    for t in sessions.iter().chain(&minted) {
        assert!(!stored.contains(t.as_str()));
    }
}
