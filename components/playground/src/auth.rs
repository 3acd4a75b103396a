//! Admin sessions: sign-in (argon2id, rate-limited, no account oracle),
//! opaque session tokens stored only as SHA-256, the cookie and bearer
//! credentials, CSRF rules for cookie-authenticated writes, impersonation,
//! password changes.
//!
//! - The session token is `sess_` + 64 lowercase hex (32 CSPRNG bytes). The
//!   browser gets it only in an `HttpOnly; SameSite=Strict; Path=/` cookie:
//!   `__Host-ratatoskr_admin_session` with `Secure` when the page is served
//!   over https (the own origin's scheme), `ratatoskr_admin_session` over http; either name is read. API
//!   clients send the same value as `Authorization: Bearer sess_…`. It is
//!   never in a response body.
//! - A session ends at its expiry (12 h, an impersonation 30 min), after
//!   [`IDLE_TIMEOUT_S`] without a request, at sign-out, or with "sign out
//!   everywhere". An impersonation and the session that started it end
//!   together: signing out of either ends both, the impersonation dies with
//!   its parent or when its impersonator is no longer a platform admin, and
//!   an impersonation found past its end takes its parent with it (a browser's
//!   cookie held only the impersonation, so the parent would be left behind).
//! - No credentials: 401 `unauthenticated`. Credentials that are not a live
//!   session (expired, idle, revoked, unknown): 401 `session_expired`, and a
//!   cookie is cleared.
//! - Cookie-authenticated POSTs need `Content-Type: application/json` and an
//!   `Origin` equal to the request's own origin (`spin-full-url`'s, or the one
//!   a trusted proxy forwarded: `guest_http::forwarded`), else
//!   403 `csrf_rejected`; bearer calls are exempt (a cross-site page cannot
//!   set `Authorization`). Sign-in, which has no session yet, needs the JSON
//!   type (415) and, if an `Origin` is sent, the same origin.
//! - Sign-in limits (see [`login`]): every attempt is recorded before its
//!   password is checked, in one statement that also checks the counts.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use serde_json::{json, Value};

use crate::access::{Membership, Role, Roles, Scope};
use crate::context::Ctx;
use crate::db::{Db, DbError, Row, Val};
use crate::error::{self, ApiError};
use crate::http::{json_body, Request, Response};
use crate::net;
use crate::routes;
use crate::schema::{self, Setup, SETUP_COLUMNS, SETUP_WIDTH};
use crate::util::{iso8601, sha256_hex};

/// The cookie over http.
pub const SESSION_COOKIE: &str = "ratatoskr_admin_session";
/// The cookie over https: the `__Host-` prefix makes the browser refuse it
/// unless it is `Secure`, `Path=/` and without `Domain` (no sibling host can set it).
pub const SECURE_SESSION_COOKIE: &str = "__Host-ratatoskr_admin_session";
pub const SESSION_TOKEN_PREFIX: &str = "sess_";
/// An ordinary admin session lasts 12 hours.
pub const SESSION_TTL_S: i64 = 12 * 3600;
/// An impersonation session lasts 30 minutes.
pub const IMPERSONATION_TTL_S: i64 = 30 * 60;
/// A session without a request for this long has ended.
pub const IDLE_TIMEOUT_S: i64 = 30 * 60;
/// `last_seen` is written at most this often (not on every request).
pub const TOUCH_EVERY_S: i64 = 60;

/// Sign-in attempts are counted over this window…
pub const LOGIN_WINDOW_S: i64 = 15 * 60;
/// …at most this many failures per (email, client address): wrong guesses
/// from one address never lock the account for the others…
pub const MAX_FAILURES_PER_PAIR: usize = 5;
/// …this many per client address (an IPv4 address or an IPv6 /64) across
/// all emails…
pub const MAX_FAILURES_PER_ADDR: usize = 20;
/// …and this many per email from all addresses together: the ceiling on a
/// guessing run spread over many addresses. Then 429 `rate_limited` until
/// the oldest counted failure leaves the window.
pub const MAX_FAILURES_PER_EMAIL: usize = 100;

pub const MAX_EMAIL_LEN: usize = 254;
pub const MAX_PASSWORD_LEN: usize = 1024;
/// Shortest password a user may set (and the demo password an operator sets).
pub const MIN_PASSWORD_LEN: usize = 12;

