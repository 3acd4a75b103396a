'use strict';
// Re-run a recording on a live agent and compare the two runs (docs/rerun.md) in a
// real browser, against the mock upstream scripted to answer the re-run differently in
// known ways: the same answer, a changed tool argument, a tool removed, an error, a
// slower turn with a tool added. Every row of the comparison is asserted, the re-run's
// requests upstream are exactly the recorded user texts in order, each after the
// previous turn's stream closed (rerun_post_001); the error turn is recorded and the
// run goes on (rerun_post_002); the re-run is a recording (Export session / OTLP,
// rerun_post_004); the comparison's export follows its schema; a recording without user
// text is refused with a typed reason (rerun_pre_001); cancel mid-run leaves no open
// stream (rerun_post_003). Keyboard, axe and layout shift over the new sheet and bar.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');
const { PAYLOADS: P } = require('./lib/xss-corpus');

const AXE_SOURCE = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const AXE_TAGS = ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22a', 'wcag22aa', 'best-practice'];
const SCHEMA = path.join(h.REPO_ROOT, 'docs', 'rerun-comparison.schema.json');
const TEXTS = ['hello there', 'weather in Oslo', 'plan a trip', 'check the status', 'summarise'];
const done = (input, output, reason = 'stop') => ({ usage: { input_tokens: input, output_tokens: output }, finish_reason: reason });

/** Per agent, per user text: [delay before (ms), event, data]. v2 differs from v1 in known ways. */
const SCRIPTS = {
  v1: {
    'hello there': [[40, 'text', { delta: 'Hello! How can I help?' }], [20, 'done', done(5, 6)]],
    'weather in Oslo': [
      [30, 'tool_call', { call_id: 'c1', name: 'lookup', arguments: { q: 'weather', city: 'Oslo', units: 'metric' } }],
      [60, 'tool_result', { call_id: 'c1', name: 'lookup', output: 'sunny', is_error: false }],
      [30, 'text', { delta: 'It is sunny in Oslo.' }], [20, 'done', done(12, 7)]],
    'plan a trip': [
      [30, 'tool_call', { call_id: 'c2', name: 'lookup', arguments: { q: 'flights' } }],
      [40, 'tool_result', { call_id: 'c2', name: 'lookup', output: '3 flights', is_error: false }],
      [30, 'tool_call', { call_id: 'c3', name: 'book', arguments: { seat: 'aisle' } }],
      [40, 'tool_result', { call_id: 'c3', name: 'book', output: 'booked', is_error: false }],
      [30, 'text', { delta: 'Booked.' }], [20, 'done', done(20, 3)]],
    'check the status': [
      [30, 'tool_call', { call_id: 'c4', name: 'status', arguments: {} }],
      [40, 'tool_result', { call_id: 'c4', name: 'status', output: 'green', is_error: false }],
      [30, 'text', { delta: 'All green.' }], [20, 'done', done(8, 3)]],
    summarise: [[40, 'text', { delta: 'Short summary.' }], [20, 'done', done(10, 20)]],
  },
  v2: {
    'hello there': [[40, 'text', { delta: 'Hello! How can I help?' }], [20, 'done', done(5, 6)]],
    'weather in Oslo': [
      [30, 'tool_call', { call_id: 'd1', name: 'lookup', arguments: { q: 'weather', city: 'Oslo', units: 'imperial' } }],
      [60, 'tool_result', { call_id: 'd1', name: 'lookup', output: 'sunny', is_error: false }],
      [30, 'text', { delta: 'It is sunny in Oslo today.' }], [20, 'done', done(12, 8)]],
    'plan a trip': [
      [30, 'tool_call', { call_id: 'd2', name: 'lookup', arguments: { q: 'flights' } }],
      [40, 'tool_result', { call_id: 'd2', name: 'lookup', output: '3 flights', is_error: false }],
      [30, 'text', { delta: 'I found flights.' }], [20, 'done', done(20, 4)]],
    'check the status': [[50, 'error', { code: 'upstream_failed', message: 'model overloaded' }]],
    summarise: [
      [30, 'tool_call', { call_id: 'd3', name: 'calc', arguments: { expr: '2+2' } }],
      [1300, 'tool_result', { call_id: 'd3', name: 'calc', output: '4', is_error: false }], // a stall at ?stall_ms=500
      [40, 'text', { delta: 'A much longer summary.' }], [20, 'done', done(10, 35, 'length')]],
  },
};

