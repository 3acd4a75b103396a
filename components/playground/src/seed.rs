//! Lazy set-up on a request: migrations, the bootstrap platform admin
//! (variables `bootstrap_admin_email` + `bootstrap_admin_password`) and, with
//! `seed_demo_data`, the demo world (README "Demo world"). One cheap query
//! per request reads the schema version and the markers; everything after it
//! is idempotent (`INSERT OR IGNORE` on natural keys, deterministic ids), so
//! two requests racing through it leave the same state.
//!
//! The bootstrap admin is created once per configured email: an existing
//! user with that email is made platform admin, and its password is never
//! overwritten. Demo users that already exist keep their rows, but take the
//! current `demo_password` when it changed: the `demo_password` marker holds
//! a salted SHA-256 fingerprint of the password they have (never the
//! password), so the argon2 re-hash runs once per change, not per request,
//! and only for the seeded demo users (their own ids and emails), never for a
//! bootstrap or any other account.

use serde_json::json;

use crate::access::Scope;
use crate::auth::{hash_password, normalize_email};
use crate::context::Ctx;
use crate::db::{Db, DbError, Val};
use crate::error::{ApiError, PlaygroundErrors};
use crate::schema::{self, SCHEMA_VERSION};
use crate::util::sha256_hex;

/// Bumped when the demo world changes.
pub const DEMO_SEED_VERSION: &str = "1";

pub fn ensure(ctx: &Ctx) -> Result<(), ApiError> {
    let setup = schema::setup(ctx.db);
    let state = setup.state;
    if state.version < SCHEMA_VERSION {
        schema::migrate(ctx.db, state.version, ctx.now_s()).map_err(log("migrations"))?;
    }
    let cfg = ctx.config;
    if !cfg.bootstrap_admin_email.is_empty()
        && !cfg.bootstrap_admin_password.is_empty()
        && state.bootstrap_admin.as_deref() != Some(cfg.bootstrap_admin_email.as_str())
    {
        bootstrap_admin(ctx).map_err(log("bootstrap admin"))?;
    }
    if !cfg.seed_demo_data {
        return Ok(());
    }
    let seeded = state.demo_seed.as_deref() == Some(DEMO_SEED_VERSION);
    // An emptied demo_password after seeding changes nothing (sign-in needs a password anyway).
    let password_current = is_demo_password(setup.demo_password.as_deref(), &cfg.demo_password)
        || (seeded && cfg.demo_password.is_empty());
    if seeded && password_current {
        return Ok(());
    }
    if cfg.demo_password.is_empty() {
        return Err(ApiError::misconfigured("seed_demo_data is on but demo_password is empty"));
    }
    // Demo users from an earlier run have the password of that run.
    let earlier = if password_current { Vec::new() } else { seeded_demo_users(ctx).map_err(log("demo users"))? };
    if !seeded {
        seed_demo(ctx).map_err(log("demo seed"))?;
    }
    if !password_current {
        apply_demo_password(ctx, &earlier, state.bootstrap_admin.as_deref()).map_err(log("demo password"))?;
    }
    Ok(())
}

/// The `demo_password` marker for `password`: `<salt>:<sha256 hex of salt:password>`.
pub fn demo_password_marker(password: &str, salt: &str) -> String {
    format!("{salt}:{}", sha256_hex(&format!("{salt}:{password}")))
}

/// Is `marker` the fingerprint of `password`?
pub fn is_demo_password(marker: Option<&str>, password: &str) -> bool {
    marker
        .and_then(|m| Some((m, m.split_once(':')?.0)))
        .is_some_and(|(m, salt)| demo_password_marker(password, salt) == m)
}

/// The seeded demo users present now: their own id with their own email. A
/// demo email that belonged to another account first (the bootstrap admin,
/// a real user) kept that account's id, so it is not among them.
fn seeded_demo_users(ctx: &Ctx) -> Result<Vec<&'static str>, DbError> {
    let users = demo_users();
    let ids: Vec<Val> = users.iter().map(|u| u.id.into()).collect();
    let marks = vec!["?"; ids.len()].join(", ");
    let rows = ctx.db.query(&format!("SELECT id, email FROM users WHERE id IN ({marks})"), &ids)?;
    let mut found = Vec::new();
    for row in rows {
        let (id, email) = (row.text(0)?, row.text(1)?);
        found.extend(users.iter().filter(|u| u.id == id && normalize_email(u.email) == email).map(|u| u.id));
    }
    Ok(found)
}

