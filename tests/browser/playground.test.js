'use strict';
// The Playground view in a real browser against the real host with the
// demo world: sign-in/out, token mint + countdown, chat through the same-origin
// inference pass-through with the one-shot re-mint and replay, the session-expired
// state, the search probe's EU / non-EU / feature-disabled / no-key states, the
// trace viewer for allowed and forbidden roles, the XSS corpus through provider
// results, chat output and trace step data, and no gateway token anywhere it
// must not be.
//
// Two hosts: MOCKED points inference_base_url and brave_base_url at a Node mock
// (scripted 401 token_expired, recorded attempts, hostile search results); REAL
// keeps the simulator's inference (which records traces) and providers.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./lib/harness');
const { PAYLOADS: P } = require('./lib/xss-corpus');

const htmlEscape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
// The API's whitespace rule for result text (Rust's char::is_whitespace / is_control).
const plainText = (s) =>
  s.split(/[\u0000-\u001f\u007f-\u009f \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u).filter(Boolean).join(' ');

const DEMO_PASSWORD = 'pw-' + crypto.randomBytes(8).toString('hex');
// Chromium logs expected HTTP refusals of the admin API as resource-load errors.
const ADMIN_ERRORS = [400, 401, 403, 404, 503].map((status) => ({ path: /^\/admin\/v1\//, status }));

/** A Node stand-in for the gateway inference endpoint and the Brave API. */
function startMock() {
  const mock = { attempts: [], plan: [], deltas: null, traceId: 'trc_mock_1', searches: [] };
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const u = new URL(req.url, 'http://mock');
      if (u.pathname.startsWith('/inference/')) {
        mock.attempts.push({ path: u.pathname, auth: req.headers.authorization, body });
        const mode = mock.plan.shift() || 'stream';
        if (mode === 'expired' || mode === 'invalid') {
          res.writeHead(401, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: mode === 'expired' ? 'token_expired' : 'invalid_token', message: 'refused' } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-trace-id': mock.traceId });
        const deltas = mock.deltas || ['Hello', ' from', ' the mock.'];
        let i = 0;
        const next = () => {
          if (i < deltas.length) {
            res.write('data: ' + JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: deltas[i++] }, finish_reason: null }] }) + '\n\n');
            setTimeout(next, 5);
          } else {
            res.write('data: ' + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }) + '\n\n');
            res.end('data: [DONE]\n\n');
          }
        };
        next();
        return;
      }
      if (u.pathname === '/brave/res/v1/web/search') {
        const q = u.searchParams.get('q') || '';
        mock.searches.push(q);
        const m = /^xss-(\d+)$/.exec(q);
        const results = m
          // As a real provider sends literal text: HTML-escaped (the API decodes it back).
          ? P.slice(Number(m[1]) * 5, Number(m[1]) * 5 + 5).map((p) => ({ title: htmlEscape(p), url: p, description: htmlEscape(p) }))
          : [
            { title: 'Plain result', url: 'https://example.test/a?b=1', description: 'an https link' },
            { title: 'Script scheme', url: 'javascript:window.__xss=1', description: 'never a link' },
            { title: 'Data scheme', url: 'data:text/html,<script>window.__xss=1</script>', description: 'never a link' },
            { title: 'Plain http', url: 'http://example.test/b', description: 'an http link' },
          ];
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ web: { results } }));
        return;
      }
      res.writeHead(404).end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    mock.origin = 'http://127.0.0.1:' + server.address().port;
    mock.stop = () => new Promise((r) => { server.closeAllConnections(); server.close(r); });
    resolve(mock);
  }));
}

async function openPlayground(browser, host) {
  const opened = await h.openConsole(browser, host.url, { allowNetworkErrors: ADMIN_ERRORS });
  const { page } = opened;
  opened.consoleAll = [];
  page.on('console', (msg) => opened.consoleAll.push(msg.text()));
  // Keyboard: the tab is a button in the header.
  await page.focus('#tab-playground');
  await page.keyboard.press('Enter');
  await h.waitFor(page, () => !document.getElementById('playground-view').hidden && document.getElementById('console-view').hidden,
    undefined, { what: 'the playground view' });
  return opened;
}