function scenario() {
  return {
    agents: [{ agent_id: 'v1', display_name: 'Agent v1' }, { agent_id: 'v2', display_name: 'Agent v2' }, { agent_id: 'slow', display_name: 'Agent slow' },
      { agent_id: 'down', display_name: 'Agent down' }],
    sessionRefused: (agentId) => agentId === 'down',
    tools: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, tools: [{ name: 'lookup', description: 'Look it up.' }] }),
    bifrost: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, endpoint: 'http://mock.invalid/v1', model: 'mock-' + s.agent_id, caps: {}, tools: [], bound_at: '2026-11-03T09:00:00Z', inflight_turns: 0,
      last_dispatch: s.turns ? { turn_id: 't_' + s.turns, latency_ms: 5, status: 'ok' } : null }),
    affect: (agentId) => ({ agent_id: agentId, emitted_at: '2026-11-03T10:00:00.000Z', pad: { pleasure: 0.1, arousal: 0.1, dominance: 0.1 } }),
    adminEvents: (s) => [{ type: 'session.created', data: { session_id: s.session_id, agent_id: s.agent_id } }],
    async turn(ctx) {
      if (ctx.session.agent_id === 'slow') {
        await ctx.sleep(8000); // long enough to be cancelled in
        if (ctx.cancelled) return;
        ctx.send('text', { delta: 'late' });
        ctx.send('done', { turn_id: ctx.turnId, ...done(1, 1) });
        return;
      }
      const script = SCRIPTS[ctx.session.agent_id][ctx.text];
      if (!script) { ctx.send('error', { code: 'unknown_script', message: ctx.text }); return; }
      for (const [delay, event, data] of script) {
        await ctx.sleep(delay);
        if (ctx.cancelled) return;
        ctx.send(event, event === 'done' ? { turn_id: ctx.turnId, ...data } : data);
      }
    },
  };
}

async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  return { name: d.suggestedFilename(), text: fs.readFileSync(await d.path(), 'utf8') };
}

async function importText(page, text, name) {
  await page.setInputFiles('#import-file', { name, mimeType: 'application/json', buffer: Buffer.from(text, 'utf8') });
  await h.waitFor(page, () => window.ratatoskrConsole.flight.replaying && !document.getElementById('replay-banner').hidden, undefined, { what: 'the recording shown' });
}

const status = (page) => page.evaluate(() => window.ratatoskrConsole.rerun.status());

/** Records every text #rerun-state shows, in order, and the progress each stall marker appeared at. */
async function watchProgress(page) {
  await page.evaluate(() => {
    window.__rerunStates = [];
    window.__stallsAt = [];
    const node = document.getElementById('rerun-state');
    new MutationObserver(() => { const t = node.textContent; if (window.__rerunStates[window.__rerunStates.length - 1] !== t) window.__rerunStates.push(t); })
      .observe(node, { childList: true, characterData: true, subtree: true });
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) if (n.nodeType === 1 && n.classList.contains('stall-marker')) window.__stallsAt.push(node.textContent);
    }).observe(document.getElementById('transcript'), { childList: true, subtree: true });
  });
}

async function waitForEnd(page, timeout = 30_000) {
  await h.waitFor(page, () => ['ended', 'cancelled', 'interrupted', 'failed'].includes(window.ratatoskrConsole.rerun.status().phase), undefined, { timeout, what: 'the re-run to end' });
  return status(page);
}

/** The per-turn rows of the comparison sheet: each cell's text. */
async function rows(page) {
  return page.$$eval('#rerun-out table.run-rows tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => (c.querySelector('li')
    ? [...c.querySelectorAll('li')].map((li) => li.textContent) : c.textContent))));
}

/** The totals table: {row: [A, B, B − A]}. */
async function totals(page) {
  return page.$$eval('#rerun-out table.run-totals tbody tr', (trs) => Object.fromEntries(trs.map((tr) => [tr.cells[0].textContent, [...tr.cells].slice(1).map((c) => c.textContent)])));
}

/** Checks an export against docs/rerun-comparison.schema.json (Python's jsonschema, Draft 2020-12): its faults' paths. */
function schemaFaults(value) {
  return JSON.parse(execFileSync('python3', ['-c', [
    'import json, sys', 'from jsonschema import Draft202012Validator as V', 's = json.load(open(sys.argv[1]))',
    'print(json.dumps([list(map(str, e.absolute_path)) for e in V(s).iter_errors(json.load(sys.stdin))]))'].join('\n'), SCHEMA], { input: JSON.stringify(value), encoding: 'utf8' }));
}

async function axe(page) {
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async (tags) => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: tags }, resultTypes: ['violations'] });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, AXE_TAGS);
}

/** axe wide and narrow, back to wide. */
async function axeBoth(page, found, what) {
  for (const size of [{ width: 420, height: 800 }, { width: 1280, height: 800 }]) {
    await page.setViewportSize(size);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    for (const v of await axe(page)) found.push(`${what} @${size.width}: ${v}`);
  }
}

