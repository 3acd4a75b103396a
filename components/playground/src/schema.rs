//! The Playground database (Spin SQLite, label `default`) and its versioned,
//! idempotent migrations.
//!
//! # Table contract
//!
//! Times are integers: **unix seconds** for sessions, tokens and login
//! attempts; **unix milliseconds** for traces and their steps. Booleans are
//! `0`/`1`. Ids are text of `A-Z a-z 0-9 _ -` (1-128 characters).
//!
//! | table | columns |
//! |---|---|
//! | `schema_version` | `version` PK, `applied_at` (s) |
//! | `settings` | `key` PK, `value` (markers: which bootstrap admin / demo seed ran, the salted fingerprints of the demo and bootstrap passwords) |
//! | `users` | `id` PK, `email` UNIQUE (lowercase), `platform_admin`, `password_hash` (argon2id PHC string), `created_at` (s) |
//! | `tenants` | `id` PK, `slug` UNIQUE, `playground_enabled`, `eu_region_routing` |
//! | `memberships` | (`user_id`, `tenant_id`) PK, `role` `admin`\|`member`\|`viewer`, `gateway_scope` `'all'` or a JSON list of gateway ids |
//! | `gateways` | `id` PK, `tenant_id`, `slug` (UNIQUE per tenant), `eu_region_routing`, `web_search_provider` `brave`\|`linkup`\|NULL (= brave), `web_search_api_key` (NULL = none stored) |
//! | `admin_sessions` | `token_hash` PK (SHA-256 hex of the opaque session token), `user_id`, `impersonator_id` (NULL unless impersonating), `created_at`, `expires_at` (s), `revoked`, `last_seen` (s, written at most once a minute; NULL = `created_at`), `parent_hash` (an impersonation's starting session) |
//! | `gateway_tokens` | minted tokens: see `gateway-ledger` |
//! | `traces`, `trace_steps` | the inference endpoint's traces: see `gateway-ledger` |
//! | `login_attempts` | `key_hash` (SHA-256 of `pair:<email>\n<addr>` / `addr:<addr>` / `email:<email>`, `<addr>` an IPv4 address or IPv6 /64), `at` (s): sign-in attempts (a success removes its own), for rate limiting |
//! | `audit` | `id` PK, `at` (s), `actor_id`, `action` (`impersonate`), `target_id`, `detail` (JSON) |
//!
//! `gateway_tokens`, `traces` and `trace_steps` are the contract with the
//! simulator's inference endpoint, which reads the tokens and writes the
//! traces: their DDL, every statement either side runs on them, the token
//! format and hash and the row types are defined once, in `crates/gateway-ledger`
//! (its crate docs describe the columns); migration 1 runs that DDL.

use crate::db::{Db, DbError, Row, Val};

/// The newest schema version.
pub const SCHEMA_VERSION: i64 = 2;