/// Gives `users` (seeded demo users) the current demo password, then records
/// its fingerprint. A bootstrap admin's email (configured now, or `earlier`)
/// is never touched, even if it is a demo email.
fn apply_demo_password(ctx: &Ctx, users: &[&'static str], bootstrap: Option<&str>) -> Result<(), DbError> {
    let cfg = ctx.config;
    for u in demo_users().iter().filter(|u| users.contains(&u.id)) {
        let email = normalize_email(u.email);
        if email == cfg.bootstrap_admin_email || Some(email.as_str()) == bootstrap {
            continue;
        }
        let hash = hash_password(&cfg.demo_password, &ctx.random_bytes::<16>());
        ctx.db.exec(
            "UPDATE users SET password_hash = ? WHERE id = ? AND email = ?",
            &[hash.into(), u.id.into(), email.into()],
        )?;
    }
    schema::set_marker(ctx.db, "demo_password", &demo_password_marker(&cfg.demo_password, &ctx.random_hex::<8>()))
}

fn log(what: &'static str) -> impl Fn(DbError) -> ApiError {
    move |e| {
        // SQLite's message names tables and constraints, never bound values.
        eprintln!("playground: {what} failed: {}", e.0);
        e.into()
    }
}

/// Inserts a user unless the email exists; returns the email's user id.
fn upsert_user(ctx: &Ctx, id: &str, email: &str, password: &str, platform_admin: bool) -> Result<String, DbError> {
    let email = normalize_email(email);
    let existing = ctx.db.one("SELECT id FROM users WHERE email = ?", &[email.as_str().into()])?;
    if let Some(row) = existing {
        return row.text(0);
    }
    let hash = hash_password(password, &ctx.random_bytes::<16>());
    ctx.db.exec(
        "INSERT OR IGNORE INTO users (id, email, platform_admin, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        &[id.into(), email.as_str().into(), platform_admin.into(), hash.into(), Val::Int(ctx.now_s())],
    )?;
    // A racing request may have won with another id: the email decides.
    ctx.db
        .one("SELECT id FROM users WHERE email = ?", &[email.as_str().into()])?
        .ok_or_else(|| DbError("user vanished".into()))?
        .text(0)
}

fn bootstrap_admin(ctx: &Ctx) -> Result<(), DbError> {
    let email = ctx.config.bootstrap_admin_email.clone();
    let id = format!("usr_{}", ctx.random_hex::<8>());
    let id = upsert_user(ctx, &id, &email, &ctx.config.bootstrap_admin_password, true)?;
    ctx.db.exec("UPDATE users SET platform_admin = 1 WHERE id = ?", &[id.into()])?;
    schema::set_marker(ctx.db, "bootstrap_admin", &email)
}

/// The demo tenants: (id, slug, playground_enabled, eu_region_routing).
pub const DEMO_TENANTS: &[(&str, &str, bool, bool)] =
    &[("ten_acme", "acme", true, false), ("ten_euco", "euco", true, true), ("ten_frozen", "frozen", false, false)];

/// One demo gateway.
pub struct DemoGateway {
    pub id: &'static str,
    pub tenant_id: &'static str,
    pub slug: &'static str,
    pub provider: Option<&'static str>,
    /// The stored `web_search_api_key` (demo values, never returned).
    pub key: Option<&'static str>,
    pub eu_region_routing: bool,
}

const fn gateway(
    id: &'static str,
    tenant_id: &'static str,
    slug: &'static str,
    provider: &'static str,
    key: Option<&'static str>,
) -> DemoGateway {
    DemoGateway { id, tenant_id, slug, provider: Some(provider), key, eu_region_routing: false }
}

/// The demo gateways. euco's come under the EU gate through the tenant's flag.
pub const DEMO_GATEWAYS: &[DemoGateway] = &[
    gateway("gw_acme_main", "ten_acme", "main", "brave", Some("demo-brave-key-acme-main")),
    gateway("gw_acme_nokey", "ten_acme", "nokey", "brave", None),
    gateway("gw_acme_second", "ten_acme", "second", "linkup", Some("demo-linkup-key-acme-second")),
    gateway("gw_euco_eu-linkup", "ten_euco", "eu-linkup", "linkup", Some("demo-linkup-key-euco")),
    gateway("gw_euco_eu-brave", "ten_euco", "eu-brave", "brave", Some("demo-brave-key-euco")),
    gateway("gw_frozen_main", "ten_frozen", "main", "brave", Some("demo-brave-key-frozen")),
];

/// One demo user; all sign in with `demo_password`.
pub struct DemoUser {
    pub id: &'static str,
    pub email: &'static str,
    pub platform_admin: bool,
    /// (tenant id, role, gateway scope).
    pub membership: Option<(&'static str, &'static str, Scope)>,
}

pub fn demo_users() -> Vec<DemoUser> {
    let user = |id, email, membership| DemoUser { id, email, platform_admin: false, membership };
    vec![
        DemoUser { id: "usr_demo_platform", email: "platform@demo.test", platform_admin: true, membership: None },
        user("usr_demo_acme_admin", "admin@acme.test", Some(("ten_acme", "admin", Scope::All))),
        user(
            "usr_demo_acme_scoped",
            "scoped-admin@acme.test",
            Some(("ten_acme", "admin", Scope::Gateways(vec!["gw_acme_second".into()]))),
        ),
        user("usr_demo_acme_member", "member@acme.test", Some(("ten_acme", "member", Scope::All))),
        user("usr_demo_acme_viewer", "viewer@acme.test", Some(("ten_acme", "viewer", Scope::All))),
        user("usr_demo_euco_admin", "admin@euco.test", Some(("ten_euco", "admin", Scope::All))),
    ]
}

/// Step counts of a gateway's demo traces (3-12 steps each).
pub const DEMO_TRACE_STEPS: [usize; 3] = [3, 7, 12];

const STEP_NAMES: [&str; 12] = [
    "request.received",
    "auth.token",
    "route.model",
    "prompt.build",
    "llm.call",
    "tool.web_search",
    "tool.result",
    "llm.call",
    "guardrail.check",
    "llm.stream",
    "usage.record",
    "response.done",
];

fn step_name(i: usize, total: usize) -> &'static str {
    if i + 1 == total {
        "response.done"
    } else {
        STEP_NAMES[i]
    }
}