/** Runs before the page's script: every layout shift, as layout-shift.test.js records them. */
function LAYOUT_SHIFT_OBSERVER() {
  window.__shifts = [];
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__shifts.push({ value: e.value, input: e.hadRecentInput, at: e.startTime }); })
    .observe({ type: 'layout-shift', buffered: true });
}

const fmtSigned = (v, unit) => (v > 0 ? '+' : v < 0 ? '−' : '±') + Math.abs(Math.round(v * 10) / 10) + unit;
const signedValue = (s) => { const m = /^([+−±])([\d.]+)/.exec(s); return (m[1] === '−' ? -1 : 1) * Number(m[2]); };

describe('re-run a recording on a live agent and compare the runs', () => {
  let mock; let host; let browser;
  const saved = {}; // the live recording (A) of the first test, as a session document and as OTLP

  h.suiteSetup(async (own) => {
    mock = own(await new MockUpstream(scenario()).start());
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  const sessionStreams = (sessionId) => mock.turnStreams.filter((s) => s.session_id === sessionId);

  test('the live session re-run on another agent: progress, every row of the comparison, the requests upstream, the export, both recordings kept', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { initScripts: [LAYOUT_SHIFT_OBSERVER] });
    const axeFound = [];
    try {
      await page.goto(host.url + '/?stall_ms=500');
      await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
      const sessionA = await h.startSession(page, 'v1');
      for (const text of TEXTS) {
        await h.sendWithEnter(page, text);
        assert.equal((await h.waitForTerminal(page)).kind, 'done', text);
      }
      const A = await page.evaluate(() => window.ratatoskrConsole.flight.buildExport());
      saved.doc = JSON.stringify(A);
      await page.check('#otlp-content');
      saved.otlp = (await download(page, '#export-otlp')).text;
      await page.uncheck('#otlp-content');
      saved.bare = (await download(page, '#export-otlp')).text;

      // "Re-run on…" from the keyboard: the recorded agent is picked; choose v2.
      await page.focus('#rerun-open');
      await page.keyboard.press('Enter');
      assert.equal(await page.isVisible('#rerun-pane'), true);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'rerun-agent');
      assert.equal(await page.inputValue('#rerun-agent'), 'v1', 'the recorded agent by default');
      assert.equal(await page.textContent('#rerun-source'), `From the live session ${sessionA} · agent Agent v1 · 5 turns`);
      assert.match(await page.textContent('#rerun-note'), /^5 user texts will be sent in order, each once the previous turn has ended, in a new live session\. The recorded agent is picked\.$/);
      await axeBoth(page, axeFound, 're-run sheet, set-up');
      await page.selectOption('#rerun-agent', 'v2');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'rerun-start');
      await watchProgress(page);
      const boxes = () => page.evaluate(() => ['rerun-bar', 'rerun-state', 'rerun-cancel', 'transcript']
        .map((id) => { const r = document.getElementById(id).getBoundingClientRect(); return [id, r.x, r.y, r.width, r.height]; }));
      await page.keyboard.press('Enter');
      await h.waitFor(page, () => document.getElementById('rerun-state').textContent === 'turn 1/5 · running', undefined, { what: 'turn 1 running' });
      const shiftFrom = await page.evaluate(() => performance.now());
      const boxesRunning = await boxes();
      assert.equal(await page.textContent('#rerun-label'), 'Re-run on Agent v2:');
      const sessionB = (await status(page)).session_id;
      assert.notEqual(sessionB, sessionA);
      assert.equal(await page.textContent('#session-id'), sessionB, 'a new live session');
      assert.equal(await page.isDisabled('#message'), true, 'the composer is the re-run\'s while it runs');
      // Every pane is live as usual: tools, BifrostState, the admin stream.
      await h.waitFor(page, () => /lookup/.test(document.getElementById('tools').textContent) && /mock-v2/.test(document.getElementById('bifrost').textContent)
        && document.getElementById('admin-light').classList.contains('live'), undefined, { what: 'the live panes of the re-run\'s session' });
      const end = await waitForEnd(page);
      assert.equal(end.phase, 'ended');
      // Turn 5's silent tool call stalls at ?stall_ms=500: shown live, as in any live turn.
      const stallsAt = await page.evaluate(() => window.__stallsAt);
      assert.ok(stallsAt.includes('turn 5/5 · running'), `the stall marker in the slower turn: ${JSON.stringify(stallsAt)}`);
      const states = await page.evaluate(() => window.__rerunStates);
      assert.deepEqual(states.filter((s) => /running|ended/.test(s)), ['turn 1/5 · running', 'turn 2/5 · running', 'turn 3/5 · running', 'turn 4/5 · running', 'turn 5/5 · running', 'turn 5/5 · ended']);
      assert.deepEqual(await boxes(), boxesRunning, 'the bar and the transcript did not move while it ran');
      const shifts = await page.evaluate((from) => window.__shifts.filter((s) => !s.input && s.at >= from).reduce((a, s) => a + s.value, 0), shiftFrom);
      assert.ok(shifts < 0.1, `layout shift during the re-run: ${shifts}`);

      // rerun_post_001: upstream got exactly the recorded texts, in order, each after the previous stream closed.
      const streams = sessionStreams(sessionB);
      assert.deepEqual(streams.map((s) => s.text), A.turns.map((t) => t.user_text));
      assert.deepEqual(streams.map((s) => s.text), TEXTS);
      for (let k = 1; k < streams.length; k += 1) assert.ok(streams[k].opened >= streams[k - 1].closed, `turn ${k + 1} was sent after turn ${k}'s stream closed`);
      assert.ok(mock.turnStreams.every((s) => s.closed !== null), 'no turn stream left open');

      // The comparison sheet opened by itself, focus in it.
      await h.waitFor(page, () => !document.getElementById('rerun-result').hidden, undefined, { what: 'the comparison' });
      assert.equal(await page.evaluate(() => document.activeElement.id), 'rerun-out');
      const B = await page.evaluate(() => window.ratatoskrConsole.flight.buildExport());
      assert.equal(B.session_id, sessionB);
      assert.deepEqual(B.turns.map((t) => [t.user_text, t.terminal.kind]), TEXTS.map((t) => [t, t === 'check the status' ? 'error' : 'done']),
        'rerun_post_002: the error turn is recorded and the run went on');
      const tl = (doc) => doc.turns.map((t) => t.terminal.browser_ms);
      const firstText = (doc) => doc.turns.map((t) => { const e = t.events.find((x) => x.event === 'text'); return e ? e.browser_ms : null; });
      const [totA, totB, ftA, ftB] = [tl(A), tl(B), firstText(A), firstText(B)];
      const time = (k, a, b) => fmtSigned(b[k] - a[k], ' ms') + ' (' + Math.round(a[k] * 10) / 10 + ' → ' + Math.round(b[k] * 10) / 10 + ')';
      const r = await rows(page);
      assert.deepEqual(r.map((row) => row.slice(0, 7)), [
        ['1', 'hello there', 'same words · 1.000', ['none'], '—', 'stop', 'in ±0 · out ±0'],
        ['2', 'weather in Oslo', '−1 +2 words · 0.833', ['~ lookup', '  ~ $.units: "metric" → "imperial"'], '—', 'stop', 'in ±0 · out +1'],
        ['3', 'plan a trip', '−1 +3 words · 0.000', ['− book', '1 same'], '—', 'stop', 'in ±0 · out +1'],
        ['4', 'check the status', '−2 +0 words · 0.000', ['− status'], 'turn: done → error', 'stop → upstream_failed', 'in — · out —'],
        ['5', 'summarise', '−1 +3 words · 0.200', ['+ calc'], '—', 'stop → length', 'in ±0 · out +15'],
      ]);
      for (let k = 0; k < 5; k += 1) {
        assert.equal(r[k][8], time(k, totA, totB), `turn ${k + 1}: the total's delta from both recordings`);
        assert.equal(r[k][7], ftB[k] === null ? '— (' + Math.round(ftA[k] * 10) / 10 + ' → —)' : time(k, ftA, ftB), `turn ${k + 1}: the first text's delta`);
        assert.equal(r[k][9], 'Compare turn ' + (k + 1));
      }
      // Timers only delay: B's turn takes at least its scripted 1390 ms; A's 60 ms may grow on a busy machine.
      assert.ok(signedValue(r[4][8]) >= 700, `the slower turn: ${r[4][8]} (scripted +1330 ms)`);
      const t = await totals(page);
      assert.deepEqual(t.turns, ['5', '5', '5 paired']);
      assert.deepEqual(t['changed turns'][2], '4');
      assert.deepEqual(t['output words changed'][2], '13');
      assert.deepEqual(t['mean similarity'][2], '0.407');
      assert.deepEqual(t['tool calls'][2], '1 same · 1 changed · 1 added · 2 removed');
      assert.deepEqual(t['ok → error'][2], '1');
      assert.deepEqual(t['finish changed'][2], '2');
      assert.deepEqual(t['output tokens'], ['36', '53', '+17']);
      assert.deepEqual(t['input tokens'], ['47', '47', '±0']);
      const sum = (xs) => Math.round(xs.reduce((a, x) => a + x, 0) * 10) / 10;
      assert.deepEqual(t['total time'], [sum(totA) + ' ms', sum(totB) + ' ms', fmtSigned(sum(totB) - sum(totA), ' ms')]);
      assert.match(await page.textContent('#rerun-out'), /Similarity: token Jaccard/);
      await axeBoth(page, axeFound, 'run comparison');

      // The export: versioned, the schema's, the same as the sheet's model.
      const exp = await download(page, '#rerun-export');
      assert.equal(exp.name, `ratatoskr-run-comparison-${sessionA}_vs_${sessionB}.json`);
      const cmp = JSON.parse(exp.text);
      assert.deepEqual([cmp.format, cmp.version, cmp.similarity, cmp.run], ['ratatoskr-run-comparison', 1, 'token_jaccard', { state: 'ended', planned: 5, sent: 5 }]);
      assert.deepEqual(schemaFaults(cmp), []);
      const model = await page.evaluate(([a, b]) => window.ratatoskrConsole.rerun.compareRuns(a, b), [A, B]);
      assert.deepEqual(cmp.rows, model.rows);
      assert.deepEqual(cmp.totals, model.totals);
      assert.deepEqual(cmp.rows[1].tools[0].arguments, [{ path: '$.units', op: 'changed', a: 'metric', b: 'imperial' }]);
      // rerun_post_004: both recordings kept; the re-run is the live session's recording (Export session / OTLP).
      const expA = JSON.parse((await download(page, '#rerun-export-a')).text);
      assert.deepEqual(expA.turns, A.turns);
      const expBText = (await download(page, '#rerun-export-b')).text;
      const expB = JSON.parse(expBText);
      assert.deepEqual(expB.turns, B.turns);
      Object.assign(saved, { b: expBText, rows: r, comparison: cmp });
      await h.screenshot(page, '40-rerun-comparison');
      if (process.env.UPDATE_DOCS_SCREENSHOT === '1' || !fs.existsSync(path.join(h.REPO_ROOT, 'docs', 'rerun.png'))) {
        await page.evaluate(() => { document.getElementById('rerun-pane').scrollTop = 0; });
        await (await page.$('#rerun-pane')).screenshot({ path: path.join(h.REPO_ROOT, 'docs', 'rerun.png') });
      }
      // A row opens the two-turn Compare for that pair; Escape returns to the row.
      await page.focus('#rerun-out button.run-pair[data-turn="2"]');
      await page.keyboard.press('Enter');
      await h.waitFor(page, () => !document.getElementById('compare-pane').hidden && document.querySelector('#compare-out table'), undefined, { what: 'the two-turn Compare' });
      assert.match(await page.textContent('#compare-out .compare-head'), /^A: A \(recording\) · turn 2 {2}· {2}B: B \(re-run\) · turn 2$/);
      assert.deepEqual(await page.$$eval('#compare-out ul.json-diff li', (li) => li.map((x) => x.textContent)), ['~ $.units: "metric" → "imperial"', '2 unchanged']);
      await axeBoth(page, axeFound, 'compare over the run comparison');
      await page.keyboard.press('Escape');
      assert.equal(await page.isHidden('#compare-pane'), true);
      assert.equal(await page.evaluate(() => document.activeElement.getAttribute('data-turn')), '2', 'focus back on the row');
      await page.keyboard.press('Escape');
      assert.equal(await page.isHidden('#rerun-pane'), true);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'rerun-open');
      assert.equal(await page.isDisabled('#message'), false, 'the composer is the operator\'s again');
      // Re-run A again: the same recording, not the live session (B), offered again.
      await page.click('#rerun-show');
      await page.click('#rerun-again');
      assert.equal(await page.textContent('#rerun-source'), `From the recording A ${sessionA} · agent Agent v1 · 5 turns`);
      assert.equal(await page.inputValue('#rerun-agent'), 'v1');
      assert.equal(await page.isEnabled('#rerun-start'), true);
      await page.keyboard.press('Escape');
      // The sheet closed, the live session's own exports are the re-run's.
      const own = JSON.parse((await download(page, '#export-session')).text);
      assert.deepEqual([own.session_id, own.agent.agent_id, own.turns], [sessionB, 'v2', B.turns]);
      await page.check('#otlp-content');
      const otlpB = await page.evaluate((text) => window.ratatoskrConsole.otlp.parseImportText(text), (await download(page, '#export-otlp')).text);
      assert.deepEqual(otlpB.turns, B.turns, 'the re-run\'s OTLP export maps back to it');
      assert.deepEqual(axeFound, [], 'axe violations');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('an imported session document, and an OTLP trace with content, re-run on the recorded agent (the default): the same answers, the same texts upstream', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      for (const [what, text] of [['session document', saved.doc], ['OTLP trace', saved.otlp]]) {
        await importText(page, text, what + '.json');
        await page.click('#rerun-open');
        assert.match(await page.textContent('#rerun-source'), /^From the recording s_\w+ · agent Agent v1 · 5 turns$/);
        assert.equal(await page.inputValue('#rerun-agent'), 'v1', `${what}: the recorded agent by default`);
        await page.click('#rerun-start');
        assert.equal(await page.isHidden('#replay-banner'), true, 'the recording is left at once');
        const end = await waitForEnd(page);
        assert.equal(end.phase, 'ended', what);
        assert.deepEqual(sessionStreams(end.session_id).map((s) => s.text), TEXTS, `${what}: the recorded texts upstream, in order`);
        const c = end.comparison;
        assert.deepEqual(c.rows.map((r) => [r.output.words_changed, r.output.similarity, r.tool_counts.same, r.status.change, r.finish.same]),
          [[0, 1, 0, 'same', true], [0, 1, 1, 'same', true], [0, 1, 2, 'same', true], [0, 1, 1, 'same', true], [0, 1, 0, 'same', true]], `${what}: the same answers`);
        assert.deepEqual([c.totals.changed_turns, c.totals.usage.output_tokens.delta, c.a.role, c.b.agent.agent_id], [0, 0, 'recording', 'v1']);
        assert.match(await page.textContent('#rerun-out'), /A: recording s_\w+ · agent Agent v1 · 5 turns/);
        await page.keyboard.press('Escape');
      }
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('a GenAI trace from another tool re-run: its user texts upstream in order; its agent not offered here, so the sheet says so and picks the first', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await importText(page, fs.readFileSync(path.join(__dirname, 'fixtures', 'otlp-genai-foreign.json'), 'utf8'), 'foreign.json');
      const texts = await page.evaluate(() => window.ratatoskrConsole.flight.buildExport().turns.map((t) => t.user_text));
      assert.ok(texts.length >= 1 && texts.every((t) => t.trim() !== ''), 'the fixture carries user texts');
      await page.click('#rerun-open');
      assert.match(await page.textContent('#rerun-note'), / The recorded agent travel-bot is not offered here: pick one\.$/);
      assert.equal(await page.inputValue('#rerun-agent'), 'v1', 'the first agent offered');
      await page.click('#rerun-start');
      const end = await waitForEnd(page);
      assert.equal(end.phase, 'ended');
      assert.deepEqual(sessionStreams(end.session_id).map((x) => x.text), texts, 'the trace\'s user texts, in order');
      assert.deepEqual(end.comparison.a.agent.agent_id, 'travel-bot');
      assert.deepEqual(end.comparison.rows.map((r) => [r.pair, r.user_text_same]), texts.map(() => ['paired', true]));
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('Compare with a file: the recording shown against its re-run exported earlier: the same rows, nothing sent', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await importText(page, saved.doc, 'a.json');
      await page.click('#rerun-open');
      const at = Date.now();
      await page.setInputFiles('#rerun-file', { name: 'b.json', mimeType: 'application/json', buffer: Buffer.from('{"format":"nope"}') });
      await h.waitFor(page, () => !document.getElementById('rerun-error').hidden, undefined, { what: 'the refused file' });
      assert.equal(await page.getAttribute('#rerun-error', 'data-error-code'), 'import_wrong_format');
      await page.setInputFiles('#rerun-file', { name: 'b.json', mimeType: 'application/json', buffer: Buffer.from(saved.b) });
      await h.waitFor(page, () => !document.getElementById('rerun-result').hidden, undefined, { what: 'the comparison with the file' });
      assert.equal(await page.isHidden('#rerun-error'), true);
      assert.deepEqual(await rows(page), saved.rows, 'the rows the re-run showed');
      const c = (await status(page)).comparison;
      assert.deepEqual(c.run, { state: 'file', planned: 5, sent: 5 });
      assert.deepEqual([c.rows, c.totals], [saved.comparison.rows, saved.comparison.totals]);
      assert.deepEqual(schemaFaults(c), []);
      assert.equal(await page.isVisible('#replay-banner'), true, 'the recording is still shown');
      assert.deepEqual(problems.requests.filter((q) => q.at >= at && new URL(q.url).pathname.startsWith('/api/')), [], 'no request');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('rerun_pre_001: an OTLP export without content has no user text: refused with a typed reason, nothing sent; nothing shown: refused too', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await page.click('#rerun-open');
      assert.equal(await page.getAttribute('#rerun-error', 'data-error-code'), 'rerun_no_recording');
      await page.keyboard.press('Escape');
      await importText(page, saved.bare, 'bare.json');
      const at = Date.now();
      await page.click('#rerun-open');
      await h.waitFor(page, () => !document.getElementById('rerun-error').hidden, undefined, { what: 'the refusal' });
      assert.equal(await page.getAttribute('#rerun-error', 'data-error-code'), 'rerun_no_user_text');
      assert.equal(await page.textContent('#rerun-error'),
        'Re-run refused: rerun_no_user_text — the recording holds no user text (an OTLP export made without content carries none): nothing to send.');
      assert.equal(await page.isDisabled('#rerun-start'), true);
      assert.equal(await page.evaluate(() => document.activeElement.id), 'rerun-close');
      const found = [];
      await axeBoth(page, found, 're-run refused');
      assert.deepEqual(found, []);
      await page.keyboard.press('Escape');
      assert.equal(await page.isVisible('#replay-banner'), true, 'the recording is still shown');
      assert.deepEqual(problems.requests.filter((r) => r.at >= at && new URL(r.url).pathname.startsWith('/api/')), [], 'no request');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('rerun_post_003: Cancel re-run mid-run cancels the running turn, sends nothing more and leaves no open stream; the rest is not run', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await importText(page, saved.doc, 'session.json');
      await page.click('#rerun-open');
      await page.selectOption('#rerun-agent', 'slow');
      await page.click('#rerun-start');
      await h.waitFor(page, () => document.getElementById('rerun-state').textContent === 'turn 1/5 · running' && /^t_/.test(window.ratatoskrConsole.state.turnId || ''),
        undefined, { what: 'the first turn under way' });
      const sessionB = (await status(page)).session_id;
      assert.equal(sessionStreams(sessionB).filter((s) => s.closed === null).length, 1, 'one turn stream open upstream');
      const found = [];
      await axeBoth(page, found, 're-run running');
      assert.deepEqual(found, []);
      await page.focus('#rerun-cancel');
      await page.keyboard.press('Enter');
      const end = await waitForEnd(page, 10_000);
      assert.equal(end.phase, 'cancelled');
      assert.equal(await page.textContent('#rerun-state'), 'turn 1/5 · cancelled');
      await h.waitFor(page, () => !window.ratatoskrConsole.state.turnRunning, undefined, { what: 'no turn running' });
      await h.sleep(1000); // a next text would have gone by now
      const streams = sessionStreams(sessionB);
      assert.equal(streams.length, 1, 'nothing sent after the cancel');
      assert.ok(streams[0].closed !== null, 'its stream is closed');
      assert.ok(mock.turnStreams.every((s) => s.closed !== null), 'no turn stream open anywhere');
      assert.equal(mock.requests.filter((q) => q.method === 'POST' && q.path.startsWith(`/v1/sessions/${sessionB}/turns/`) && q.path.endsWith('/cancel')).length, 1, 'the turn was cancelled upstream');
      const c = end.comparison;
      assert.deepEqual(c.run, { state: 'cancelled', planned: 5, sent: 1 });
      assert.deepEqual(c.rows.map((r) => [r.pair, r.status.b, r.status.change]), [['paired', 'cancelled', 'changed'], ...Array(4).fill(['not_run', null, 'not_run'])]);
      const r = await rows(page);
      assert.deepEqual(r.map((row) => [row[2], row[4], row[9]]), [['−5 +0 words · 0.000', 'turn: done → cancelled', 'Compare turn 1'], ...Array(4).fill(['not run', 'not run', '—'])]);
      assert.equal(await page.isDisabled('#message'), false);
      await page.keyboard.press('Escape');
      await page.click('#rerun-dismiss');
      assert.equal(await page.isHidden('#rerun-bar'), true);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
  test('importing a file mid-run interrupts the re-run (its stream closed, the rest not run); a session that cannot start fails it, nothing sent', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, { allowNetworkErrors: [{ path: /^\/api\/sessions$/, status: 503 }, { path: /^\/api\/sessions$/, status: 502 }] });
    try {
      await importText(page, saved.doc, 'a.json');
      await page.click('#rerun-open');
      await page.selectOption('#rerun-agent', 'slow');
      await page.click('#rerun-start');
      await h.waitFor(page, () => document.getElementById('rerun-state').textContent === 'turn 1/5 · running' && /^t_/.test(window.ratatoskrConsole.state.turnId || ''),
        undefined, { what: 'the first turn under way' });
      const sessionB = (await status(page)).session_id;
      await importText(page, saved.doc, 'a-again.json');
      const end = await waitForEnd(page, 10_000);
      assert.equal(end.phase, 'interrupted');
      assert.equal(await page.textContent('#rerun-state'), 'turn 1/5 · interrupted');
      assert.deepEqual(end.comparison.run, { state: 'interrupted', planned: 5, sent: 1 });
      assert.deepEqual(end.comparison.rows.map((r) => [r.pair, r.status.b]), [['paired', 'running'], ...Array(4).fill(['not_run', null])], 'the turn left as far as it got, the rest not run');
      await h.waitFor(page, () => !window.ratatoskrConsole.state.turnRunning, undefined, { what: 'no turn running' });
      const closed = Date.now() + 5000;
      while (sessionStreams(sessionB).some((x) => x.closed === null) && Date.now() < closed) await h.sleep(50);
      assert.deepEqual(sessionStreams(sessionB).map((x) => [x.text, x.closed !== null]), [['hello there', true]], 'one text sent, its stream closed');
      await page.keyboard.press('Escape');

      // A session that cannot start: the bar says why; nothing is sent, nothing compared.
      await page.click('#rerun-open');
      await page.selectOption('#rerun-agent', 'down');
      const before = mock.turnStreams.length;
      await page.click('#rerun-start');
      const failed = await waitForEnd(page, 10_000);
      assert.equal(failed.phase, 'failed');
      assert.equal(failed.comparison, null);
      assert.match(await page.textContent('#rerun-state'), /^failed · could not start a session: \w+ \(HTTP 5\d\d\)$/);
      assert.equal(await page.isDisabled('#rerun-show'), true);
      assert.equal(mock.turnStreams.length, before);
      assert.equal(await page.isHidden('#replay-banner'), true, 'the recording was left, the console is empty');
      assert.equal(await page.textContent('#session-id'), 'none');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('the XSS corpus through a re-run and its comparison sheet: user texts, tool names and error messages stay text', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const turn = (index, payloads) => {
        const events = [{ event: 'turn.started', data: { turn_id: 'x' + index }, server_ms: null, browser_ms: 1 }];
        payloads.forEach((p, i) => {
          events.push({ event: 'tool_call', data: { call_id: 'x' + index + '_' + i, name: p, arguments: { [p]: p } }, server_ms: null, browser_ms: 2 + 2 * i });
          events.push({ event: 'tool_result', data: { call_id: 'x' + index + '_' + i, name: p, output: p, is_error: false }, server_ms: null, browser_ms: 3 + 2 * i });
        });
        const end = 4 + 2 * payloads.length;
        events.push({ event: 'text', data: { delta: payloads.join(' ') }, server_ms: null, browser_ms: end });
        const data = { turn_id: 'x' + index, usage: { input_tokens: 1, output_tokens: 1 }, finish_reason: payloads[0] };
        events.push({ event: 'done', data, server_ms: null, browser_ms: end + 1 });
        return { index, user_text: 'x ' + payloads.join(' '), started_at: '2026-11-03T10:00:0' + index + '.000Z', server_t0: null, first_byte_ms: 1, events,
          terminal: { kind: 'done', origin: 'stream', data, browser_ms: end + 1 }, stalls: [] };
      };
      const half = Math.ceil(P.length / 2);
      const doc = {
        format: 'ratatoskr-session', version: 1, exported_at: '2026-11-03T10:00:00.000Z', agent: { agent_id: 'v1', display_name: P[3] }, session_id: 's_xss',
        bifrost_visible_host: null, started_at: '2026-11-03T10:00:00.000Z', stall_ms: 10000, turns: [turn(1, P.slice(0, half)), turn(2, P.slice(half))],
        tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
      };
      await importText(page, JSON.stringify(doc), 'xss.json');
      await page.click('#rerun-open');
      await page.click('#rerun-start');
      const end = await waitForEnd(page);
      assert.equal(end.phase, 'ended');
      assert.deepEqual(end.comparison.rows.map((r) => r.status.change), ['ok_to_error', 'ok_to_error'], 'the mock answers an unknown text with an error');
      const sheet = await page.evaluate(() => ({
        names: [...document.querySelectorAll('#rerun-out .run-tools li')].map((li) => li.textContent),
        tags: [...new Set([...document.querySelectorAll('#rerun-out *')].map((n) => n.tagName))].sort(),
        attrs: [...new Set([...document.querySelectorAll('#rerun-out *')].flatMap((n) => [...n.attributes].map((a) => a.name)))].sort(),
      }));
      for (const p of P) assert.ok(sheet.names.includes('− ' + p), 'every tool name as text: ' + JSON.stringify(p));
      assert.deepEqual(sheet.tags.filter((t) => !['BUTTON', 'CAPTION', 'DIV', 'LI', 'P', 'SPAN', 'TABLE', 'TBODY', 'TD', 'TH', 'THEAD', 'TR', 'UL'].includes(t)), []);
      assert.deepEqual(sheet.attrs.filter((a) => !['aria-label', 'class', 'data-turn', 'scope', 'type'].includes(a)), []);
      assert.equal(await page.evaluate(() => document.scripts.length), 1);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
