//! The demo password (set, changed, missing), the bootstrap admin's and a user's own password change.

use super::*;

#[test]
fn a_changed_demo_password_reaches_the_seeded_demo_users_once_and_no_one_else() {
    let mut w = World::new();
    assert_eq!(w.try_login("admin@acme.test", DEMO_PASSWORD).status, 200);
    // A real account that happens to share the demo password.
    let real_hash = auth::hash_password(DEMO_PASSWORD, &[9; 16]);
    w.db.exec(
        "INSERT INTO users (id, email, platform_admin, password_hash, created_at) VALUES ('usr_real', 'real@acme.test', 0, ?, 0)",
        &[real_hash.into()],
    )
    .unwrap();
    let before = password_hashes(&w);

    w.config.demo_password = "changed-demo-pass-2026".into();
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 401, "invalid_credentials");
    for email in ["admin@acme.test", "platform@demo.test", "member@acme.test", "viewer@acme.test"] {
        assert_eq!(w.try_login(email, "changed-demo-pass-2026").status, 200, "{email}");
    }
    assert_eq!(w.try_login("real@acme.test", DEMO_PASSWORD).status, 200, "a real account keeps its password");
    assert_eq!(w.try_login(ROOT_EMAIL, ROOT_PASSWORD).status, 200, "so does the bootstrap admin");
    let after = password_hashes(&w);
    for ((email, old), (_, new)) in before.iter().zip(&after) {
        let demo = seed::demo_users().iter().any(|u| u.email == email);
        assert_eq!(old != new, demo, "{email}: re-hashed only if a demo user");
    }
    // Unchanged variable: no re-hash on later requests.
    w.request("GET", "/auth/me", &[], None);
    assert_eq!(password_hashes(&w), after);
    // The marker is a salted fingerprint, never the password.
    let settings = w.db.query("SELECT key, value FROM settings", &[]).unwrap();
    let marker = settings.iter().find(|r| r.text(0).unwrap() == "demo_password").expect("a marker").text(1).unwrap();
    assert!(seed::is_demo_password(Some(&marker), "changed-demo-pass-2026"));
    assert!(!seed::is_demo_password(Some(&marker), DEMO_PASSWORD));
    assert!(!marker.contains("changed-demo-pass-2026") && !marker.contains(&sha256_hex("changed-demo-pass-2026")));
    for row in &settings {
        let value = row.text(1).unwrap();
        assert!(!value.contains("changed-demo-pass-2026") && !value.contains(DEMO_PASSWORD), "{value}");
    }
}

#[test]
fn a_bootstrap_admin_on_a_demo_email_keeps_its_own_password() {
    let mut cfg = config();
    cfg.bootstrap_admin_email = "platform@demo.test".into();
    let mut w = World::with_config(cfg);
    assert_eq!(w.try_login("platform@demo.test", ROOT_PASSWORD).status, 200);
    w.config.demo_password = "changed-demo-pass-2026".into();
    assert_eq!(w.try_login("admin@acme.test", "changed-demo-pass-2026").status, 200);
    assert_eq!(w.try_login("platform@demo.test", ROOT_PASSWORD).status, 200);
    assert_error(&w.try_login("platform@demo.test", "changed-demo-pass-2026"), 401, "invalid_credentials");
}

