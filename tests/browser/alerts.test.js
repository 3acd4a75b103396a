'use strict';
// Alerts while the tab is hidden (docs/alerts.md), in Chromium against the mock
// upstream: the page's visibility is made "hidden" by an init script, and the real
// Notification constructor is wrapped by another that records each call and forwards
// it (nothing is stubbed: the page calls the browser's own Notification).

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');

const STALL_MS = 400;
// For a test that is not about stalls: a turn that is slow to start on a busy machine
// must not add a stall alert of its own.
const NO_STALL_MS = 600000;
const AFFECT_404 = { path: /^\/api\/affect\?agent_id=\w+$/, status: 404 };

// Before the page's own script: a visibility the test sets, and the recording wrapper.
function observe() {
  window.__hidden = false;
  Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => (window.__hidden ? 'hidden' : 'visible') });
  Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => window.__hidden });
  window.__notifications = [];
  window.__permissionRequests = 0;
  const Real = window.Notification;
  class Recorded extends Real {
    constructor(title, options) {
      window.__notifications.push({ title, body: options && options.body, tag: options && options.tag });
      super(title, options);
    }
    static get permission() { return Real.permission; }
    static requestPermission(...args) { window.__permissionRequests += 1; return Real.requestPermission(...args); }
  }
  window.Notification = Recorded;
}

function scenario() {
  return {
    agents: [{ agent_id: 'stally', display_name: 'Stally' }, { agent_id: 'dropper', display_name: 'Dropper' }],
    tools: (session) => ({ session_id: session.session_id, agent_id: session.agent_id, tools: [] }),
    bifrost: (session) => ({
      session_id: session.session_id, agent_id: session.agent_id, endpoint: 'http://mock.invalid/v1', model: 'm', caps: {},
      tools: [], bound_at: '2026-11-01T09:00:00Z', inflight_turns: 0, last_dispatch: null,
    }),
    affect: () => ({ status: 404 }),
    adminEvents: (session) => [{ type: 'session.created', data: { session_id: session.session_id } }],
    adminEnds: (session) => session.agent_id === 'dropper',
    async turn(ctx) {
      ctx.send('thinking', { delta: 'hm' });
      if (ctx.text === 'stall then fail') await ctx.sleep(STALL_MS * 4);
      ctx.send('error', { code: 'model_overloaded', message: 'try later' });
    },
  };
}

const setHidden = (page, hidden) => page.evaluate((v) => { window.__hidden = v; document.dispatchEvent(new Event('visibilitychange')); }, hidden);
const notifications = (page) => page.evaluate(() => window.__notifications.slice());

async function sendAndWait(page, text) {
  await page.fill('#message', text);
  await page.click('#send');
  return h.waitForTerminal(page);
}

describe('alerts while the tab is hidden (mock upstream)', () => {
  let mock;
  let host;
  let browser;

  h.suiteSetup(async (own) => {
    mock = own(await new MockUpstream(scenario()).start());
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  test('granted once from the Alerts button: a stall and an error while hidden notify and mark the title, nothing while visible', async () => {
    const { context, page, problems } = await h.openConsole(browser, host.url, { path: '/?stall_ms=' + STALL_MS, initScripts: [observe], allowNetworkErrors: [AFFECT_404] });
    try {
      const baseTitle = await page.title();
      assert.equal(await page.textContent('#alerts-toggle'), 'Alerts: off');
      await context.grantPermissions(['notifications'], { origin: host.url });
      await page.click('#alerts-toggle');
      await h.waitFor(page, () => document.getElementById('alerts-toggle').textContent === 'Alerts: on', undefined, { what: 'alerts on' });
      assert.equal(await page.evaluate(() => window.__permissionRequests), 0, 'already granted: not asked again');
      await h.startSession(page, 'stally');
      // Visible: an error turn raises nothing.
      assert.equal((await sendAndWait(page, 'fail at once')).kind, 'error');
      assert.deepEqual(await notifications(page), []);
      assert.equal(await page.title(), baseTitle);
      // Hidden: the stall, then the error, each once.
      await setHidden(page, true);
      assert.equal((await sendAndWait(page, 'stall then fail')).kind, 'error');
      const notes = await notifications(page);
      assert.deepEqual(notes.map((n) => n.title), ['ratatoskr: turn stalled', 'ratatoskr: turn ended in error']);
      assert.match(notes[1].body, /^error model_overloaded · session s_[0-9a-f]+$/);
      assert.notEqual(notes[0].tag, notes[1].tag);
      assert.equal(await page.title(), '(2) ⚠ turn ended in error · ' + baseTitle);
      const raised = await page.evaluate(() => window.ratatoskrConsole.alerts.raised);
      assert.deepEqual(raised.map((a) => [a.kind, a.notified]), [['stall', true], ['error', true]]);
      // Shown again: the title is back.
      await setHidden(page, false);
      assert.equal(await page.title(), baseTitle);
      // The admin stream ends with stream_error while hidden: one alert for it.
      await setHidden(page, true);
      await h.startSession(page, 'dropper');
      await h.waitFor(page, () => window.__notifications.length === 3, undefined, { what: 'the stream_error notification' });
      const last = (await notifications(page))[2];
      assert.equal(last.title, 'ratatoskr: admin stream ended');
      assert.match(last.body, /^stream_error connection_dropped · session s_/);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('off until allowed: without the permission no Notification is made, and the title still says it', async () => {
    const { context, page, problems } = await h.openConsole(browser, host.url, { path: '/?stall_ms=' + NO_STALL_MS, initScripts: [observe], allowNetworkErrors: [AFFECT_404] });
    try {
      const baseTitle = await page.title();
      await h.startSession(page, 'stally');
      await setHidden(page, true);
      assert.equal((await sendAndWait(page, 'fail at once')).kind, 'error');
      assert.deepEqual(await notifications(page), [], 'never allowed: no notification');
      assert.equal(await page.evaluate(() => window.__permissionRequests), 0, 'never asked without the button');
      assert.equal(await page.title(), '(1) ⚠ turn ended in error · ' + baseTitle);
      assert.deepEqual((await page.evaluate(() => window.ratatoskrConsole.alerts.raised)).map((a) => a.notified), [false]);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
