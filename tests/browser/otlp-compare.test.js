'use strict';
// Compare, OTLP export and OTLP import (docs/otlp.md, docs/console.md "Compare turns") in a
// real browser: two scripted turns with known differences compared field by field,
// the OTLP/JSON export (through the UI's download) parsed by the official
// OpenTelemetry protobuf classes, content only when ticked, the key canary over it;
// our own export imported back to the same panes, a hand-written GenAI trace from
// another tool rendered as turns, tool calls and timelines, typed refusals, and the
// XSS corpus through the OTLP import and the compare view.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');
const { PAYLOADS: P } = require('./lib/xss-corpus');

// A scripted gap as the browser sees it: two receipt times, each of which a
// busy machine or Spin's outbound path (up to a 40 ms delayed ACK) can move.
// The exact check is the compare view against the recorded timelines.
const TOL = 100;
const VENV_PY = path.join(h.REPO_ROOT, 'target', 'otlp-venv', 'bin', 'python');
const CHECK = path.join(__dirname, 'lib', 'otlp-check.py');
const FOREIGN = path.join(__dirname, 'fixtures', 'otlp-genai-foreign.json');
const emitted = (k) => new Date(Date.UTC(2026, 10, 1, 10, 0, k)).toISOString();
const snapshot = (agentId, k, pleasure) => ({ agent_id: agentId, emitted_at: emitted(k), pad: { pleasure, arousal: 0.1, dominance: 0.2 } });

/** Two turns that differ in every compared field. */
const SCRIPTS = {
  'weather in Oslo': {
    pleasure: 0.5,
    events: [
      [100, 'thinking', { delta: 'checking the weather' }],
      [100, 'tool_call', { call_id: 'g1', name: 'lookup', arguments: { q: 'weather', city: 'Oslo', units: 'metric' } }],
      [200, 'tool_result', { call_id: 'g1', name: 'lookup', output: 'sunny 21C', is_error: false }],
      [100, 'text', { delta: 'It is sunny in Oslo today.' }],
      [50, 'done', { usage: { input_tokens: 12, output_tokens: 7 }, finish_reason: 'stop' }],
    ],
  },
  'weather in Bergen please': {
    pleasure: 0.2,
    events: [
      [300, 'thinking', { delta: 'checking the weather' }],
      [100, 'tool_call', { call_id: 'b1', name: 'lookup', arguments: { q: 'weather', city: 'Bergen', days: 3 } }],
      [500, 'tool_result', { call_id: 'b1', name: 'lookup', output: 'upstream timeout KEY', is_error: true }],
      [100, 'text', { delta: 'It is rainy in Bergen today.' }],
      [50, 'done', { usage: { input_tokens: 15, output_tokens: 9 }, finish_reason: 'length' }],
    ],
  },
};

function scenario() {
  const sc = {
    keys: [],
    now: new Map(),
    agents: [{ agent_id: 'cmp', display_name: 'Agent cmp' }],
    tools: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, tools: [{ name: 'lookup', description: 'Look it up. ' + sc.keys[0], input_schema: { type: 'object' } }] }),
    bifrost: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, endpoint: 'http://mock.invalid/?k=' + sc.keys[1], model: 'mock-1', caps: {}, tools: [], bound_at: '2026-11-01T09:00:00Z', inflight_turns: 0, last_dispatch: null }),
    affect: (agentId) => sc.now.get(agentId) || snapshot(agentId, 0, 0.1),
    adminEvents: (s) => [{ type: 'key.used', data: { session_id: s.session_id, note: 'echo ' + sc.keys[0] + ' ' + sc.keys[1] } }],
    async turn(ctx) {
      const script = SCRIPTS[ctx.text];
      if (!script) { ctx.send('error', { code: 'unknown_script', message: ctx.text }); return; }
      let k = 0;
      for (const [delay, event, data] of script.events) {
        await ctx.sleep(delay);
        k += 1;
        const d = JSON.parse(JSON.stringify(data).replace('KEY', sc.keys[0] + ' ' + sc.keys[1]));
        if (event === 'done') sc.now.set(ctx.session.agent_id, snapshot(ctx.session.agent_id, ctx.index || k, script.pleasure));
        ctx.send(event, event === 'done' ? { turn_id: ctx.turnId, ...d } : d);
      }
    },
  };
  return sc;
}

