'use strict';
// Bidirectional controls in upstream strings: U+202E
// RIGHT-TO-LEFT OVERRIDE and friends must not reorder the console's own words on
// the same line. A scripted mock upstream puts them into the transcript, the
// Tools pane, BifrostState, AdminEvents and the affect pane; each upstream run
// must be a bidi isolate that holds none of the console's words, and those words
// must still read left to right on screen.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');

const RLO = '\u202E';
// A bare override, and the ways out of a naive isolate (an isolate of its own
// closed early by a PDI, or a paragraph separator), each followed by an override.
const A = {
  rlo: 'gnp' + RLO + 'exe.txt',
  pdi: 'x\u2069' + RLO + 'evil',
  pdis: '\u2069\u2069\u2069' + RLO + 'evil',
  ps: 'y\u2029' + RLO + 'evil',
  mix: '\u202B\u202Dz\u202C\u2067w\u2066v\u2068u\u200F\u200E' + RLO + 'q',
};
const NAME = 'Sindra' + RLO + 'evil';

function scenario() {
  return {
    agents: [{ agent_id: 'bidi', display_name: NAME }],
    tools: (session) => ({ session_id: session.session_id, agent_id: 'bidi', tools: [{ name: A.pdi, description: 'd' }, { name: A.rlo, description: 'd' }] }),
    bifrost: (session) => ({
      session_id: session.session_id, agent_id: A.rlo, endpoint: 'http://mock.invalid/v1', model: A.ps,
      caps: { [A.pdi]: A.rlo, b: 1 }, tools: [{ name: A.pdis, description: A.rlo }],
      bound_at: '2026-11-01T09:00:00Z', inflight_turns: 0,
      last_dispatch: { turn_id: A.pdi, latency_ms: A.rlo, status: A.ps },
    }),
    affect: () => ({ agent_id: A.pdi, emitted_at: A.rlo, pad: { pleasure: 0.1, arousal: 0.1, dominance: 0.1 } }),
    adminEvents: (session) => [{ type: A.pdis, data: { session_id: session.session_id, timestamp: A.mix } }],
    async turn(ctx) {
      if (ctx.text === 'tools') {
        ctx.send('thinking', { delta: A.rlo });
        await ctx.sleep(1500); // the reasoning line stays up meanwhile
        ctx.send('tool_call', { call_id: 'c1', name: A.pdi, arguments: { q: A.rlo } });
        ctx.send('tool_result', { call_id: 'c1', name: A.pdi, output: A.rlo, is_error: true });
        ctx.send('text', { delta: A.rlo });
        ctx.send('done', { turn_id: ctx.turnId, usage: { input_tokens: 1, output_tokens: A.ps }, finish_reason: A.pdis });
        return;
      }
      ctx.send('error', { code: A.pdis, message: A.mix });
    },
  };
}

/**
 * In the page: `line` is the element of one visual line, `run` the upstream text
 * in it and `label` a word of the console's own on that line, after the run.
 * The run must sit in an isolate (unicode-bidi: isolate, or a <bdi>) that holds
 * all of it (each of its bidi controls inside an isolate within) and not the
 * label; the label must read left to right and stand to the right of the run.
 */
function audit({ selector, run, label }) {
  const isolated = (e) => e.tagName === 'BDI' || getComputedStyle(e).unicodeBidi === 'isolate';
  const lines = [...document.querySelectorAll(selector)].filter((l) => l.textContent.includes(run) && l.textContent.includes(label));
  if (lines.length === 0) return { error: `no ${selector} shows both the run and ${JSON.stringify(label)}` };
  const line = lines[0];
  const holder = [line, ...line.querySelectorAll('*')].reverse().find((e) => e.textContent === run);
  const texts = [];
  const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) texts.push(walker.currentNode);
  // The label: the first text node of the console's own holding it after the run.
  const labelNode = texts.find((t) => t.data.includes(label) && !(holder && holder.contains(t)));
  const controls = texts.filter((t) => /[\u202A-\u202E\u2066-\u2069\u200E\u200F]/.test(t.data));
  const chars = [];
  if (labelNode) {
    const start = labelNode.data.indexOf(label);
    for (let i = start; i < start + label.length; i += 1) {
      const r = document.createRange();
      r.setStart(labelNode, i);
      r.setEnd(labelNode, i + 1);
      const b = r.getBoundingClientRect();
      if (b.width > 0) chars.push({ left: b.left, top: b.top });
    }
  }
  // The run's right edge on the label's line (a run may wrap, or be cut into fragments).
  const onLabelLine = holder && chars.length ? [...holder.getClientRects()].filter((r) => r.top <= chars[0].top + 1 && r.bottom > chars[0].top) : [];
  const runRight = onLabelLine.length ? Math.max(...onLabelLine.map((r) => r.right)) : -Infinity;
  return {
    runHasElement: !!holder,
    runIsolated: !!holder && isolated(holder),
    // Every bidi control on the line (this run's or another's) is inside an isolate.
    controlsIsolated: controls.every((t) => {
      for (let e = t.parentElement; e && line.contains(e); e = e.parentElement) if (isolated(e)) return true;
      return false;
    }),
    labelOutsideRun: !!labelNode && !!holder && !holder.contains(labelNode),
    labelLeftToRight: chars.length > 1 && chars.every((c, i) => i === 0 || (c.top !== chars[i - 1].top || c.left > chars[i - 1].left)),
    labelAfterRun: !!holder && chars.length > 0 && chars[0].left >= runRight - 1,
  };
}

