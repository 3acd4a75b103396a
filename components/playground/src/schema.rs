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
//! | `settings` | `key` PK, `value` (markers: which bootstrap admin / demo seed ran) |
//! | `users` | `id` PK, `email` UNIQUE (lowercase), `platform_admin`, `password_hash` (argon2id PHC string), `created_at` (s) |
//! | `tenants` | `id` PK, `slug` UNIQUE, `playground_enabled`, `eu_region_routing` |
//! | `memberships` | (`user_id`, `tenant_id`) PK, `role` `admin`\|`member`\|`viewer`, `gateway_scope` `'all'` or a JSON list of gateway ids |
//! | `gateways` | `id` PK, `tenant_id`, `slug` (UNIQUE per tenant), `eu_region_routing`, `web_search_provider` `brave`\|`linkup`\|NULL (= brave), `web_search_api_key` (NULL = none stored) |
//! | `admin_sessions` | `token_hash` PK (SHA-256 hex of the opaque session token), `user_id`, `impersonator_id` (NULL unless impersonating), `created_at`, `expires_at` (s), `revoked` |
//! | `gateway_tokens` | see below |
//! | `traces`, `trace_steps` | see below |
//! | `login_attempts` | `key_hash` (SHA-256 of `email:<email>` / `addr:<ip>`), `at` (s): failed sign-ins, for rate limiting |
//! | `audit` | `id` PK, `at` (s), `actor_id`, `action` (`impersonate`), `target_id`, `detail` (JSON) |
//!
//! ## `gateway_tokens`: what the inference endpoint validates
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `token_hash` | TEXT PK | lowercase hex SHA-256 of the whole token string `myra_<64 hex>` |
//! | `gateway_id` | TEXT | `gateways.id` the token is bound to |
//! | `scopes` | TEXT | JSON list, `["playground"]` for minted tokens |
//! | `kind` | TEXT | `playground` |
//! | `created_at`, `expires_at` | INTEGER | unix seconds; valid while `now < expires_at` |
//! | `created_by` | TEXT | `users.id` of the minting user |
//!
//! A bearer `myra_…` on `POST /{tenant_slug}/{gateway_slug}/v1/chat/completions`
//! is valid when this finds a row with `expires_at > now` (else 401
//! `token_expired` if a row exists, `invalid_token` if none, or if the slugs
//! differ from the URL's):
//!
//! ```sql
//! SELECT t.expires_at, g.id, g.slug, te.slug
//!   FROM gateway_tokens t JOIN gateways g ON g.id = t.gateway_id
//!   JOIN tenants te ON te.id = g.tenant_id
//!  WHERE t.token_hash = ?
//! ```
//!
//! ## `traces` and `trace_steps`: what the inference endpoint writes
//!
//! `traces(id TEXT PK, gateway_id TEXT, started_at INTEGER ms, ended_at
//! INTEGER ms NULL, model TEXT, status TEXT)` — `status` is free text
//! (`ok`, `error`, `running` by convention). `trace_steps(trace_id TEXT,
//! seq INTEGER, name TEXT, started_at INTEGER ms, ended_at INTEGER ms NULL,
//! data TEXT)` with PRIMARY KEY (`trace_id`, `seq`); steps are read in `seq`
//! order and `data` is a JSON document returned decoded inline (text that is
//! not JSON is returned as a JSON string). Insert the trace row first, then
//! one `INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at,
//! data) VALUES (?, ?, ?, ?, ?, ?)` per step.

use crate::db::{Db, DbError, Val};

/// The newest schema version.
pub const SCHEMA_VERSION: i64 = 1;

/// Each migration is a list of single statements (Spin runs only the first
/// statement of a text), every one of them safe to run twice.
const MIGRATIONS: &[(i64, &[&str])] = &[(
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
        "CREATE TABLE IF NOT EXISTS gateway_tokens (
            token_hash TEXT PRIMARY KEY,
            gateway_id TEXT NOT NULL REFERENCES gateways(id),
            scopes TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            created_by TEXT)",
        "CREATE INDEX IF NOT EXISTS gateway_tokens_by_gateway ON gateway_tokens (gateway_id, kind, expires_at)",
        "CREATE TABLE IF NOT EXISTS traces (
            id TEXT PRIMARY KEY,
            gateway_id TEXT NOT NULL REFERENCES gateways(id),
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            model TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'ok')",
        "CREATE INDEX IF NOT EXISTS traces_by_gateway ON traces (gateway_id, started_at DESC)",
        "CREATE TABLE IF NOT EXISTS trace_steps (
            trace_id TEXT NOT NULL REFERENCES traces(id),
            seq INTEGER NOT NULL,
            name TEXT NOT NULL,
            started_at INTEGER NOT NULL,
            ended_at INTEGER,
            data TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (trace_id, seq))",
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
)];

/// What one cheap query says about the database.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub version: i64,
    pub bootstrap_admin: Option<String>,
    pub demo_seed: Option<String>,
}

/// Reads the schema version and the setup markers in one statement. A
/// fresh database (no tables yet) reads as version 0.
pub fn state(db: &dyn Db) -> State {
    let row = db.one(
        "SELECT (SELECT MAX(version) FROM schema_version),
                (SELECT value FROM settings WHERE key = 'bootstrap_admin'),
                (SELECT value FROM settings WHERE key = 'demo_seed')",
        &[],
    );
    match row {
        Ok(Some(row)) => State {
            version: row.opt_int(0).ok().flatten().unwrap_or(0),
            bootstrap_admin: row.opt_text(1).ok().flatten(),
            demo_seed: row.opt_text(2).ok().flatten(),
        },
        _ => State::default(),
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
            db.exec(sql, &[])?;
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
        assert_eq!(versions.len(), 1, "one row per version");
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
