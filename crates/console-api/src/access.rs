//! Optional access control for the console's API (`console_access`).
//!
//! The default, `open`, is the seed's LAN model: whoever reaches the console
//! (on an allowed Host) may use it. `signed-in` makes every `/api` request
//! carry a Playground session (its cookie, which the Playground sets for
//! `Path=/`, or `Authorization: Bearer sess_…`) whose user holds
//! `console_role` or more: `viewer` < `member` < `admin` < `platform_admin`.
//! The session is checked by the Playground itself, through service chaining
//! to `GET /admin/v1/auth/me`, so its rules (expiry, idle timeout, revocation,
//! impersonation) are the console's too. A stream is checked when it opens.

use std::time::Duration;

use guest_http::{ApiError, Method, TransportFailure};
use serde_json::Value;

use crate::error;
use crate::plan::Call;

/// The Playground's own answer to "who is this session?" (`GET
/// /admin/v1/auth/me`). Spin routes a chained request as `/...`, so the
/// Playground's route-relative path is the whole path here.
const ME_AUTHORITY: &str = "playground.spin.internal";
const ME_PATH: &str = "/auth/me";
const ME_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_ME_BODY: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConsoleRole {
    Viewer,
    Member,
    Admin,
    PlatformAdmin,
}

impl ConsoleRole {
    fn parse(raw: &str) -> Option<ConsoleRole> {
        Some(match raw {
            "viewer" => ConsoleRole::Viewer,
            "member" => ConsoleRole::Member,
            "admin" => ConsoleRole::Admin,
            "platform_admin" => ConsoleRole::PlatformAdmin,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            ConsoleRole::Viewer => "viewer",
            ConsoleRole::Member => "member",
            ConsoleRole::Admin => "admin",
            ConsoleRole::PlatformAdmin => "platform_admin",
        }
    }

    /// The highest role of a `/auth/me` answer's user.
    fn of(me: &Value) -> Option<ConsoleRole> {
        let user = me.get("user")?;
        if user.get("platform_admin").and_then(Value::as_bool) == Some(true) {
            return Some(ConsoleRole::PlatformAdmin);
        }
        let memberships = user.get("memberships")?.as_array()?;
        memberships.iter().filter_map(|m| ConsoleRole::parse(m.get("role")?.as_str()?)).max()
    }
}

/// The credentials a request carries, forwarded to the Playground only.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    pub cookie: Option<&'a str>,
    pub authorization: Option<&'a str>,
}

/// A session check to make before the request is served.
#[derive(Debug)]
pub struct Check {
    pub call: Call,
    need: ConsoleRole,
}

/// `None`: the console is open. Otherwise the check to make, or why the
/// request is refused before any call (no credentials, a bad setting: a
/// misspelt `console_access` fails closed).
pub fn check(var: impl Fn(&str) -> Option<String>, credentials: Credentials<'_>) -> Result<Option<Check>, ApiError> {
    match var("console_access").as_deref().map(str::trim) {
        None | Some("") | Some("open") => return Ok(None),
        Some("signed-in") => {}
        Some(_) => return Err(error::misconfigured("console_access is neither open nor signed-in")),
    }
    let role = var("console_role").unwrap_or_default();
    let role = role.trim();
    let need = match role {
        "" => ConsoleRole::Viewer,
        raw => ConsoleRole::parse(raw).ok_or_else(|| error::misconfigured("console_role is not a role"))?,
    };
    let mut headers = vec![("accept".to_string(), b"application/json".to_vec())];
    for (name, value) in [("cookie", credentials.cookie), ("authorization", credentials.authorization)] {
        if let Some(value) = value.filter(|v| !v.trim().is_empty()) {
            headers.push((name.to_string(), value.as_bytes().to_vec()));
        }
    }
    if headers.len() == 1 {
        return Err(error::console_sign_in_required());
    }
    let call = Call {
        method: Method::Get,
        https: false,
        authority: ME_AUTHORITY.to_string(),
        path_and_query: ME_PATH.to_string(),
        headers,
        body: None,
        timeout: ME_TIMEOUT,
        streaming: false,
    };
    Ok(Some(Check { call, need }))
}

