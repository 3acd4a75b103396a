'use strict';
// The two views on the built-in simulator: each
// view's composer fills its pane at every width the console supports; the
// header shows each view's own controls only (hidden ones out of the tab
// order); the view is kept in the URL fragment across reloads and back/forward.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');

// Expected refusals Chromium logs as load errors: no affect snapshot yet; the
// Playground asks who is signed in (nobody: 401).
const EXPECTED = [{ path: /^\/api\/affect\?agent_id=\w+$/, status: 404 }, { path: /^\/admin\/v1\/auth\/me$/, status: 401 }];
// The console-only controls of the header.
const CONSOLE_BAR = ['#agent-select', '#start-session', '#session-id', '#bifrost-host'];

/**
 * How much of its row a composer's message box takes: the box's width over the
 * pane's content width less the buttons beside it (so 1 is all the room there is),
 * and the form's width over the pane's content width.
 */
async function composerFill(page, id) {
  return page.evaluate((id) => {
    const box = document.getElementById(id);
    const form = box.closest('form');
    const pane = box.closest('.pane');
    const cs = getComputedStyle(pane);
    const content = pane.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const r = box.getBoundingClientRect();
    const beside = [...form.querySelectorAll('button')].map((b) => b.getBoundingClientRect())
      .filter((b) => b.width > 0 && b.top < r.bottom && b.bottom > r.top)
      .reduce((w, b) => w + b.width, 0);
    return {
      row: +(r.width / (content - beside)).toFixed(3),
      form: +(form.getBoundingClientRect().width / content).toFixed(3),
      box: Math.round(r.width),
      pane: Math.round(content),
    };
  }, id);
}

/**
 * Tabs from the page's first stop (the Console tab: focused directly, as a blur
 * would leave Tab's starting point where focus was) until `stop` has focus; the ids seen.
 */
async function tabOrder(page, stop, n = 20) {
  await page.focus('#tab-console');
  const order = ['tab-console'];
  for (let i = 0; i < n && !order.includes(stop); i += 1) {
    await page.keyboard.press('Tab');
    order.push(await page.evaluate(() => document.activeElement.id || document.activeElement.tagName));
  }
  return order;
}

async function visibleView(page) {
  return page.evaluate(() => ({
    console: !document.getElementById('console-view').hidden,
    playground: !document.getElementById('playground-view').hidden,
    pressed: ['tab-console', 'tab-playground'].filter((id) => document.getElementById(id).getAttribute('aria-pressed') === 'true'),
    hash: location.hash,
  }));
}

