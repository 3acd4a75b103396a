//! Gateway tokens: `myra_` + 64 lowercase hex (32 CSPRNG bytes); only their SHA-256 is
//! stored. The playground mints them ([`delete_expired`], [`insert`]), the simulator's
//! inference endpoint accepts them ([`lookup`]).

use sha2::{Digest, Sha256};

use crate::{Db, DbError, Val};

pub const TOKEN_PREFIX: &str = "myra_";
pub const TOKEN_HEX_DIGITS: usize = 64;
/// The `kind` of a token minted by the playground.
pub const PLAYGROUND_KIND: &str = "playground";
/// The `scopes` (a JSON list) of a token minted by the playground.
pub const PLAYGROUND_SCOPES: &str = "[\"playground\"]";

/// The token for 32 random bytes.
pub fn format_token(random: &[u8; 32]) -> String {
    format!("{TOKEN_PREFIX}{}", hex::encode(random))
}

/// Is `t` exactly `myra_` + 64 lowercase hex digits?
pub fn is_token(t: &str) -> bool {
    t.strip_prefix(TOKEN_PREFIX)
        .is_some_and(|h| h.len() == TOKEN_HEX_DIGITS && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
}

/// Lowercase hex SHA-256 of `text` (how every token of the playground is stored).
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The `gateway_tokens.token_hash` key: [`sha256_hex`] of the whole token string.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token)
}

/// Removes a gateway's tokens of one kind that are expired at `now_s`.
pub const DELETE_EXPIRED: &str = "DELETE FROM gateway_tokens WHERE gateway_id = ? AND kind = ? AND expires_at <= ?";

pub const INSERT: &str =
    "INSERT INTO gateway_tokens (token_hash, gateway_id, scopes, kind, created_at, expires_at, created_by)
         VALUES (?, ?, ?, ?, ?, ?, ?)";

/// The token row by its hash, with the slugs of its gateway and tenant: [`Grant`]'s columns.
pub const LOOKUP: &str = "SELECT t.expires_at, t.kind, g.id, g.slug, te.slug \
     FROM gateway_tokens t JOIN gateways g ON g.id = t.gateway_id \
     JOIN tenants te ON te.id = g.tenant_id \
     WHERE t.token_hash = ?";

/// A `gateway_tokens` row to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewToken<'a> {
    pub token_hash: &'a str,
    pub gateway_id: &'a str,
    pub scopes: &'a str,
    pub kind: &'a str,
    pub created_at_s: i64,
    pub expires_at_s: i64,
    pub created_by: &'a str,
}

pub fn delete_expired(db: &dyn Db, gateway_id: &str, kind: &str, now_s: i64) -> Result<(), DbError> {
    db.exec(DELETE_EXPIRED, &[gateway_id.into(), kind.into(), Val::Int(now_s)])
}

pub fn insert(db: &dyn Db, t: &NewToken) -> Result<(), DbError> {
    db.exec(
        INSERT,
        &[
            t.token_hash.into(),
            t.gateway_id.into(),
            t.scopes.into(),
            t.kind.into(),
            Val::Int(t.created_at_s),
            Val::Int(t.expires_at_s),
            t.created_by.into(),
        ],
    )
}

/// What [`LOOKUP`] finds for a token hash.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub expires_at_s: i64,
    pub kind: String,
    pub gateway_id: String,
    pub gateway_slug: String,
    pub tenant_slug: String,
}

impl Grant {
    /// Valid while `now < expires_at`.
    pub fn is_valid_at(&self, now_s: i64) -> bool {
        now_s < self.expires_at_s
    }
}

/// The stored token with this hash, if any.
pub fn lookup(db: &dyn Db, token_hash: &str) -> Result<Option<Grant>, DbError> {
    let Some(row) = db.one(LOOKUP, &[token_hash.into()])? else { return Ok(None) };
    Ok(Some(Grant {
        expires_at_s: row.int(0)?,
        kind: row.opt_text(1)?.unwrap_or_else(|| PLAYGROUND_KIND.to_owned()),
        gateway_id: row.text(2)?,
        gateway_slug: row.text(3)?,
        tenant_slug: row.text(4)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemDb;

    fn db() -> MemDb {
        let db = MemDb::with_shared_tables();
        db.exec("INSERT INTO tenants (id, slug) VALUES ('ten_acme', 'acme')", &[]).unwrap();
        db.exec("INSERT INTO gateways (id, tenant_id, slug) VALUES ('gw_main', 'ten_acme', 'main')", &[]).unwrap();
        db
    }

    #[test]
    fn token_format() {
        let t = format_token(&[0xAB; 32]);
        assert_eq!(t, format!("myra_{}", "ab".repeat(32)));
        assert!(is_token(&t));
        assert!(!is_token(&t.to_uppercase()));
        assert!(!is_token(&t.replace("myra_", "MYRA_")));
        assert!(!is_token(&t[..t.len() - 1]));
        assert!(!is_token(&format!("{t}0")));
        assert!(!is_token(&t.replace('b', "g")));
        assert!(!is_token("myra_"));
        assert!(!is_token(""));
    }

    #[test]
    fn the_hash_is_lowercase_hex_sha256_of_the_whole_token() {
        assert_eq!(token_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let t = format_token(&[7; 32]);
        assert_ne!(token_hash(&t), token_hash(&t[TOKEN_PREFIX.len()..]), "the prefix is hashed too");
    }

    #[test]
    fn a_minted_row_is_what_the_lookup_grants() {
        let db = db();
        let token = format_token(&[1; 32]);
        let minted = NewToken {
            token_hash: &token_hash(&token),
            gateway_id: "gw_main",
            scopes: PLAYGROUND_SCOPES,
            kind: PLAYGROUND_KIND,
            created_at_s: 1_000,
            expires_at_s: 2_800,
            created_by: "usr_1",
        };
        delete_expired(&db, "gw_main", PLAYGROUND_KIND, 1_000).unwrap();
        insert(&db, &minted).unwrap();
        let grant = lookup(&db, &token_hash(&token)).unwrap().unwrap();
        assert_eq!(
            grant,
            Grant {
                expires_at_s: 2_800,
                kind: "playground".into(),
                gateway_id: "gw_main".into(),
                gateway_slug: "main".into(),
                tenant_slug: "acme".into(),
            }
        );
        assert!(grant.is_valid_at(2_799) && !grant.is_valid_at(2_800));
        assert_eq!(lookup(&db, &token).unwrap(), None, "the raw token is not the key");
        // Expired at exactly expires_at: the next mint's clean-up removes it.
        delete_expired(&db, "gw_main", PLAYGROUND_KIND, 2_800).unwrap();
        assert_eq!(lookup(&db, &token_hash(&token)).unwrap(), None);
    }

    #[test]
    fn before_the_tables_exist_the_lookup_fails_with_sqlites_message() {
        let err = lookup(&MemDb::new(), &token_hash("myra_x")).unwrap_err();
        assert!(err.to_string().contains("no such table"), "{err}");
    }
}
