//! Gateways as the routes see them (never with their key), and
//! `GET /gateways`: `{gateways: [...]}`, the ones the caller may access, for
//! the console's gateway picker.

use serde_json::{json, Value};

use crate::access::Access;
use crate::auth::Principal;
use crate::context::Ctx;
use crate::db::{Db, DbError, Row};
use crate::error::{self, ApiError};
use crate::http::Response;

/// A gateway joined with its tenant. The stored search key is not here: only
/// the search probe reads it, at the moment it sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub id: String,
    pub slug: String,
    pub tenant_id: String,
    pub tenant_slug: String,
    pub playground_enabled: bool,
    pub gateway_eu: bool,
    pub tenant_eu: bool,
    /// `web_search_provider` as stored (`None` = the brave default).
    pub provider: Option<String>,
}

const SELECT: &str = "SELECT g.id, g.slug, g.tenant_id, t.slug, t.playground_enabled, g.eu_region_routing,
        t.eu_region_routing, g.web_search_provider
   FROM gateways g JOIN tenants t ON t.id = g.tenant_id";

fn from_row(row: &Row) -> Result<Gateway, DbError> {
    Ok(Gateway {
        id: row.text(0)?,
        slug: row.text(1)?,
        tenant_id: row.text(2)?,
        tenant_slug: row.text(3)?,
        playground_enabled: row.flag(4)?,
        gateway_eu: row.flag(5)?,
        tenant_eu: row.flag(6)?,
        provider: row.opt_text(7)?,
    })
}

pub fn load(db: &dyn Db, id: &str) -> Result<Option<Gateway>, DbError> {
    db.one(&format!("{SELECT} WHERE g.id = ?"), &[id.into()])?.as_ref().map(from_row).transpose()
}

/// The gateway and the caller's access to it; no access is 404 exactly like
/// an unknown id (no existence leak).
pub fn accessible(ctx: &Ctx, p: &Principal, id: &str) -> Result<(Gateway, Access), ApiError> {
    let gateway = load(ctx.db, id)?.ok_or_else(error::gateway_not_found)?;
    let access = p.roles.access(&gateway.tenant_id, &gateway.id).ok_or_else(error::gateway_not_found)?;
    Ok((gateway, access))
}

pub fn to_json(g: &Gateway) -> Value {
    json!({
        "id": g.id,
        "slug": g.slug,
        "tenant_slug": g.tenant_slug,
        "playground_enabled": g.playground_enabled,
        // With the tenant EU-residency floor applied.
        "eu_region_routing": g.gateway_eu || g.tenant_eu,
        "web_search": { "provider": g.provider.as_deref().unwrap_or("brave") },
    })
}

/// `GET /gateways` → `{gateways: [{id, slug, tenant_slug, playground_enabled, eu_region_routing, web_search: {provider}}]}`
/// (an object, so fields can be added without breaking clients).
pub fn list(ctx: &Ctx, p: &Principal) -> Result<Response, ApiError> {
    let rows = ctx.db.query(&format!("{SELECT} ORDER BY t.slug, g.slug"), &[])?;
    let mut out = Vec::new();
    for row in &rows {
        let g = from_row(row)?;
        if p.roles.access(&g.tenant_id, &g.id).is_some() {
            out.push(to_json(&g));
        }
    }
    Ok(Response::json(200, &json!({ "gateways": out })))
}