/// A well-formed argon2id PHC string with the OWASP default parameters (the
/// same as every stored hash) whose output is random bytes: no known
/// password verifies against it. Sign-in with an unknown email verifies
/// against it, so the answer and its cost are those of a wrong password.
pub const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$cmF0YXRvc2tyLWR1bW15LXNhbHQ$2VGkyRw2Nfq4PjOiNQ8j1u6zLnHArb5hG7P+IgS2nTA";

// ---- passwords ----------------------------------------------------------------

/// An argon2id PHC string with the default (OWASP) parameters.
pub fn hash_password(password: &str, salt: &[u8; 16]) -> String {
    let salt = SaltString::encode_b64(salt).expect("16 bytes is a valid salt");
    Argon2::default().hash_password(password.as_bytes(), &salt).expect("argon2id with default parameters").to_string()
}

/// Verifies in constant time (argon2's output comparison); an unparsable
/// stored hash never verifies.
pub fn verify_password(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(hash) => Argon2::default().verify_password(password.as_bytes(), &hash).is_ok(),
        Err(_) => false,
    }
}

pub fn normalize_email(raw: &str) -> String {
    raw.trim().to_ascii_lowercase()
}

// ---- cookies and credentials ------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Cookie,
    Bearer,
}

pub fn session_cookie(token: &str, max_age_s: i64, secure: bool) -> String {
    let name = if secure { SECURE_SESSION_COOKIE } else { SESSION_COOKIE };
    format!(
        "{name}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{}",
        if secure { "; Secure" } else { "" }
    )
}

pub fn clear_cookie(secure: bool) -> String {
    session_cookie("", 0, secure)
}

/// Was this request's page served over https (the cookie's name and `Secure`)?
pub fn https(ctx: &Ctx, req: &Request) -> bool {
    net::is_https(req, &ctx.config.trusted_proxies)
}

/// Every session cookie value among `Cookie` headers (either name), in order.
/// A browser may hold more than one (an older `Path=/admin` cookie is sent
/// first), so each is tried.
pub fn cookie_values<'a>(headers: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    headers
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == SESSION_COOKIE || *name == SECURE_SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
        .collect()
}

/// The first session cookie value, if any.
pub fn cookie_value<'a>(headers: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    cookie_values(headers).into_iter().next()
}

/// The presented credentials: a bearer header wins over cookies.
pub fn credentials(req: &Request) -> Vec<(Via, &str)> {
    if let Some(auth) = req.header("authorization") {
        let (scheme, token) = auth.trim().split_once(' ').unwrap_or((auth, ""));
        // Another scheme (or an empty bearer) is no credential at all.
        return match scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
            true => vec![(Via::Bearer, token.trim())],
            false => Vec::new(),
        };
    }
    cookie_values(req.headers_named("cookie")).into_iter().map(|v| (Via::Cookie, v)).collect()
}

/// The first presented credential.
pub fn credential(req: &Request) -> Option<(Via, &str)> {
    credentials(req).into_iter().next()
}

