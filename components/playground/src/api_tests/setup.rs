//! Routing, lazy setup and its races, and secrets that never leave.

use super::*;

#[test]
fn unknown_routes_and_methods_are_typed() {
    let w = World::new();
    assert_error(&w.request("GET", "/nope", &[], None), 404, "not_found");
    let r = w.request("DELETE", "/gateways", &[], None);
    assert_error(&r, 405, "method_not_allowed");
    assert_eq!(header(&r, "allow"), Some("GET"));
    assert_error(&w.request("GET", "/auth/login", &[], None), 405, "method_not_allowed");
}

#[test]
fn setup_is_lazy_idempotent_and_bootstraps_the_admin() {
    let w = World::new();
    assert_eq!(schema::state(&w.db).version, 0);
    w.request("GET", "/auth/me", &[], None);
    let state = schema::state(&w.db);
    assert_eq!(state.version, schema::SCHEMA_VERSION);
    assert_eq!(state.bootstrap_admin.as_deref(), Some(ROOT_EMAIL));
    assert_eq!(state.demo_seed.as_deref(), Some(seed::DEMO_SEED_VERSION));
    let counts = |w: &World| {
        ["users", "tenants", "gateways", "memberships", "traces", "trace_steps"]
            .map(|t| w.db.query(&format!("SELECT 1 FROM {t}"), &[]).unwrap().len())
    };
    assert_eq!(counts(&w), [7, 3, 6, 5, 18, 6 * 22]);
    // Running everything again (a racing request) changes nothing.
    schema::migrate(&w.db, 0, 0).unwrap();
    w.db.exec("DELETE FROM settings", &[]).unwrap();
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(counts(&w), [7, 3, 6, 5, 18, 6 * 22]);
    let root = json_of(&w.get("/auth/me", &w.login(ROOT_EMAIL)));
    assert_eq!(root["user"]["platform_admin"], true);
    // Without seed_demo_data only the bootstrap admin exists.
    let mut cfg = config();
    cfg.seed_demo_data = false;
    let w = World::with_config(cfg);
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(counts(&w), [1, 0, 0, 0, 0, 0]);
}

#[test]
fn a_bootstrap_email_with_quotes_is_stored_literally() {
    let mut cfg = config();
    cfg.bootstrap_admin_email = "o'neil\"; drop table users;--@ops.test".into();
    cfg.seed_demo_data = false;
    let w = World::with_config(cfg);
    let r = w.try_login("o'neil\"; drop table users;--@ops.test", ROOT_PASSWORD);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(json_of(&r)["user"]["email"], "o'neil\"; drop table users;--@ops.test");
}

#[test]
fn racing_first_requests_set_up_the_database_once() {
    let file = FileDb::new("race");
    file.race(3, World::new, |i, mut w| {
        w.random = CountingRandom(AtomicU64::new(1000 * (i as u64 + 1)));
        assert_error(&w.request("GET", "/auth/me", &[], None), 401, "unauthenticated");
    });
    let db = MemDb::file(&file.path);
    assert_eq!(db.query("SELECT 1 FROM users", &[]).unwrap().len(), 7);
    assert_eq!(db.query("SELECT 1 FROM schema_version", &[]).unwrap().len(), schema::SCHEMA_VERSION as usize);
    assert_eq!(db.query("SELECT 1 FROM trace_steps", &[]).unwrap().len(), 6 * 22);
}

#[test]
fn no_password_hash_key_or_token_hash_in_any_response() {
    let w = World::new();
    let mut minted = Vec::new();
    let mut sessions = Vec::new();
    for email in [
        "platform@demo.test",
        "admin@acme.test",
        "scoped-admin@acme.test",
        "member@acme.test",
        "viewer@acme.test",
        "admin@euco.test",
    ] {
        let t = w.login(email);
        w.get("/auth/me", &t);
        w.get("/gateways", &t);
        for gw in [
            "gw_acme_main",
            "gw_acme_nokey",
            "gw_acme_second",
            "gw_euco_eu-linkup",
            "gw_euco_eu-brave",
            "gw_frozen_main",
        ] {
            let r = w.post("/playground/token", &t, json!({ "gateway_id": gw }));
            if let Some(tok) = json_of(&r)["token"].as_str() {
                minted.push(tok.to_string());
            }
            w.get(&format!("/playground/search?q=x&gateway_id={gw}"), &t);
            w.get(&format!("/playground/traces?gateway_id={gw}"), &t);
        }
        w.get("/traces/trc_acme_main_1", &t);
        sessions.push(t);
    }
    w.try_login("admin@acme.test", "wrong");
    let seen = w.seen.borrow().join("\n");
    let mut secrets: Vec<String> = vec![DEMO_PASSWORD.into(), ROOT_PASSWORD.into(), "$argon2".into()];
    secrets.extend(seed::DEMO_GATEWAYS.iter().filter_map(|g| g.key.map(String::from)));
    secrets.extend(minted.iter().chain(&sessions).map(|t| sha256_hex(t)));
    for secret in &secrets {
        assert!(!seen.contains(secret.as_str()), "{secret} leaked");
    }
    assert!(!minted.is_empty());
    // A session token leaves only in Set-Cookie, never in a body.
    let bodies = w.bodies.borrow().join("\n");
    for token in &sessions {
        assert!(!bodies.contains(token.as_str()), "a session token is in a response body");
    }
    // At rest: passwords only as argon2id (OWASP's parameters), no token in the clear.
    let hashes = w.db.query("SELECT password_hash FROM users", &[]).unwrap();
    assert!(hashes.iter().all(|r| r.text(0).unwrap().starts_with("$argon2id$v=19$m=19456,t=2,p=1$")));
    let stored: String = ["SELECT token_hash FROM gateway_tokens", "SELECT token_hash FROM admin_sessions"]
        .iter()
        .flat_map(|sql| w.db.query(sql, &[]).unwrap())
        .map(|r| r.text(0).unwrap())
        .collect();
    for token in sessions.iter().chain(&minted) {
        assert!(!stored.contains(token.as_str()), "{token} is stored in the clear");
    }
}
