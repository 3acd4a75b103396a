'use strict';
// The flight recorder (docs/flight-recorder.md) in a real browser: the turn
// timeline against a scripted upstream with known delays, the stall marker, the
// buffering detector behind a buffering proxy (and never on the direct path), session
// export -> import (file picker and drag-and-drop) with no live call after it, typed
// refusals of malformed documents, the XSS corpus through an imported document, the
// key canary over the exported document, and affect history surviving a reload.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');
const { BufferingProxy } = require('./lib/buffering-proxy');
const { PAYLOADS: P, SINGLE_LINE: S } = require('./lib/xss-corpus');

const TOLERANCE_MS = 50;
const n = P.length;
const at = (i) => P[((i % n) + n) % n];
// The only markup the console makes, and the only attributes it sets (as in xss.test.js).
const ALLOWED_TAGS = new Set(['HEADER', 'H1', 'LABEL', 'SELECT', 'OPTION', 'BUTTON', 'SPAN', 'MAIN', 'SECTION', 'H2', 'DIV',
  'FORM', 'TEXTAREA', 'OL', 'UL', 'LI', 'INPUT', 'P', 'PRE', 'DETAILS', 'SUMMARY', 'DL', 'DT', 'DD', 'SCRIPT']);
const ALLOWED_ATTRS = new Set(['id', 'class', 'role', 'aria-label', 'aria-live', 'aria-pressed', 'type', 'disabled', 'placeholder',
  'rows', 'for', 'title', 'value', 'hidden', 'data-search', 'data-error-code', 'tabindex']);

function snapshot(agentId, emittedAt, pleasure, context = 'steady collaboration') {
  return {
    agent_id: agentId,
    emitted_at: emittedAt,
    pad: { pleasure, arousal: 0.1, dominance: 0.2 },
    relations: [{
      target_entity: 'end_user:operator',
      relation_context: context,
      trust_ability: { value: 0.5, confidence: 0.3, evidence_count: 1 },
      warmth: { value: 0.4 + pleasure / 10, confidence: 0.3, evidence_count: 2 },
      agency: 0.1,
      obligation_balance: -0.1,
    }],
  };
}

const emitted = (k) => new Date(Date.UTC(2026, 10, 1, 10, 0, k)).toISOString();

/** The scripted turns: [delay before (ms), event, data] after turn.started (sent at 0). */
const SCRIPTS = {
  timeline: [
    [300, 'thinking', { delta: 'weighing the lookup' }],
    [300, 'text', { delta: 'Hello' }],
    [200, 'tool_call', { call_id: 'c1', name: 'lookup', arguments: { q: 'x' } }],
    [500, 'tool_result', { call_id: 'c1', name: 'lookup', output: 'found', is_error: false }],
    [100, 'tool_call', { call_id: 'c2', name: 'fetch_url', arguments: { url: 'http://example.invalid/' } }],
    [250, 'tool_result', { call_id: 'c2', name: 'fetch_url', output: 'timeout', is_error: true }],
    [1200, 'text', { delta: ' world' }],
    [100, 'done', { usage: { input_tokens: 12, output_tokens: 7 }, finish_reason: 'stop' }],
  ],
  stall: [
    [50, 'thinking', { delta: 'hmm' }],
    [1600, 'text', { delta: 'after a silence' }],
    [50, 'done', { usage: { input_tokens: 1, output_tokens: 3 }, finish_reason: 'stop' }],
  ],
  spread: [
    [400, 'thinking', { delta: 'one' }],
    [400, 'text', { delta: 'two ' }],
    [400, 'text', { delta: 'three ' }],
    [400, 'text', { delta: 'four' }],
    [0, 'done', { usage: { input_tokens: 2, output_tokens: 4 }, finish_reason: 'stop' }],
  ],
};

function scenario() {
  const sc = {
    keys: [],
    sent: new Map(), // turn id -> [{event, at}] as the mock sent them
    affectNow: new Map(), // agent id -> its current snapshot (else one fixed snapshot)
    agents: ['timed', 'stall', 'spread', 'round', 'hist', 'bad'].map((id) => ({ agent_id: id, display_name: 'Agent ' + id })),
    tools: (session) => ({
      session_id: session.session_id, agent_id: session.agent_id,
      tools: [
        { name: 'lookup', description: 'Look it up. ' + sc.keys[0], input_schema: { type: 'object' } },
        { name: 'fetch_url', description: 'Fetch a URL.', input_schema: { type: 'object' } },
      ],
    }),
    bifrost: (session) => ({
      session_id: session.session_id, agent_id: session.agent_id, endpoint: 'http://mock.invalid/v1?k=' + sc.keys[1], model: 'mock-1',
      caps: { max_tokens: 1024, echo: sc.keys[0] }, tools: [{ name: 'lookup', description: 'Look it up.' }],
      bound_at: '2026-11-01T09:00:00Z', inflight_turns: 0,
      last_dispatch: session.turns ? { turn_id: 't_last', latency_ms: 40 * session.turns, status: 'ok' } : null,
    }),
    affect: (agentId) => sc.affectNow.get(agentId) || snapshot(agentId, emitted(0), 0.1, 'context ' + sc.keys[1]),
    adminEvents: (session) => [
      { type: 'session.created', data: { session_id: session.session_id, agent_id: session.agent_id, timestamp: '2026-11-01T09:00:01Z' } },
      { type: 'key.used', data: { session_id: session.session_id, note: 'echo ' + sc.keys[1] + ' ' + sc.keys[0] } },
      { type: 'turn.queued', data: { session_id: session.session_id, position: 1 } },
    ],
    async turn(ctx) {
      const log = [{ event: 'turn.started', at: Date.now() }];
      sc.sent.set(ctx.turnId, log);
      const send = (event, data) => { log.push({ event, at: Date.now() }); ctx.send(event, data); };
      const script = SCRIPTS[ctx.text];
      if (script) {
        for (const [delay, event, data] of script) {
          if (delay) await ctx.sleep(delay);
          if (ctx.cancelled) return;
          send(event, event === 'done' ? { turn_id: ctx.turnId, ...data } : data);
        }
        return;
      }
      if (ctx.text.startsWith('emit ')) {
        // A turn after which the agent's affect moves (the poll picks it up).
        const k = Number(ctx.text.slice(5));
        send('thinking', { delta: 'feeling ' + k });
        send('tool_call', { call_id: 'k' + k, name: 'lookup', arguments: { k } });
        await ctx.sleep(30);
        send('tool_result', { call_id: 'k' + k, name: 'lookup', output: 'key echo ' + sc.keys[0] + ' / ' + sc.keys[1], is_error: false });
        send('text', { delta: 'answer ' + k });
        sc.affectNow.set(ctx.session.agent_id, snapshot(ctx.session.agent_id, emitted(k), 0.1 + (k % 10) / 10, 'context ' + sc.keys[1]));
        send('done', { turn_id: ctx.turnId, usage: { input_tokens: k, output_tokens: k }, finish_reason: 'stop' });
        return;
      }
      send('error', { code: 'unknown_script', message: ctx.text });
    },
  };
  return sc;
}

