//! `POST /playground/token {gateway_id}`: mints a gateway inference token.
//!
//! `myra_` + 64 lowercase hex (32 CSPRNG bytes), scopes `["playground"]`,
//! kind `playground`, valid for [`PLAYGROUND_TOKEN_TTL_S`]. Only its SHA-256
//! is stored. Each mint first deletes the gateway's EXPIRED playground
//! tokens and leaves valid ones alone (concurrent sessions each keep theirs).
//! Deliberately NOT gated by `playground_enabled` (ordinary chat mints here
//! too). Order: impersonation guard → `gateway_id` → gateway access (404) →
//! role (403 `insufficient_role` for viewers).

use serde_json::{json, Value};

use crate::access::may_use_playground;
use crate::auth::Principal;
use crate::context::Ctx;
use crate::db::{Db, DbError};
use crate::error::{self, ApiError};
use crate::http::{json_body, Request, Response};
use crate::util::iso8601;
use crate::{gateways, routes};
use gateway_ledger::tokens::{self as ledger, NewToken};
use gateway_ledger::transaction;

/// 30 minutes: a token that passes the chat app's pre-turn refresh check
/// always outlives the longest legal turn.
pub const PLAYGROUND_TOKEN_TTL_S: i64 = 1800;
/// The token format, kind and scopes are the contract with the simulator's lookup.
pub use gateway_ledger::tokens::{format_token, is_token, PLAYGROUND_KIND, PLAYGROUND_SCOPES, TOKEN_PREFIX};

/// Deletes the gateway's expired playground tokens, then stores the new one.
/// Returns `expires_at` (unix seconds).
pub fn store(db: &dyn Db, gateway_id: &str, token: &str, user_id: &str, now_s: i64) -> Result<i64, DbError> {
    let expires_at = now_s + PLAYGROUND_TOKEN_TTL_S;
    let row = NewToken {
        token_hash: &ledger::token_hash(token),
        gateway_id,
        scopes: PLAYGROUND_SCOPES,
        kind: PLAYGROUND_KIND,
        created_at_s: now_s,
        expires_at_s: expires_at,
        created_by: user_id,
    };
    // One transaction, so one commit (one fsync of the database file) per mint,
    // and the clean-up never happens without the new token.
    transaction(db, || {
        ledger::delete_expired(db, gateway_id, PLAYGROUND_KIND, now_s)?;
        ledger::insert(db, &row)
    })?;
    Ok(expires_at)
}

