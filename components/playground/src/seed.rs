//! Lazy set-up on a request: migrations, the bootstrap platform admin
//! (variables `bootstrap_admin_email` + `bootstrap_admin_password`) and, with
//! `seed_demo_data`, the demo world (docs/playground.md, "Demo world"). The
//! request's first statement reads the schema version and the markers
//! ([`schema::SETUP_COLUMNS`], with the session lookup when there is one); everything after it
//! is idempotent (`INSERT OR IGNORE` on natural keys, deterministic ids), so
//! two requests racing through it leave the same state.
//!
//! The bootstrap admin is created once per configured email (an existing
//! user with that email is made platform admin). Its password follows the
//! variable: when `bootstrap_admin_password` changes, the next request gives
//! the account the new password (unless its hash already verifies it) and
//! ends its sessions. The `bootstrap_password` marker holds a salted SHA-256
//! fingerprint of the configured password (never the password), so the
//! argon2 check runs once per change, not per request.
//!
//! No demo password is published. With `demo_password` set (at least
//! [`MIN_PASSWORD_LEN`] characters, else nothing is seeded), the demo users
//! sign in with it; a change re-hashes them once (the `demo_password` marker
//! is its fingerprint), and only the seeded demo users (their own ids and
//! emails), never a bootstrap or any other account. Without it, seeding
//! draws a random password for this database, gives it to the demo users
//! (argon2 hashes only) and prints it once to stderr, the terminal of
//! whoever started the app; and it seeds only for a request from loopback,
//! so a server reachable from elsewhere never hands out demo accounts to
//! the first visitor. A database whose demo users still have the password
//! this app once published is given a random one the same way.

use std::cell::Cell;

use serde_json::json;

use crate::access::Scope;
use crate::auth::{hash_password, normalize_email, revoke_all, verify_password, MIN_PASSWORD_LEN};
use crate::context::Ctx;
use crate::db::{transaction, Db, DbError, Row, Val};
use crate::error::ApiError;
use crate::http::Request;
use crate::net;
use crate::schema::{self, Setup, SCHEMA_VERSION};
use crate::util::sha256_hex;

/// Bumped when the demo world changes.
pub const DEMO_SEED_VERSION: &str = "1";
/// The demo password earlier versions published: demo users that still have
/// it get a random one.
pub const PUBLISHED_DEMO_PASSWORD: &str = "ratatoskr-demo";
/// Characters of a generated demo password (5 bits each: 100 bits).
pub const GENERATED_PASSWORD_CHARS: usize = 20;
/// 32 symbols (a byte's low 5 bits pick one), none easily misread (no i, l, o, 1).
const ALPHABET: &[u8; 32] = b"abcdefghjkmnpqrstuvwxyz023456789";

/// Whether [`ensure`] ran any statement: what the request read before it
/// may be stale then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ensured {
    Untouched,
    Worked,
}

/// Brings the database to what the configuration asks, given its `setup` as
/// the request's first statement read it: migrations, the bootstrap admin,
/// the demo world. On the usual request there is nothing to do and no
/// statement runs.
pub fn ensure(ctx: &Ctx, req: &Request, setup: Setup) -> Result<Ensured, ApiError> {
    let counted = Counted { db: ctx.db, statements: Cell::new(0) };
    set_up(&Ctx { db: &counted, ..*ctx }, req, setup)?;
    Ok(match counted.statements.get() {
        0 => Ensured::Untouched,
        _ => Ensured::Worked,
    })
}

/// Counts the statements run through it: every branch of [`set_up`] that
/// reads or writes is seen, with nothing to keep in step by hand.
struct Counted<'a> {
    db: &'a dyn Db,
    statements: Cell<usize>,
}

impl Db for Counted<'_> {
    fn query(&self, sql: &str, params: &[Val]) -> Result<Vec<Row>, DbError> {
        self.statements.set(self.statements.get() + 1);
        self.db.query(sql, params)
    }
}