async function signIn(page, email) {
  await h.waitFor(page, () => !document.getElementById('pg-login-form').hidden, undefined, { what: 'the sign-in form' });
  await page.fill('#pg-email', email);
  await page.fill('#pg-password', DEMO_PASSWORD);
  await page.click('#pg-login');
  await h.waitFor(page, () => !document.getElementById('pg-who').hidden && document.querySelectorAll('#pg-gateway option').length > 0,
    undefined, { what: `signed in as ${email}` });
}

async function sendChat(page, text) {
  await page.fill('#pg-draft', text);
  await page.focus('#pg-draft');
  await page.keyboard.press('Enter');
}

/** Waits for the newest assistant turn to end; returns its status or state. */
async function lastTurn(page) {
  await h.waitFor(page, () => {
    const turns = document.querySelectorAll('#pg-chat .msg.assistant');
    const t = turns[turns.length - 1];
    return t && (t.querySelector('.status-line') || t.querySelector('.pg-state'));
  }, undefined, { timeout: 20_000, what: 'the chat turn to end' });
  return page.evaluate(() => {
    const turns = document.querySelectorAll('#pg-chat .msg.assistant');
    const t = turns[turns.length - 1];
    const state = t.querySelector('.pg-state');
    const text = t.querySelector('.text');
    return {
      status: t.querySelector('.status-line') ? t.querySelector('.status-line').textContent : null,
      state: state ? state.dataset.errorCode : null,
      reply: text ? text.textContent : null,
      traceButton: !!t.querySelector('.pg-open-trace'),
    };
  });
}

async function probe(page, gatewayId, q) {
  await page.selectOption('#pg-gateway', gatewayId);
  await page.evaluate(() => document.getElementById('pg-search-out').replaceChildren());
  await page.fill('#pg-q', q);
  await page.click('#pg-search');
  await h.waitFor(page, () => {
    const out = document.getElementById('pg-search-out');
    return out.querySelector('.pg-search-meta, .pg-state');
  }, undefined, { what: `the probe of ${gatewayId}` });
  return page.evaluate(() => {
    const out = document.getElementById('pg-search-out');
    const state = out.querySelector('.pg-state');
    return {
      state: state ? state.dataset.errorCode : null,
      text: out.textContent,
      meta: out.querySelector('.pg-search-meta') ? out.querySelector('.pg-search-meta').textContent : null,
      results: [...out.querySelectorAll('.pg-result')].map((li) => ({
        title: li.querySelector('.pg-title').textContent,
        url: li.querySelector('.pg-url').textContent,
        snippet: li.querySelector('.pg-snippet').textContent,
        link: li.querySelector('a') ? { href: li.querySelector('a').getAttribute('href'), rel: li.querySelector('a').getAttribute('rel') } : null,
      })),
    };
  });
}

async function openTrace(page, id) {
  await page.evaluate(() => document.getElementById('pg-trace-out').replaceChildren());
  await page.fill('#pg-trace-id', id);
  await page.click('#pg-trace-open');
  await h.waitFor(page, () => document.querySelector('#pg-trace-out .timeline, #pg-trace-out .pg-state'), undefined, { what: `trace ${id}` });
  return page.evaluate(() => {
    const out = document.getElementById('pg-trace-out');
    const state = out.querySelector('.pg-state');
    return {
      state: state ? state.dataset.errorCode : null,
      text: state ? state.textContent : null,
      steps: [...out.querySelectorAll('.pg-step')].map((li) => ({
        name: li.querySelector('.pg-step-name').textContent,
        timing: li.querySelector('.muted').textContent,
        data: li.querySelector('.pg-step-data').textContent,
        collapsed: !li.querySelector('details').open,
      })),
    };
  });
}

