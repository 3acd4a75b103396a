// Calls to the app's own JSON routes and the one describer of a failed answer,
// for both views.

import { up } from './dom.js';

/** A Response as { ok, status, body }; body is its JSON, or null. */
export async function readResult(response) {
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  return { ok: response.ok, status: response.status, body };
}

export async function api(path, options) {
  return readResult(await fetch(path, options));
}

/** api(), with a failed fetch as status 0 instead of a throw. */
export async function tryApi(path, options) {
  try { return await api(path, options); } catch (_) { return { ok: false, status: 0, body: null }; }
}

/**
 * The one describer of a failed API result, for both views: envelopeCode is the
 * code its envelope carries ({"error_code"}, or the gateway's {"error": {"code"}});
 * code falls back to http_<status>; parts read "code (HTTP status)", the code
 * as upstream text.
 */
export function describeError(result) {
  const body = result.body || {};
  let envelopeCode;
  if (typeof body.error_code === 'string') envelopeCode = body.error_code;
  else if (body.error && typeof body.error.code === 'string') envelopeCode = body.error.code;
  const code = envelopeCode ?? 'http_' + result.status;
  return { code, envelopeCode, status: result.status, parts: [up(code), ' (HTTP ' + result.status + ')'] };
}
