'use strict';
// Accessibility: axe-core (pinned in package.json) over
// every view and state of the console the browser tests reach, wide (1280x800)
// and narrow (420x800): WCAG 2.0/2.1/2.2 A and AA plus axe's best practices,
// and ZERO violations of any impact.
//
// axe is injected with page.evaluate() of node_modules/axe-core/axe.min.js: it
// runs over CDP (Runtime.evaluate), which the page's CSP (script-src by hash)
// does not govern, so the context keeps its CSP (no bypassCSP) and the
// instrumentation still sees any violation axe itself would cause.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const h = require('./lib/harness');

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const AXE_VERSION = require('axe-core/package.json').version;
const TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa', 'best-practice'];
const WIDE = { width: 1280, height: 800 };
const NARROW = { width: 420, height: 800 };
const DEMO_PASSWORD = 'pw-' + crypto.randomBytes(8).toString('hex');
// Expected refusals Chromium logs as load errors: no affect snapshot yet; nobody
// signed in to the Playground yet.
const EXPECTED = [{ path: /^\/api\/affect\?agent_id=\w+$/, status: 404 }, { path: /^\/admin\/v1\/auth\/me$/, status: 401 }];

/** axe over the whole document: its violations as "rule (impact): targets". */
async function axe(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async (tags) => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return { version: window.axe.version, violations: r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) })) };
  }, TAGS);
  assert.equal(result.version, AXE_VERSION);
  return result.violations;
}

/**
 * axe's scrollable-region-focusable only looks at what overflows right now; this
 * looks at every shown element that may scroll (overflow auto/scroll), whatever
 * its content: each must be a tab stop or hold one, and a tab stop of its own
 * needs an accessible name (a role that takes one, and aria-label).
 */
async function unreachableScrollers(page) {
  return page.evaluate(() => {
    const FOCUSABLE = 'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])';
    const bad = [];
    for (const node of document.body.querySelectorAll('*')) {
      if (['TEXTAREA', 'SELECT', 'INPUT'].includes(node.tagName) || !node.getClientRects().length) continue;
      const cs = getComputedStyle(node);
      if (!/(auto|scroll)/.test(cs.overflowY + ' ' + cs.overflowX)) continue;
      const name = node.id ? '#' + node.id : node.tagName.toLowerCase() + '.' + node.className;
      if (node.matches('[tabindex="0"]')) {
        if (!node.getAttribute('aria-label') || !(node.getAttribute('role') || ['OL', 'UL'].includes(node.tagName))) bad.push(name + ' (a tab stop without a role and name)');
      } else if (![...node.querySelectorAll(FOCUSABLE)].some((f) => f.getClientRects().length)) {
        bad.push(name + ' (no tab stop)');
      }
    }
    return bad;
  });
}

/**
 * Runs axe (and the scroller check) at each size; collects violations under the
 * state's name. Both sizes are checked in one page, so the state is the same.
 */
async function check(page, found, state, sizes = [WIDE, NARROW]) {
  for (const size of sizes) {
    await page.setViewportSize(size);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    for (const v of await axe(page)) found.push(`${state} @${size.width}: ${v.id} (${v.impact}): ${v.targets.join(', ')}`);
    for (const s of await unreachableScrollers(page)) found.push(`${state} @${size.width}: a scrolling element out of keyboard reach: ${s}`);
  }
}

function report(t, found, states) {
  t.diagnostic(`axe ${AXE_VERSION} over ${states} states, wide and narrow: ${found.length} violations`);
  for (const f of found) t.diagnostic(f);
}