pub fn is_session_token(token: &str) -> bool {
    token.len() == SESSION_TOKEN_PREFIX.len() + 64
        && token.starts_with(SESSION_TOKEN_PREFIX)
        && token[SESSION_TOKEN_PREFIX.len()..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The CSRF rule for writes (see the module docs).
pub fn check_csrf(ctx: &Ctx, req: &Request, via: Via) -> Result<(), ApiError> {
    csrf_rule(req, via, &ctx.config.trusted_proxies)
}

fn csrf_rule(req: &Request, via: Via, trusted: &[net::Cidr]) -> Result<(), ApiError> {
    if via == Via::Bearer {
        return Ok(());
    }
    if !guest_http::headers::is_json(req.header("content-type").unwrap_or("")) {
        return Err(error::csrf_rejected("content_type"));
    }
    let Some(origin) = req.header("origin") else {
        return Err(error::csrf_rejected("origin_missing"));
    };
    same_origin(req, origin, trusted)
}

/// The browser's `Origin` against this request's own (behind a trusted
/// proxy: the scheme and host the browser used, see `guest_http::forwarded`).
fn same_origin(req: &Request, origin: &str, trusted: &[net::Cidr]) -> Result<(), ApiError> {
    match (guest_http::forwarded::origin(origin), net::own_origin(req, trusted)) {
        (Some(theirs), Some(ours)) if theirs == ours => Ok(()),
        _ => Err(error::csrf_rejected("origin_mismatch")),
    }
}

// ---- the authenticated caller --------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRef {
    pub id: String,
    pub email: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user: UserRef,
    pub roles: Roles,
    pub impersonator: Option<UserRef>,
    pub via: Via,
    pub session_hash: String,
    /// The session that started this impersonation.
    pub parent_hash: Option<String>,
    pub expires_at: i64,
}

impl Principal {
    /// The person behind the credential: the impersonator when impersonating.
    pub fn actor_id(&self) -> &str {
        self.impersonator.as_ref().map_or(&self.user.id, |i| &i.id)
    }
}

/// A session lookup made ahead of [`authenticate`], in the request's first
/// statement ([`first_read`]).
pub struct Looked {
    token: String,
    session_hash: String,
    /// `None`: no session has that hash.
    row: Option<Row>,
}

/// The request's first statement: the set-up markers (`seed::ensure` needs
/// them on every request) and, when `with_session` and a session-shaped
/// credential was presented, the first one's session, read together.
pub fn first_read(ctx: &Ctx, req: &Request, with_session: bool) -> (Setup, Option<Looked>) {
    let token = credentials(req).into_iter().map(|(_, token)| token).find(|token| is_session_token(token));
    let Some(token) = token.filter(|_| with_session) else { return (schema::setup(ctx.db), None) };
    let session_hash = sha256_hex(token);
    match read_session(ctx.db, &session_hash) {
        Ok((setup, row)) => (setup, Some(Looked { token: token.to_string(), session_hash, row })),
        // A database not set up yet has no tables: the set-up runs, then the lookup again.
        Err(_) => (Setup::default(), None),
    }
}

/// The live session behind the request's credential; `looked`: a lookup
/// already made (and still current) for one of them.
pub fn authenticate(ctx: &Ctx, req: &Request, mut looked: Option<Looked>) -> Result<Principal, ApiError> {
    let presented = credentials(req);
    let Some(&(via, _)) = presented.first() else {
        return Err(error::unauthenticated());
    };
    for (via, token) in presented {
        let looked = match looked.take_if(|l| l.token == token) {
            Some(l) => l,
            None => lookup(ctx.db, token)?,
        };
        if let Some(principal) = live_session(ctx, looked, via)? {
            return Ok(principal);
        }
    }
    let e = error::session_expired();
    Err(match via {
        Via::Cookie => e.header("set-cookie", clear_cookie(https(ctx, req))),
        Via::Bearer => e,
    })
}

fn revoke(db: &dyn Db, hashes: &[&str]) -> Result<(), DbError> {
    for hash in hashes {
        db.exec(
            "UPDATE admin_sessions SET revoked = 1 WHERE token_hash = ? OR parent_hash = ?",
            &[(*hash).into(), (*hash).into()],
        )?;
    }
    Ok(())
}

/// A session and what it joins: its user, the session that started it (an
/// impersonation's), the impersonator, and the user's memberships as one
/// JSON column ([`memberships`]).
const SESSION_ROW: &str = "SELECT s.user_id, u.email, u.platform_admin, s.impersonator_id, s.expires_at, s.revoked,
        COALESCE(s.last_seen, s.created_at), s.parent_hash,
        p.revoked, p.expires_at, COALESCE(p.last_seen, p.created_at), i.platform_admin, i.email,
        (SELECT json_group_array(json_array(m.tenant_id, t.slug, m.role, m.gateway_scope))
           FROM memberships m JOIN tenants t ON t.id = m.tenant_id WHERE m.user_id = s.user_id)
   FROM admin_sessions s JOIN users u ON u.id = s.user_id
   LEFT JOIN admin_sessions p ON p.token_hash = s.parent_hash
   LEFT JOIN users i ON i.id = s.impersonator_id
  WHERE s.token_hash = ?";

/// The set-up markers and the [`SESSION_ROW`] of `session_hash`, if there
/// is one, in one statement: the one-row join keeps the markers' row when
/// there is no session.
fn read_session(db: &dyn Db, session_hash: &str) -> Result<(Setup, Option<Row>), DbError> {
    let sql = format!("SELECT {SETUP_COLUMNS}, x.* FROM (SELECT 1) LEFT JOIN ({SESSION_ROW}) x ON 1");
    let mut row = db.one(&sql, &[session_hash.into()])?.ok_or_else(|| DbError("no set-up row".into()))?;
    let session = Row(row.0.split_off(SETUP_WIDTH));
    // `user_id` is never NULL in a session row.
    Ok((Setup::from_row(&row), session.opt_text(0)?.is_some().then_some(session)))
}

/// The session of a presented credential (no row, and no statement, for a
/// token that is not session-shaped).
fn lookup(db: &dyn Db, token: &str) -> Result<Looked, DbError> {
    let session_hash = sha256_hex(token);
    let row = match is_session_token(token) {
        true => read_session(db, &session_hash)?.1,
        false => None,
    };
    Ok(Looked { token: token.to_string(), session_hash, row })
}

/// The session `looked` found, if it is live now (see the module docs).
fn live_session(ctx: &Ctx, looked: Looked, via: Via) -> Result<Option<Principal>, ApiError> {
    let Looked { session_hash, row, .. } = looked;
    let Some(row) = row else { return Ok(None) };
    let now = ctx.now_s();
    let expires_at = row.int(4)?;
    let last_seen = row.int(6)?;
    let parent_hash = row.opt_text(7)?;
    if row.flag(5)? {
        return Ok(None);
    }
    if now >= expires_at || now - last_seen >= IDLE_TIMEOUT_S {
        // Ended by time: an impersonation takes the session that started it along.
        let mut ended = vec![session_hash.as_str()];
        ended.extend(parent_hash.as_deref());
        revoke(ctx.db, &ended)?;
        return Ok(None);
    }
    let impersonator = match row.opt_text(3)? {
        None => None,
        Some(id) => {
            let parent_live = parent_hash.is_some()
                && row.opt_int(8)? == Some(0)
                && row.opt_int(9)?.is_some_and(|t| now < t)
                && row.opt_int(10)?.is_some_and(|t| now - t < IDLE_TIMEOUT_S);
            if !parent_live || row.opt_int(11)? != Some(1) {
                revoke(ctx.db, &[&session_hash])?;
                return Ok(None);
            }
            Some(UserRef { id, email: row.opt_text(12)?.unwrap_or_default() })
        }
    };
    if now - last_seen >= TOUCH_EVERY_S {
        // Working as someone else keeps the impersonator's own session alive too.
        ctx.db.exec(
            "UPDATE admin_sessions SET last_seen = ? WHERE token_hash = ? OR token_hash = ?",
            &[Val::Int(now), session_hash.as_str().into(), parent_hash.clone().into()],
        )?;
    }
    let user = UserRef { id: row.text(0)?, email: row.text(1)? };
    let roles = Roles { platform_admin: row.flag(2)?, memberships: memberships(&row.text(13)?)? };
    Ok(Some(Principal { user, roles, impersonator, via, session_hash, parent_hash, expires_at }))
}

/// The user's memberships from the session query's JSON column (one
/// `[tenant_id, slug, role, scope]` array each), in tenant slug order. They
/// come with the session row because under Spin every statement is a host
/// call and a thread hop of its own (measured in docs/benchmarks/runs.md).
fn memberships(json: &str) -> Result<Vec<Membership>, DbError> {
    let rows: Vec<[String; 4]> = serde_json::from_str(json).map_err(|e| DbError(format!("memberships column: {e}")))?;
    let mut out: Vec<Membership> = rows
        .into_iter()
        // An unknown role grants nothing (fail closed).
        .filter_map(|[tenant_id, tenant_slug, role, scope]| {
            Some(Membership { tenant_id, tenant_slug, role: Role::parse(&role)?, scope: Scope::parse(&scope) })
        })
        .collect();
    // SQLite's BINARY collation compares bytes, as `str` does.
    out.sort_by(|a, b| a.tenant_slug.cmp(&b.tenant_slug));
    Ok(out)
}

/// `{user: {id, email, platform_admin, memberships}, impersonator?, session_expires_at}`.
pub fn profile(p: &Principal) -> Value {
    let memberships: Vec<Value> = p
        .roles
        .memberships
        .iter()
        .map(|m| {
            json!({
                "tenant_id": m.tenant_id,
                "tenant_slug": m.tenant_slug,
                "role": m.role.as_str(),
                "gateway_scope": m.scope.to_json(),
            })
        })
        .collect();
    let mut body = json!({
        "user": {
            "id": p.user.id,
            "email": p.user.email,
            "platform_admin": p.roles.platform_admin,
            "memberships": memberships,
        },
        "session_expires_at": iso8601(p.expires_at),
    });
    if let Some(imp) = &p.impersonator {
        body["impersonator"] = json!({ "id": imp.id, "email": imp.email });
    }
    body
}

/// Stores a new session and returns its token (never stored itself).
fn create_session(
    ctx: &Ctx,
    user_id: &str,
    impersonation: Option<(&str, &str)>,
    ttl_s: i64,
) -> Result<(String, i64), DbError> {
    let token = format!("{SESSION_TOKEN_PREFIX}{}", ctx.random_hex::<32>());
    let expires_at = ctx.now_s() + ttl_s;
    let (impersonator, parent) = impersonation.unzip();
    ctx.db.exec(
        "INSERT INTO admin_sessions (token_hash, user_id, impersonator_id, parent_hash, created_at, last_seen, expires_at, revoked)
         VALUES (?, ?, ?, ?, ?, ?, ?, 0)",
        &[
            sha256_hex(&token).into(),
            user_id.into(),
            impersonator.into(),
            parent.into(),
            Val::Int(ctx.now_s()),
            Val::Int(ctx.now_s()),
            Val::Int(expires_at),
        ],
    )?;
    Ok((token, expires_at))
}

fn load_principal(ctx: &Ctx, token: &str, via: Via) -> Result<Principal, ApiError> {
    live_session(ctx, lookup(ctx.db, token)?, via)?.ok_or_else(error::session_expired)
}

// ---- rate limiting ---------------------------------------------------------------------

/// Seconds until one more attempt is allowed, given the failure times inside
/// the window (any order); `None` when under the limit.
pub fn retry_after(failures: &[i64], limit: usize, now_s: i64) -> Option<i64> {
    if failures.len() < limit {
        return None;
    }
    let mut sorted = failures.to_vec();
    sorted.sort_unstable();
    // One slot frees when the (len - limit + 1)-th oldest failure ages out.
    let frees_at = sorted[failures.len() - limit] + LOGIN_WINDOW_S;
    Some((frees_at - now_s).max(1))
}

fn failures(db: &dyn Db, key_hash: &str, since: i64) -> Result<Vec<i64>, DbError> {
    db.query("SELECT at FROM login_attempts WHERE key_hash = ? AND at > ?", &[key_hash.into(), Val::Int(since)])?
        .iter()
        .map(|r| r.int(0))
        .collect()
}

/// The counters one password check is recorded against.
pub struct AttemptKeys {
    /// (email, client address): the limit that stops one address guessing one account.
    pub pair: String,
    /// The client address across emails.
    pub addr: String,
    /// The email across addresses.
    pub email: String,
}

impl AttemptKeys {
    pub fn new(ctx: &Ctx, req: &Request, email: &str) -> AttemptKeys {
        let addr = net::limit_key(net::client(req, &ctx.config.trusted_proxies));
        AttemptKeys {
            pair: sha256_hex(&format!("pair:{email}\n{addr}")),
            addr: sha256_hex(&format!("addr:{addr}")),
            email: sha256_hex(&format!("email:{email}")),
        }
    }

    fn limits(&self) -> [(&str, usize); 3] {
        [
            (self.pair.as_str(), MAX_FAILURES_PER_PAIR),
            (self.addr.as_str(), MAX_FAILURES_PER_ADDR),
            (self.email.as_str(), MAX_FAILURES_PER_EMAIL),
        ]
    }
}

/// One recorded attempt: its rows, counted as a failure until [`Attempt::succeeded`].
pub struct Attempt(Vec<i64>);

/// Records an attempt before its password is checked, or refuses it (429).
/// One statement checks the three counts and inserts the three rows, so
/// concurrent guesses are serialised by SQLite's write lock: N attempts in
/// flight count N, and the (N+1)-th past a limit is refused unevaluated.
pub fn record_attempt(ctx: &Ctx, keys: &AttemptKeys) -> Result<Attempt, ApiError> {
    let now = ctx.now_s();
    let since = now - LOGIN_WINDOW_S;
    ctx.db.exec("DELETE FROM login_attempts WHERE at <= ?", &[Val::Int(since)])?;
    let mut params =
        vec![Val::Int(now), keys.pair.as_str().into(), keys.addr.as_str().into(), keys.email.as_str().into()];
    for (key, limit) in keys.limits() {
        params.extend([key.into(), Val::Int(since), Val::Int(limit as i64)]);
    }
    let rows = ctx.db.query(
        "INSERT INTO login_attempts (key_hash, at)
         SELECT column1, ? FROM (VALUES (?), (?), (?))
          WHERE (SELECT COUNT(*) FROM login_attempts WHERE key_hash = ? AND at > ?) < ?
            AND (SELECT COUNT(*) FROM login_attempts WHERE key_hash = ? AND at > ?) < ?
            AND (SELECT COUNT(*) FROM login_attempts WHERE key_hash = ? AND at > ?) < ?
         RETURNING rowid",
        &params,
    )?;
    if !rows.is_empty() {
        return Ok(Attempt(rows.iter().map(|r| r.int(0)).collect::<Result<_, _>>()?));
    }
    let mut wait = None;
    for (key, limit) in keys.limits() {
        wait = wait.max(retry_after(&failures(ctx.db, key, since)?, limit, now));
    }
    Err(error::rate_limited(wait.unwrap_or(1)))
}

impl Attempt {
    /// The password was right: this attempt does not count, and the pair's
    /// earlier failures are forgiven (the address knows the password).
    pub fn succeeded(self, ctx: &Ctx, keys: &AttemptKeys) -> Result<(), DbError> {
        for rowid in self.0 {
            ctx.db.exec("DELETE FROM login_attempts WHERE rowid = ?", &[Val::Int(rowid)])?;
        }
        ctx.db.exec("DELETE FROM login_attempts WHERE key_hash = ?", &[keys.pair.as_str().into()])
    }
}

// ---- routes ----------------------------------------------------------------------------------

/// `POST /auth/login {email, password}`.
pub fn login(ctx: &Ctx, req: &Request) -> Result<Response, ApiError> {
    if !guest_http::headers::is_json(req.header("content-type").unwrap_or("")) {
        return Err(ApiError::unsupported_media_type());
    }
    // Login CSRF: a browser always sends Origin on a cross-site POST.
    if let Some(origin) = req.header("origin") {
        same_origin(req, origin, &ctx.config.trusted_proxies)?;
    }
    let body = json_body(req, false)?;
    let email = match body.get("email") {
        Some(Value::String(e)) if !e.trim().is_empty() && e.len() <= MAX_EMAIL_LEN => normalize_email(e),
        _ => return Err(error::invalid_login_field("email")),
    };
    let password = match body.get("password") {
        Some(Value::String(p)) if !p.is_empty() && p.len() <= MAX_PASSWORD_LEN => p.as_str(),
        _ => return Err(error::invalid_login_field("password")),
    };

    // The same answer for known and unknown emails: both are counted.
    let keys = AttemptKeys::new(ctx, req, &email);
    let attempt = record_attempt(ctx, &keys)?;

    let user = ctx.db.one("SELECT id, password_hash FROM users WHERE email = ?", &[email.as_str().into()])?;
    let (user_id, stored) = match &user {
        Some(row) => (Some(row.text(0)?), row.text(1)?),
        None => (None, DUMMY_HASH.to_string()),
    };
    // Always one full argon2id verification, known email or not.
    let verified = verify_password(password, &stored);
    let Some(user_id) = user_id.filter(|_| verified) else {
        return Err(error::invalid_credentials());
    };
    attempt.succeeded(ctx, &keys)?;
    let now = ctx.now_s();
    // Sessions long past their expiry are of no further use.
    ctx.db.exec("DELETE FROM admin_sessions WHERE expires_at < ?", &[Val::Int(now - 7 * 86_400)])?;
    let (token, _) = create_session(ctx, &user_id, None, SESSION_TTL_S)?;
    let principal = load_principal(ctx, &token, Via::Cookie)?;
    Ok(Response::json(200, &profile(&principal))
        .with_header("set-cookie", session_cookie(&token, SESSION_TTL_S, https(ctx, req))))
}

/// `POST /auth/logout`: revokes the session server-side and clears the
/// cookie. Signing out of an impersonation signs out the session that
/// started it too, and signing out of that session ends its impersonations.
pub fn logout(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    json_body(req, true)?;
    let mut ended = vec![p.session_hash.as_str()];
    ended.extend(p.parent_hash.as_deref());
    revoke(ctx.db, &ended)?;
    Ok(Response::json(200, &json!({ "signed_out": true })).with_header("set-cookie", clear_cookie(https(ctx, req))))
}

/// `POST /auth/logout-all`: revokes every session of the person behind the
/// credential (the impersonator when impersonating), the impersonations they
/// started included.
pub fn logout_all(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    json_body(req, true)?;
    let revoked = revoke_all(ctx.db, p.actor_id(), None)?;
    Ok(Response::json(200, &json!({ "signed_out": true, "sessions_revoked": revoked }))
        .with_header("set-cookie", clear_cookie(https(ctx, req))))
}

/// Revokes every live session of `user_id` and every impersonation they
/// started, except `keep`; returns how many.
pub fn revoke_all(db: &dyn Db, user_id: &str, keep: Option<&str>) -> Result<usize, DbError> {
    let rows = db.query(
        "UPDATE admin_sessions SET revoked = 1
          WHERE revoked = 0 AND (user_id = ? OR impersonator_id = ?) AND token_hash IS NOT ?
         RETURNING 1",
        &[user_id.into(), user_id.into(), keep.into()],
    )?;
    Ok(rows.len())
}

/// `POST /auth/password {current_password, new_password}`: the signed-in
/// user (never an impersonation) sets a new password of at least
/// [`MIN_PASSWORD_LEN`] characters. A wrong current password is counted like
/// a failed sign-in. Every other session of the user ends.
pub fn change_password(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    if p.impersonator.is_some() {
        return Err(error::impersonation_forbidden());
    }
    let body = json_body(req, false)?;
    let field = |name: &'static str| match body.get(name) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_PASSWORD_LEN => Ok(s.as_str()),
        _ => Err(error::invalid_password_field(name)),
    };
    let current = field("current_password")?;
    let new = field("new_password")?;
    if new.chars().count() < MIN_PASSWORD_LEN {
        return Err(error::password_too_short(MIN_PASSWORD_LEN));
    }
    let keys = AttemptKeys::new(ctx, req, &p.user.email);
    let attempt = record_attempt(ctx, &keys)?;
    let stored = ctx.db.one("SELECT password_hash FROM users WHERE id = ?", &[p.user.id.as_str().into()])?;
    let stored = stored.map(|r| r.text(0)).transpose()?.unwrap_or_else(|| DUMMY_HASH.to_string());
    if !verify_password(current, &stored) {
        return Err(error::wrong_password());
    }
    attempt.succeeded(ctx, &keys)?;
    let hash = hash_password(new, &ctx.random_bytes::<16>());
    ctx.db.exec("UPDATE users SET password_hash = ? WHERE id = ?", &[hash.into(), p.user.id.as_str().into()])?;
    let revoked = revoke_all(ctx.db, &p.user.id, Some(&p.session_hash))?;
    Ok(Response::json(200, &json!({ "password_changed": true, "sessions_revoked": revoked })))
}