fn seed_demo(ctx: &Ctx) -> Result<(), DbError> {
    let db: &dyn Db = ctx.db;
    for (id, slug, playground, eu) in DEMO_TENANTS {
        db.exec(
            "INSERT OR IGNORE INTO tenants (id, slug, playground_enabled, eu_region_routing) VALUES (?, ?, ?, ?)",
            &[(*id).into(), (*slug).into(), (*playground).into(), (*eu).into()],
        )?;
    }
    for g in DEMO_GATEWAYS {
        db.exec(
            "INSERT OR IGNORE INTO gateways (id, tenant_id, slug, eu_region_routing, web_search_provider, web_search_api_key)
             VALUES (?, ?, ?, ?, ?, ?)",
            &[g.id.into(), g.tenant_id.into(), g.slug.into(), g.eu_region_routing.into(), g.provider.into(), g.key.into()],
        )?;
    }
    for u in demo_users() {
        let user_id = upsert_user(ctx, u.id, u.email, &ctx.config.demo_password, u.platform_admin)?;
        if let Some((tenant, role, scope)) = u.membership {
            db.exec(
                "INSERT OR IGNORE INTO memberships (user_id, tenant_id, role, gateway_scope) VALUES (?, ?, ?, ?)",
                &[user_id.into(), tenant.into(), role.into(), scope.to_db().into()],
            )?;
        }
    }
    let base_ms = ctx.now_ms - 3 * 3600 * 1000;
    for (g, DemoGateway { id: gateway_id, slug, provider, .. }) in DEMO_GATEWAYS.iter().enumerate() {
        for (n, steps) in DEMO_TRACE_STEPS.iter().enumerate() {
            let trace_id = format!("trc_{}_{}", &gateway_id[3..], n + 1);
            let started = base_ms + (g as i64 * 10 + n as i64) * 60_000;
            let status = if n == 2 { "error" } else { "ok" };
            let model = if n == 1 { "ratatoskr-small" } else { "ratatoskr-large" };
            db.exec(
                "INSERT OR IGNORE INTO traces (id, gateway_id, started_at, ended_at, model, status) VALUES (?, ?, ?, ?, ?, ?)",
                &[
                    trace_id.as_str().into(),
                    (*gateway_id).into(),
                    Val::Int(started),
                    Val::Int(started + *steps as i64 * 150),
                    model.into(),
                    status.into(),
                ],
            )?;
            for i in 0..*steps {
                let name = step_name(i, *steps);
                let data = match name {
                    "request.received" => json!({ "gateway": slug, "messages": 1 + n }),
                    "prompt.build" => json!({ "prompt": format!("Demo question {} for {slug}", n + 1) }),
                    "tool.web_search" => json!({ "provider": provider.unwrap_or("brave"), "q": "demo search" }),
                    "llm.call" | "llm.stream" => {
                        json!({ "model": model, "output": "A demo answer.", "tokens": 40 + i })
                    }
                    "response.done" => {
                        json!({ "status": status, "finish_reason": if status == "ok" { "stop" } else { "error" } })
                    }
                    _ => json!({ "seq": i }),
                };
                let at = started + i as i64 * 150;
                db.exec(
                    "INSERT OR IGNORE INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES (?, ?, ?, ?, ?, ?)",
                    &[
                        trace_id.as_str().into(),
                        Val::Int(i as i64),
                        name.into(),
                        Val::Int(at),
                        Val::Int(at + 120),
                        data.to_string().into(),
                    ],
                )?;
            }
        }
    }
    schema::set_marker(db, "demo_seed", DEMO_SEED_VERSION)
}