function otlpCheck(file) {
  let out;
  try { out = execFileSync(VENV_PY, [CHECK, file], { encoding: 'utf8' }); } catch (e) { out = e.stdout || String(e); }
  return JSON.parse(out);
}

async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  const file = await d.path();
  return { name: d.suggestedFilename(), file, text: fs.readFileSync(file, 'utf8') };
}

async function importText(page, text, name = 'trace.json') {
  await page.setInputFiles('#import-file', { name, mimeType: 'application/json', buffer: Buffer.from(text, 'utf8') });
}

async function panes(page) {
  return page.evaluate(() => ({
    transcript: document.getElementById('transcript').textContent,
    timelines: [...document.querySelectorAll('#transcript details.flight')].map((d) => d.textContent),
    tools: document.getElementById('tools').textContent,
    bifrost: document.getElementById('bifrost').textContent,
    admin: [...document.querySelectorAll('#admin-events li')].map((li) => li.textContent),
    affect: document.getElementById('affect').textContent,
  }));
}

/** The compare tables as {caption: {row: [A, B, delta]}}. */
async function compareTables(page) {
  return page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#compare-out table')].map((t) => [t.caption.textContent,
    Object.fromEntries([...t.tBodies[0].rows].map((r) => [r.cells[0].textContent, [...r.cells].slice(1).map((c) => c.textContent)]))])));
}

