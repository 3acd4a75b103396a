//! Sign-in limits: per email, per address (an IPv6 /64), per pair, behind trusted proxies, under racing guesses.

use super::*;

#[test]
fn login_is_rate_limited_per_email_and_per_address() {
    let w = World::new();
    for _ in 0..5 {
        assert_error(&w.try_login("member@acme.test", "wrong"), 401, "invalid_credentials");
    }
    // Even the right password waits now, and the answer says how long.
    let limited = w.try_login("member@acme.test", DEMO_PASSWORD);
    assert_error(&limited, 429, "rate_limited");
    assert_eq!(header(&limited, "retry-after"), Some("900"));
    assert_eq!(json_of(&limited)["retry_after"], 900);
    // Unknown emails are limited the same way (no account oracle).
    for _ in 0..5 {
        w.try_login("ghost@acme.test", "wrong");
    }
    assert_error(&w.try_login("ghost@acme.test", "wrong"), 429, "rate_limited");
    // Another email from the same address still works (5+5 < 20 failures)...
    w.login("admin@acme.test");
    // ...and the window passes.
    w.advance_s(901);
    w.login("member@acme.test");

    // Per address: 20 failures over many emails block the address.
    let w = World::new();
    for i in 0..20 {
        w.try_login(&format!("user{i}@x.test"), "wrong");
    }
    assert_error(&w.try_login("admin@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    let other = w.request(
        "POST",
        "/auth/login",
        &[("content-type", "application/json"), ("spin-client-addr", "10.9.9.9:1")],
        Some(&json!({ "email": "admin@acme.test", "password": DEMO_PASSWORD }).to_string()),
    );
    assert_eq!(other.status, 200, "another address is not limited");
}

#[test]
fn parallel_guesses_are_each_counted_before_any_is_checked() {
    let file = FileDb::new("guess-race");
    file.world(World::new()).request("GET", "/auth/me", &[], None);
    let mut statuses = file.race(10, World::new, |i, w| w.try_login("member@acme.test", &format!("guess-{i}")).status);
    statuses.sort();
    let evaluated = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(evaluated, auth::MAX_FAILURES_PER_PAIR, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 10 - auth::MAX_FAILURES_PER_PAIR);
}

#[test]
fn wrong_guesses_from_one_address_do_not_lock_out_the_others() {
    let w = World::new();
    let attacker = "10.66.0.1:1000";
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        assert_error(&w.login_from(attacker, "member@acme.test", "wrong"), 401, "invalid_credentials");
    }
    assert_error(&w.login_from(attacker, "member@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    // The rightful user, elsewhere, signs in.
    assert_eq!(w.login_from("10.77.0.2:2000", "member@acme.test", DEMO_PASSWORD).status, 200);
    // A success does not count, and forgives the pair's failures.
    let user = "10.77.0.3:2000";
    for _ in 0..auth::MAX_FAILURES_PER_PAIR - 1 {
        w.login_from(user, "viewer@acme.test", "typo");
    }
    assert_eq!(w.login_from(user, "viewer@acme.test", DEMO_PASSWORD).status, 200);
    for _ in 0..auth::MAX_FAILURES_PER_PAIR - 1 {
        assert_error(&w.login_from(user, "viewer@acme.test", "typo"), 401, "invalid_credentials");
    }
    assert_eq!(w.login_from(user, "viewer@acme.test", DEMO_PASSWORD).status, 200);
}

#[test]
fn ipv6_clients_are_limited_per_64() {
    let w = World::new();
    for i in 0..auth::MAX_FAILURES_PER_ADDR {
        let addr = format!("[2001:db8:aa:bb::{:x}]:443", i + 1);
        assert_error(&w.login_from(&addr, &format!("user{i}@x.test"), "wrong"), 401, "invalid_credentials");
    }
    // Another address in the same /64 is the same client.
    assert_error(&w.login_from("[2001:db8:aa:bb:ffff::1]:443", "admin@acme.test", DEMO_PASSWORD), 429, "rate_limited");
    assert_eq!(w.login_from("[2001:db8:aa:bc::1]:443", "admin@acme.test", DEMO_PASSWORD).status, 200);
}

#[test]
fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
    let mut cfg = config();
    cfg.trusted_proxies = crate::net::parse_trusted("10.0.0.2").unwrap();
    let w = World::with_config(cfg);
    let via_proxy = |client: &str, password: &str| {
        w.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json"), ("spin-client-addr", "10.0.0.2:443"), ("x-forwarded-for", client)],
            Some(&json!({ "email": "member@acme.test", "password": password }).to_string()),
        )
    };
    for _ in 0..auth::MAX_FAILURES_PER_PAIR {
        via_proxy("198.51.100.7", "wrong");
    }
    assert_error(&via_proxy("198.51.100.7", DEMO_PASSWORD), 429, "rate_limited");
    assert_eq!(via_proxy("198.51.100.8", DEMO_PASSWORD).status, 200, "another client behind the proxy");
    // A client cannot pick its own address: the left-most hop is its own writing.
    assert_error(&via_proxy("203.0.113.1, 198.51.100.7", DEMO_PASSWORD), 429, "rate_limited");
    // From an untrusted peer the header is ignored: rotating it changes nothing.
    for i in 0..auth::MAX_FAILURES_PER_PAIR {
        let xff = format!("192.0.2.{i}");
        w.request(
            "POST",
            "/auth/login",
            &[("content-type", "application/json"), ("spin-client-addr", "10.5.5.5:1"), ("x-forwarded-for", &xff)],
            Some(&json!({ "email": "viewer@acme.test", "password": "wrong" }).to_string()),
        );
    }
    assert_error(&w.login_from("10.5.5.5:1", "viewer@acme.test", DEMO_PASSWORD), 429, "rate_limited");
}
