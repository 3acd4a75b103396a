//! Who may do what: roles, gateway scopes and the per-route decisions.
//!
//! Gateway-scoped access: a user has access to a gateway when they are a
//! platform admin, or hold a membership in the gateway's tenant whose
//! `gateway_scope` is `all` or lists the gateway. Without access a gateway
//! (and its traces) does not exist for the caller: 404, never 403.
//!
//! With access, the role decides:
//!
//! | action | platform admin | tenant admin | member | viewer |
//! |---|---|---|---|---|
//! | list gateways (`GET /gateways`) | every gateway | its scope | its scope | its scope |
//! | mint a playground token | yes | yes | yes | 403 `insufficient_role` |
//! | web-search probe | yes | yes | yes | 403 `insufficient_role` |
//! | read / list traces | yes | yes | 403 `insufficient_role` | 403 `insufficient_role` |
//!
//! Members mint because minting is how ordinary chat gets its credential (the
//! seed: "both mint through this one route"); viewers only look. Trace detail
//! holds prompts and model output, so only admins read it (the seed's rule).
//! An impersonated session acts with the impersonated user's roles, except
//! that it can never mint (403 `impersonation_forbidden`, checked first).

use serde_json::{json, Value};

use crate::error::{self, ApiError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Member,
    Viewer,
}

impl Role {
    pub fn parse(raw: &str) -> Option<Role> {
        match raw {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }
}

/// `gateway_scope`: `all`, or a JSON list of gateway ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Gateways(Vec<String>),
}

impl Scope {
    /// Anything unreadable is an empty scope: fail closed.
    pub fn parse(raw: &str) -> Scope {
        if raw.trim() == "all" {
            return Scope::All;
        }
        match serde_json::from_str::<Vec<String>>(raw) {
            Ok(ids) => Scope::Gateways(ids),
            Err(_) => Scope::Gateways(Vec::new()),
        }
    }

    pub fn to_db(&self) -> String {
        match self {
            Scope::All => "all".into(),
            Scope::Gateways(ids) => serde_json::to_string(ids).unwrap_or_else(|_| "[]".into()),
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            Scope::All => json!("all"),
            Scope::Gateways(ids) => json!(ids),
        }
    }

    pub fn covers(&self, gateway_id: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Gateways(ids) => ids.iter().any(|id| id == gateway_id),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub tenant_id: String,
    pub tenant_slug: String,
    pub role: Role,
    pub scope: Scope,
}

/// What a caller is, for access decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    pub platform_admin: bool,
    pub memberships: Vec<Membership>,
}

/// How a caller reaches one gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Platform,
    Tenant(Role),
}

impl Roles {
    /// `None`: no access (the gateway does not exist for this caller).
    pub fn access(&self, tenant_id: &str, gateway_id: &str) -> Option<Access> {
        if self.platform_admin {
            return Some(Access::Platform);
        }
        self.memberships
            .iter()
            .find(|m| m.tenant_id == tenant_id && m.scope.covers(gateway_id))
            .map(|m| Access::Tenant(m.role))
    }
}

/// Minting a playground token, and the search probe.
pub fn may_use_playground(access: Access) -> Result<(), ApiError> {
    match access {
        Access::Platform | Access::Tenant(Role::Admin) | Access::Tenant(Role::Member) => Ok(()),
        Access::Tenant(Role::Viewer) => Err(error::insufficient_role()),
    }
}

/// Reading or listing traces.
pub fn may_read_traces(access: Access) -> Result<(), ApiError> {
    match access {
        Access::Platform | Access::Tenant(Role::Admin) => Ok(()),
        Access::Tenant(Role::Member) | Access::Tenant(Role::Viewer) => Err(error::insufficient_role()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(role: Role, scope: Scope) -> Roles {
        Roles {
            platform_admin: false,
            memberships: vec![Membership { tenant_id: "ten_acme".into(), tenant_slug: "acme".into(), role, scope }],
        }
    }

    #[test]
    fn scopes_parse_fail_closed() {
        assert_eq!(Scope::parse("all"), Scope::All);
        assert_eq!(Scope::parse("[\"gw_a\",\"gw_b\"]"), Scope::Gateways(vec!["gw_a".into(), "gw_b".into()]));
        assert_eq!(Scope::parse("garbage"), Scope::Gateways(vec![]));
        assert_eq!(Scope::parse("[1,2]"), Scope::Gateways(vec![]));
        assert!(!Scope::parse("").covers("gw_a"));
        assert_eq!(Scope::parse(&Scope::Gateways(vec!["gw_a".into()]).to_db()), Scope::Gateways(vec!["gw_a".into()]));
    }

    #[test]
    fn access_needs_the_tenant_and_the_scope() {
        let admin = member(Role::Admin, Scope::All);
        assert_eq!(admin.access("ten_acme", "gw_any"), Some(Access::Tenant(Role::Admin)));
        assert_eq!(admin.access("ten_euco", "gw_any"), None, "another tenant's gateway does not exist");
        let scoped = member(Role::Admin, Scope::Gateways(vec!["gw_acme_second".into()]));
        assert_eq!(scoped.access("ten_acme", "gw_acme_second"), Some(Access::Tenant(Role::Admin)));
        assert_eq!(scoped.access("ten_acme", "gw_acme_main"), None);
        // A gateway id listed in a scope never grants access across tenants.
        let odd = member(Role::Admin, Scope::Gateways(vec!["gw_euco_x".into()]));
        assert_eq!(odd.access("ten_euco", "gw_euco_x"), None);
        let platform = Roles { platform_admin: true, memberships: vec![] };
        assert_eq!(platform.access("ten_anything", "gw_x"), Some(Access::Platform));
    }

    #[test]
    fn the_role_matrix() {
        use Access::*;
        let cases = [
            (Platform, true, true),
            (Tenant(Role::Admin), true, true),
            (Tenant(Role::Member), true, false),
            (Tenant(Role::Viewer), false, false),
        ];
        for (access, playground, traces) in cases {
            assert_eq!(may_use_playground(access).is_ok(), playground, "{access:?} playground");
            assert_eq!(may_read_traces(access).is_ok(), traces, "{access:?} traces");
            for result in [may_use_playground(access), may_read_traces(access)] {
                if let Err(e) = result {
                    assert_eq!((e.status, e.code), (403, "insufficient_role"));
                }
            }
        }
    }
}