/** Elements under the playground view that are not the console's own kinds. */
async function foreignMarkup(page) {
  return page.evaluate(() => {
    const ok = new Set(['DIV', 'SPAN', 'P', 'PRE', 'DETAILS', 'SUMMARY', 'DL', 'DT', 'DD', 'OL', 'UL', 'LI', 'A', 'BUTTON',
      'SECTION', 'H2', 'FORM', 'LABEL', 'INPUT', 'SELECT', 'OPTION', 'TEXTAREA']);
    const bad = [];
    for (const node of document.getElementById('playground-view').querySelectorAll('*')) {
      if (!ok.has(node.tagName)) bad.push(node.tagName);
      if (node.tagName === 'A') {
        const href = node.getAttribute('href') || '';
        if (!/^https?:\/\//.test(href) || node.getAttribute('rel') !== 'noopener noreferrer') bad.push('A ' + href);
      }
      for (const a of node.attributes) if (/^on/i.test(a.name) || a.name === 'style' || a.name === 'src') bad.push(node.tagName + '[' + a.name + ']');
    }
    return bad;
  });
}

/** No gateway token in storage, cookies, the URL, the console or the DOM. */
async function assertNoTokenLeak(page, consoleAll) {
  const where = await page.evaluate(() => ({
    local: JSON.stringify(Object.entries(localStorage)),
    session: JSON.stringify(Object.entries(sessionStorage)),
    cookie: document.cookie,
    url: location.href,
    dom: document.documentElement.outerHTML,
    exposed: JSON.stringify(window.ratatoskrConsole),
  }));
  for (const [k, v] of Object.entries(where)) assert.ok(!/myra_/.test(v), `a gateway token in ${k}`);
  assert.equal(where.local, '[]');
  assert.equal(where.session, '[]');
  assert.ok(!consoleAll.some((t) => /myra_/.test(t)), 'a gateway token in console output');
}

describe('playground view', () => {
  let browser, mock, mocked, real;

  h.suiteSetup(async (own) => {
    mock = own(await startMock());
    const common = { seed_demo_data: 'true', demo_password: DEMO_PASSWORD, admin_key: h.randomKey() };
    mocked = own(await h.startHost({ variables: {
      ...common,
      inference_base_url: mock.origin + '/inference', inference_origin: mock.origin,
      brave_base_url: mock.origin + '/brave', brave_origin: mock.origin,
    } }));
    real = own(await h.startHost({ variables: { ...common, admin_key: h.randomKey() } }));
    browser = own(await h.launchBrowser());
  });

  test('sign-in, roles, sign-out; a wrong password is a typed refusal', async () => {
    const { context, page, problems } = await openPlayground(browser, real);
    try {
      await page.fill('#pg-email', 'admin@acme.test');
      await page.fill('#pg-password', 'not-the-password');
      await page.click('#pg-login');
      await h.waitFor(page, () => document.getElementById('pg-login-error').textContent !== '', undefined, { what: 'the refusal' });
      assert.match(await page.textContent('#pg-login-error'), /invalid_credentials/);
      await signIn(page, 'admin@acme.test');
      assert.match(await page.textContent('#pg-who-text'), /admin@acme\.test · admin@acme/);
      assert.equal(await page.isHidden('#pg-imp-banner'), true);
      const gateways = await page.$$eval('#pg-gateway option', (o) => o.map((x) => x.value));
      assert.deepEqual(gateways.sort(), ['gw_acme_main', 'gw_acme_nokey', 'gw_acme_second']);
      // A reload keeps the session (cookie), never the token.
      await page.click('#pg-signout');
      await h.waitFor(page, () => !document.getElementById('pg-login-form').hidden, undefined, { what: 'signed out' });
      assert.equal(await page.isDisabled('#pg-send'), true);
      const me = await page.evaluate(async () => (await fetch('/admin/v1/auth/me')).status);
      assert.equal(me, 401, 'the session is gone server-side');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('impersonation shows a banner and the mint refusal is typed', async () => {
    const { context, page, problems } = await openPlayground(browser, real);
    try {
      await signIn(page, 'platform@demo.test');
      assert.match(await page.textContent('#pg-who-text'), /platform@demo\.test · platform admin/);
      // The page's own same-origin JSON POST passes the CSRF rule.
      const status = await page.evaluate(async () => (await fetch('/admin/v1/auth/impersonate', {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user_id: 'usr_demo_acme_admin' }),
      })).status);
      assert.equal(status, 200);
      await page.reload();
      await page.click('#tab-playground');
      await h.waitFor(page, () => !document.getElementById('pg-imp-banner').hidden, undefined, { what: 'the impersonation banner' });
      assert.equal(await page.textContent('#pg-imp-banner'), 'Impersonating: admin@acme.test (by platform@demo.test)');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      await page.click('#pg-mint');
      await h.waitFor(page, () => /mint refused/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'the refusal' });
      assert.match(await page.textContent('#pg-token-state'), /impersonation_forbidden \(HTTP 403\)/);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('mint + countdown; a chat streams through the pass-through and links to its trace', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, real);
    try {
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      await page.click('#pg-mint');
      await h.waitFor(page, () => /expires in (29:[0-5]\d|30:00)/.test(document.getElementById('pg-token-state').textContent),
        undefined, { what: 'the countdown' });
      const first = Number(await page.getAttribute('#pg-token-state', 'data-seconds-left'));
      await h.sleep(2100);
      const later = Number(await page.getAttribute('#pg-token-state', 'data-seconds-left'));
      assert.ok(later < first && later >= first - 4, `countdown ${first} -> ${later}`);
      assert.match(await page.textContent('#pg-token-state'), /^token for acme\/main · expires in/);

      await sendChat(page, 'Hello playground');
      const turn = await lastTurn(page);
      assert.equal(turn.status.startsWith('done'), true, JSON.stringify(turn));
      assert.match(turn.reply, /Hello playground/);
      assert.equal(await page.inputValue('#pg-draft'), '', 'a sent draft is cleared');
      // The answer's trace opens in the viewer: a timeline with durations, data collapsed.
      await page.click('#pg-chat .pg-open-trace');
      await h.waitFor(page, () => document.querySelector('#pg-trace-out .timeline li'), undefined, { what: 'the turn trace' });
      const names = await page.$$eval('#pg-trace-out .pg-step-name', (n) => n.map((x) => x.textContent));
      assert.deepEqual(names.slice(0, 3), ['auth', 'route', 'model.request']);
      const timings = await page.$$eval('#pg-trace-out .pg-step .muted', (n) => n.map((x) => x.textContent));
      assert.ok(timings.every((t) => /^\+\d+ ms · \d+ ms$/.test(t)), timings.join('|'));
      // docs/playground.png (docs/playground.md's picture) is rewritten only on request.
      const picture = path.join(h.REPO_ROOT, 'docs', 'playground.png');
      if (process.env.UPDATE_DOCS_SCREENSHOT === '1' || !fs.existsSync(picture)) await page.screenshot({ path: picture });
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('a 401 token_expired re-mints once and replays the same turn', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, mocked);
    try {
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      mock.attempts = [];
      mock.plan = ['expired', 'stream'];
      mock.deltas = null;
      await sendChat(page, 'replay me');
      const turn = await lastTurn(page);
      assert.equal(turn.reply, 'Hello from the mock.');
      assert.match(turn.status, /^done/);
      assert.equal(mock.attempts.length, 2, 'exactly two attempts');
      const [a, b] = mock.attempts;
      assert.match(a.auth, /^Bearer myra_[0-9a-f]{64}$/);
      assert.match(b.auth, /^Bearer myra_[0-9a-f]{64}$/);
      assert.notEqual(a.auth, b.auth, 'the replay carries a freshly minted token');
      assert.equal(a.body, b.body, 'the same turn is replayed');
      assert.equal(a.path, '/inference/acme/main/v1/chat/completions');
      assert.deepEqual(JSON.parse(a.body), { messages: [{ role: 'user', content: 'replay me' }], stream: true });

      // A second 401 is shown, not looped.
      mock.attempts = [];
      mock.plan = ['expired', 'expired'];
      await sendChat(page, 'twice');
      const refused = await lastTurn(page);
      assert.equal(refused.state, 'token_expired');
      assert.equal(mock.attempts.length, 2);
      assert.equal(await page.inputValue('#pg-draft'), 'twice', 'the draft is kept');
      await h.sleep(300);
      assert.equal(mock.attempts.length, 2, 'no loop');
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('a token with fewer than 3 minutes left is refreshed before the turn (browser clock moved)', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, mocked);
    try {
      await page.clock.install();
      await page.reload();
      await page.click('#tab-playground');
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      const mints = () => problems.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/admin/v1/playground/token')).length;
      await page.click('#pg-mint');
      await h.waitFor(page, () => /expires in (29|30):/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'a token' });
      assert.equal(mints(), 1);
      mock.attempts = [];
      mock.plan = ['stream', 'stream'];
      // Plenty of time left: the turn uses the token it has.
      await sendChat(page, 'fresh token');
      assert.match((await lastTurn(page)).status, /^done/);
      assert.equal(mints(), 1, 'no mint while more than 3 minutes remain');
      // 28 minutes later (the browser's clock): under 3 minutes left, re-mint first.
      await page.clock.fastForward('28:00');
      await h.waitFor(page, () => /expires in 0[01]:/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'the countdown near the end' });
      await sendChat(page, 'stale token');
      await h.waitFor(page, () => document.querySelectorAll('#pg-chat .msg.assistant .status-line').length === 2, undefined, { what: 'the second turn' });
      assert.equal(mints(), 2, 'one mint before the turn');
      assert.equal(mock.attempts.length, 2, 'no refused attempt: the refresh came first');
      assert.notEqual(mock.attempts[0].auth, mock.attempts[1].auth);
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('a session expired during the re-mint shows the typed state; sign-in resumes with the draft kept', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, mocked);
    try {
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      await page.click('#pg-mint');
      await h.waitFor(page, () => /expires in/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'a token' });
      // Revoke the browser's session server-side, from another client.
      const cookie = (await context.cookies()).find((c) => c.name === 'ratatoskr_admin_session');
      assert.ok(cookie && cookie.httpOnly, 'an HttpOnly session cookie');
      const out = await fetch(mocked.url + '/admin/v1/auth/logout', { method: 'POST', headers: { authorization: 'Bearer ' + cookie.value } });
      assert.equal(out.status, 200);
      await page.evaluate(() => { window.__noNavigation = true; });
      const url = page.url();

      mock.attempts = [];
      mock.plan = ['expired'];
      await sendChat(page, 'keep this draft');
      const turn = await lastTurn(page);
      assert.equal(turn.state, 'session_expired');
      assert.equal(mock.attempts.length, 1);
      assert.equal(await page.inputValue('#pg-draft'), 'keep this draft');
      assert.equal(page.url(), url);
      assert.equal(await page.evaluate(() => window.__noNavigation), true, 'no navigation mid-turn');
      const userMsgs = await page.$$eval('#pg-chat .msg.user .text', (n) => n.map((x) => x.textContent));
      assert.deepEqual(userMsgs, ['keep this draft'], 'the conversation is kept');

      // The state's sign-in action works.
      await page.click('#pg-chat .pg-signin-again');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'pg-email');
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      mock.plan = ['stream'];
      await page.click('#pg-send');
      const resumed = await lastTurn(page);
      assert.match(resumed.status, /^done/);
      assert.equal(await page.$$eval('#pg-chat .msg.user', (n) => n.length), 2);
      assert.equal(await page.locator('#pg-chat [data-error-code="session_expired"]').count(), 1, 'the earlier state stays in the conversation');
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('search probe: non-EU, EU, EU-gate refusal, feature_disabled, no stored key; only http(s) links', async () => {
    const { context, page, problems } = await openPlayground(browser, mocked);
    try {
      await signIn(page, 'platform@demo.test');
      const us = await probe(page, 'gw_acme_main', 'rust');
      assert.equal(us.state, null);
      assert.match(us.meta, /provider brave · EU gate: not enforced/);
      assert.deepEqual(us.results.map((r) => r.link), [
        { href: 'https://example.test/a?b=1', rel: 'noopener noreferrer' }, null, null,
        { href: 'http://example.test/b', rel: 'noopener noreferrer' },
      ]);
      assert.equal(us.results[1].url, 'javascript:window.__xss=1', 'shown as text');

      const eu = await probe(page, 'gw_euco_eu-linkup', 'residency');
      assert.equal(eu.state, null, eu.text);
      assert.match(eu.meta, /provider linkup · EU gate: enforced, passed/);
      assert.ok(eu.results.length >= 1 && eu.results.length <= 5);

      const refused = await probe(page, 'gw_euco_eu-brave', 'residency');
      assert.equal(refused.state, 'eu_gate_refused');
      assert.match(refused.text, /EU gate: refused — .*eu_region_routing/);
      const frozen = await probe(page, 'gw_frozen_main', 'x');
      assert.equal(frozen.state, 'feature_disabled');
      const nokey = await probe(page, 'gw_acme_nokey', 'x');
      assert.equal(nokey.state, 'search_key_missing');
      assert.match(nokey.text, /No stored web-search key/);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('trace viewer: tenant admin reads, member gets 403, unknown is 404', async () => {
    const { context, page, problems } = await openPlayground(browser, real);
    try {
      await signIn(page, 'admin@acme.test');
      const t = await openTrace(page, 'trc_acme_main_3');
      assert.equal(t.state, null);
      assert.equal(t.steps.length, 12);
      assert.ok(t.steps.every((s) => s.collapsed && /^\+\d+ ms · \d+ ms$/.test(s.timing)));
      assert.ok(t.steps.every((s) => { JSON.parse(s.data); return true; }));
      const missing = await openTrace(page, 'trc_nope');
      assert.equal(missing.state, 'trace_not_found');
      await page.click('#pg-signout');
      await signIn(page, 'member@acme.test');
      const forbidden = await openTrace(page, 'trc_acme_main_1');
      assert.equal(forbidden.state, 'insufficient_role');
      assert.match(forbidden.text, /^Forbidden/);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('XSS corpus through provider results and chat output (mocks) stays text', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, mocked);
    try {
      await signIn(page, 'admin@acme.test');
      for (let k = 0; k * 5 < P.length; k++) {
        const r = await probe(page, 'gw_acme_main', 'xss-' + k);
        const expected = P.slice(k * 5, k * 5 + 5);
        // Titles and snippets are the API's plain text: the payload itself, its
        // whitespace and control-character runs collapsed.
        assert.deepEqual(r.results.map((x) => x.title), expected.map(plainText), `titles of batch ${k}`);
        assert.deepEqual(r.results.map((x) => x.snippet), expected.map(plainText), `snippets of batch ${k}`);
        assert.deepEqual(r.results.map((x) => x.url), expected, `urls of batch ${k}`);
        assert.deepEqual(await foreignMarkup(page), [], `markup of batch ${k}`);
      }
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      mock.plan = ['stream'];
      mock.deltas = P.map((p) => p + '\n');
      await sendChat(page, P[0]);
      const turn = await lastTurn(page);
      mock.deltas = null;
      assert.match(turn.status, /^done/);
      assert.equal(turn.reply, P.map((p) => p + '\n').join(''));
      assert.equal(await page.textContent('#pg-chat .msg.user .text'), P[0]);
      assert.deepEqual(await foreignMarkup(page), []);
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('XSS corpus through a real turn and its trace step data stays text', async () => {
    const { context, page, problems, consoleAll } = await openPlayground(browser, real);
    try {
      await signIn(page, 'admin@acme.test');
      await page.selectOption('#pg-gateway', 'gw_acme_main');
      const prompt = P.filter((p) => !p.includes('\0')).join('\n');
      await sendChat(page, prompt);
      const turn = await lastTurn(page);
      assert.match(turn.status || '', /^done/, JSON.stringify(turn));
      await page.click('#pg-chat .pg-open-trace');
      await h.waitFor(page, () => document.querySelector('#pg-trace-out .timeline li'), undefined, { what: 'the turn trace' });
      const steps = await page.$$eval('#pg-trace-out .pg-step', (n) => n.map((x) => ({
        name: x.querySelector('.pg-step-name').textContent, data: x.querySelector('.pg-step-data').textContent })));
      const request = steps.find((s) => s.name === 'model.request');
      assert.ok(request, steps.map((s) => s.name).join());
      // A textarea normalises line breaks to LF and the console trims the draft.
      const sent = prompt.replace(/\r\n?/g, '\n').trim();
      assert.equal(JSON.parse(request.data).prompt, sent, 'the prompt reads back literally');
      assert.ok(request.data.includes(JSON.stringify(sent)), 'as escaped JSON text');
      // Expand every step: still only text.
      await page.$$eval('#pg-trace-out details', (d) => d.forEach((x) => { x.open = true; }));
      await h.sleep(100);
      assert.deepEqual(await foreignMarkup(page), []);
      await assertNoTokenLeak(page, consoleAll);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