/** Opens the console at a path of its origin (e.g. with `?stall_ms=`). */
async function openAt(browser, base, pathAndQuery, options) {
  const c = await h.openConsole(browser, base, options);
  if (pathAndQuery !== '/') {
    await c.page.goto(base + pathAndQuery);
    await c.page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
  }
  return c;
}

/** The last assistant turn's timeline values, as the page computed them. */
async function lastTimeline(page) {
  return page.evaluate(() => {
    const s = window.ratatoskrConsole.flight.buildExport();
    const turn = s.turns[s.turns.length - 1];
    return { turn, timeline: window.ratatoskrConsole.flight.turnTimeline(turn) };
  });
}

/** Every console pane's text, for comparing a live session with its import. */
async function panes(page) {
  return page.evaluate(() => {
    const t = (id) => document.getElementById(id).textContent;
    return {
      transcript: t('transcript'),
      turns: document.querySelectorAll('#transcript .msg.assistant').length,
      timelines: [...document.querySelectorAll('#transcript details.flight')].map((d) => d.textContent),
      tools: t('tools'),
      bifrost: t('bifrost'),
      admin: [...document.querySelectorAll('#admin-events li')].map((li) => li.textContent),
      affect: t('affect'),
      sparks: [...document.querySelectorAll('#affect .spark')].map((s) => s.textContent + ' ' + s.title),
    };
  });
}

async function exportDocument(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-session')]);
  const file = await download.path();
  return { name: download.suggestedFilename(), text: fs.readFileSync(file, 'utf8') };
}

async function importWithPicker(page, text, name = 'session.json') {
  await page.setInputFiles('#import-file', { name, mimeType: 'application/json', buffer: Buffer.from(text, 'utf8') });
}

