'use strict';
// No layout shift: the console's panes keep their geometry
// while the page loads and while a session and a full turn on the simulator fill
// them (agent list, tools, BifrostState, admin events, the transcript, the
// delayed affect snapshot). Measured as the page sees it: a PerformanceObserver
// of 'layout-shift' entries (buffered, so from the first paint on), summing the
// values of entries without hadRecentInput, at 1280x800 and 420x800.
//
// The page is driven without trusted input (DOM clicks and requestSubmit()), so
// no shift is excused as following a user's input: every shift counts.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');

const LIMIT = 0.1;
const AFFECT_404 = [{ path: /^\/api\/affect\?agent_id=\w+$/, status: 404 }];

/** Runs before the console's script: records every layout shift with what moved. */
function LAYOUT_SHIFT_OBSERVER() {
  if (window.__shifts) return;
  const shifts = [];
  Object.defineProperty(window, '__shifts', { value: shifts });
  const name = (node) => {
    if (!node || node.nodeType !== 1) return node ? '#text' : '?';
    return node.tagName.toLowerCase() + (node.id ? '#' + node.id : '') + (node.className && typeof node.className === 'string' ? '.' + node.className.trim().split(/\s+/).join('.') : '');
  };
  const box = (r) => (r ? [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)].join(',') : '');
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      shifts.push({
        value: e.value, hadRecentInput: e.hadRecentInput, at: Math.round(e.startTime),
        sources: (e.sources || []).map((s) => name(s.node) + ' ' + box(s.previousRect) + ' -> ' + box(s.currentRect)),
      });
    }
  }).observe({ type: 'layout-shift', buffered: true });
}

/** The shifts so far: their sum (without hadRecentInput) and the larger ones, described. */
async function shiftsSince(page, fromMs = 0) {
  return page.evaluate((from) => {
    const counted = window.__shifts.filter((s) => !s.hadRecentInput && s.at >= from);
    return {
      sum: counted.reduce((a, s) => a + s.value, 0),
      count: counted.length,
      excused: window.__shifts.filter((s) => s.hadRecentInput).length,
      worst: counted.slice().sort((a, b) => b.value - a.value).slice(0, 5).map((s) => `${s.value.toFixed(4)} at ${s.at} ms: ${s.sources.join(' | ')}`),
    };
  }, fromMs);
}

/** Lets pending fetches land and the page paint (layout-shift entries come after a frame). */
async function settle(page, ms = 600) {
  await h.sleep(ms);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

describe('layout shift (simulator)', () => {
  let host;
  let browser;

  h.suiteSetup(async (own) => {
    host = own(await h.startHost({ variables: { admin_key: h.randomKey() } }));
    browser = own(await h.launchBrowser());
  });

  for (const viewport of [{ width: 1280, height: 800 }, { width: 420, height: 800 }]) {
    test(`cumulative layout shift stays under ${LIMIT} from load through a full turn at ${viewport.width}x${viewport.height}`, async (t) => {
      const { page, problems, context } = await h.openConsole(browser, host.url, {
        viewport, allowNetworkErrors: AFFECT_404, initScripts: [LAYOUT_SHIFT_OBSERVER],
      });
      try {
        // Load: the config answer (agent list, bifrost host, admin badge) has landed.
        await settle(page);
        const load = await shiftsSince(page);
        const sessionFrom = await page.evaluate(() => performance.now());

        // A session (no trusted input): tools, BifrostState, the admin stream, affect.
        await page.selectOption('#agent-select', 'sindra');
        await page.evaluate(() => document.getElementById('start-session').click());
        await h.waitFor(page, () => document.getElementById('session-id').textContent.startsWith('s_') && !document.getElementById('message').disabled,
          undefined, { what: 'the session' });
        await h.waitFor(page, () => /3 tools available/.test(document.querySelector('#tools .tools-inventory').textContent), undefined, { what: 'the tools inventory' });
        await h.waitFor(page, () => document.querySelector('#bifrost dl.kv'), undefined, { what: 'the BifrostState pane' });
        await h.waitFor(page, () => document.getElementById('admin-light').classList.contains('live'), undefined, { what: 'the admin stream' });

        // A full turn: reasoning, text, tool calls, done, then the delayed affect emit.
        await page.evaluate(() => {
          document.getElementById('message').value = 'How windy is it in Trondheim today?';
          document.getElementById('composer').requestSubmit();
        });
        const end = await h.waitForTerminal(page);
        assert.equal(end.kind, 'done', end.text);
        await h.waitForPanesAfterTurn(page);
        await settle(page);
        const turn = await shiftsSince(page, sessionFrom);
        const total = await shiftsSince(page);
        t.diagnostic(`${viewport.width}x${viewport.height}: load ${load.sum.toFixed(4)} (${load.count} shifts), session + turn ${turn.sum.toFixed(4)} (${turn.count}), total ${total.sum.toFixed(4)}; ${total.excused} excused by input`);
        await h.screenshot(page, `24-layout-shift-${viewport.width}`);

        assert.equal(total.excused, 0, 'no shift is excused as following input: the test gives none');
        assert.ok(load.sum < LIMIT, `layout shift while loading: ${load.sum.toFixed(4)}\n${load.worst.join('\n')}`);
        assert.ok(total.sum < LIMIT, `layout shift from load through a full turn: ${total.sum.toFixed(4)}\n${total.worst.join('\n')}`);
        await h.assertClean(assert, page, problems);
      } finally {
        await context.close();
      }
    });
  }
});
