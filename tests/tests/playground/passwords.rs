//! The demo password: generated and shown once, changed across a restart.

use super::*;

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

fn password_hashes(p: &Playground) -> Vec<(String, String)> {
    let rows = p.sql("SELECT email, password_hash FROM users ORDER BY email");
    rows.iter().map(|r| (text(&r[0]), text(&r[1]))).collect()
}

/// The same database file under a new app with `demo_password` set to `password`.
async fn restart(p: Playground, password: &str) -> Playground {
    let Playground { app, brave, linkup, brave_mode, db_path } = p;
    drop(app);
    let options = base_options(&brave, &linkup, &db_path).variable("demo_password", password);
    let app = TestApp::start(options).await.expect("the playground restarts on the same database");
    Playground { app, brave, linkup, brave_mode, db_path }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_demo_password_reaches_the_demo_users_after_a_restart_and_no_one_else() {
    const CHANGED: &str = "demo-pw-changed-4b2f";
    let p = Playground::start("demo-password").await;
    p.login("admin@acme.test").await;
    // A real account outside the demo world (it shares the root's password).
    p.sql(
        "INSERT INTO users (id, email, platform_admin, password_hash, created_at)
         SELECT 'usr_real_ops', 'real@ops.test', 0, password_hash, 0 FROM users WHERE email = 'root@ops.test'",
    );
    let before = password_hashes(&p);

    let p = restart(p, CHANGED).await;
    p.login_raw("admin@acme.test", DEMO_PASSWORD).await.assert(401, "invalid_credentials");
    for email in ["admin@acme.test", "platform@demo.test", "member@acme.test"] {
        p.login_raw(email, CHANGED).await.assert(200, "");
    }
    p.login_raw("real@ops.test", ROOT_PASSWORD).await.assert(200, "");
    p.login_raw(ROOT_EMAIL, ROOT_PASSWORD).await.assert(200, "");
    let after = password_hashes(&p);
    for ((email, old), (_, new)) in before.iter().zip(&after) {
        let demo = !["real@ops.test", ROOT_EMAIL].contains(&email.as_str());
        assert_eq!(old != new, demo, "{email}: re-hashed only if a demo user");
    }
    let markers = p.sql("SELECT value FROM settings");
    assert!(markers.iter().all(|r| !text(&r[0]).contains(CHANGED) && !text(&r[0]).contains(DEMO_PASSWORD)));

    // The same password again: nothing is re-hashed.
    let p = restart(p, CHANGED).await;
    p.login_raw("viewer@acme.test", CHANGED).await.assert(200, "");
    assert_eq!(password_hashes(&p), after);
}
