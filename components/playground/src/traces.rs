//! Trace reads: `GET /playground/trace/{id}` (= `GET /traces/{id}`) and
//! `GET /playground/traces?gateway_id=&limit=`.
//!
//! Platform admins read any trace; a tenant admin needs access to the
//! trace's gateway; a member or viewer with access gets 403
//! `insufficient_role`; without access (another tenant, outside the scope)
//! or for an unknown id: 404 (`trace_not_found` / `gateway_not_found`),
//! the same answer, so nothing leaks.

use serde_json::{json, Value};

use crate::access::may_read_traces;
use crate::auth::Principal;
use crate::context::{Ctx, Request, Response};
use crate::db::Val;
use crate::error::{ApiError, PlaygroundErrors};
use crate::{gateways, routes};

/// A step's stored `data`, decoded inline; text that is not JSON stays a string.
pub fn decode_data(raw: Option<String>) -> Value {
    match raw {
        None => Value::Null,
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

pub fn read(ctx: &Ctx, p: &Principal, raw_id: &str) -> Result<Response, ApiError> {
    let id = routes::trace_id(raw_id)?;
    let row = ctx.db.one(
        "SELECT tr.id, tr.gateway_id, tr.started_at, tr.ended_at, tr.model, tr.status, g.slug, g.tenant_id, t.slug
           FROM traces tr JOIN gateways g ON g.id = tr.gateway_id JOIN tenants t ON t.id = g.tenant_id
          WHERE tr.id = ?",
        &[Val::Text(id.clone())],
    )?;
    let Some(row) = row else { return Err(ApiError::trace_not_found()) };
    let (gateway_id, tenant_id) = (row.text(1)?, row.text(7)?);
    let access = p.roles.access(&tenant_id, &gateway_id).ok_or_else(ApiError::trace_not_found)?;
    may_read_traces(access)?;
    let steps = ctx.db.query(
        "SELECT name, started_at, ended_at, data FROM trace_steps WHERE trace_id = ? ORDER BY seq",
        &[Val::Text(id)],
    )?;
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        out.push(json!({
            "name": step.text(0)?,
            "started_at": step.opt_int(1)?,
            "ended_at": step.opt_int(2)?,
            "data": decode_data(step.opt_text(3)?),
        }));
    }
    let trace = json!({
        "id": row.text(0)?,
        "gateway_id": gateway_id,
        "tenant_slug": row.text(8)?,
        "gateway_slug": row.text(6)?,
        "started_at": row.opt_int(2)?,
        "ended_at": row.opt_int(3)?,
        "model": row.text(4)?,
        "status": row.text(5)?,
        "step_count": out.len(),
    });
    Ok(Response::json(200, &json!({ "trace": trace, "steps": out })))
}

pub fn list(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    let gateway_id = routes::gateway_param(&req.query)?;
    let limit = routes::limit_param(&req.query)?;
    let (gateway, access) = gateways::accessible(ctx, p, &gateway_id)?;
    may_read_traces(access)?;
    let rows = ctx.db.query(
        "SELECT id, started_at, model, status FROM traces WHERE gateway_id = ? ORDER BY started_at DESC, id LIMIT ?",
        &[Val::Text(gateway.id.clone()), Val::Int(limit)],
    )?;
    let mut traces = Vec::with_capacity(rows.len());
    for row in rows {
        traces.push(json!({
            "id": row.text(0)?,
            "started_at": row.opt_int(1)?,
            "model": row.text(2)?,
            "status": row.text(3)?,
        }));
    }
    Ok(Response::json(200, &json!({ "gateway_id": gateway.id, "traces": traces })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_data_is_decoded_inline_or_kept_as_text() {
        assert_eq!(decode_data(Some("{\"a\":[1,2]}".into())), json!({ "a": [1, 2] }));
        assert_eq!(decode_data(Some("not json".into())), json!("not json"));
        assert_eq!(decode_data(Some("42".into())), json!(42));
        assert_eq!(decode_data(None), Value::Null);
    }
}
