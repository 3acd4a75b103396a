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
use crate::error::{ApiError, PlaygroundErrors};
use crate::{gateways, routes};
use gateway_ledger::traces as ledger;

/// A step's stored `data`, decoded inline; text that is not JSON stays a string.
pub fn decode_data(raw: Option<String>) -> Value {
    match raw {
        None => Value::Null,
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}

pub fn read(ctx: &Ctx, p: &Principal, raw_id: &str) -> Result<Response, ApiError> {
    let id = routes::trace_id(raw_id)?;
    let Some(tr) = ledger::read(ctx.db, &id)? else { return Err(ApiError::trace_not_found()) };
    let access = p.roles.access(&tr.tenant_id, &tr.gateway_id).ok_or_else(ApiError::trace_not_found)?;
    may_read_traces(access)?;
    let out: Vec<Value> = ledger::steps(ctx.db, &id)?
        .into_iter()
        .map(|step| {
            json!({
                "name": step.name,
                "started_at": step.started_at_ms,
                "ended_at": step.ended_at_ms,
                "data": decode_data(step.data),
            })
        })
        .collect();
    let trace = json!({
        "id": tr.id,
        "gateway_id": tr.gateway_id,
        "tenant_slug": tr.tenant_slug,
        "gateway_slug": tr.gateway_slug,
        "started_at": tr.started_at_ms,
        "ended_at": tr.ended_at_ms,
        "model": tr.model,
        "status": tr.status,
        "step_count": out.len(),
    });
    Ok(Response::json(200, &json!({ "trace": trace, "steps": out })))
}

pub fn list(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    let gateway_id = routes::gateway_param(&req.query)?;
    let limit = routes::limit_param(&req.query)?;
    let (gateway, access) = gateways::accessible(ctx, p, &gateway_id)?;
    may_read_traces(access)?;
    let traces: Vec<Value> = ledger::list(ctx.db, &gateway.id, limit)?
        .into_iter()
        .map(|t| json!({ "id": t.id, "started_at": t.started_at_ms, "model": t.model, "status": t.status }))
        .collect();
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
