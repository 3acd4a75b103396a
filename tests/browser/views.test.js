'use strict';
// The two views (issue 13, point 2) on the built-in simulator: each view's
// composer fills its pane at every width the console supports.

const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');

// Expected refusals Chromium logs as load errors: no affect snapshot yet; the
// Playground asks who is signed in (nobody: 401).
const EXPECTED = [{ path: /^\/api\/affect\?agent_id=\w+$/, status: 404 }, { path: /^\/admin\/v1\/auth\/me$/, status: 401 }];

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

describe('the two views (simulator)', () => {
  let host;
  let browser;

  before(async () => {
    host = await h.startHost({ variables: { admin_key: h.randomKey() } });
    browser = await h.launchBrowser();
  });

  after(async () => {
    if (browser) await browser.close();
    if (host) await host.stop();
  });

  test('each composer fills its pane at 1400x900 and at 420x800', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { viewport: { width: 1400, height: 900 }, allowNetworkErrors: EXPECTED });
    try {
      for (const size of [{ width: 1400, height: 900 }, { width: 420, height: 800 }]) {
        await page.setViewportSize(size);
        await page.click('#tab-console');
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
});