/// Each migration is a list of single statements (Spin runs only the first
/// statement of a text), every one of them safe to run twice.
const MIGRATIONS: &[(i64, &[&str])] = &[
    (
        1,
        &[
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE IF NOT EXISTS users (
            id TEXT PRIMARY KEY,
            email TEXT NOT NULL UNIQUE,
            platform_admin INTEGER NOT NULL DEFAULT 0,
            password_hash TEXT NOT NULL,
            created_at INTEGER NOT NULL)",
            "CREATE TABLE IF NOT EXISTS tenants (
            id TEXT PRIMARY KEY,
            slug TEXT NOT NULL UNIQUE,
            playground_enabled INTEGER NOT NULL DEFAULT 1,
            eu_region_routing INTEGER NOT NULL DEFAULT 0)",
            "CREATE TABLE IF NOT EXISTS memberships (
            user_id TEXT NOT NULL REFERENCES users(id),
            tenant_id TEXT NOT NULL REFERENCES tenants(id),
            role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
            gateway_scope TEXT NOT NULL DEFAULT 'all',
            PRIMARY KEY (user_id, tenant_id))",
            "CREATE TABLE IF NOT EXISTS gateways (
            id TEXT PRIMARY KEY,
            tenant_id TEXT NOT NULL REFERENCES tenants(id),
            slug TEXT NOT NULL,
            eu_region_routing INTEGER NOT NULL DEFAULT 0,
            web_search_provider TEXT CHECK (web_search_provider IS NULL OR web_search_provider IN ('brave', 'linkup')),
            web_search_api_key TEXT,
            UNIQUE (tenant_id, slug))",
            "CREATE TABLE IF NOT EXISTS admin_sessions (
            token_hash TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id),
            impersonator_id TEXT REFERENCES users(id),
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            revoked INTEGER NOT NULL DEFAULT 0)",
            gateway_ledger::GATEWAY_TOKENS_TABLE,
            gateway_ledger::GATEWAY_TOKENS_INDEX,
            gateway_ledger::TRACES_TABLE,
            gateway_ledger::TRACES_INDEX,
            gateway_ledger::TRACE_STEPS_TABLE,
            "CREATE TABLE IF NOT EXISTS login_attempts (key_hash TEXT NOT NULL, at INTEGER NOT NULL)",
            "CREATE INDEX IF NOT EXISTS login_attempts_by_key ON login_attempts (key_hash, at)",
            "CREATE TABLE IF NOT EXISTS audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,
            actor_id TEXT NOT NULL,
            action TEXT NOT NULL,
            target_id TEXT,
            detail TEXT)",
        ],
    ),
    (
        2,
        &[
            // Idle timeout, and the session an impersonation was started from.
            "ALTER TABLE admin_sessions ADD COLUMN last_seen INTEGER",
            "ALTER TABLE admin_sessions ADD COLUMN parent_hash TEXT",
            "CREATE INDEX IF NOT EXISTS admin_sessions_by_user ON admin_sessions (user_id)",
            "CREATE INDEX IF NOT EXISTS admin_sessions_by_parent ON admin_sessions (parent_hash)",
        ],
    ),
];

/// What one cheap query says about the database.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub version: i64,
    pub bootstrap_admin: Option<String>,
    pub demo_seed: Option<String>,
}

/// The [`State`] and the marker only the demo seed reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    pub state: State,
    /// The `demo_password` marker: which demo password the demo users have (see `seed`).
    pub demo_password: Option<String>,
    /// The `bootstrap_password` marker: which configured password the bootstrap admin was given.
    pub bootstrap_password: Option<String>,
}

/// The schema version and the setup markers as [`SETUP_WIDTH`] columns: a
/// statement of their own ([`setup`]), or the head of the session lookup
/// (`auth`), so a signed-in request reads both in one statement (under Spin
/// every statement is a host call of its own).
pub const SETUP_COLUMNS: &str = "(SELECT MAX(version) FROM schema_version),
        (SELECT value FROM settings WHERE key = 'bootstrap_admin'),
        (SELECT value FROM settings WHERE key = 'demo_seed'),
        (SELECT value FROM settings WHERE key = 'demo_password'),
        (SELECT value FROM settings WHERE key = 'bootstrap_password')";
pub const SETUP_WIDTH: usize = 5;

/// Reads the schema version and the setup markers in one statement. A
/// fresh database (no tables yet) reads as version 0.
pub fn state(db: &dyn Db) -> State {
    setup(db).state
}

/// [`state`] with the demo password's marker, in the same one statement.
pub fn setup(db: &dyn Db) -> Setup {
    match db.one(&format!("SELECT {SETUP_COLUMNS}"), &[]) {
        Ok(Some(row)) => Setup::from_row(&row),
        _ => Setup::default(),
    }
}

