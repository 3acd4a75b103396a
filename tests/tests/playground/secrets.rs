//! The log: what it shows once (a generated demo password; what seeding does
//! with it: `api_tests::passwords`) and never (tokens, passwords, keys).

use super::*;

/// Every route as every demo user, and what the component wrote to its log
/// (what the responses and the tables hold: `api_tests::setup`).
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
    // The platform Linkup key is in the app's configuration, never in an answer.
    assert!(!responses.contains(PLATFORM_LINKUP_KEY), "the platform Linkup key is in a response");
    // Never in the log: passwords, hashes, keys, tokens, a tried password.
    let mut never: Vec<String> =
        vec![DEMO_PASSWORD.into(), ROOT_PASSWORD.into(), PLATFORM_LINKUP_KEY.into(), "$argon2".into()];
    never.extend(DEMO_KEYS.iter().map(|k| k.to_string()));
    never.extend(sessions.iter().chain(&minted).map(|t| sha256_hex(t)));
    never.extend(sessions.iter().chain(&minted).cloned());
    never.push("a-wrong-password-canary".into());
    for secret in &never {
        assert!(!log.contains(secret.as_str()), "{secret} is in the log:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_demo_password_the_demo_users_get_a_random_one_shown_once_in_the_log() {
    // spin.toml's default: no demo password. Our requests come from loopback.
    let p = Playground::start_with("generated", |o| o.variable("demo_password", "")).await;
    p.login_raw("platform@demo.test", "ratatoskr-demo").await.assert(401, "invalid_credentials");
    let log = p.app.log();
    let shown: Vec<&str> = log.match_indices("sign in with the password ").map(|(i, m)| &log[i + m.len()..]).collect();
    // Spin writes a component's stderr to its terminal and to its log file:
    // one line in each, the same password.
    let sinks = if Runtime::selected() == Runtime::Host { 1 } else { 2 };
    assert_eq!(shown.len(), sinks, "shown once: {log}");
    assert!(shown.iter().all(|s| s.split_whitespace().next() == shown[0].split_whitespace().next()));
    let password = shown[0].split_whitespace().next().unwrap().to_string();
    assert!(password.len() >= 20, "{password}");
    p.login_raw("platform@demo.test", &password).await.assert(200, "");
    p.login_raw("viewer@acme.test", &password).await.assert(200, "");
    assert!(!p.app.log()[log.len()..].contains(&password), "never again");
}