fn set_up(ctx: &Ctx, req: &Request, setup: Setup) -> Result<(), ApiError> {
    let state = setup.state;
    if state.version < SCHEMA_VERSION {
        schema::migrate(ctx.db, state.version, ctx.now_s()).map_err(log("migrations"))?;
    }
    let cfg = ctx.config;
    if !cfg.bootstrap_admin_email.is_empty() && !cfg.bootstrap_admin_password.is_empty() {
        if state.bootstrap_admin.as_deref() != Some(cfg.bootstrap_admin_email.as_str()) {
            bootstrap_admin(ctx).map_err(log("bootstrap admin"))?;
        }
        if !is_demo_password(setup.bootstrap_password.as_deref(), &cfg.bootstrap_admin_password) {
            sync_bootstrap_password(ctx).map_err(log("bootstrap password"))?;
        }
    }
    if !cfg.seed_demo_data {
        return Ok(());
    }
    let seeded = state.demo_seed.as_deref() == Some(DEMO_SEED_VERSION);
    let marker = setup.demo_password.as_deref();
    let unset = cfg.demo_password.is_empty();
    let valid = cfg.demo_password.chars().count() >= MIN_PASSWORD_LEN && cfg.demo_password != PUBLISHED_DEMO_PASSWORD;
    if !unset && !valid {
        say(format!(
            "playground: demo_password ignored: it must have at least {MIN_PASSWORD_LEN} characters and not be \
             the formerly published default; no demo data is seeded with it"
        ));
    }
    if unset || !valid {
        // Keep whatever password the demo users have, unless it is the published one.
        let published = marker.is_none() || is_demo_password(marker, PUBLISHED_DEMO_PASSWORD);
        if seeded && !published {
            return Ok(());
        }
        if !seeded && !unset {
            return Ok(());
        }
        if !seeded && !net::is_loopback(net::client(req, &cfg.trusted_proxies)) {
            say(format!(
                "playground: demo data NOT seeded: seed_demo_data is on without a demo_password and this request \
                 did not come from loopback; open the app on 127.0.0.1 once, or set demo_password \
                 (SPIN_VARIABLE_DEMO_PASSWORD, at least {MIN_PASSWORD_LEN} characters)"
            ));
            return Ok(());
        }
        return seed_generated(ctx, state.bootstrap_admin.as_deref()).map_err(log("demo seed"));
    }
    if seeded && is_demo_password(marker, &cfg.demo_password) {
        return Ok(());
    }
    let hash = hash_password(&cfg.demo_password, &ctx.random_bytes::<16>());
    // Demo users from an earlier run have the password of that run.
    let earlier = if seeded { seeded_demo_users(ctx).map_err(log("demo users"))? } else { Vec::new() };
    if !seeded {
        seed_demo(ctx, &hash).map_err(log("demo seed"))?;
    }
    apply_demo_hash(ctx, &earlier, state.bootstrap_admin.as_deref(), &hash, &cfg.demo_password)
        .map_err(log("demo password"))
}

/// A fresh random demo password: [`GENERATED_PASSWORD_CHARS`] symbols from
/// the CSPRNG, in groups of five.
pub fn generate_password(ctx: &Ctx) -> String {
    let bytes = ctx.random_bytes::<GENERATED_PASSWORD_CHARS>();
    let symbols: Vec<char> = bytes.iter().map(|b| ALPHABET[(b & 31) as usize] as char).collect();
    symbols.chunks(5).map(|c| c.iter().collect::<String>()).collect::<Vec<_>>().join("-")
}

