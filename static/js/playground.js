// The Playground view (the Playground API, /admin/v1): sign-in, the gateway token,
// a streamed chat, the search probe and the trace viewer. The gateway token lives
// in this module only: never in storage, a cookie, the URL, the console, or
// window.ratatoskrConsole.

import { $, clear, el, fill, up } from './dom.js';
import { describeError, readResult, tryApi } from './api.js';
import { readSse } from './sse.js';

const PG_REFRESH_MS = 3 * 60 * 1000;
// The Playground view's state; traceButtons maps each chat turn's trace button to its id.
export const pg = {
  profile: null, gateways: [], busy: false, countdown: null, history: [], started: false, authGen: 0,
  traceButtons: new WeakMap(),
};
let playToken = null; // { token, expiresAtMs, tenantSlug, gatewaySlug, gatewayId }; never exported

function pgPost(path, body) {
  return tryApi(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

/** The profile's roles as parts: "platform admin, role@tenant, …". */
function describeRoles(profile) {
  const user = profile.user || {};
  const roles = [];
  if (user.platform_admin === true) roles.push(['platform admin']);
  for (const m of Array.isArray(user.memberships) ? user.memberships : []) {
    if (m && typeof m === 'object') roles.push([up(m.role ?? '?'), '@', up(m.tenant_slug ?? '?')]);
  }
  return roles.length ? roles.flatMap((r, i) => (i ? [', ', ...r] : r)) : ['no roles'];
}

export function renderAuth() {
  const signedIn = pg.profile !== null;
  $('pg-login-form').hidden = signedIn;
  $('pg-who').hidden = !signedIn;
  const banner = $('pg-imp-banner');
  const imp = signedIn && pg.profile.impersonator && typeof pg.profile.impersonator === 'object' ? pg.profile.impersonator : null;
  banner.hidden = !imp;
  if (imp) fill(banner, 'Impersonating: ', up((pg.profile.user || {}).email ?? '?'), ' (by ', up(imp.email ?? '?'), ')');
  else clear(banner);
  if (signedIn) {
    fill($('pg-who-text'), 'Signed in as ', up((pg.profile.user || {}).email ?? '?'), ' · ', ...describeRoles(pg.profile));
  }
  const ready = signedIn && pg.gateways.length > 0;
  for (const id of ['pg-gateway', 'pg-mint', 'pg-search']) $(id).disabled = !ready;
  $('pg-draft').disabled = !ready;
  $('pg-send').disabled = !ready || pg.busy;
  $('pg-trace-open').disabled = !signedIn;
}

export async function pgLoadMe() {
  const gen = ++pg.authGen;
  const result = await tryApi('/admin/v1/auth/me');
  if (gen !== pg.authGen) return; // a sign-in or sign-out happened meanwhile
  if (result.ok && result.body && typeof result.body === 'object') {
    pg.profile = result.body;
    await pgLoadGateways();
  } else {
    pg.profile = null;
  }
  renderAuth();
}

async function pgLoadGateways() {
  const result = await tryApi('/admin/v1/gateways');
  const list = result.ok && result.body && Array.isArray(result.body.gateways) ? result.body.gateways : [];
  pg.gateways = list.filter((g) => g && typeof g.id === 'string');
  const select = $('pg-gateway');
  const previous = select.value;
  clear(select);
  for (const g of pg.gateways) {
    select.append(el('option', { value: g.id, text: String(g.tenant_slug ?? '?') + ' / ' + String(g.slug ?? '?') + ' (' + g.id + ')' }));
  }
  if (pg.gateways.some((g) => g.id === previous)) select.value = previous;
  if (!result.ok) fill($('pg-login-error'), 'gateways unavailable: ', ...describeError(result).parts);
}

export async function pgSignIn() {
  const email = $('pg-email').value.trim();
  const password = $('pg-password').value;
  pg.authGen += 1;
  $('pg-login-error').textContent = '';
  $('pg-login').disabled = true;
  const result = await pgPost('/admin/v1/auth/login', { email, password });
  $('pg-login').disabled = false;
  $('pg-password').value = '';
  if (!result.ok || !result.body) {
    fill($('pg-login-error'), 'sign-in failed: ', ...describeError(result).parts);
    return;
  }
  pg.profile = result.body;
  await pgLoadGateways();
  renderAuth();
  $('pg-draft').focus();
}

export function dropToken() {
  playToken = null;
  if (pg.countdown) { clearInterval(pg.countdown); pg.countdown = null; }
  $('pg-token-state').textContent = 'no token';
}

export async function pgSignOut() {
  pg.authGen += 1;
  await pgPost('/admin/v1/auth/logout', {});
  pg.profile = null;
  pg.gateways = [];
  pg.history = [];
  dropToken();
  clear($('pg-gateway'));
  clear($('pg-chat'));
  clear($('pg-search-out'));
  clear($('pg-trace-out'));
  renderAuth();
  $('pg-email').focus();
}

function tickCountdown() {
  const node = $('pg-token-state');
  if (!playToken) { node.textContent = 'no token'; return; }
  const left = Math.max(0, Math.floor((playToken.expiresAtMs - Date.now()) / 1000));
  const mm = String(Math.floor(left / 60)).padStart(2, '0');
  const ss = String(left % 60).padStart(2, '0');
  fill(node, 'token for ', up(playToken.tenantSlug), '/', up(playToken.gatewaySlug), ' · expires in ' + mm + ':' + ss);
  node.dataset.secondsLeft = String(left);
}

/** usePlayToken: mints for the gateway; the token stays in this module. */
export async function mintToken(gatewayId) {
  const result = await pgPost('/admin/v1/playground/token', { gateway_id: gatewayId });
  const b = result.body;
  if (!result.ok || !b || typeof b.token !== 'string' || !Number.isFinite(Date.parse(b.expires_at))) {
    const error = describeError(result);
    dropToken();
    fill($('pg-token-state'), 'mint refused: ', ...error.parts);
    return { ok: false, error };
  }
  playToken = {
    token: b.token, expiresAtMs: Date.parse(b.expires_at), gatewayId,
    tenantSlug: String(b.tenant_slug ?? ''), gatewaySlug: String(b.gateway_slug ?? ''),
  };
  if (!pg.countdown) pg.countdown = setInterval(tickCountdown, 1000);
  tickCountdown();
  return { ok: true };
}

/** A token for the gateway with at least three minutes left, minting when needed. */
async function ensureToken(gatewayId) {
  if (playToken && playToken.gatewayId === gatewayId && playToken.expiresAtMs - Date.now() >= PG_REFRESH_MS) return { ok: true };
  return mintToken(gatewayId);
}

function pgMessage(role, text) {
  const textNode = el('div', { class: 'text', text: up(text) });
  const node = el('div', { class: 'msg ' + role }, el('div', { class: 'who', text: role === 'user' ? 'you' : 'assistant' }), textNode);
  $('pg-chat').append(node);
  $('pg-chat').scrollTop = $('pg-chat').scrollHeight;
  return { node, textNode };
}

/** A typed state in a chat turn; text is parts (upstream text in up()). */
function pgState(parent, code, text, bad) {
  const node = el('div', { class: 'pg-state' + (bad ? ' bad' : ''), role: 'status', 'data-error-code': code }, ...[].concat(text));
  parent.append(node);
  return node;
}

function showSessionExpired(parent) {
  const node = pgState(parent, 'session_expired', 'Session expired: sign in again to continue. The conversation and your draft are kept. ', false);
  node.append(el('button', { type: 'button', class: 'pg-signin-again', text: 'Sign in' })); // wired in main.js
  pg.profile = null;
  dropToken();
  renderAuth();
}

function inferenceUrl(token) {
  return '/admin/v1/gw/' + encodeURIComponent(token.tenantSlug) + '/' + encodeURIComponent(token.gatewaySlug) + '/v1/chat/completions';
}

export async function pgSendChat() {
  const draft = $('pg-draft');
  const text = draft.value.trim();
  const gatewayId = $('pg-gateway').value;
  if (!text || pg.busy || !gatewayId || !pg.profile) return;
  pg.busy = true;
  renderAuth();
  const messages = pg.history.concat([{ role: 'user', content: text }]);
  const body = JSON.stringify({ messages, stream: true });
  pgMessage('user', text);
  const turn = el('div', { class: 'msg assistant' }, el('div', { class: 'who', text: 'assistant' }));
  $('pg-chat').append(turn);
  try {
    const reply = await pgRunTurn(gatewayId, body, turn, draft);
    if (reply !== null) pg.history = messages.concat([{ role: 'assistant', content: reply }]);
  } finally {
    pg.busy = false;
    renderAuth();
    $('pg-chat').scrollTop = $('pg-chat').scrollHeight;
  }
}

/** One turn: a 401 token_expired before any byte re-mints ONCE and replays the same body. */
async function pgRunTurn(gatewayId, body, turn, draft) {
  const first = await ensureToken(gatewayId);
  if (!first.ok) {
    if (first.error.status === 401) showSessionExpired(turn);
    else pgState(turn, first.error.code, ['Could not mint a token: ', ...first.error.parts], true);
    return null;
  }
  let replayed = false;
  for (;;) {
    let response;
    try {
      response = await fetch(inferenceUrl(playToken), {
        method: 'POST', headers: { authorization: 'Bearer ' + playToken.token, 'content-type': 'application/json' }, body,
      });
    } catch (_) {
      pgState(turn, 'network_error', 'The inference request failed (network).', true);
      return null;
    }
    if (response.status === 401) {
      const { code } = describeError(await readResult(response));
      if (code === 'token_expired' && !replayed) {
        replayed = true;
        const again = await mintToken(gatewayId);
        if (again.ok) continue;
        if (again.error.status === 401) showSessionExpired(turn);
        else pgState(turn, again.error.code, ['Could not re-mint a token: ', ...again.error.parts], true);
        return null;
      }
      pgState(turn, code, ['Refused (HTTP 401): ', up(code), replayed ? ' — after one re-mint; not retrying' : ''], true);
      return null;
    }
    if (!response.ok || !response.body) {
      const error = describeError(await readResult(response));
      pgState(turn, error.code, ['Inference failed: ', ...error.parts], true);
      return null;
    }
    draft.value = ''; // the turn is under way: the draft has been sent
    return pgStream(response, turn);
  }
}

async function pgStream(response, turn) {
  const textNode = el('div', { class: 'text', text: up('') });
  turn.append(textNode);
  const traceId = response.headers.get('x-trace-id');
  let reply = '';
  let done = false;
  const onEvent = (_, data) => {
    if (data === '[DONE]') { done = true; return; }
    let chunk;
    try { chunk = JSON.parse(data); } catch (_) { return; }
    const choice = chunk && Array.isArray(chunk.choices) ? chunk.choices[0] : null;
    const delta = choice && choice.delta && typeof choice.delta.content === 'string' ? choice.delta.content : '';
    if (delta) { reply += delta; textNode.textContent = reply; }
  };
  // Only [DONE] counts as done: a failed read and an early end both read "stream ended early".
  await readSse(response, onEvent, { afterChunk: () => { $('pg-chat').scrollTop = $('pg-chat').scrollHeight; } });
  const line = el('div', { class: 'status-line ' + (done ? 'done' : 'error'), role: 'status', text: done ? 'done' : 'stream ended early' });
  if (traceId) {
    const open = el('button', { type: 'button', class: 'pg-open-trace', title: 'Open this turn\'s trace' }, 'trace ', up(traceId));
    pg.traceButtons.set(open, traceId); // wired in main.js
    line.append(' · ', open);
  }
  turn.append(line);
  return done ? reply : null;
}

// Search probe: query + the selected gateway.
function safeLink(raw) {
  let url = null;
  try { url = new URL(String(raw)); } catch (_) { url = null; }
  if (url && (url.protocol === 'http:' || url.protocol === 'https:')) {
    return el('a', { href: url.href, rel: 'noopener noreferrer', target: '_blank', class: 'mono', text: up(raw) });
  }
  return el('span', { class: 'mono muted', text: up(raw ?? '') });
}

export async function pgSearch() {
  const q = $('pg-q').value;
  const gatewayId = $('pg-gateway').value;
  const out = $('pg-search-out');
  if (!gatewayId) return;
  out.replaceChildren(el('p', { class: 'muted', text: 'probing…' }));
  const result = await tryApi('/admin/v1/playground/search?q=' + encodeURIComponent(q) + '&gateway_id=' + encodeURIComponent(gatewayId));
  const b = result.body || {};
  if (result.ok) {
    const eu = b.eu_region_routing === true;
    const list = el('ol', { class: 'pg-results' });
    for (const r of (Array.isArray(b.results) ? b.results : []).slice(0, 5)) {
      if (!r || typeof r !== 'object') continue;
      list.append(el('li', { class: 'pg-result' },
        el('div', { class: 'pg-title', text: up(r.title ?? '') }),
        el('div', { class: 'pg-url' }, safeLink(r.url)),
        el('div', { class: 'muted pg-snippet', text: up(r.snippet ?? '') })));
    }
    out.replaceChildren(
      el('div', { class: 'pg-search-meta', 'data-eu-gate': eu ? 'passed' : 'not_enforced' }, 'provider ', up(b.provider ?? '?'), ' · EU gate: ',
        ...(eu ? ['enforced, passed (', up(b.provider ?? '?'), ' is EU-based)'] : ['not enforced (no eu_region_routing)'])),
      list.children.length ? list : el('p', { class: 'muted', text: 'no results' }));
    return;
  }
  const { code, parts: described } = describeError(result);
  let text;
  if (code === 'feature_disabled') text = ['Playground is disabled for this tenant (feature_disabled).'];
  else if (code === 'search_key_missing') text = ['No stored web-search key on this gateway (search_key_missing).'];
  else if (code === 'eu_gate_refused') text = ['EU gate: refused — ', up(b.reason ?? 'the provider is not EU-based')];
  else text = ['Search failed: ', ...described];
  out.replaceChildren(el('p', { class: 'pg-state bad', 'data-error-code': code }, ...text));
}

// Trace viewer.
export async function pgOpenTrace(id) {
  const out = $('pg-trace-out');
  const traceId = String(id || '').trim();
  if (!traceId) return;
  out.replaceChildren(el('p', { class: 'muted', text: 'loading…' }));
  const result = await tryApi('/admin/v1/playground/trace/' + encodeURIComponent(traceId));
  if (!result.ok || !result.body || !result.body.trace) {
    const { code, parts: described } = describeError(result);
    let text;
    if (result.status === 403) text = ['Forbidden: your role may not read this trace (', up(code), ').'];
    else if (result.status === 404) text = ['Trace not found (', up(code), ').'];
    else text = ['Trace unavailable: ', ...described];
    out.replaceChildren(el('p', { class: 'pg-state bad', 'data-error-code': code }, ...text));
    return;
  }
  const t = result.body.trace;
  const steps = Array.isArray(result.body.steps) ? result.body.steps : [];
  const start = Number(t.started_at);
  const kv = el('dl', { class: 'kv' });
  const row = (k, ...parts) => kv.append(el('dt', { text: k }), el('dd', { class: 'mono' }, ...parts));
  row('trace', up(t.id ?? '')); row('gateway', up(t.tenant_slug ?? '?'), '/', up(t.gateway_slug ?? '?'), ' (', up(t.gateway_id ?? ''), ')');
  row('model', up(t.model ?? '')); row('status', up(t.status ?? '')); row('steps', steps.length);
  if (Number.isFinite(start) && Number.isFinite(Number(t.ended_at))) row('duration', (Number(t.ended_at) - start) + ' ms');
  const timeline = el('ol', { class: 'timeline' });
  for (const s of steps) {
    if (!s || typeof s !== 'object') continue;
    const st = Number(s.started_at), en = Number(s.ended_at);
    const offset = Number.isFinite(st) && Number.isFinite(start) ? '+' + (st - start) + ' ms' : '';
    const dur = Number.isFinite(st) && Number.isFinite(en) ? (en - st) + ' ms' : '?';
    let json;
    try { json = JSON.stringify(s.data, null, 2); } catch (_) { json = String(s.data); }
    timeline.append(el('li', { class: 'pg-step' },
      el('div', {}, el('span', { class: 'mono pg-step-name', text: up(s.name ?? '?') }), ' ', el('span', { class: 'muted', text: offset + ' · ' + dur })),
      el('details', {}, el('summary', { text: 'data' }), el('pre', { class: 'pg-step-data', text: up(json === undefined ? 'null' : json) }))));
  }
  out.replaceChildren(kv, timeline);
}