const OK = { runHasElement: true, runIsolated: true, controlsIsolated: true, labelOutsideRun: true, labelLeftToRight: true, labelAfterRun: true };

/** Runs audit() for one line; the results are asserted together at the end. */
async function check(page, results, where, spec) {
  results[where] = await page.evaluate(audit, spec);
}

describe('bidi controls in upstream text stay in their runs (mock upstream)', () => {
  let mock;
  let host;
  let browser;

  h.suiteSetup(async (own) => {
    mock = own(await new MockUpstream(scenario()).start());
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  test('transcript, Tools, BifrostState, AdminEvents and affect isolate every upstream run', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { viewport: { width: 1400, height: 900 } });
    const results = {};
    try {
      await h.startSession(page, 'bidi');
      await h.sendWithEnter(page, 'tools');
      // The transcript: the reasoning line names the agent, then the console's phrase.
      await h.waitFor(page, () => document.querySelector('.thinking-note'), undefined, { what: 'the reasoning line' });
      await check(page, results, 'reasoning line', { selector: '.thinking-note', run: NAME, label: ' is ' });
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await check(page, results, 'tool result line', { selector: '#transcript details.tool summary', run: A.pdi, label: ' · error' });
      await check(page, results, 'done line', { selector: '#transcript .status-line', run: A.ps, label: ' out · ' });
      await h.sendWithEnter(page, 'fail');
      assert.equal((await h.waitForTerminal(page)).kind, 'error');
      await check(page, results, 'error line', { selector: '#transcript .status-line.error', run: A.pdis, label: ' — ' });

      // Tools: the inventory and the live events.
      await h.waitFor(page, () => /2 tools available/.test(document.querySelector('#tools .tools-inventory').textContent), undefined, { what: 'the inventory' });
      await check(page, results, 'tool inventory', { selector: '#tools .tools-inventory .mono', run: A.pdi, label: ', ' });
      await check(page, results, 'tool event', { selector: '#tool-events li .mono', run: A.pdi, label: ' · error' });

      // BifrostState and AdminEvents.
      await h.waitFor(page, () => document.querySelector('#bifrost dl.kv'), undefined, { what: 'BifrostState' });
      await check(page, results, 'last dispatch', { selector: '#bifrost dd', run: A.pdi, label: ' · ' });
      await check(page, results, 'caps', { selector: '#bifrost dd', run: A.rlo, label: ', ' });
      await check(page, results, 'bifrost tool', { selector: '#bifrost li', run: A.pdis, label: ' — ' });
      await h.waitFor(page, () => document.querySelector('#admin-events li'), undefined, { what: 'an admin event' });
      await check(page, results, 'admin event time', { selector: '#admin-events li div', run: A.mix, label: ' · #' });
      await check(page, results, 'admin event type', { selector: '#admin-events li div', run: A.pdis, label: ' · #' });

      // Affect: the snapshot's head line.
      await h.waitFor(page, () => /emitted/.test(document.getElementById('affect').textContent), undefined, { what: 'the affect snapshot' });
      await check(page, results, 'affect head', { selector: '#affect > div', run: A.pdi, label: ' · emitted ' });

      const expected = Object.fromEntries(Object.keys(results).map((k) => [k, OK]));
      assert.deepEqual(results, expected, 'each upstream run is an isolate without the console\'s words, which read left to right');

      // Every upstream string reads back literally (textContent is unchanged).
      assert.equal(await page.textContent('#transcript .msg.assistant > .who'), NAME);
      assert.equal(await page.textContent('#transcript .status-line.done'), `done · 1 in / ${A.ps} out · ${A.pdis}`);
      assert.equal(await page.textContent('#transcript .status-line.error'), `error · ${A.pdis} — ${A.mix}`);
      assert.equal(await page.textContent('#tools .tools-inventory .mono'), `${A.pdi}, ${A.rlo}`);
      await h.screenshot(page, '14-bidi');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