/** Runs before the console's script: which view each of the first three frames shows. */
function FRAME_PROBE() {
  if (window.__frames) return;
  const frames = [];
  Object.defineProperty(window, '__frames', { value: frames });
  const look = () => {
    const shown = (id) => { const node = document.getElementById(id); return node ? !node.hidden : null; };
    frames.push({ console: shown('console-view'), playground: shown('playground-view') });
    if (frames.length < 3) requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
}

async function consoleBarVisible(page) {
  const shown = [];
  for (const sel of CONSOLE_BAR) if (await page.isVisible(sel)) shown.push(sel);
  return shown;
}

describe('the two views (simulator)', () => {
  let host;
  let browser;

  h.suiteSetup(async (own) => {
    host = own(await h.startHost({ variables: { admin_key: h.randomKey() } }));
    browser = own(await h.launchBrowser());
  });

  test('each composer fills its pane at 1400x900 and at 420x800', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { viewport: { width: 1400, height: 900 }, allowNetworkErrors: EXPECTED });
    try {
      for (const size of [{ width: 1400, height: 900 }, { width: 420, height: 800 }]) {
        await page.setViewportSize(size);
        await page.click('#tab-console');
        // The tab sets the fragment; the view changes on hashchange, a task later:
        // measured before it, the console is still hidden and its box 0 px wide.
        await h.waitFor(page, () => !document.getElementById('console-view').hidden, undefined, { what: 'the console view' });
        const con = await composerFill(page, 'message');
        await page.click('#tab-playground');
        await h.waitFor(page, () => !document.getElementById('playground-view').hidden, undefined, { what: 'the playground view' });
        const pg = await composerFill(page, 'pg-draft');
        for (const [view, m] of [['console', con], ['playground', pg]]) {
          assert.ok(m.row >= 0.9, `${view} at ${size.width} px: the message box takes ${m.box} px of its row (${JSON.stringify(m)})`);
          assert.ok(m.form >= 0.98, `${view} at ${size.width} px: the composer spans its pane (${JSON.stringify(m)})`);
        }
        if (size.width === 1400) await h.screenshot(page, '13-playground-1400');
      }
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('a page opened on #playground shows the Playground from its first frame', async () => {
    // The console's modules block rendering until they have run: the view the
    // fragment names is drawn first, never a frame of the console before it.
    const { page, problems, context } = await h.openConsole(browser, host.url, { path: '/#playground', allowNetworkErrors: EXPECTED, initScripts: [FRAME_PROBE] });
    try {
      await h.waitFor(page, () => window.__frames.length >= 3, undefined, { what: 'three frames' });
      const playground = { console: false, playground: true };
      assert.deepEqual(await page.evaluate(() => window.__frames), [playground, playground, playground]);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('the header shows each view\'s own controls; the view is in the URL fragment (reload, back/forward)', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { allowNetworkErrors: EXPECTED });
    try {
      assert.deepEqual(await consoleBarVisible(page), CONSOLE_BAR, 'the console shows its controls');
      assert.deepEqual(await tabOrder(page, 'start-session'), ['tab-console', 'tab-playground', 'agent-select', 'start-session']);

      // Into the Playground by keyboard: the console's controls go, and leave the tab order.
      await page.focus('#tab-playground');
      await page.keyboard.press('Enter');
      await h.waitFor(page, () => !document.getElementById('playground-view').hidden, undefined, { what: 'the playground view' });
      assert.deepEqual(await visibleView(page), { console: false, playground: true, pressed: ['tab-playground'], hash: '#playground' });
      assert.deepEqual(await consoleBarVisible(page), [], 'no console control shows in the Playground');
      const order = await tabOrder(page, 'pg-login');
      assert.deepEqual(order, ['tab-console', 'tab-playground', 'pg-email', 'pg-password', 'pg-login'], 'the Playground\'s tab order');

      // A reload with the fragment returns to the same view.
      await page.reload();
      await h.waitFor(page, () => document.querySelectorAll('#agent-select option').length > 0 && !document.getElementById('pg-login-form').hidden,
        undefined, { what: 'the reloaded page' });
      assert.deepEqual(await visibleView(page), { console: false, playground: true, pressed: ['tab-playground'], hash: '#playground' });
      assert.deepEqual(await consoleBarVisible(page), []);
      assert.deepEqual(await tabOrder(page, 'pg-email'), ['tab-console', 'tab-playground', 'pg-email']);

      // Back to the console with its tab: its controls are shown and reachable again.
      await page.click('#tab-console');
      await h.waitFor(page, () => !document.getElementById('console-view').hidden, undefined, { what: 'the console view' });
      assert.deepEqual(await visibleView(page), { console: true, playground: false, pressed: ['tab-console'], hash: '#console' });
      assert.deepEqual(await consoleBarVisible(page), CONSOLE_BAR);
      assert.deepEqual(await tabOrder(page, 'start-session'), ['tab-console', 'tab-playground', 'agent-select', 'start-session']);

      // Back and forward move between the views.
      await page.goBack();
      await h.waitFor(page, () => !document.getElementById('playground-view').hidden, undefined, { what: 'back to the playground' });
      assert.deepEqual(await visibleView(page), { console: false, playground: true, pressed: ['tab-playground'], hash: '#playground' });
      assert.deepEqual(await consoleBarVisible(page), []);
      await page.goForward();
      await h.waitFor(page, () => !document.getElementById('console-view').hidden, undefined, { what: 'forward to the console' });
      assert.deepEqual(await visibleView(page), { console: true, playground: false, pressed: ['tab-console'], hash: '#console' });
      assert.deepEqual(await consoleBarVisible(page), CONSOLE_BAR);

      // An unknown fragment is the console.
      await page.goto(host.url + '/#nowhere');
      await page.reload();
      await h.waitFor(page, () => document.querySelectorAll('#agent-select option').length > 0, undefined, { what: 'the console' });
      assert.deepEqual(await visibleView(page), { console: true, playground: false, pressed: ['tab-console'], hash: '#nowhere' });
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