async function importWithDrop(page, text, name = 'session.json') {
  await page.evaluate(([body, fileName]) => {
    const dt = new DataTransfer();
    dt.items.add(new File([body], fileName, { type: 'application/json' }));
    const view = document.getElementById('console-view');
    view.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    view.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, [text, name]);
}

/**
 * Validates a value against docs/session-export.schema.json: a small JSON Schema
 * reader for the keywords that schema uses. Returns the first fault, or null.
 */
function schemaFault(schema, value, root = schema, at = '$') {
  if (schema.$ref) return schemaFault(root.$defs[schema.$ref.replace('#/$defs/', '')], value, root, at);
  if (schema.oneOf) {
    const ok = schema.oneOf.filter((s) => schemaFault(s, value, root, at) === null).length;
    return ok === 1 ? null : `${at}: matches ${ok} of oneOf`;
  }
  if ('const' in schema && value !== schema.const) return `${at}: not ${JSON.stringify(schema.const)}`;
  if (schema.enum && !schema.enum.includes(value)) return `${at}: not one of ${schema.enum}`;
  if (schema.type) {
    const types = [].concat(schema.type);
    const kind = value === null ? 'null' : Array.isArray(value) ? 'array' : Number.isInteger(value) ? 'integer' : typeof value;
    if (!types.includes(kind) && !(kind === 'integer' && types.includes('number'))) return `${at}: ${kind}, not ${types}`;
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) return `${at}: below ${schema.minimum}`;
    if (schema.maximum !== undefined && value > schema.maximum) return `${at}: above ${schema.maximum}`;
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${at}: more than ${schema.maxItems} items`;
    for (let i = 0; schema.items && i < value.length; i += 1) {
      const f = schemaFault(schema.items, value[i], root, `${at}[${i}]`);
      if (f) return f;
    }
  } else if (value !== null && typeof value === 'object') {
    for (const k of schema.required || []) if (!(k in value)) return `${at}: no ${k}`;
    for (const [k, v] of Object.entries(value)) {
      if (schema.properties && schema.properties[k]) {
        const f = schemaFault(schema.properties[k], v, root, `${at}.${k}`);
        if (f) return f;
      } else if (schema.additionalProperties === false) {
        return `${at}: unknown field ${k}`;
      }
    }
  }
  return null;
}

const SCHEMA = JSON.parse(fs.readFileSync(path.join(h.REPO_ROOT, 'docs', 'session-export.schema.json'), 'utf8'));

const apiRequestsAfter = (problems, t) => problems.requests.filter((r) => r.at >= t && new URL(r.url).pathname.startsWith('/api/'));

// Timings these tests hold to 50-100 ms: jco's shim hands a stream's first
// events on a few hundred ms late under load (a false stall, a shorter span).
const JCO_LATE = "jco's shim hands a stream's first events on a few hundred ms late under load";

describe('flight recorder (mock upstream)', () => {
  let mock;
  let host;
  let proxy;
  let browser;
  let sc;

  h.suiteSetup(async (own) => {
    sc = scenario();
    mock = own(await new MockUpstream(sc).start());
    sc.keys = [mock.consumerKey, mock.adminKey];
    host = own(await h.startHost({ variables: mock.variables() }));
    proxy = own(await new BufferingProxy(host.url).start());
    browser = own(await h.launchBrowser());
  });

  test('turn timeline: first byte, first thinking / text, each tool call, terminal, total, largest gap, deltas/s (within 50 ms)',
    { skip: h.notOnJco(JCO_LATE) }, async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      assert.equal(await page.evaluate(() => window.ratatoskrConsole.flight.stallMs), 10000, 'the stall threshold defaults to 10 s');
      await h.startSession(page, 'timed');
      await h.sendWithEnter(page, 'timeline');
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await h.waitFor(page, () => document.querySelector('#transcript .msg.assistant details.flight'), undefined, { what: 'the turn timeline' });
      const { turn, timeline: t } = await lastTimeline(page);
      const sent = sc.sent.get(turn.events[0].data.turn_id);
      assert.ok(sent, 'the mock logged the turn');
      assert.deepEqual(turn.events.map((e) => e.event), sent.map((e) => e.event), 'every relayed event recorded, in order');

      // Known delays: when the mock sent each event, from the moment the browser sent
      // the turn (the same machine's clock: turn.started_at is the browser's Date.now()
      // at sending). The page's times may trail them only by the relay's latency.
      // turn.started, the first body write after the head, may also wait for the head's
      // ACK (Nagle is on, as in Spin): the first byte gets a wider bound.
      const sentFrom = Date.parse(turn.started_at);
      const near = (got, want, what, tol = TOLERANCE_MS) => assert.ok(Math.abs(got - want) <= tol, `${what}: ${got.toFixed(1)} ms, expected ${want} ms ± ${tol}`);
      turn.events.forEach((e, i) => { if (i > 0) near(e.browser_ms, sent[i].at - sentFrom, `event ${i} (${e.event})`); });
      const sentAt = (event, k = 0) => sent.filter((e) => e.event === event)[k].at - sentFrom;
      const b0 = turn.events[0].browser_ms;
      assert.ok(t.first_byte_ms !== null && t.first_byte_ms <= b0 + 1, `first byte ${t.first_byte_ms} ms, at or before turn.started (${b0} ms)`);
      near(t.first_byte_ms, sent[0].at - sentFrom, 'time to first byte', 2 * TOLERANCE_MS);
      near(t.first_thinking_ms, sentAt('thinking'), 'time to first thinking');
      near(t.first_text_ms, sentAt('text'), 'time to first text');
      assert.equal(t.tools.length, 2);
      assert.deepEqual(t.tools.map((x) => [x.call_id, x.name, x.is_error]), [['c1', 'lookup', false], ['c2', 'fetch_url', true]]);
      near(t.tools[0].duration_ms, sentAt('tool_result', 0) - sentAt('tool_call', 0), 'lookup duration');
      near(t.tools[1].duration_ms, sentAt('tool_result', 1) - sentAt('tool_call', 1), 'fetch_url duration');
      near(t.tools[0].duration_ms, 500, 'lookup duration (script)');
      near(t.tools[1].duration_ms, 250, 'fetch_url duration (script)');
      assert.deepEqual(t.terminal && [t.terminal.kind, t.terminal.origin], ['done', 'stream']);
      near(t.total_ms, sentAt('done'), 'total');
      assert.deepEqual([t.max_gap.after, t.max_gap.before], ['tool_result', 'text'], 'the largest gap is the 1.2 s silence');
      near(t.max_gap.ms, sentAt('text', 1) - sentAt('tool_result', 1), 'largest gap');
      near(t.max_gap.ms, 1200, 'largest gap (script)');
      assert.equal(t.deltas, 7);
      assert.ok(Math.abs(t.deltas_per_s - 7 / (t.total_ms / 1000)) < 0.06, `deltas/s ${t.deltas_per_s}`);
      assert.equal(t.buffering.buffered, false, 'no buffering on the direct path');
      assert.deepEqual(t.stalls, []);
      if (turn.events.some((e) => e.server_ms !== null)) {
        // The proxy's stamps agree with the upstream's send times too.
        const st1 = turn.events[1].server_ms;
        turn.events.forEach((e, i) => { if (i > 0) near(e.server_ms - st1, sent[i].at - sent[1].at, `proxy stamp ${i} (${e.event})`); });
      }

      // Rendered: a <details> under the status line, keyboard reachable (Shift+Tab from
      // the composer lands on its summary; Enter opens it), values as computed.
      const shown = await page.evaluate(() => {
        const msg = [...document.querySelectorAll('#transcript .msg.assistant')].pop();
        const d = msg.querySelector('details.flight');
        const rows = {};
        for (const dt of d.querySelectorAll('dt')) rows[dt.textContent] = (rows[dt.textContent] ? rows[dt.textContent] + ' | ' : '') + dt.nextElementSibling.textContent;
        return { after: d.previousElementSibling.className, summary: d.querySelector('summary').textContent, rows, warning: !!msg.querySelector('.buffering-warning') };
      });
      assert.equal(shown.after, 'status-line done');
      assert.equal(shown.warning, false);
      assert.match(shown.summary, /^timeline · \d+ ms · 7 deltas$/);
      const ms = (v) => Math.round(v) + ' ms';
      assert.equal(shown.rows['first byte'], ms(t.first_byte_ms));
      assert.equal(shown.rows['first thinking'], ms(t.first_thinking_ms));
      assert.equal(shown.rows['first text'], ms(t.first_text_ms));
      assert.equal(shown.rows.tool, `lookup · ${ms(t.tools[0].start_ms)} → ${ms(t.tools[0].end_ms)} · ${ms(t.tools[0].duration_ms)} · ok | `
        + `fetch_url · ${ms(t.tools[1].start_ms)} → ${ms(t.tools[1].end_ms)} · ${ms(t.tools[1].duration_ms)} · error`);
      assert.equal(shown.rows.terminal, `done at ${ms(t.total_ms)}`);
      assert.equal(shown.rows.total, ms(t.total_ms));
      assert.equal(shown.rows['largest gap'], `${ms(t.max_gap.ms)} (tool_result → text)`);
      assert.equal(shown.rows.deltas, `7 · ${t.deltas_per_s.toFixed(1)} /s`);
      await page.focus('#message');
      await page.keyboard.press('Shift+Tab');
      assert.equal(await page.evaluate(() => document.activeElement.tagName + ' ' + document.activeElement.parentElement.className), 'SUMMARY flight');
      await page.keyboard.press('Enter');
      assert.equal(await page.evaluate(() => document.querySelector('#transcript details.flight').open), true, 'Enter opens the timeline');
      const msg = await page.$('#transcript .msg.assistant');
      await msg.screenshot({ path: path.join(h.ARTIFACTS, '20-turn-timeline.png') }).catch(() => fs.mkdirSync(h.ARTIFACTS, { recursive: true }));
      if (process.env.UPDATE_DOCS_SCREENSHOT === '1' || !fs.existsSync(path.join(h.REPO_ROOT, 'docs', 'timeline.png'))) {
        await msg.screenshot({ path: path.join(h.REPO_ROOT, 'docs', 'timeline.png') });
      }
      const rec = await h.assertClean(assert, page, problems);
      assert.equal(rec.activeIntervals, 0, 'no interval left running after the turn');
    } finally {
      await context.close();
    }
  });

  test('stall marker: appears after ?stall_ms= of silence, says for how long, clears when a delta arrives',
    { skip: h.notOnJco(JCO_LATE) }, async () => {
    const { page, problems, context } = await openAt(browser, host.url, '/?stall_ms=400');
    try {
      assert.equal(await page.evaluate(() => window.ratatoskrConsole.flight.stallMs), 400);
      await h.startSession(page, 'stall');
      await h.sendWithEnter(page, 'stall');
      await h.waitFor(page, () => document.querySelector('#transcript .stall-marker'), undefined, { timeout: 5000, what: 'the stall marker' });
      const first = await page.textContent('#transcript .stall-marker');
      assert.match(first, /^⏸ stalled · no delta for \d+\.\d s$/);
      await h.sleep(500);
      const later = await page.evaluate(() => { const m = document.querySelector('#transcript .stall-marker'); return m && m.textContent; });
      assert.ok(later, 'still stalled 0.5 s later');
      const secs = (s) => Number(/for (\d+\.\d) s/.exec(s)[1]);
      assert.ok(secs(later) > secs(first), `the silence counter moves: ${first} → ${later}`);
      assert.ok(secs(later) >= 0.4, later);
      // The delta arrives: the marker goes, and the timeline keeps the stall.
      await h.waitFor(page, () => !document.querySelector('#transcript .stall-marker') && /after a silence/.test(document.querySelector('#transcript .msg.assistant .text').textContent),
        undefined, { timeout: 5000, what: 'the marker to clear when the text arrives' });
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      assert.equal(await page.$('#transcript .stall-marker'), null);
      const { timeline: t } = await lastTimeline(page);
      assert.equal(t.stalls.length, 1);
      const stall = t.stalls[0].to_ms - t.stalls[0].from_ms;
      assert.ok(Math.abs(stall - 1600) <= TOLERANCE_MS * 2, `stall of ${stall} ms`);
      assert.match(await page.evaluate(() => document.querySelector('#transcript details.flight').textContent), /stalls1 · longest \d+ ms/);
      const rec = await h.assertClean(assert, page, problems);
      assert.equal(rec.activeIntervals, 0, 'the stall watch stopped with the turn');
    } finally {
      await context.close();
    }
  });

  test('buffering detector: a typed warning behind a buffering proxy, never on the direct path',
    { skip: h.notOnJco(JCO_LATE) }, async () => {
    const runTurn = async (base) => {
      const c = await h.openConsole(browser, base);
      await h.startSession(c.page, 'spread');
      await h.sendWithEnter(c.page, 'spread');
      assert.equal((await h.waitForTerminal(c.page)).kind, 'done');
      await h.waitFor(c.page, () => document.querySelector('#transcript details.flight'), undefined, { what: 'the timeline' });
      return c;
    };
    const direct = await runTurn(host.url);
    try {
      const { turn, timeline } = await lastTimeline(direct.page);
      assert.ok(turn.events.every((e) => Number.isFinite(e.server_ms)), 'the proxy stamps every relayed turn event (`: t=`)');
      assert.ok(Number.isFinite(turn.server_t0), 'the stream carries `: t0=`');
      assert.ok(timeline.server_span_ms >= 1500, `the proxy saw the turn over ${timeline.server_span_ms} ms`);
      assert.equal(timeline.buffering.buffered, false, JSON.stringify(timeline.buffering));
      assert.equal(await direct.page.$('.buffering-warning'), null, 'no warning on the direct path');
      await h.assertClean(assert, direct.page, direct.problems, 'direct');
    } finally {
      await direct.context.close();
    }

    const held = await runTurn(proxy.url);
    try {
      const { turn, timeline } = await lastTimeline(held.page);
      const turnHeld = proxy.held.find((x) => /\/turns$/.test(x.path));
      assert.ok(turnHeld && turnHeld.heldMs >= 1500, `the proxy held the turn stream: ${JSON.stringify(turnHeld)}`);
      assert.ok(turn.events.every((e) => Number.isFinite(e.server_ms)));
      const b = timeline.buffering;
      assert.equal(b.buffered, true, JSON.stringify(b));
      assert.equal(b.bunched, b.stamped);
      assert.ok(b.window_ms <= 50 && b.server_spread_ms >= 1000, JSON.stringify(b));
      const warning = await held.page.evaluate(() => {
        const w = document.querySelector('#transcript .msg.assistant .buffering-warning');
        return w && { code: w.getAttribute('data-error-code'), text: w.textContent, role: w.getAttribute('role') };
      });
      assert.ok(warning, 'the warning is shown on the turn');
      assert.equal(warning.code, 'response_buffered');
      assert.match(warning.text, /^⚠ response_buffered: /);
      assert.match(warning.text, /reverse proxy/);
      assert.match(warning.text, /proxy_buffering off/);
      assert.match(warning.text, /X-Accel-Buffering: no/);
      assert.match(await held.page.textContent('#transcript details.flight summary'), / · buffered$/);
      await h.screenshot(held.page, '21-buffering-warning');
      await h.assertClean(assert, held.page, held.problems, 'behind the buffering proxy');
    } finally {
      await held.context.close();
    }
  });

  test('buffering rule: >= 80 % of stamped events within 50 ms in the browser, their stamps >= 1 s apart', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const rule = (pairs) => page.evaluate((p) => window.ratatoskrConsole.flight.detectBuffering(
        p.map(([server, browser]) => ({ event: 'text', data: {}, server_ms: server, browser_ms: browser }))), pairs);
      // Held and released at once: flagged.
      assert.equal((await rule([[0, 2000], [400, 2001], [800, 2002], [1200, 2003], [1600, 2004]])).buffered, true);
      // Exactly at the bounds: 4 of 5 (80 %) within 50 ms, their stamps 1000 ms apart.
      const edge = await rule([[0, 10], [500, 2000], [1000, 2020], [1200, 2040], [1500, 2050]]);
      assert.deepEqual(edge, { stamped: 5, bunched: 4, window_ms: 50, server_spread_ms: 1000, buffered: true });
      // Just outside each bound: not flagged.
      assert.equal((await rule([[0, 10], [500, 2000], [999, 2020], [1200, 2040], [1499, 2050]])).buffered, false, 'stamps 999 ms apart');
      assert.equal((await rule([[0, 10], [500, 2000], [1000, 2020], [1200, 2040], [1500, 2051]])).buffered, false, 'spread over 51 ms');
      assert.equal((await rule([[0, 10], [300, 300], [500, 2000], [1000, 2020], [1200, 2040], [1500, 2050]])).buffered, false, '4 of 6 (67 %)');
      // A pause then a burst that was a burst at the server too: not flagged.
      assert.equal((await rule([[0, 5], [1500, 1505], [1501, 1506], [1502, 1507], [1503, 1508]])).buffered, false, 'an upstream burst');
      // Streamed as sent, or without stamps: not flagged.
      assert.equal((await rule([[0, 5], [400, 405], [800, 806], [1200, 1204], [1600, 1607]])).buffered, false);
      assert.deepEqual(await rule([[null, 1], [null, 2], [null, 3]]), { stamped: 0, buffered: false });
      assert.equal((await rule([[0, 1], [1500, 2]])).buffered, false, 'fewer than 3 stamped events');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('export -> import round trip: one versioned document without a key; every pane the same, read-only, no live call after the import', async () => {
    const live = await h.openConsole(browser, host.url);
    let doc;
    let exported;
    let livePanes;
    try {
      const sessionId = await h.startSession(live.page, 'round');
      await h.waitFor(live.page, () => document.querySelectorAll('#admin-events li').length === 3 && document.querySelector('#bifrost dl.kv')
        && /tools available/.test(document.getElementById('tools').textContent) && /emitted/.test(document.getElementById('affect').textContent),
      undefined, { what: 'every pane of the live session' });
      for (const k of [1, 2]) {
        await h.sendWithEnter(live.page, 'emit ' + k);
        assert.equal((await h.waitForTerminal(live.page)).kind, 'done');
        await h.waitFor(live.page, (e) => { const head = document.querySelector('#affect > div'); return head !== null && head.textContent.endsWith(e); }, emitted(k), { timeout: 8000, what: `the affect emit ${k}` });
      }
      await h.sendWithEnter(live.page, 'timeline');
      assert.equal((await h.waitForTerminal(live.page)).kind, 'done');
      await h.waitFor(live.page, () => /last dispatch/.test(document.getElementById('bifrost').textContent) && /120 ms/.test(document.getElementById('bifrost').textContent),
        undefined, { what: 'the BifrostState after the third turn' });
      await h.sleep(300);
      livePanes = await panes(live.page);
      exported = await exportDocument(live.page);
      doc = JSON.parse(exported.text);

      // The document: versioned, complete, both timestamps on every event.
      assert.equal(exported.name, `ratatoskr-session-${sessionId}.json`);
      assert.equal(doc.format, 'ratatoskr-session');
      assert.equal(doc.version, 1);
      assert.deepEqual(doc.agent, { agent_id: 'round', display_name: 'Agent round' });
      assert.equal(doc.session_id, sessionId);
      assert.equal(doc.turns.length, 3);
      for (const turn of doc.turns) {
        assert.ok(turn.events.length >= 4);
        for (const e of turn.events) {
          assert.ok(Number.isFinite(e.browser_ms), 'browser receive time');
          assert.ok('server_ms' in e, 'server stamp field');
        }
        assert.equal(turn.terminal.kind, 'done');
      }
      assert.equal(doc.tools.status, 200);
      assert.deepEqual(doc.tools.body.tools.map((t) => t.name), ['lookup', 'fetch_url']);
      assert.ok(doc.bifrost_snapshots.length >= 4, `a BifrostState per fetch: ${doc.bifrost_snapshots.length}`);
      assert.equal(doc.admin_events.length, 3);
      assert.deepEqual(doc.affect_history.map((s) => s.emitted_at), [emitted(0), emitted(1), emitted(2)]);
      // The key canary over the export: the upstream echoed both keys into tools,
      // BifrostState, tool output, admin events and affect; the document has neither.
      for (const key of [mock.consumerKey, mock.adminKey]) {
        assert.ok(key.length >= 16);
        assert.ok(!exported.text.includes(key), 'the export never contains a key');
        assert.ok(!exported.text.includes(key.slice(4)), 'nor a part of one');
      }
      assert.ok(exported.text.includes('[redacted]'), 'the echoes arrived redacted');
      // It follows the published schema, and the page's own reader takes it.
      assert.equal(schemaFault(SCHEMA, doc), null, 'the export follows docs/session-export.schema.json');
      assert.match(schemaFault(SCHEMA, { ...doc, version: 2 }), /version/);
      assert.match(schemaFault(SCHEMA, { ...doc, turns: [{ ...doc.turns[0], events: [{ event: 'text', data: {}, server_ms: null }] }] }), /browser_ms/);
      assert.equal(await live.page.evaluate((text) => window.ratatoskrConsole.flight.parseSessionDocument(text).session_id, exported.text), sessionId);

      // Imported into the live page itself (file picker): the live session stops.
      const importAt = Date.now();
      await importWithPicker(live.page, exported.text);
      await h.waitFor(live.page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the recorded banner' });
      assert.deepEqual(await panes(live.page), livePanes, 'the import shows the same panes');
      await h.sleep(2500); // past a keepalive and the first PAD poll slot
      assert.deepEqual(apiRequestsAfter(live.problems, importAt), [], 'no /api request after the import');
      const rec = await h.record(live.page);
      assert.equal(rec.openES, 0, 'the admin stream was closed');
      assert.equal(rec.activeIntervals, 0);
      await h.assertClean(assert, live.page, live.problems, 'live page');
    } finally {
      await live.context.close();
    }

    // A fresh console, the document dropped on it.
    const fresh = await h.openConsole(browser, host.url);
    try {
      await h.sleep(300);
      const importAt = Date.now();
      await importWithDrop(fresh.page, exported.text, 'dropped.json');
      await h.waitFor(fresh.page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the recorded banner' });
      const banner = await fresh.page.textContent('#replay-banner');
      assert.match(banner, /^Recorded session \(read-only\): agent Agent round · session s_\w+ · exported .* · 3 turns\. No live calls are made\. Leave recording$/);
      assert.deepEqual(await panes(fresh.page), livePanes, 'the dropped import shows the same panes');
      assert.equal(await fresh.page.textContent('#session-id'), doc.session_id);
      for (const id of ['message', 'send', 'cancel', 'bifrost-refresh']) assert.equal(await fresh.page.isDisabled('#' + id), true, `#${id} is disabled in a recording`);
      await fresh.page.click('#bifrost-refresh', { force: true }).catch(() => {});
      await fresh.page.keyboard.press('Escape');
      // Its export is the same document (but for exported_at).
      const again = JSON.parse((await exportDocument(fresh.page)).text);
      assert.deepEqual({ ...again, exported_at: null }, { ...doc, exported_at: null });
      await h.sleep(1500);
      assert.deepEqual(apiRequestsAfter(fresh.problems, importAt), [], 'no /api request after the import');
      await h.screenshot(fresh.page, '22-imported-session');
      // Leaving the recording goes back to the empty console, still without a call.
      await fresh.page.click('#replay-close');
      assert.equal(await fresh.page.isHidden('#replay-banner'), true);
      assert.equal(await fresh.page.textContent('#session-id'), 'none');
      assert.equal(await fresh.page.$$eval('#transcript .msg', (m) => m.length), 0);
      assert.deepEqual(apiRequestsAfter(fresh.problems, importAt), []);
      await h.assertClean(assert, fresh.page, fresh.problems, 'fresh page');
    } finally {
      await fresh.context.close();
    }
  });

  test('malformed or wrong-version documents are refused with a typed error, and nothing is rendered', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      // A valid document to corrupt, made by a real session.
      await h.startSession(page, 'bad');
      await h.sendWithEnter(page, 'emit 1');
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await h.waitFor(page, (e) => { const head = document.querySelector('#affect > div'); return head !== null && head.textContent.endsWith(e); }, emitted(1), { timeout: 8000, what: 'the affect emit' });
      // Before the snapshot below: on jco serve the post-turn BifrostState can land after a fixed sleep.
      await h.waitForLastDispatch(page, { timeout: 8000 });
      await h.sleep(200);
      const good = JSON.parse((await exportDocument(page)).text);
      const before = await panes(page);
      const mutate = (fn) => { const d = JSON.parse(JSON.stringify(good)); fn(d); return JSON.stringify(d); };
      const cases = [
        ['not JSON', '{"format": "ratatoskr-session", "version": 1,', 'import_invalid_json'],
        ['empty file', '', 'import_invalid_json'],
        ['a JSON array', '[1, 2, 3]', 'import_wrong_format'],
        ['another format', mutate((d) => { d.format = 'har'; }), 'import_wrong_format'],
        ['no format', mutate((d) => { delete d.format; }), 'import_wrong_format'],
        ['version 2', mutate((d) => { d.version = 2; }), 'import_unsupported_version'],
        ['version "1"', mutate((d) => { d.version = '1'; }), 'import_unsupported_version'],
        ['turns not an array', mutate((d) => { d.turns = {}; }), 'import_invalid_document'],
        ['an event without browser_ms', mutate((d) => { delete d.turns[0].events[1].browser_ms; }), 'import_invalid_document'],
        ['a bad terminal kind', mutate((d) => { d.turns[0].terminal.kind = 'exploded'; }), 'import_invalid_document'],
        ['an unknown field', mutate((d) => { d.extra = true; }), 'import_invalid_document'],
        // The fault is at the very end: validation must run before any pane is drawn.
        ['the last affect snapshot broken', mutate((d) => { d.affect_history.push('not a snapshot'); }), 'import_invalid_document'],
      ];
      for (const [what, text, code] of cases) {
        await importWithPicker(page, text, 'bad.json');
        await h.waitFor(page, (c) => { const e = document.getElementById('import-error'); return !e.hidden && e.getAttribute('data-error-code') === c; }, code, { what: `${what}: ${code}` });
        const shown = await page.textContent('#import-error');
        assert.ok(shown.startsWith(`Import refused: ${code} — `), `${what}: ${shown}`);
        assert.equal(await page.isHidden('#replay-banner'), true, `${what}: no recorded banner`);
        assert.deepEqual(await panes(page), before, `${what}: the page is unchanged`);
        await page.evaluate(() => { document.getElementById('import-error').hidden = true; });
      }
      assert.match(await page.evaluate(() => {
        try { window.ratatoskrConsole.flight.parseSessionDocument('{"format":"ratatoskr-session","version":1}'); } catch (e) { return e.code + ': ' + e.message; }
        return 'accepted';
      }), /^import_invalid_document: /);
      // A good import, then a bad one: the recording stays as it was.
      await importWithPicker(page, JSON.stringify(good));
      await h.waitFor(page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the good import' });
      const replayed = await panes(page);
      await importWithDrop(page, mutate((d) => { d.version = 7; }));
      await h.waitFor(page, () => !document.getElementById('import-error').hidden, undefined, { what: 'the refusal over a recording' });
      assert.equal(await page.getAttribute('#import-error', 'data-error-code'), 'import_unsupported_version');
      assert.deepEqual(await panes(page), replayed);
      assert.equal(await page.isVisible('#replay-banner'), true);
      await h.screenshot(page, '23-import-refused');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('an imported document renders through the text-only kit: the XSS corpus as literal text', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const events = [{ event: 'turn.started', data: { turn_id: P[7] }, server_ms: 0, browser_ms: 5 }];
      let t = 5;
      const push = (event, data) => { t += 3; events.push({ event, data, server_ms: t, browser_ms: t }); };
      for (const p of P) push('thinking', { delta: p + '\n' });
      P.forEach((p, i) => {
        push('tool_call', { call_id: 'c' + i, name: p, arguments: { payload: p } });
        push('tool_result', { call_id: 'c' + i, name: p, output: p, is_error: i % 5 === 0 });
      });
      for (const p of P) push('text', { delta: p + '\n' });
      push(S[3], { delta: P[4] }); // an unknown event type: ignored, as live
      push('done', { turn_id: P[7], usage: { input_tokens: P[1], output_tokens: P[2] }, finish_reason: P[3] });
      const doc = {
        format: 'ratatoskr-session', version: 1, exported_at: P[0],
        agent: { agent_id: P[5], display_name: P[6] },
        session_id: P[8], bifrost_visible_host: P[9], started_at: P[10], stall_ms: 10000,
        turns: [
          { index: 1, user_text: P.join(' '), started_at: P[11], server_t0: 1, first_byte_ms: 4, events,
            terminal: { kind: 'done', origin: 'stream', data: { turn_id: P[7], usage: { input_tokens: P[1], output_tokens: P[2] }, finish_reason: P[3] }, browser_ms: t },
            stalls: [] },
          { index: 2, user_text: P[12], started_at: P[13], server_t0: null, first_byte_ms: null,
            events: [{ event: 'error', data: { code: P[14], message: P[15] }, server_ms: null, browser_ms: 1 }],
            terminal: { kind: 'error', origin: 'stream', data: { code: P[14], message: P[15] }, browser_ms: 1 }, stalls: [] },
        ],
        tools: { fetched_at: P[16], status: 200, ok: true, body: { session_id: P[17], agent_id: P[18], tools: P.map((p) => ({ name: p, description: p })) } },
        bifrost_snapshots: [{ fetched_at: P[19], status: 200, ok: true, body: {
          agent_id: P[20], endpoint: P[30], model: P[40], caps: Object.fromEntries(S.slice(0, 20).map((p, i) => [p, at(i + 7)])),
          tools: P.map((p, i) => ({ name: p, description: at(i + 1) })), bound_at: P[60], inflight_turns: P[61],
          last_dispatch: { turn_id: P[62], latency_ms: P[63], status: P[64] } } }],
        admin_events: S.map((p, i) => ({ event: { id: p, type: p, timestamp: null, data: { session_id: P[8], note: p, [p]: at(i + 3) } }, shown_at: at(i + 9) })),
        affect_history: [{
          agent_id: P[21], emitted_at: P[22], pad: { pleasure: 0.1, arousal: 0.2, dominance: 0.3 },
          relations: P.map((p, i) => ({ target_entity: p, relation_context: at(i + 1), trust_ability: { value: 0.5, confidence: 0.5, evidence_count: at(i + 2) } })),
        }],
      };
      assert.equal(schemaFault(SCHEMA, doc), null, 'the corpus document is a valid export');
      await importWithPicker(page, JSON.stringify(doc), 'xss.json');
      await h.waitFor(page, () => !document.getElementById('replay-banner').hidden, undefined, { what: 'the imported corpus' });
      const dom = await page.evaluate(() => {
        const text = (node) => (node ? node.textContent : null);
        const turns = document.querySelectorAll('#transcript .msg.assistant');
        return {
          user: text(document.querySelector('#transcript .msg.user .text')),
          who: text(turns[0].querySelector('.who')),
          answer: text(turns[0].querySelector(':scope > .text')),
          reasoning: text(turns[0].querySelector('details.reasoning pre')),
          tools: [...turns[0].querySelectorAll('details.tool summary')].map(text),
          status: [...turns].map((m) => text(m.querySelector('.status-line'))),
          timelineTools: [...turns[0].querySelectorAll('details.flight dt')].filter((dt) => dt.textContent === 'tool').map((dt) => text(dt.nextElementSibling)),
          inventory: text(document.querySelector('#tools .tools-inventory .mono')),
          endpoint: [...document.querySelectorAll('#bifrost dt')].find((dt) => dt.textContent === 'endpoint').nextElementSibling.textContent,
          admin: [...document.querySelectorAll('#admin-events li')].map((li) => text(li.querySelector('div > .mono'))),
          adminTimes: [...document.querySelectorAll('#admin-events li')].map((li) => text(li.querySelector('div > .muted'))),
          relations: [...document.querySelectorAll('#affect .relation')].map((r) => text(r.children[0])),
          banner: text(document.getElementById('replay-banner')),
          session: text(document.getElementById('session-id')),
        };
      });
      assert.equal(dom.user, P.join(' '));
      assert.equal(dom.who, P[6]);
      assert.equal(dom.answer, P.map((p) => p + '\n').join(''));
      assert.equal(dom.reasoning, P.map((p) => p + '\n').join(''));
      assert.equal(dom.tools.length, 2 * P.length);
      P.forEach((p, i) => {
        assert.equal(dom.tools[2 * i], `call · ${p}`);
        assert.equal(dom.tools[2 * i + 1], `result · ${p}` + (i % 5 === 0 ? ' · error' : ''));
        assert.ok(dom.timelineTools[i].startsWith(p + ' · '), `timeline tool #${i}`);
      });
      assert.deepEqual(dom.status, [`done · ${P[1]} in / ${P[2]} out · ${P[3]}`, `error · ${P[14]} — ${P[15]}`]);
      assert.equal(dom.inventory, P.join(', '));
      assert.equal(dom.endpoint, P[30]);
      assert.deepEqual(dom.admin, S.slice().reverse());
      assert.deepEqual(dom.adminTimes, S.map((p, i) => `${at(i + 9)} · #${p}`).reverse());
      assert.deepEqual(dom.relations, P);
      assert.equal(dom.session, P[8]);
      assert.ok(dom.banner.includes(P[6]) && dom.banner.includes(P[8]));

      const structure = await page.evaluate(([tags, attrs]) => {
        const badTags = [];
        const badAttrs = [];
        for (const node of document.body.querySelectorAll('*')) {
          if (!tags.includes(node.tagName)) badTags.push(node.tagName);
          for (const a of node.attributes) if (!attrs.includes(a.name)) badAttrs.push(node.tagName + '[' + a.name + ']');
        }
        return { badTags, badAttrs, scripts: document.scripts.length, frames: window.frames.length };
      }, [[...ALLOWED_TAGS], [...ALLOWED_ATTRS]]);
      assert.deepEqual(structure, { badTags: [], badAttrs: [], scripts: 1, frames: 0 });
      const foreign = problems.requests.filter((r) => {
        if (r.url.startsWith('data:') || r.url.startsWith('blob:')) return false;
        const u = new URL(r.url);
        return u.origin !== host.url || !(u.pathname === '/' || h.CONSOLE_MODULES.includes(u.pathname) || u.pathname.startsWith('/api/'));
      });
      assert.deepEqual(foreign, []);
      await h.screenshot(page, '24-imported-xss-corpus');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('affect history: seeded from /api/affect/history, it survives a page reload and spans sessions',
    { skip: h.spinAppOnly('the affect history needs a key-value store; the portable console answers its typed 503') }, async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      sc.affectNow.set('hist', snapshot('hist', emitted(10), 0.1));
      await h.startSession(page, 'hist');
      await h.waitFor(page, (e) => /emitted/.test(document.getElementById('affect').textContent) && document.querySelector('#affect > div').textContent.endsWith(e), emitted(10), { what: 'the first snapshot' });
      for (const k of [11, 12]) {
        await h.sendWithEnter(page, 'emit ' + k);
        assert.equal((await h.waitForTerminal(page)).kind, 'done');
        await h.waitFor(page, (e) => { const head = document.querySelector('#affect > div'); return head !== null && head.textContent.endsWith(e); }, emitted(k), { timeout: 8000, what: `the emit ${k}` });
      }
      const sparks = async () => page.evaluate(() => [...document.querySelectorAll('#affect .metric')].map((m) => [...m.children].map((c) => c.textContent).concat(m.querySelector('.spark').title)));
      const drawn = await sparks();
      const pleasure = drawn.find((r) => r[0] === 'pleasure');
      assert.deepEqual(pleasure.slice(1, 3), ['0.300', '▲ 0.100']);
      assert.match(pleasure[3], /^▁[▁▂▃▄▅▆▇█]█$/);
      assert.equal(pleasure[4], 'last 3 emits');

      // The server's log, newest last.
      const logged = await page.evaluate(async () => (await fetch('/api/affect/history?agent_id=hist')).json());
      assert.equal(logged.agent_id, 'hist');
      assert.deepEqual(logged.snapshots.map((s) => s.emitted_at), [emitted(10), emitted(11), emitted(12)]);

      // Reload: a new page, a new session for the same agent; the same history is drawn.
      await page.reload();
      await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
      assert.equal(await page.textContent('#affect'), 'No snapshot yet.');
      await h.startSession(page, 'hist');
      await h.waitFor(page, () => document.querySelector('#affect .spark') && /last 3 emits/.test(document.querySelector('#affect .spark').title), undefined, { what: 'the seeded history after the reload' });
      await h.sleep(500); // the current read (the same emit) is deduplicated
      assert.deepEqual(await sparks(), drawn, 'the same sparklines after a reload');
      assert.equal(await page.evaluate(() => window.__rec.fetches.filter((f) => f.url.startsWith('/api/affect/history?')).length), 1, 'one history read per session start');

      // And the next emit extends it across the two sessions.
      await h.sendWithEnter(page, 'emit 13');
      assert.equal((await h.waitForTerminal(page)).kind, 'done');
      await h.waitFor(page, () => /last 4 emits/.test(document.querySelector('#affect .spark').title), undefined, { timeout: 8000, what: 'the emit after the reload' });
      const after = (await sparks()).find((r) => r[0] === 'pleasure');
      assert.equal(after[1], '0.400');
      assert.match(after[3], /^▁[▁▂▃▄▅▆▇█]{2}█$/);
      assert.equal(after[4], 'last 4 emits');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('affect history on a server without a store: the heading of the pane names its typed 503, the live snapshot is drawn',
    { skip: !h.PORTABLE && 'the Spin app keeps the history; only the portable console has no store' }, async () => {
    const { page, problems, context } = await openAt(browser, host.url, '/');
    try {
      sc.affectNow.set('hist', snapshot('hist', emitted(20), 0.1));
      await h.startSession(page, 'hist');
      await h.waitFor(page, (e) => document.querySelector('#affect > div') && document.querySelector('#affect > div').textContent.endsWith(e), emitted(20), { what: 'the live snapshot' });
      const heading = await page.textContent('#affect-pane h2');
      assert.equal(heading, 'Persona / affect · history not kept by this server: affect_history_unavailable (HTTP 503)');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