describe('accessibility: axe-core over both views', () => {
  let host;
  let browser;

  h.suiteSetup(async (own) => {
    host = own(await h.startHost({ variables: { admin_key: h.randomKey(), seed_demo_data: 'true', demo_password: DEMO_PASSWORD } }));
    browser = own(await h.launchBrowser());
  });

  test('the console: before a session, after a real turn (every pane), the timeline open, an imported recording', async (t) => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { allowNetworkErrors: EXPECTED });
    const found = [];
    try {
      await check(page, found, 'console before a session');

      // A real turn on the simulator; every pane filled (affect after its delayed emit).
      await h.startSession(page, 'sindra');
      await h.waitFor(page, () => /3 tools available/.test(document.querySelector('#tools .tools-inventory').textContent), undefined, { what: 'the tools inventory' });
      await h.waitFor(page, () => document.querySelector('#bifrost dl.kv'), undefined, { what: 'the BifrostState pane' });
      await h.waitFor(page, () => document.getElementById('admin-light').classList.contains('live'), undefined, { what: 'the admin stream' });
      await check(page, found, 'console, session started');
      await h.sendWithEnter(page, 'How windy is it in Trondheim today?');
      await h.waitFor(page, () => document.querySelector('.thinking-note, #transcript .awaiting'), undefined, { what: 'the turn under way' });
      await check(page, found, 'console, turn under way', [WIDE]);
      const end = await h.waitForTerminal(page);
      assert.equal(end.kind, 'done', end.text);
      await h.waitForPanesAfterTurn(page);
      // A second turn, so the transcript and the event lists overflow their panes.
      await h.sendWithEnter(page, 'And tomorrow, in Bergen? Please answer at length.');
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await check(page, found, 'console after two turns');

      // The flight recorder's timeline, every tool call and reasoning opened; admin events filtered and paused.
      await page.evaluate(() => { for (const d of document.querySelectorAll('#transcript details')) d.open = true; });
      await page.fill('#admin-filter', 'turn');
      await page.click('#admin-pause');
      await check(page, found, 'console, timelines and details open, admin events filtered and paused');
      await page.click('#admin-pause');
      await page.fill('#admin-filter', '');

      // The recording exported, then imported: the read-only replay of every pane.
      const doc = await page.evaluate(() => window.ratatoskrConsole.flight.buildExport());
      await page.setInputFiles('#import-file', { name: 'session.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(doc), 'utf8') });
      await h.waitFor(page, () => window.ratatoskrConsole.flight.replaying && !document.getElementById('replay-banner').hidden, undefined, { what: 'the replay' });
      await check(page, found, 'console, imported recording');
      // A refused import: its typed error above the transcript.
      await page.setInputFiles('#import-file', { name: 'bad.json', mimeType: 'application/json', buffer: Buffer.from('{"format":"nope"}', 'utf8') });
      await h.waitFor(page, () => !document.getElementById('import-error').hidden, undefined, { what: 'the import refusal' });
      await check(page, found, 'console, import refused');
      await page.click('#replay-close');
      await h.waitFor(page, () => !window.ratatoskrConsole.flight.replaying, undefined, { what: 'the replay left' });
      await check(page, found, 'console, recording left');

      report(t, found, 8);
      assert.deepEqual(found, [], 'axe violations in the console');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('the Playground: signed out, a refused sign-in, signed in (demo world) with a mint, a chat, a search and a trace open', async (t) => {
    const { page, problems, context } = await h.openConsole(browser, host.url, {
      allowNetworkErrors: [...EXPECTED, ...[400, 401, 403, 404].map((status) => ({ path: /^\/admin\/v1\//, status }))],
    });
    const found = [];
    try {
      await page.click('#tab-playground');
      await h.waitFor(page, () => !document.getElementById('playground-view').hidden && !document.getElementById('pg-login-form').hidden,
        undefined, { what: 'the Playground, signed out' });
      await check(page, found, 'playground signed out');

      await page.fill('#pg-email', 'admin@acme.test');
      await page.fill('#pg-password', 'not-the-password');
      await page.click('#pg-login');
      await h.waitFor(page, () => document.getElementById('pg-login-error').textContent !== '', undefined, { what: 'the refusal' });
      await check(page, found, 'playground, sign-in refused');

      await page.fill('#pg-email', 'admin@acme.test');
      await page.fill('#pg-password', DEMO_PASSWORD);
      await page.click('#pg-login');
      await h.waitFor(page, () => !document.getElementById('pg-who').hidden && document.querySelectorAll('#pg-gateway option').length > 0,
        undefined, { what: 'signed in' });
      await check(page, found, 'playground signed in');

      await page.selectOption('#pg-gateway', 'gw_acme_main');
      await page.click('#pg-mint');
      await h.waitFor(page, () => /expires in/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'a token' });
      for (const text of ['Hello playground', 'A second question, so the chat scrolls', 'And a third one']) {
        const before = await page.$$eval('#pg-chat .status-line', (n) => n.length);
        await page.fill('#pg-draft', text);
        await page.click('#pg-send');
        await h.waitFor(page, (n) => document.querySelectorAll('#pg-chat .status-line, #pg-chat .pg-state').length > n, before,
          { timeout: 20_000, what: 'the chat turn' });
      }
      await page.fill('#pg-q', 'rust');
      await page.click('#pg-search');
      await h.waitFor(page, () => document.querySelector('#pg-search-out .pg-search-meta, #pg-search-out .pg-state'), undefined, { what: 'the search probe' });
      await page.click('#pg-chat .pg-open-trace');
      await h.waitFor(page, () => document.querySelector('#pg-trace-out .timeline li'), undefined, { what: 'the trace' });
      await page.evaluate(() => { for (const d of document.querySelectorAll('#pg-trace-out details')) d.open = true; });
      await check(page, found, 'playground: token, chat, search, trace open');

      // An unknown trace: the typed state.
      await page.fill('#pg-trace-id', 'trc_nope');
      await page.click('#pg-trace-open');
      await h.waitFor(page, () => document.querySelector('#pg-trace-out .pg-state'), undefined, { what: 'the trace refusal' });
      await check(page, found, 'playground, trace not found');

      report(t, found, 5);
      assert.deepEqual(found, [], 'axe violations in the Playground');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