/// `POST /auth/impersonate {user_id}`: platform admins only, never from an
/// impersonated session, never into another platform admin. The new
/// session (30 minutes) carries the admin as `impersonator` and the admin's
/// session as its parent, is recorded in `audit`, and replaces the cookie.
pub fn impersonate(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    if p.impersonator.is_some() {
        return Err(error::impersonation_forbidden());
    }
    if !p.roles.platform_admin {
        return Err(error::not_platform_admin());
    }
    let body = json_body(req, false)?;
    let target_id = routes::user_id(body.get("user_id").and_then(Value::as_str).unwrap_or(""))?;
    let target = ctx.db.one("SELECT id, platform_admin FROM users WHERE id = ?", &[target_id.as_str().into()])?;
    let Some(target) = target else {
        return Err(error::user_not_found());
    };
    if target.flag(1)? {
        return Err(error::platform_admin_not_impersonable());
    }
    let ttl = IMPERSONATION_TTL_S.min(p.expires_at - ctx.now_s()).max(1);
    let parent = (p.user.id.as_str(), p.session_hash.as_str());
    let (token, expires_at) = create_session(ctx, &target_id, Some(parent), ttl)?;
    ctx.db.exec(
        "INSERT INTO audit (at, actor_id, action, target_id, detail) VALUES (?, ?, 'impersonate', ?, ?)",
        &[
            Val::Int(ctx.now_s()),
            p.user.id.as_str().into(),
            target_id.as_str().into(),
            json!({ "expires_at": expires_at, "session_hash_prefix": &sha256_hex(&token)[..12] }).to_string().into(),
        ],
    )?;
    let principal = load_principal(ctx, &token, Via::Cookie)?;
    Ok(Response::json(200, &profile(&principal))
        .with_header("set-cookie", session_cookie(&token, ttl, https(ctx, req))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Body;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/playground/token".into(),
            query: String::new(),
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: Body::Bytes(Vec::new()),
        }
    }

    #[test]
    fn passwords_hash_with_argon2id_defaults_and_verify() {
        let hash = hash_password("correct horse", &[7; 16]);
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct horsf", &hash));
        assert!(!verify_password("x", "not a phc string"));
        assert_ne!(hash, hash_password("correct horse", &[8; 16]), "salted");
    }

    #[test]
    fn the_dummy_hash_costs_what_a_real_one_does() {
        let dummy = PasswordHash::new(DUMMY_HASH).unwrap();
        let real_hash = hash_password("x", &[1; 16]);
        let real = PasswordHash::new(&real_hash).unwrap();
        assert_eq!(dummy.algorithm, real.algorithm);
        assert_eq!(dummy.version, real.version);
        assert_eq!(dummy.params, real.params);
        assert_eq!(dummy.hash.map(|h| h.len()), real.hash.map(|h| h.len()));
        for guess in ["", "password", "demo", "ratatoskr-demo"] {
            assert!(!verify_password(guess, DUMMY_HASH));
        }
    }

    #[test]
    fn cookies_are_http_only_strict_and_secure_over_https() {
        let c = session_cookie("sess_abc", 60, false);
        assert_eq!(c, "ratatoskr_admin_session=sess_abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=60");
        assert_eq!(
            session_cookie("sess_abc", 60, true),
            "__Host-ratatoskr_admin_session=sess_abc; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure"
        );
        assert!(clear_cookie(false).contains("Max-Age=0"));
        let headers = ["a=1; ratatoskr_admin_session=sess_x ; b=2", "c=3"];
        assert_eq!(cookie_value(headers.into_iter()), Some("sess_x"));
        assert_eq!(cookie_value(["ratatoskr_admin_sessionx=1"].into_iter()), None);
        assert_eq!(cookie_value(["ratatoskr_admin_session="].into_iter()), None);
        // Either name is read, every value in order (an older Path=/admin cookie comes first).
        let both = ["ratatoskr_admin_session=sess_old; __Host-ratatoskr_admin_session=sess_new"];
        assert_eq!(cookie_values(both.into_iter()), vec!["sess_old", "sess_new"]);
    }

    #[test]
    fn bearer_wins_and_other_schemes_are_no_credential() {
        let r = req(&[("authorization", "Bearer sess_1"), ("cookie", "ratatoskr_admin_session=sess_2")]);
        assert_eq!(credential(&r), Some((Via::Bearer, "sess_1")));
        let r = req(&[("cookie", "ratatoskr_admin_session=sess_2")]);
        assert_eq!(credential(&r), Some((Via::Cookie, "sess_2")));
        assert_eq!(credential(&req(&[("authorization", "Basic abc")])), None);
        assert_eq!(credential(&req(&[("authorization", "Bearer ")])), None);
        assert_eq!(credential(&req(&[])), None);
    }

    #[test]
    fn session_tokens_are_strictly_shaped() {
        assert!(is_session_token(&format!("sess_{}", "a1".repeat(32))));
        assert!(!is_session_token(&format!("sess_{}", "A1".repeat(32))));
        assert!(!is_session_token(&format!("myra_{}", "a1".repeat(32))));
        assert!(!is_session_token("sess_' OR '1'='1"));
    }

    #[test]
    fn csrf_rules_for_cookie_writes() {
        let url = ("spin-full-url", "http://127.0.0.1:3000/admin/v1/playground/token");
        let json = ("content-type", "application/json; charset=utf-8");
        let ok = req(&[url, json, ("origin", "http://127.0.0.1:3000")]);
        assert!(csrf_rule(&ok, Via::Cookie, &[]).is_ok());
        let reason = |r: &Request| csrf_rule(r, Via::Cookie, &[]).unwrap_err().fields["reason"].clone();
        assert_eq!(reason(&req(&[url, ("origin", "http://127.0.0.1:3000")])), "content_type");
        assert_eq!(
            reason(&req(&[url, ("content-type", "text/plain"), ("origin", "http://127.0.0.1:3000")])),
            "content_type"
        );
        assert_eq!(reason(&req(&[url, json])), "origin_missing");
        for evil in [
            "http://evil.test",
            "http://127.0.0.1:3001",
            "https://127.0.0.1:3000",
            "null",
            "http://127.0.0.1:3000.evil.test",
            "http://127.0.0.1:3000/x",
        ] {
            assert_eq!(reason(&req(&[url, json, ("origin", evil)])), "origin_mismatch", "{evil}");
        }
        // Bearer calls are exempt: a cross-site page cannot set Authorization.
        assert!(csrf_rule(&req(&[url]), Via::Bearer, &[]).is_ok());
        let e = csrf_rule(&req(&[url]), Via::Cookie, &[]).unwrap_err();
        assert_eq!((e.status, e.code), (403, "csrf_rejected"));
    }

    #[test]
    fn rate_limit_windows() {
        assert_eq!(retry_after(&[100, 200], 5, 300), None);
        // Five failures at 100..=500: the oldest leaves the window at 100 + 900.
        assert_eq!(retry_after(&[500, 100, 300, 200, 400], 5, 600), Some(400));
        // Six failures with a limit of five: the second oldest decides.
        assert_eq!(retry_after(&[100, 200, 300, 400, 500, 600], 5, 700), Some(400));
        assert_eq!(retry_after(&[0; 5], 5, 10_000), Some(1), "never below one second");
    }
}