impl Setup {
    /// The [`SETUP_COLUMNS`] at the head of `row`.
    pub fn from_row(row: &Row) -> Setup {
        Setup {
            state: State {
                version: row.opt_int(0).ok().flatten().unwrap_or(0),
                bootstrap_admin: row.opt_text(1).ok().flatten(),
                demo_seed: row.opt_text(2).ok().flatten(),
            },
            demo_password: row.opt_text(3).ok().flatten(),
            bootstrap_password: row.opt_text(4).ok().flatten(),
        }
    }
}

/// Applies every migration newer than `from`. Safe when two requests race:
/// every statement is idempotent and the version rows are `INSERT OR IGNORE`.
pub fn migrate(db: &dyn Db, from: i64, now_s: i64) -> Result<(), DbError> {
    for (version, statements) in MIGRATIONS {
        if *version <= from {
            continue;
        }
        for sql in *statements {
            match db.exec(sql, &[]) {
                // `ADD COLUMN` has no `IF NOT EXISTS`: a racing request added it first.
                Err(e) if sql.starts_with("ALTER TABLE") && e.0.contains("duplicate column name") => {}
                other => other?,
            }
        }
        db.exec(
            "INSERT OR IGNORE INTO schema_version (version, applied_at) VALUES (?, ?)",
            &[Val::Int(*version), Val::Int(now_s)],
        )?;
    }
    Ok(())
}

pub fn set_marker(db: &dyn Db, key: &str, value: &str) -> Result<(), DbError> {
    db.exec(
        "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[key.into(), value.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::MemDb;

    #[test]
    fn a_fresh_database_is_version_zero_and_migrates_to_current() {
        let db = MemDb::new();
        assert_eq!(state(&db).version, 0);
        migrate(&db, 0, 1_000).unwrap();
        assert_eq!(state(&db), State { version: SCHEMA_VERSION, bootstrap_admin: None, demo_seed: None });
    }

    #[test]
    fn migrations_are_idempotent_and_keep_data() {
        let db = MemDb::new();
        migrate(&db, 0, 1_000).unwrap();
        db.exec("INSERT INTO tenants (id, slug) VALUES ('ten_x', 'x')", &[]).unwrap();
        // A racing request that also saw version 0 runs everything again.
        migrate(&db, 0, 2_000).unwrap();
        migrate(&db, SCHEMA_VERSION, 3_000).unwrap();
        let rows = db.query("SELECT slug FROM tenants", &[]).unwrap();
        assert_eq!(rows.len(), 1);
        let versions = db.query("SELECT version, applied_at FROM schema_version", &[]).unwrap();
        assert_eq!(versions.len(), SCHEMA_VERSION as usize, "one row per version");
        assert_eq!(versions[0].int(1).unwrap(), 1_000, "the first application is kept");
    }

    #[test]
    fn every_migration_statement_is_a_single_statement() {
        for (_, statements) in MIGRATIONS {
            for sql in *statements {
                assert!(!sql.trim_end().trim_end_matches(';').contains(';'), "{sql}");
            }
        }
    }

    #[test]
    fn markers_upsert() {
        let db = MemDb::new();
        migrate(&db, 0, 1).unwrap();
        set_marker(&db, "demo_seed", "1").unwrap();
        set_marker(&db, "bootstrap_admin", "a@b").unwrap();
        set_marker(&db, "bootstrap_admin", "c@d").unwrap();
        let s = state(&db);
        assert_eq!((s.bootstrap_admin.as_deref(), s.demo_seed.as_deref()), (Some("c@d"), Some("1")));
    }

    #[test]
    fn the_provider_check_constraint_holds() {
        let db = MemDb::new();
        migrate(&db, 0, 1).unwrap();
        db.exec("INSERT INTO tenants (id, slug) VALUES ('t', 't')", &[]).unwrap();
        assert!(db
            .exec(
                "INSERT INTO gateways (id, tenant_id, slug, web_search_provider) VALUES ('g', 't', 'g', 'google')",
                &[]
            )
            .is_err());
        db.exec("INSERT INTO gateways (id, tenant_id, slug, web_search_provider) VALUES ('g', 't', 'g', NULL)", &[])
            .unwrap();
    }
}