/// Seeds (or re-passwords) the demo users with a generated password. One
/// transaction decides who does it, so racing first requests print one
/// password, the one that works.
fn seed_generated(ctx: &Ctx, bootstrap: Option<&str>) -> Result<(), DbError> {
    let password = generate_password(ctx);
    let hash = hash_password(&password, &ctx.random_bytes::<16>());
    let done = transaction(ctx.db, || {
        let setup = schema::setup(ctx.db);
        let seeded = setup.state.demo_seed.as_deref() == Some(DEMO_SEED_VERSION);
        let marker = setup.demo_password.as_deref();
        if seeded && marker.is_some() && !is_demo_password(marker, PUBLISHED_DEMO_PASSWORD) {
            return Ok(false);
        }
        let earlier = if seeded { seeded_demo_users(ctx)? } else { Vec::new() };
        if !seeded {
            seed_demo(ctx, &hash)?;
        }
        apply_demo_hash(ctx, &earlier, bootstrap, &hash, &password)?;
        Ok(true)
    })?;
    if done {
        #[cfg(test)]
        GENERATED.with(|g| *g.borrow_mut() = Some(password.clone()));
        let emails: Vec<&str> = demo_users().iter().map(|u| u.email).collect();
        say(format!(
            "playground: demo data seeded. The demo users ({}) sign in with the password {password} \
             (generated for this database and shown only now; set demo_password to choose one)",
            emails.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// The password this thread's last seeding generated (what stderr showed).
    pub static GENERATED: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// A password's marker: `<salt>:<sha256 hex of salt:password>`.
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

/// Gives `users` (seeded demo users) `hash` (of `password`), then records the
/// password's fingerprint. A bootstrap admin's email (configured now, or
/// `bootstrap` earlier) is never touched, even if it is a demo email.
fn apply_demo_hash(
    ctx: &Ctx,
    users: &[&'static str],
    bootstrap: Option<&str>,
    hash: &str,
    password: &str,
) -> Result<(), DbError> {
    for u in demo_users().iter().filter(|u| users.contains(&u.id)) {
        let email = normalize_email(u.email);
        if email == ctx.config.bootstrap_admin_email || Some(email.as_str()) == bootstrap {
            continue;
        }
        ctx.db.exec(
            "UPDATE users SET password_hash = ? WHERE id = ? AND email = ?",
            &[hash.into(), u.id.into(), email.into()],
        )?;
    }
    schema::set_marker(ctx.db, "demo_password", &demo_password_marker(password, &ctx.random_hex::<8>()))
}

fn log(what: &'static str) -> impl Fn(DbError) -> ApiError {
    move |e| {
        // SQLite's message names tables and constraints, never bound values.
        say(format!("playground: {what} failed: {}", e.0));
        e.into()
    }
}

/// Inserts a user unless the email exists; returns the email's user id.
fn upsert_user(
    ctx: &Ctx,
    id: &str,
    email: &str,
    hash: &dyn Fn() -> String,
    platform_admin: bool,
) -> Result<String, DbError> {
    let email = normalize_email(email);
    let existing = ctx.db.one("SELECT id FROM users WHERE email = ?", &[email.as_str().into()])?;
    if let Some(row) = existing {
        return row.text(0);
    }
    ctx.db.exec(
        "INSERT OR IGNORE INTO users (id, email, platform_admin, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
        &[id.into(), email.as_str().into(), platform_admin.into(), hash().into(), Val::Int(ctx.now_s())],
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
    let hash = || hash_password(&ctx.config.bootstrap_admin_password, &ctx.random_bytes::<16>());
    let id = upsert_user(ctx, &id, &email, &hash, true)?;
    ctx.db.exec("UPDATE users SET platform_admin = 1 WHERE id = ?", &[id.into()])?;
    schema::set_marker(ctx.db, "bootstrap_admin", &email)
}

/// The configured bootstrap password changed (or was never recorded): the
/// account takes it unless its hash already verifies it, and a change ends
/// every session the account has.
fn sync_bootstrap_password(ctx: &Ctx) -> Result<(), DbError> {
    let cfg = ctx.config;
    let row = ctx
        .db
        .one("SELECT id, password_hash FROM users WHERE email = ?", &[cfg.bootstrap_admin_email.as_str().into()])?;
    if let Some(row) = row {
        let id = row.text(0)?;
        if !verify_password(&cfg.bootstrap_admin_password, &row.text(1)?) {
            let hash = hash_password(&cfg.bootstrap_admin_password, &ctx.random_bytes::<16>());
            ctx.db.exec("UPDATE users SET password_hash = ? WHERE id = ?", &[hash.into(), id.as_str().into()])?;
            let ended = revoke_all(ctx.db, &id, None)?;
            say(format!(
                "playground: the bootstrap admin now signs in with the configured bootstrap_admin_password \
                 ({ended} session(s) signed out)"
            ));
        }
    }
    let marker = demo_password_marker(&cfg.bootstrap_admin_password, &ctx.random_hex::<8>());
    schema::set_marker(ctx.db, "bootstrap_password", &marker)
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

/// One demo user; all sign in with the demo password (see the module docs).
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

fn seed_demo(ctx: &Ctx, hash: &str) -> Result<(), DbError> {
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
        let user_id = upsert_user(ctx, u.id, u.email, &|| hash.to_string(), u.platform_admin)?;
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

/// One line to stderr in one write, so the host's log never splits it.
fn say(line: String) {
    eprint!("{}", line + "\n");
}