describe('compare, OTLP export and import', () => {
  let mock; let host; let browser; let sc;
  let live; // the page with the two scripted turns, shared by the tests below
  let exported = {};

  h.suiteSetup(async (own) => {
    if (!fs.existsSync(VENV_PY)) execFileSync('bash', ['-c', 'source scripts/lib.sh && ensure_otlp_proto'], { cwd: h.REPO_ROOT, stdio: 'inherit' });
    sc = scenario();
    mock = own(await new MockUpstream(sc).start());
    sc.keys = [mock.consumerKey, mock.adminKey];
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  test('two scripted turns; OTLP export through the UI parses as ExportTraceServiceRequest; content only when ticked; no key', async () => {
    live = await h.openConsole(browser, host.url);
    const { page } = live;
    await h.startSession(page, 'cmp');
    await h.waitFor(page, (e) => document.querySelector('#affect > div') && document.querySelector('#affect > div').textContent.endsWith(e), emitted(0), { what: 'the first affect' });
    for (const [k, text] of Object.keys(SCRIPTS).entries()) {
      await h.sendWithEnter(page, text);
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await h.waitFor(page, () => !/emitted 2026-11-01T10:00:00/.test(document.getElementById('affect').textContent) && window.ratatoskrConsole.flight.buildExport().affect_history.length === document.querySelectorAll('#transcript .msg.assistant').length + 1,
        undefined, { timeout: 12000, what: `the affect emit after turn ${k + 1}` });
    }
    for (const content of [false, true]) {
      if (content) await page.check('#otlp-content');
      const d = await download(page, '#export-otlp');
      assert.match(d.name, /^ratatoskr-otlp-s_\w+\.json$/);
      const checked = otlpCheck(d.file);
      assert.equal(checked.ok, true, JSON.stringify(checked).slice(0, 500));
      const names = checked.spans.map((s) => s.name);
      assert.deepEqual(names, ['ratatoskr.session', 'invoke_agent Agent cmp', 'execute_tool lookup', 'invoke_agent Agent cmp', 'execute_tool lookup']);
      const [session, t1, tool1, t2, tool2] = checked.spans;
      const sid = session.attributes['gen_ai.conversation.id'];
      assert.match(sid, /^s_/);
      for (const s of [t1, t2]) {
        assert.equal(s.kind, 3, 'invoke_agent is a CLIENT span');
        assert.equal(s.attributes['gen_ai.operation.name'], 'invoke_agent');
        assert.equal(s.attributes['gen_ai.conversation.id'], sid);
        assert.equal(s.attributes['gen_ai.agent.id'], 'cmp');
        assert.ok(s.attributes['gen_ai.response.time_to_first_chunk'] > 0);
        assert.ok(s.attributes['ratatoskr.bifrost.state'].includes('mock-1'));
      }
      assert.deepEqual([t1.attributes['gen_ai.response.finish_reasons'], t2.attributes['gen_ai.response.finish_reasons']], [['stop'], ['length']]);
      assert.deepEqual([t1.attributes['gen_ai.usage.input_tokens'], t1.attributes['gen_ai.usage.output_tokens'], t2.attributes['gen_ai.usage.input_tokens']], [12, 7, 15]);
      assert.ok(Math.abs(t1.attributes['ratatoskr.affect.delta.pad.pleasure'] - 0.4) < 1e-9, 'affect across turn 1');
      assert.ok(Math.abs(t2.attributes['ratatoskr.affect.delta.pad.pleasure'] + 0.3) < 1e-9, 'affect across turn 2');
      assert.deepEqual([tool1.attributes['gen_ai.tool.name'], tool1.attributes['gen_ai.tool.call.id'], tool2.attributes['gen_ai.tool.call.id']], ['lookup', 'g1', 'b1']);
      assert.equal(tool2.status, 2, 'a failed tool call is an ERROR span');
      assert.ok(Math.abs(Number(BigInt(tool1.end) - BigInt(tool1.start)) / 1e6 - 200) <= TOL, 'the tool span lasts its duration');
      assert.ok(Math.abs(Number(BigInt(tool2.end) - BigInt(tool2.start)) / 1e6 - 500) <= TOL);
      const contentKeys = ['gen_ai.input.messages', 'gen_ai.output.messages'];
      for (const key of contentKeys) assert.equal(key in t1.attributes, content, `${key} only when ticked`);
      assert.equal('gen_ai.tool.call.arguments' in tool1.attributes, content);
      for (const word of ['sunny in Oslo', 'checking the weather', 'Bergen', 'sunny 21C']) assert.equal(d.text.includes(word), content, `"${word}" ${content ? 'with' : 'only with'} content`);
      // The key canary: echoed into tools, BifrostState, tool output and admin events; never in the export.
      for (const key of sc.keys) {
        assert.ok(!d.text.includes(key) && !d.text.includes(key.slice(5)), 'no key in the OTLP export');
        assert.ok(!d.text.includes(Buffer.from(key).toString('base64').slice(0, 16)), 'nor base64 of one');
      }
      exported[content ? 'content' : 'bare'] = d.text;
    }
    fs.mkdirSync(h.ARTIFACTS, { recursive: true });
    fs.writeFileSync(path.join(h.ARTIFACTS, 'otlp-export.json'), exported.content);
    await h.assertClean(assert, page, live.problems);
  });

  test('compare two turns: user text, tool calls (arguments diff, size, ok/error, duration), output word diff, timing, affect, finish and usage', async () => {
    const { page } = live;
    await page.focus('#compare-open');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'compare-a', 'the pane opens with the keyboard, focus on turn A');
    assert.deepEqual(await page.$$eval('#compare-a option', (o) => o.map((x) => x.textContent)), ['live · turn 1 · weather in Oslo', 'live · turn 2 · weather in Bergen please']);
    await page.keyboard.press('Tab'); // B
    await page.keyboard.press('Tab'); // Compare
    assert.equal(await page.evaluate(() => document.activeElement.id), 'compare-run');
    await page.keyboard.press('Enter');
    await h.waitFor(page, () => document.querySelector('#compare-out table'), undefined, { what: 'the comparison' });
    const doc = await page.evaluate(() => window.ratatoskrConsole.flight.buildExport());
    const tl = await page.evaluate((d) => d.turns.map((t) => window.ratatoskrConsole.flight.turnTimeline(t)), doc);
    const diffs = await page.evaluate(() => [...document.querySelectorAll('#compare-out .diff-text')].map((d) => [...d.children].map((c) => (c.tagName === 'DEL' ? '-' : c.tagName === 'INS' ? '+' : '=') + c.textContent)));
    assert.deepEqual(diffs[0], ['=weather in ', '-Oslo', '+Bergen please']);
    assert.deepEqual(diffs[1].filter((r) => r[0] !== '='), ['-sunny', '+rainy', '-Oslo', '+Bergen']);
    const t = await compareTables(page);
    const tool = t['tool call 1'];
    assert.deepEqual(tool.name, ['lookup', 'lookup', 'same']);
    assert.deepEqual(tool['call id'], ['g1', 'b1', '']);
    const outA = doc.turns[0].events.find((e) => e.event === 'tool_result').data.output.length;
    const outB = doc.turns[1].events.find((e) => e.event === 'tool_result').data.output.length;
    assert.deepEqual(tool['result size'], [`${outA} chars`, `${outB} chars`, `${outB - outA > 0 ? '+' : '−'}${Math.abs(outB - outA)} chars`]);
    assert.deepEqual(tool['ok / error'], ['ok', 'error', 'changed']);
    const dur = tool.duration.map((x) => Number(x.replace(/[^\d.]/g, '')));
    assert.ok(Math.abs(dur[0] - 200) <= TOL && Math.abs(dur[1] - 500) <= TOL && Math.abs(dur[2] - 300) <= 2 * TOL, tool.duration.join(' | '));
    assert.match(tool.duration[2], /^\+/);
    const args = await page.$$eval('#compare-out ul.json-diff li', (li) => li.map((x) => x.textContent));
    assert.deepEqual(args, ['~ $.city: "Oslo" → "Bergen"', '− $.units: "metric"', '+ $.days: 3', '1 unchanged']);
    const timing = t['Timing (ms from sending the turn)'];
    assert.deepEqual(Object.keys(timing), ['first byte', 'first thinking', 'first text', 'total', 'largest gap', 'deltas / s']);
    const signedOf = (s) => (s === '—' ? null : (s[0] === '−' ? -1 : 1) * Number(s.replace(/[^\d.]/g, '')));
    const want = { 'first thinking': tl[1].first_thinking_ms - tl[0].first_thinking_ms, 'first text': tl[1].first_text_ms - tl[0].first_text_ms, total: tl[1].total_ms - tl[0].total_ms };
    for (const [row, delta] of Object.entries(want)) assert.ok(Math.abs(signedOf(timing[row][2]) - delta) <= 0.11, `${row}: ${timing[row]} vs ${delta}`);
    assert.ok(Math.abs(want['first thinking'] - 200) <= TOL && Math.abs(want.total - 500) <= 2 * TOL, JSON.stringify(want));
    assert.match(timing['largest gap'][2], /^\+/);
    assert.match(timing['deltas / s'][2], /^−/);
    const fin = t['Finish and usage'];
    assert.deepEqual(fin.finish, ['done · stop', 'done · length', 'differs']);
    assert.deepEqual(fin['input tokens'], ['12', '15', '+3']);
    assert.deepEqual(fin['output tokens'], ['7', '9', '+2']);
    const affect = await page.$$eval('#compare-out .compare-affect', (b) => b.map((x) => x.textContent));
    assert.equal(affect[0], `A: ${emitted(0)} → ${emitted(1)}pad.pleasure 0.1 → 0.5 +0.4`);
    assert.equal(affect[1], `B: ${emitted(1)} → ${emitted(2)}pad.pleasure 0.5 → 0.2 −0.3`);
    // Keyboard: the result is a tab stop; Escape closes the pane and gives focus back.
    await page.focus('#compare-out');
    await page.keyboard.press('Escape');
    assert.equal(await page.isHidden('#compare-pane'), true);
    assert.equal(await page.evaluate(() => document.activeElement.id), 'compare-open');
    await page.click('#compare-open');
    await page.click('#compare-run');
    await h.waitFor(page, () => document.querySelector('#compare-out table'), undefined, { what: 'the comparison again' });
    const pane = await page.$('#compare-pane');
    await pane.screenshot({ path: path.join(h.ARTIFACTS, '30-compare.png') });
    if (process.env.UPDATE_DOCS_SCREENSHOT === '1' || !fs.existsSync(path.join(h.REPO_ROOT, 'docs', 'compare.png'))) {
      await pane.screenshot({ path: path.join(h.REPO_ROOT, 'docs', 'compare.png') });
    }
    await h.assertClean(assert, page, live.problems);
  });

  test('OTLP import: our own export round-trips to the same panes, no /api call; compare live against the file', async () => {
    const { page, problems } = live;
    const livePanes = await panes(page);
    // Load the OTLP file for comparison only: the live page stays as it is.
    await page.setInputFiles('#compare-file', { name: 'mine.json', mimeType: 'application/json', buffer: Buffer.from(exported.content) });
    await h.waitFor(page, () => /file: mine\.json · 2 turns/.test(document.getElementById('compare-file-name').textContent), undefined, { what: 'the compare file' });
    await page.selectOption('#compare-a', 'current:1');
    await page.selectOption('#compare-b', 'file:1');
    await page.click('#compare-run');
    const same = await compareTables(page);
    assert.deepEqual(same['tool call 1']['ok / error'], ['error', 'error', 'same']);
    assert.deepEqual(same['Timing (ms from sending the turn)'].total.slice(2), ['±0 ms']);
    assert.deepEqual(await panes(page), livePanes, 'loading a file to compare changes no pane');
    const at = Date.now();
    await importText(page, exported.content, 'mine.json');
    await h.waitFor(page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the recorded banner' });
    assert.deepEqual(await panes(page), livePanes, 'the OTLP import shows the same panes');
    await h.sleep(1600);
    assert.deepEqual(problems.requests.filter((r) => r.at >= at && new URL(r.url).pathname.startsWith('/api/')), []);
    // The content-less export imports too: the same timelines, no text.
    await importText(page, exported.bare, 'bare.json');
    await h.waitFor(page, () => !/sunny/.test(document.getElementById('transcript').textContent), undefined, { what: 'the bare import' });
    const bare = await panes(page);
    assert.deepEqual(bare.timelines, livePanes.timelines);
    await h.assertClean(assert, page, problems);
    await live.context.close();
  });

  test('OTLP import: a foreign GenAI trace renders as turns, tool calls and timelines; anything else gets a typed refusal', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const text = fs.readFileSync(FOREIGN, 'utf8');
      assert.equal(otlpCheck(FOREIGN).ok, true, 'the fixture is valid OTLP/JSON');
      await importText(page, text, 'foreign.json');
      await h.waitFor(page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the foreign import' });
      assert.match(await page.textContent('#replay-banner'), /agent travel-bot · session conv-42 · .* · 2 turns/);
      const shown = await page.evaluate(() => ({
        users: [...document.querySelectorAll('#transcript .msg.user .text')].map((n) => n.textContent),
        tools: [...document.querySelectorAll('#transcript details.tool summary')].map((n) => n.textContent),
        status: [...document.querySelectorAll('#transcript .status-line')].map((n) => n.textContent),
        answer: document.querySelectorAll('#transcript .msg.assistant > .text')[1].textContent,
        timelines: [...document.querySelectorAll('#transcript details.flight summary')].map((n) => n.textContent),
        rows: [...document.querySelectorAll('#transcript details.flight')].map((d) => Object.fromEntries([...d.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling.textContent]))),
      }));
      assert.deepEqual(shown.users, ['Book a table for two at 7pm', 'Book a table for two at 7pm']);
      assert.deepEqual(shown.tools, ['call · book_table', 'result · book_table']);
      assert.deepEqual(shown.status, ['done · 40 in / 12 out · tool_calls', 'done · 60 in / 8 out · stop']);
      assert.equal(shown.answer, 'Booked: table 12 for two at 19:00.');
      assert.deepEqual(shown.timelines, ['timeline · 1110 ms · 2 deltas', 'timeline · 800 ms · 1 deltas']);
      assert.equal(shown.rows[0]['first byte'], '250 ms');
      assert.equal(shown.rows[0].tool, 'book_table · 810 ms → 1110 ms · 300 ms · ok');

      const before = await panes(page);
      const mutate = (fn) => { const d = JSON.parse(text); fn(d); return JSON.stringify(d); };
      const spans = (d) => d.resourceSpans[0].scopeSpans[0].spans;
      const cases = [
        ['resourceSpans not an array', '{"resourceSpans": {}}', 'import_invalid_otlp'],
        ['a base64 trace id', mutate((d) => { spans(d)[0].traceId = 'S/kvNXezTaajzpKdDg5HNg=='; }), 'import_invalid_otlp'],
        ['a time that is not nanoseconds', mutate((d) => { spans(d)[2].endTimeUnixNano = '2026-01-01'; }), 'import_invalid_otlp'],
        ['an unknown AnyValue', mutate((d) => { spans(d)[2].attributes.push({ key: 'x', value: { htmlValue: '<b>' } }); }), 'import_invalid_otlp'],
        ['no GenAI span', mutate((d) => { for (const s of spans(d)) s.attributes = [{ key: 'http.request.method', value: { stringValue: 'GET' } }]; }), 'import_no_genai_spans'],
        ['our export with a broken event', exported.content.replace(/"ratatoskr\.event\.browser_ms"/, '"ratatoskr.event.browser_mz"'), 'import_invalid_document'],
        ['neither format', '{"traces": []}', 'import_wrong_format'],
      ];
      for (const [what, body, code] of cases) {
        await importText(page, body, 'bad.json');
        await h.waitFor(page, (c) => { const e = document.getElementById('import-error'); return !e.hidden && e.getAttribute('data-error-code') === c; }, code, { what: `${what}: ${code}` });
        assert.deepEqual(await panes(page), before, `${what}: nothing rendered`);
        await page.evaluate(() => { document.getElementById('import-error').hidden = true; });
      }
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('the XSS corpus through the OTLP import and the compare view: literal text, no markup, no script', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const turn = (index, offset) => {
        const events = [{ event: 'turn.started', data: { turn_id: P[offset] }, server_ms: 0, browser_ms: 1 }];
        let t = 1;
        const push = (event, data) => { t += 2; events.push({ event, data, server_ms: t, browser_ms: t }); };
        P.forEach((p, i) => {
          push('tool_call', { call_id: 'c' + i, name: p, arguments: { [p]: P[(i + offset) % P.length] } });
          push('tool_result', { call_id: 'c' + i, name: p, output: P[(i + offset) % P.length], is_error: (i + offset) % 3 === 0 });
        });
        for (const p of P.slice(offset)) push('text', { delta: p + ' ' });
        const data = { turn_id: P[offset], usage: { input_tokens: 1, output_tokens: 2 }, finish_reason: P[offset + 1] };
        push('done', data);
        return { index, user_text: P.slice(offset).join(' '), started_at: '2026-11-01T10:00:0' + index + '.000Z', server_t0: null, first_byte_ms: 1, events, terminal: { kind: 'done', origin: 'stream', data, browser_ms: t }, stalls: [] };
      };
      const doc = {
        format: 'ratatoskr-session', version: 1, exported_at: P[0], agent: { agent_id: P[2], display_name: P[3] }, session_id: P[4],
        bifrost_visible_host: P[5], started_at: '2026-11-01T10:00:00.000Z', stall_ms: 10000, turns: [turn(1, 0), turn(2, 7)],
        tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
      };
      const traceText = await page.evaluate((d) => JSON.stringify(window.ratatoskrConsole.otlp.sessionToOtlp(d, { content: true })), doc);
      const file = path.join(h.ARTIFACTS, 'otlp-xss.json');
      fs.mkdirSync(h.ARTIFACTS, { recursive: true });
      fs.writeFileSync(file, traceText);
      assert.equal(otlpCheck(file).ok, true, 'the corpus export is valid OTLP/JSON');
      await importText(page, traceText, 'xss.json');
      await h.waitFor(page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the imported corpus' });
      const users = await page.$$eval('#transcript .msg.user .text', (n) => n.map((x) => x.textContent));
      assert.deepEqual(users, [doc.turns[0].user_text, doc.turns[1].user_text]);
      const tools = await page.evaluate(() => [...document.querySelectorAll('#transcript .msg.assistant')[0].querySelectorAll('details.tool summary')].map((x) => x.textContent));
      assert.ok(P.every((p) => tools.includes('call · ' + p)), 'every tool name as text');
      await page.click('#compare-open');
      await page.selectOption('#compare-a', 'current:0');
      await page.selectOption('#compare-b', 'current:1');
      await page.click('#compare-run');
      await h.waitFor(page, () => document.querySelector('#compare-out table'), undefined, { what: 'the corpus comparison' });
      const cmp = await page.evaluate(() => ({
        text: document.getElementById('compare-out').textContent,
        user: [...document.querySelector('#compare-out .diff-text').children].filter((c) => c.tagName !== 'INS').map((c) => c.textContent).join(''),
        tags: [...new Set([...document.querySelectorAll('#compare-out *')].map((n) => n.tagName))].sort(),
        attrs: [...new Set([...document.querySelectorAll('#compare-out *')].flatMap((n) => [...n.attributes].map((a) => a.name)))].sort(),
      }));
      assert.equal(cmp.user, doc.turns[0].user_text, 'the user text diff rebuilds turn A\'s text literally');
      for (const p of P) assert.ok(cmp.text.includes(p), 'payload shown as text');
      assert.deepEqual(cmp.tags.filter((t) => !['CAPTION', 'DEL', 'DIV', 'H3', 'INS', 'LI', 'P', 'SPAN', 'TABLE', 'TBODY', 'TD', 'TH', 'THEAD', 'TR', 'UL'].includes(t)), []);
      assert.deepEqual(cmp.attrs.filter((a) => !['aria-label', 'class', 'role', 'scope', 'title'].includes(a)), []);
      assert.equal(await page.evaluate(() => document.scripts.length), 1);
      await h.screenshot(page, '31-compare-xss');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
