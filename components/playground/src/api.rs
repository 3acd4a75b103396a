//! The whole API as one pure function, [`handle`]: a request in, a response
//! out, with storage, randomness, time and outbound HTTP injected
//! ([`crate::context::Ctx`]). This module only dispatches; the wasm handler
//! only moves bytes; the native tests drive this directly.

use crate::auth;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{Request, Response};
use crate::routes::{self, Route};
use crate::{gateways, search, seed, tokens, traces};

/// Answers one request.
pub fn handle(ctx: &Ctx, req: &Request) -> Response {
    match dispatch(ctx, req) {
        Ok(response) => response,
        Err(e) => e.into(),
    }
}

fn dispatch(ctx: &Ctx, req: &Request) -> Result<Response, ApiError> {
    let route = routes::route(&req.method, &req.path)?;
    let (setup, looked) = auth::first_read(ctx, req, route != Route::Login);
    let ensured = seed::ensure(ctx, req, setup)?;
    if route == Route::Login {
        return auth::login(ctx, req);
    }
    // What the set-up wrote may end the session read before it.
    let looked = looked.filter(|_| ensured == seed::Ensured::Untouched);
    let principal = auth::authenticate(ctx, req, looked)?;
    if req.method == "POST" {
        auth::check_csrf(ctx, req, principal.via)?;
    }
    match route {
        Route::Login => unreachable!("handled above"),
        Route::Logout => auth::logout(ctx, req, &principal),
        Route::LogoutAll => auth::logout_all(ctx, req, &principal),
        Route::Password => auth::change_password(ctx, req, &principal),
        Route::Me => Ok(Response::json(200, &auth::profile(&principal))),
        Route::Impersonate => auth::impersonate(ctx, req, &principal),
        Route::Mint => tokens::mint(ctx, req, &principal),
        Route::Search => search::search(ctx, req, &principal),
        Route::Trace(raw_id) => traces::read(ctx, &principal, &raw_id),
        Route::Traces => traces::list(ctx, req, &principal),
        Route::Gateways => gateways::list(ctx, &principal),
    }
}