#[test]
fn without_a_demo_password_seeding_draws_a_random_one_and_only_for_loopback() {
    let w = World::with_config(no_demo_password());
    generated();
    // From the LAN: nothing seeded, no 500, the published password opens nothing.
    assert_error(&w.try_login("platform@demo.test", seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    assert_error(&w.try_login("platform@demo.test", ""), 400, "invalid_request");
    assert_eq!(w.user_count(), 1, "only the bootstrap admin");
    assert_eq!(generated(), None);
    // From loopback: seeded with a fresh random password, shown once.
    assert_error(&w.request("GET", "/auth/me", &[LOOPBACK], None), 401, "unauthenticated");
    assert_eq!(w.user_count(), 7);
    let password = generated().expect("a password was generated and shown");
    assert!(password.len() >= 20 && password != seed::PUBLISHED_DEMO_PASSWORD, "{password}");
    for u in seed::demo_users() {
        assert_eq!(w.try_login(u.email, &password).status, 200, "{}", u.email);
        assert_error(&w.try_login(u.email, seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    }
    // Stored as argon2 only, and never generated again for this database.
    let hashes = password_hashes(&w);
    assert!(hashes.iter().all(|(_, h)| h.starts_with("$argon2id$") && !h.contains(&password)));
    w.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_eq!(generated(), None);
    assert_eq!(password_hashes(&w), hashes);
    // Another database gets another password.
    let mut other = World::with_config(no_demo_password());
    other.random = CountingRandom(AtomicU64::new(1 << 40));
    other.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_ne!(generated().unwrap(), password);
}

#[test]
fn a_trusted_proxy_on_loopback_does_not_make_its_clients_loopback() {
    let mut cfg = no_demo_password();
    cfg.trusted_proxies = crate::net::parse_trusted("127.0.0.1").unwrap();
    let w = World::with_config(cfg);
    w.request("GET", "/auth/me", &[LOOPBACK, ("x-forwarded-for", "192.168.1.20")], None);
    assert_eq!(w.user_count(), 1);
    w.request("GET", "/auth/me", &[LOOPBACK], None);
    assert_eq!(w.user_count(), 7);
}

#[test]
fn a_short_or_published_demo_password_seeds_nothing() {
    for bad in ["short-pass1", seed::PUBLISHED_DEMO_PASSWORD] {
        let mut cfg = config();
        cfg.demo_password = bad.into();
        let w = World::with_config(cfg);
        assert_error(&w.request("GET", "/auth/me", &[LOOPBACK], None), 401, "unauthenticated");
        assert_eq!(w.user_count(), 1, "{bad}");
        assert_error(&w.try_login("platform@demo.test", bad), 401, "invalid_credentials");
    }
}

#[test]
fn demo_users_left_with_the_published_password_get_a_random_one() {
    // A database an earlier version seeded with the published default.
    let mut w = World::new();
    w.login("admin@acme.test");
    let old = auth::hash_password(seed::PUBLISHED_DEMO_PASSWORD, &[3; 16]);
    w.db.exec("UPDATE users SET password_hash = ? WHERE id LIKE 'usr_demo_%'", &[old.into()]).unwrap();
    schema::set_marker(&w.db, "demo_password", &seed::demo_password_marker(seed::PUBLISHED_DEMO_PASSWORD, "ab"))
        .unwrap();
    // The new default (no demo_password): the next request replaces it, from any address.
    w.config.demo_password = String::new();
    generated();
    assert_error(&w.try_login("viewer@acme.test", seed::PUBLISHED_DEMO_PASSWORD), 401, "invalid_credentials");
    let password = generated().expect("replaced and shown");
    assert_eq!(w.try_login("viewer@acme.test", &password).status, 200);
    assert_eq!(w.try_login(ROOT_EMAIL, ROOT_PASSWORD).status, 200, "the bootstrap admin is untouched");
}

#[test]
fn racing_first_requests_generate_one_password_the_one_that_works() {
    let file = FileDb::new("gen-race");
    let shown = file.race(
        3,
        || World::with_config(no_demo_password()),
        |i, mut w| {
            w.random = CountingRandom(AtomicU64::new(1000 * (i as u64 + 1)));
            w.request("GET", "/auth/me", &[LOOPBACK], None);
            generated()
        },
    );
    let shown: Vec<String> = shown.into_iter().flatten().collect();
    assert_eq!(shown.len(), 1, "one password shown: {shown:?}");
    let w = file.world(World::with_config(no_demo_password()));
    for u in seed::demo_users() {
        assert_eq!(w.try_login(u.email, &shown[0]).status, 200, "{}", u.email);
    }
}

#[test]
fn a_changed_bootstrap_password_takes_effect_and_ends_its_sessions() {
    let mut w = World::new();
    let root = w.login(ROOT_EMAIL);
    let hash = password_hashes(&w);
    // Unchanged: no re-hash on later requests.
    w.get("/auth/me", &root);
    assert_eq!(password_hashes(&w), hash);
    w.config.bootstrap_admin_password = "a-new-root-password-1".into();
    assert_error(&w.get("/auth/me", &root), 401, "session_expired");
    assert_error(&w.try_login(ROOT_EMAIL, ROOT_PASSWORD), 401, "invalid_credentials");
    let fresh = w.try_login(ROOT_EMAIL, "a-new-root-password-1");
    assert_eq!(fresh.status, 200);
    let fresh = token_from_cookie(&fresh);
    // Once per change: the next requests neither re-hash nor sign out.
    let after = password_hashes(&w);
    assert_eq!(w.get("/auth/me", &fresh).status, 200);
    assert_eq!(password_hashes(&w), after);
    assert_eq!(w.try_login("admin@acme.test", DEMO_PASSWORD).status, 200, "demo users untouched");
}

#[test]
fn a_user_changes_their_password_and_their_other_sessions_end() {
    let w = World::new();
    let here = w.login("admin@acme.test");
    let elsewhere = w.login("admin@acme.test");
    let other_user = w.login("member@acme.test");
    let change = |current: &str, new: &str| {
        w.cookie_post("/auth/password", &here, json!({ "current_password": current, "new_password": new }))
    };
    assert_error(&change("wrong-password", "brand-new-password-9"), 403, "wrong_password");
    let short = change(DEMO_PASSWORD, "short");
    assert_error(&short, 400, "password_too_short");
    assert_eq!(json_of(&short)["min_length"], 12);
    assert_error(&w.cookie_post("/auth/password", &here, json!({ "new_password": "x" })), 400, "invalid_request");
    // A cookie write without the same Origin is refused like every other.
    let r = w.request(
        "POST",
        "/auth/password",
        &[("cookie", &format!("{SESSION_COOKIE}={here}")), ("content-type", "application/json")],
        Some(&json!({ "current_password": DEMO_PASSWORD, "new_password": "brand-new-password-9" }).to_string()),
    );
    assert_error(&r, 403, "csrf_rejected");
    let ok = change(DEMO_PASSWORD, "brand-new-password-9");
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(json_of(&ok), json!({ "password_changed": true, "sessions_revoked": 1 }));
    assert_eq!(w.get("/auth/me", &here).status, 200, "this session goes on");
    assert_error(&w.get("/auth/me", &elsewhere), 401, "session_expired");
    assert_eq!(w.get("/auth/me", &other_user).status, 200);
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 401, "invalid_credentials");
    assert_eq!(w.try_login("admin@acme.test", "brand-new-password-9").status, 200);
    // Wrong current passwords count like failed sign-ins.
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        assert_error(&change("wrong-password", "brand-new-password-0"), 403, "wrong_password");
    }
    assert_error(&change("wrong-password", "brand-new-password-0"), 429, "rate_limited");
    // Never while impersonating.
    let platform = w.login("platform@demo.test");
    let imp =
        token_from_cookie(&w.cookie_post("/auth/impersonate", &platform, json!({ "user_id": "usr_demo_acme_viewer" })));
    let r =
        w.post("/auth/password", &imp, json!({ "current_password": DEMO_PASSWORD, "new_password": "x".repeat(12) }));
    assert_error(&r, 403, "impersonation_forbidden");
}