impl Check {
    /// `Ok` when the Playground knows the session and its user holds the
    /// role; its body is read only for a 200.
    pub fn finish(
        self,
        answer: Result<u16, TransportFailure>,
        read: impl FnOnce(usize) -> Result<Vec<u8>, TransportFailure>,
    ) -> Result<(), ApiError> {
        match answer {
            Ok(200) => {}
            Ok(401) => return Err(error::console_sign_in_required()),
            _ => return Err(error::console_access_unavailable()),
        }
        let me: Value = read(MAX_ME_BODY)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(error::console_access_unavailable)?;
        match ConsoleRole::of(&me) {
            Some(role) if role >= self.need => Ok(()),
            _ => Err(error::console_role_required(self.need.as_str())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;

    fn vars(access: &str, role: &str) -> HashMap<&'static str, String> {
        HashMap::from([("console_access", access.to_string()), ("console_role", role.to_string())])
    }

    fn run(vars: &HashMap<&'static str, String>, credentials: Credentials<'_>) -> Result<Option<Check>, ApiError> {
        check(|n| vars.get(n).cloned(), credentials)
    }

    const COOKIE: Credentials<'static> =
        Credentials { cookie: Some("ratatoskr_admin_session=sess_1"), authorization: None };

    fn me(platform_admin: bool, roles: &[&str]) -> Vec<u8> {
        let memberships: Vec<Value> = roles.iter().map(|r| json!({ "tenant_id": "t", "role": r })).collect();
        json!({ "user": { "id": "u", "platform_admin": platform_admin, "memberships": memberships } })
            .to_string()
            .into_bytes()
    }

    #[test]
    fn open_by_default_and_a_misspelt_setting_fails_closed() {
        assert!(run(&HashMap::new(), Credentials::default()).unwrap().is_none());
        assert!(run(&vars("open", "admin"), Credentials::default()).unwrap().is_none());
        for (access, role) in [("signed_in", ""), ("closed", ""), ("signed-in", "owner")] {
            let e = run(&vars(access, role), COOKIE).unwrap_err();
            assert_eq!((e.status, e.code), (500, "server_misconfigured"), "{access} {role}");
        }
    }

    #[test]
    fn signed_in_needs_credentials_and_forwards_only_them_to_the_playground() {
        let e = run(&vars("signed-in", ""), Credentials::default()).unwrap_err();
        assert_eq!((e.status, e.code), (401, "console_sign_in_required"));
        let blank = Credentials { cookie: Some(" "), authorization: Some("") };
        assert_eq!(run(&vars("signed-in", ""), blank).unwrap_err().code, "console_sign_in_required");
        let both = Credentials { cookie: Some("a=b"), authorization: Some("Bearer sess_2") };
        let check = run(&vars("signed-in", "admin"), both).unwrap().unwrap();
        let call = &check.call;
        assert_eq!(
            (call.method, call.https, call.authority.as_str()),
            (Method::Get, false, "playground.spin.internal")
        );
        assert_eq!(call.path_and_query, "/auth/me");
        let names: Vec<&str> = call.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["accept", "cookie", "authorization"]);
        assert_eq!(call.body, None);
    }

    #[test]
    fn the_role_decides_and_a_failed_check_never_lets_the_request_through() {
        let check = |role: &str| run(&vars("signed-in", role), COOKIE).unwrap().unwrap();
        assert!(check("").finish(Ok(200), |_| Ok(me(false, &["viewer"]))).is_ok());
        assert!(check("member").finish(Ok(200), |_| Ok(me(false, &["viewer", "admin"]))).is_ok());
        assert!(check("platform_admin").finish(Ok(200), |_| Ok(me(true, &[]))).is_ok());
        for (role, platform, roles) in [
            ("member", false, &["viewer"][..]),
            ("admin", false, &["member"]),
            ("platform_admin", false, &["admin"]),
            ("viewer", false, &[]),
        ] {
            let e = check(role).finish(Ok(200), |_| Ok(me(platform, roles))).unwrap_err();
            assert_eq!((e.status, e.code, &e.fields["role"]), (403, "console_role_required", &json!(role)));
        }
        let e = check("").finish(Ok(401), |_| panic!("not read")).unwrap_err();
        assert_eq!((e.status, e.code), (401, "console_sign_in_required"));
        for answer in [Ok(500), Ok(404), Ok(302), Err(TransportFailure::Unreachable), Err(TransportFailure::NotAllowed)]
        {
            let e = check("").finish(answer, |_| Ok(me(true, &[]))).unwrap_err();
            assert_eq!((e.status, e.code), (503, "console_access_unavailable"), "{answer:?}");
        }
        for body in [&b"not json"[..], b"{}", br#"{"user":{"memberships":"admin"}}"#] {
            assert!(check("").finish(Ok(200), |_| Ok(body.to_vec())).is_err());
        }
    }
}