pub fn mint(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    if p.impersonator.is_some() {
        return Err(error::impersonation_forbidden());
    }
    let body = json_body(req, false)?;
    let id = routes::gateway_id(body.get("gateway_id").and_then(Value::as_str).unwrap_or(""))?;
    let (gateway, access) = gateways::accessible(ctx, p, &id)?;
    may_use_playground(access)?;
    let token = format_token(&ctx.random_bytes::<32>());
    let expires_at = store(ctx.db, &gateway.id, &token, &p.user.id, ctx.now_s())?;
    Ok(Response::json(
        200,
        &json!({
            "token": token,
            "expires_at": iso8601(expires_at),
            "tenant_slug": gateway.tenant_slug,
            "gateway_slug": gateway.slug,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::MemDb;
    use crate::schema;
    use crate::util::sha256_hex;

    fn db() -> MemDb {
        let db = MemDb::new();
        schema::migrate(&db, 0, 0).unwrap();
        // The bundled SQLite enforces foreign keys: tokens need their gateway.
        db.exec("INSERT INTO tenants (id, slug) VALUES ('ten_t', 't')", &[]).unwrap();
        for g in ["gw_a", "gw_b"] {
            db.exec("INSERT INTO gateways (id, tenant_id, slug) VALUES (?, 'ten_t', ?)", &[g.into(), g.into()])
                .unwrap();
        }
        db
    }

    fn hashes(db: &MemDb) -> Vec<(String, i64)> {
        db.query("SELECT token_hash, expires_at FROM gateway_tokens ORDER BY created_at, token_hash", &[])
            .unwrap()
            .iter()
            .map(|r| (r.text(0).unwrap(), r.int(1).unwrap()))
            .collect()
    }

    #[test]
    fn tokens_are_myra_plus_64_lowercase_hex() {
        let t = format_token(&[0xAB; 32]);
        assert_eq!(t, format!("myra_{}", "ab".repeat(32)));
        assert!(is_token(&t));
        assert!(!is_token(&t.to_uppercase()));
        assert!(!is_token(&t[..t.len() - 1]));
        assert_eq!(PLAYGROUND_TOKEN_TTL_S, 30 * 60);
    }

    #[test]
    fn stored_as_sha256_with_scopes_kind_and_ttl() {
        let db = db();
        let t = format_token(&[1; 32]);
        let expires = store(&db, "gw_a", &t, "usr_1", 1_000).unwrap();
        assert_eq!(expires, 1_000 + 1800);
        let row = db
            .one(
                "SELECT token_hash, gateway_id, scopes, kind, created_at, expires_at, created_by FROM gateway_tokens",
                &[],
            )
            .unwrap()
            .unwrap();
        assert_eq!(row.text(0).unwrap(), sha256_hex(&t));
        assert_ne!(row.text(0).unwrap(), t, "never the token itself");
        assert_eq!(row.text(1).unwrap(), "gw_a");
        assert_eq!(serde_json::from_str::<Vec<String>>(&row.text(2).unwrap()).unwrap(), vec!["playground"]);
        assert_eq!(row.text(3).unwrap(), "playground");
        assert_eq!((row.int(4).unwrap(), row.int(5).unwrap()), (1_000, 2_800));
    }

    #[test]
    fn minting_deletes_only_this_gateways_expired_playground_tokens() {
        let db = db();
        let (a, b, other, c) =
            (format_token(&[1; 32]), format_token(&[2; 32]), format_token(&[3; 32]), format_token(&[4; 32]));
        store(&db, "gw_a", &a, "u", 0).unwrap(); // expires 1800
        store(&db, "gw_a", &b, "u", 1_000).unwrap(); // expires 2800
        store(&db, "gw_b", &other, "u", 0).unwrap(); // another gateway, expired later
                                                     // A non-playground token of the same gateway, long expired: not ours to delete.
        db.exec(
            "INSERT INTO gateway_tokens (token_hash, gateway_id, scopes, kind, created_at, expires_at) VALUES ('x', 'gw_a', '[]', 'api', 0, 1)",
            &[],
        )
        .unwrap();
        // At exactly 1800 token a is expired (valid while now < expires_at).
        store(&db, "gw_a", &c, "u", 1_800).unwrap();
        let left: Vec<String> = hashes(&db).into_iter().map(|(h, _)| h).collect();
        assert!(!left.contains(&sha256_hex(&a)), "the expired token is gone");
        assert!(left.contains(&sha256_hex(&b)), "the valid token stays");
        assert!(left.contains(&sha256_hex(&c)));
        assert!(left.contains(&sha256_hex(&other)), "other gateways are untouched");
        assert!(left.contains(&"x".to_string()), "other kinds are untouched");
    }

    #[test]
    fn a_failed_mint_keeps_the_expired_tokens_it_would_have_deleted() {
        let db = db();
        let (a, b) = (format_token(&[1; 32]), format_token(&[2; 32]));
        store(&db, "gw_a", &a, "u", 3_000).unwrap(); // expires 4800
        store(&db, "gw_a", &b, "u", 4_000).unwrap(); // expires 5800
                                                     // Storing b again fails on its primary key after the clean-up of a ran: all of it is undone.
        assert!(store(&db, "gw_a", &b, "u", 5_000).is_err());
        let left: Vec<String> = hashes(&db).into_iter().map(|(h, _)| h).collect();
        assert_eq!(left, vec![sha256_hex(&a), sha256_hex(&b)]);
        // And the connection is back in autocommit: the next mint works.
        store(&db, "gw_a", &format_token(&[3; 32]), "u", 5_000).unwrap();
        assert_eq!(hashes(&db).len(), 2, "a is cleaned up now; b and the new token stay");
    }

    #[test]
    fn a_stored_token_is_granted_by_the_lookup_the_simulator_runs() {
        let db = db();
        let t = format_token(&[9; 32]);
        let expires = store(&db, "gw_a", &t, "usr_1", 1_000).unwrap();
        // The simulator's `ledger::authorize` looks the bearer up exactly so.
        let grant = ledger::lookup(&db, &ledger::token_hash(&t)).unwrap().expect("the minted token is found");
        assert_eq!(
            (grant.gateway_id.as_str(), grant.gateway_slug.as_str(), grant.tenant_slug.as_str()),
            ("gw_a", "gw_a", "t")
        );
        assert_eq!((grant.kind.as_str(), grant.expires_at_s), (PLAYGROUND_KIND, expires));
        assert!(grant.is_valid_at(expires - 1) && !grant.is_valid_at(expires));
        assert_eq!(ledger::lookup(&db, &t).unwrap(), None, "only the hash is a key");
    }

    #[test]
    fn many_mints_keep_every_valid_token() {
        let db = db();
        for i in 0..10u8 {
            store(&db, "gw_a", &format_token(&[i; 32]), "u", 100 + i as i64).unwrap();
        }
        assert_eq!(hashes(&db).len(), 10);
    }
}
