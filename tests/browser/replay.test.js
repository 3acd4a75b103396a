'use strict';
// Paced replay of an imported recording (docs/flight-recorder.md, "Replay") in a real
// browser: a live scripted session (thinking, tool calls, a stall, affect emits)
// exported, the page reloaded, the document imported and replayed as fast as
// possible: the same panes as live (transcript, reasoning, tool panes, timelines with
// their stalls, admin events, affect), the replay's own recording equal to the
// document, and the same for the OTLP export of the session; pacing at x1 with the
// real clock (every event within 50 ms of its due time); x10 shows the stall marker
// on the replay clock; pause, step and restart from the keyboard without moving the
// bar; no /api request from the import on; the 32 MiB cap.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');

const PACING_MS = 50;
const emitted = (k) => new Date(Date.UTC(2026, 10, 2, 10, 0, k)).toISOString();
const snapshot = (agentId, k, pleasure) => ({ agent_id: agentId, emitted_at: emitted(k), pad: { pleasure, arousal: 0.1, dominance: 0.2 } });

/** Scripted turns: [delay before (ms), event, data]. */
const SCRIPTS = {
  'look it up': [
    [60, 'thinking', { delta: 'which tool ' }],
    [40, 'thinking', { delta: 'fits best?' }],
    [40, 'tool_call', { call_id: 'r1', name: 'lookup', arguments: { q: 'fjord', depth: 2 } }],
    [150, 'tool_result', { call_id: 'r1', name: 'lookup', output: 'a long narrow inlet', is_error: false }],
    [30, 'tool_call', { call_id: 'r2', name: 'fetch_url', arguments: { url: 'http://example.invalid/' } }],
    [90, 'tool_result', { call_id: 'r2', name: 'fetch_url', output: 'timeout', is_error: true }],
    [50, 'text', { delta: 'A fjord is ' }],
    [40, 'text', { delta: 'a long narrow inlet.' }],
    [30, 'done', { usage: { input_tokens: 11, output_tokens: 8 }, finish_reason: 'stop' }],
  ],
  'think slowly': [
    [50, 'thinking', { delta: 'hmm' }],
    [700, 'thinking', { delta: ' still thinking' }], // a stall at ?stall_ms=300
    [40, 'text', { delta: 'After a pause: yes.' }],
    [20, 'done', { usage: { input_tokens: 3, output_tokens: 5 }, finish_reason: 'stop' }],
  ],
};

function scenario() {
  const sc = {
    keys: [],
    now: new Map(),
    agents: [{ agent_id: 'rep', display_name: 'Agent rep' }, { agent_id: 'rep2', display_name: 'Agent rep2' }],
    tools: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, tools: [{ name: 'lookup', description: 'Look it up.' }, { name: 'fetch_url', description: 'Fetch.' }] }),
    bifrost: (s) => ({ session_id: s.session_id, agent_id: s.agent_id, endpoint: 'http://mock.invalid/v1', model: 'mock-1', caps: { max_tokens: 512 }, tools: [], bound_at: '2026-11-02T09:00:00Z', inflight_turns: 0,
      last_dispatch: s.turns ? { turn_id: 't_' + s.turns, latency_ms: 10 * s.turns, status: 'ok' } : null }),
    affect: (agentId) => sc.now.get(agentId) || snapshot(agentId, 0, 0.1),
    adminEvents: (s) => [
      { type: 'session.created', data: { session_id: s.session_id, agent_id: s.agent_id } },
      { type: 'turn.queued', data: { session_id: s.session_id, position: 1 } },
    ],
    async turn(ctx) {
      const script = SCRIPTS[ctx.text];
      if (!script) { ctx.send('error', { code: 'unknown_script', message: ctx.text }); return; }
      for (const [delay, event, data] of script) {
        await ctx.sleep(delay);
        if (ctx.cancelled) return;
        if (event === 'done') sc.now.set(ctx.session.agent_id, snapshot(ctx.session.agent_id, ctx.index || 1, 0.2 * (ctx.index || 1)));
        ctx.send(event, event === 'done' ? { turn_id: ctx.turnId, ...data } : data);
      }
    },
  };
  return sc;
}

/** Every pane, as text and as structure (tags and classes), for live against replay. */
async function panes(page) {
  return page.evaluate(() => {
    const shape = (node) => node.tagName.toLowerCase() + (node.className ? '.' + String(node.className).trim().split(/\s+/).sort().join('.') : '')
      + (node.children.length ? '(' + [...node.children].map(shape).join(',') + ')' : '');
    const t = (id) => document.getElementById(id).textContent;
    return {
      transcript: t('transcript'),
      structure: shape(document.getElementById('transcript')),
      reasoning: [...document.querySelectorAll('#transcript details.reasoning pre')].map((p) => p.textContent),
      toolCalls: [...document.querySelectorAll('#transcript details.tool')].map((d) => d.className + ' ' + d.textContent),
      status: [...document.querySelectorAll('#transcript .status-line')].map((s) => s.className + ' ' + s.textContent),
      timelines: [...document.querySelectorAll('#transcript details.flight')].map((d) => d.textContent),
      stallRows: [...document.querySelectorAll('#transcript details.flight dt')].filter((dt) => dt.textContent === 'stalls').map((dt) => dt.nextElementSibling.textContent),
      markers: document.querySelectorAll('#transcript .stall-marker, #transcript .thinking-note, #transcript .awaiting').length,
      tools: t('tools'),
      bifrost: t('bifrost'),
      admin: [...document.querySelectorAll('#admin-events li')].map((li) => li.textContent),
      affect: t('affect'),
      sparks: [...document.querySelectorAll('#affect .spark')].map((s) => s.textContent + ' ' + s.title),
    };
  });
}

async function download(page, selector) {
  const [d] = await Promise.all([page.waitForEvent('download'), page.click(selector)]);
  return fs.readFileSync(await d.path(), 'utf8');
}

async function importText(page, text, name = 'session.json') {
  await page.setInputFiles('#import-file', { name, mimeType: 'application/json', buffer: Buffer.from(text, 'utf8') });
  await h.waitFor(page, () => window.ratatoskrConsole.flight.replaying && window.ratatoskrConsole.replay.status() && window.ratatoskrConsole.replay.status().ended,
    undefined, { what: 'the imported recording drawn' });
}

const status = (page) => page.evaluate(() => window.ratatoskrConsole.replay.status());

/** Replays the recording shown from its start at a speed ("1", "2", "10", "max") and waits for its end. */
async function replayAt(page, speed, timeout = 20000) {
  await page.selectOption('#replay-speed', speed);
  await page.click('#replay-restart');
  assert.match(await page.textContent('#replay-state'), /^ready · 0\/\d+ · /);
  await page.click('#replay-play');
  await h.waitFor(page, () => window.ratatoskrConsole.replay.status().ended, undefined, { timeout, what: `the replay at ${speed} to end` });
}

const apiAfter = (problems, t) => problems.requests.filter((r) => r.at >= t && new URL(r.url).pathname.startsWith('/api'));

/** A short hand-made recording: one turn, events at known times (ms), a silence of `gap` ms before the text. */
function shortDoc({ gap = 300, stallMs = 10000 } = {}) {
  const at = [0, 40, 90, 150, 200, 260, 330, 400];
  const events = [
    ['turn.started', { turn_id: 't_short' }], ['thinking', { delta: 'a' }], ['thinking', { delta: 'b' }],
    ['tool_call', { call_id: 'x1', name: 'lookup', arguments: { q: 1 } }], ['tool_result', { call_id: 'x1', name: 'lookup', output: 'ok', is_error: false }],
    ['text', { delta: 'one ' }], ['text', { delta: 'two ' }], ['text', { delta: 'three' }],
  ].map(([event, data], i) => ({ event, data, server_ms: at[i] + 3, browser_ms: at[i] + 5 + (i >= 5 ? gap : 0) }));
  const end = events[events.length - 1].browser_ms + 30;
  const done = { turn_id: 't_short', usage: { input_tokens: 1, output_tokens: 3 }, finish_reason: 'stop' };
  events.push({ event: 'done', data: done, server_ms: null, browser_ms: end });
  const stalls = gap >= stallMs ? [{ from_ms: events[4].browser_ms, to_ms: events[5].browser_ms }] : [];
  return {
    format: 'ratatoskr-session', version: 1, exported_at: '2026-11-02T10:00:00.000Z', agent: { agent_id: 'short', display_name: 'Short' },
    session_id: 's_short', bifrost_visible_host: null, started_at: '2026-11-02T10:00:00.000Z', stall_ms: stallMs,
    turns: [{ index: 1, user_text: 'go', started_at: '2026-11-02T10:00:00.000Z', server_t0: 1, first_byte_ms: 4, events,
      terminal: { kind: 'done', origin: 'stream', data: done, browser_ms: end }, stalls, affect_at_start: null }],
    tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
  };
}

describe('paced replay', () => {
  let mock; let host; let browser; let sc;

  h.suiteSetup(async (own) => {
    sc = scenario();
    mock = own(await new MockUpstream(sc).start());
    sc.keys = [mock.consumerKey, mock.adminKey];
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  test('equality: a live session exported, reloaded, imported and replayed as fast as possible shows the same panes; its OTLP export too', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await page.goto(host.url + '/?stall_ms=300');
      await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
      await h.startSession(page, 'rep');
      await h.waitFor(page, () => document.querySelectorAll('#admin-events li').length === 2 && document.querySelector('#bifrost dl.kv')
        && /tools available/.test(document.getElementById('tools').textContent) && /emitted/.test(document.getElementById('affect').textContent),
      undefined, { what: 'every pane of the live session' });
      let sawStall = false;
      for (const [k, text] of Object.keys(SCRIPTS).entries()) {
        await h.sendWithEnter(page, text);
        if (text === 'think slowly') {
          await h.waitFor(page, () => document.querySelector('#transcript .stall-marker'), undefined, { what: 'the live stall marker' });
          sawStall = true;
        }
        assert.equal((await h.waitForTerminal(page)).kind, 'done');
        await h.waitFor(page, (e) => { const head = document.querySelector('#affect > div'); return head !== null && head.textContent.endsWith(e); }, emitted(k + 1),
          { timeout: 12000, what: `the affect emit after turn ${k + 1}` });
      }
      assert.ok(sawStall);
      await h.waitFor(page, () => /t_2/.test(document.getElementById('bifrost').textContent), undefined, { what: 'the BifrostState after the second turn' });
      await h.sleep(300);
      const live = await panes(page);
      assert.equal(live.reasoning.length, 2);
      assert.equal(live.toolCalls.length, 4);
      assert.deepEqual(live.stallRows.length, 1, 'the second turn stalled');
      assert.equal(live.markers, 0);
      const text = await download(page, '#export-session');
      const doc = JSON.parse(text);
      assert.equal(doc.stall_ms, 300);
      await page.check('#otlp-content');
      const otlp = await download(page, '#export-otlp');

      // A reload (the default 10 s stall threshold), then the import: drawn at once, the same panes.
      await page.goto(host.url + '/');
      await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
      assert.equal(await page.evaluate(() => window.ratatoskrConsole.flight.stallMs), 10000);
      const importAt = Date.now();
      await importText(page, text);
      assert.deepEqual(await panes(page), live, 'the import (the replay run to its end at once) shows the live panes');
      // Replayed as fast as possible from the start: the same panes, and the replay's own
      // recording of each turn is the document's (times, stamps, stalls, terminals).
      await replayAt(page, 'max');
      assert.deepEqual(await panes(page), live, 'replayed as fast as possible: the live panes');
      const again = await page.evaluate(() => window.ratatoskrConsole.replay.turns());
      assert.deepEqual(again, doc.turns, 'the replay records every turn exactly as the live session did');
      assert.match(await page.textContent('#replay-state'), /^ended · (\d+)\/\1 · as fast as possible$/);

      // The OTLP export (with content) of the same session: the same panes, replayed too.
      await importText(page, otlp, 'trace.json');
      assert.deepEqual(await panes(page), live, 'the OTLP import shows the live panes');
      await replayAt(page, 'max');
      assert.deepEqual(await panes(page), live, 'the OTLP import replayed: the live panes');
      assert.deepEqual(await page.evaluate(() => window.ratatoskrConsole.replay.turns()), doc.turns);
      await h.sleep(1200); // past a keepalive and a PAD poll slot
      assert.deepEqual(apiAfter(problems, importAt), [], 'no /api request from the import on');
      await h.screenshot(page, '30-replay-equal');
      const rec = await h.assertClean(assert, page, problems);
      assert.equal(rec.activeIntervals, 0, 'no interval left running after the replay');
    } finally {
      await context.close();
    }
  });

  test('pacing: at x1 (real clock) every event is applied within 50 ms of its recorded time; x2 and x10 scale it', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      await page.waitForTimeout(200);
      const importAt = Date.now();
      await importText(page, JSON.stringify(shortDoc()), 'short.json');
      const errors = {};
      for (const speed of ['1', '2', '10']) {
        const t0 = Date.now();
        await replayAt(page, speed);
        const wall = Date.now() - t0;
        const log = await page.evaluate(() => window.ratatoskrConsole.replay.log());
        const s = await status(page);
        assert.equal(log.length, s.length, 'every step logged');
        assert.ok(log.every((x) => x.target !== null));
        const err = log.map((x) => x.wall - x.target);
        errors[speed] = Math.max(...err.map(Math.abs));
        // A step is never applied before its time, nor more than 50 ms after it.
        for (const [i, e] of err.entries()) assert.ok(e >= -1 && e <= PACING_MS, `x${speed} step ${i} (${log[i].kind} at ${log[i].due} ms): ${e.toFixed(2)} ms late`);
        // From the first step to the last: the recording's span over the speed.
        const span = (log[log.length - 1].due - log[0].due) / Number(speed);
        const took = log[log.length - 1].wall - log[0].wall;
        assert.ok(Math.abs(took - span) <= PACING_MS, `x${speed}: ${took.toFixed(1)} ms for a ${span} ms span`);
        assert.ok(wall >= span, `x${speed} took ${wall} ms of wall time`);
      }
      console.log(`# replay pacing: max |error| per event x1 ${errors[1].toFixed(2)} ms, x2 ${errors[2].toFixed(2)} ms, x10 ${errors[10].toFixed(2)} ms`);
      assert.deepEqual(await page.evaluate(() => window.ratatoskrConsole.replay.turns()), shortDoc().turns);
      assert.deepEqual(apiAfter(problems, importAt), []);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('x10: the stall marker appears on the replay clock (the recorded silence, a tenth of it in wall time), as live', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url, {
      initScripts: [() => {
        window.__markers = [];
        new MutationObserver(() => {
          const m = document.querySelector('#transcript .stall-marker');
          if (m && m.textContent) window.__markers.push(m.textContent);
        }).observe(document, { subtree: true, childList: true, characterData: true });
      }],
    });
    try {
      const doc = shortDoc({ gap: 2000, stallMs: 400 });
      await importText(page, JSON.stringify(doc), 'stall.json');
      await page.evaluate(() => { window.__markers = []; });
      const t0 = Date.now();
      await replayAt(page, '10');
      const took = Date.now() - t0;
      const markers = await page.evaluate(() => window.__markers);
      assert.ok(markers.length >= 1, 'the stall marker showed during the x10 replay');
      const secs = markers.map((m) => Number(/^⏸ stalled · no delta for (\d+\.\d) s$/.exec(m)[1]));
      assert.ok(secs.every((v) => v >= 0.4 && v <= 2.1), `the recorded silence, not the wall one: ${markers.join(' | ')}`);
      assert.ok(Math.max(...secs) >= 1.0, `it counts up on the replay clock: ${markers.join(' | ')}`);
      assert.ok(took < 2000, `the 2 s silence took ${took} ms at x10`);
      assert.equal(await page.$('#transcript .stall-marker'), null, 'and it cleared when the next event came');
      const p = await panes(page);
      assert.deepEqual(p.stallRows, ['1 · longest 2060 ms'], 'the silence from the tool result to the text');
      assert.deepEqual(await page.evaluate(() => window.ratatoskrConsole.replay.turns()), doc.turns);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('controls: keyboard reachable, labelled; pause, step and restart; the state shown; the bar does not move', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      const doc = shortDoc({ gap: 3000 });
      const importAt = Date.now();
      await importText(page, JSON.stringify(doc), 'controls.json');
      const n = (await status(page)).length;
      assert.equal(n, 11, 'turn start, first byte and nine events');
      assert.equal(await page.textContent('#replay-state'), `ended · ${n}/${n} · ×1`);
      assert.equal(await page.textContent('#replay-play'), 'Replay');
      assert.equal(await page.getAttribute('#replay-bar', 'aria-label'), 'Replay');
      assert.equal(await page.evaluate(() => document.getElementById('replay-speed').labels[0].textContent.startsWith('Speed')), true);
      const boxes = () => page.evaluate(() => ['replay-play', 'replay-step', 'replay-restart', 'replay-speed', 'replay-state', 'transcript']
        .map((id) => { const r = document.getElementById(id).getBoundingClientRect(); return [id, r.x, r.y, r.width, r.height]; }));
      const before = await boxes();

      // The keyboard: Tab from the banner's button reaches Replay, Step (skipped while disabled), Restart, Speed.
      await page.focus('#replay-close');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'replay-play');
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement.id), 'replay-restart', 'Step is disabled once ended');
      await page.keyboard.press('Enter'); // Restart: paused at the start, the panes empty
      assert.equal(await page.textContent('#replay-state'), `ready · 0/${n} · ×1`);
      assert.equal(await page.$$eval('#transcript .msg', (m) => m.length), 0);
      assert.equal(await page.textContent('#replay-play'), 'Play');
      // Step, one event at a time while paused.
      await page.focus('#replay-step');
      await page.keyboard.press('Enter');
      assert.equal(await page.textContent('#replay-state'), `paused · 1/${n} · ×1`);
      assert.equal(await page.$$eval('#transcript .msg', (m) => m.length), 2, 'the turn began: the user message and the answer');
      assert.match(await page.textContent('#transcript .awaiting'), /^awaiting first token · 0\.0 s$/, 'on the replay clock, standing still while paused');
      for (let k = 2; k <= 4; k += 1) await page.keyboard.press('Enter');
      assert.equal(await page.textContent('#replay-state'), `paused · 4/${n} · ×1`);
      assert.equal(await page.textContent('#transcript details.reasoning pre'), 'a', 'the first thinking delta');
      assert.match(await page.textContent('#transcript .thinking-note'), /Short is thinking$/, 'the reasoning line');
      // Play, then pause in the 3 s silence: nothing moves while paused.
      await page.focus('#replay-play');
      await page.keyboard.press('Enter');
      await h.waitFor(page, () => /^playing · 7\//.test(document.getElementById('replay-state').textContent), undefined, { what: 'playing into the silence' });
      assert.equal(await page.textContent('#replay-play'), 'Pause');
      await page.keyboard.press('Enter');
      const paused = await page.textContent('#replay-state');
      assert.equal(paused, `paused · 7/${n} · ×1`);
      await h.sleep(400);
      assert.equal(await page.textContent('#replay-state'), paused);
      // The speed, from the keyboard: x10 finishes the rest.
      await page.focus('#replay-speed');
      await page.selectOption('#replay-speed', '10');
      assert.equal(await page.textContent('#replay-state'), `paused · 7/${n} · ×10`);
      await page.click('#replay-play');
      await h.waitFor(page, () => window.ratatoskrConsole.replay.status().ended, undefined, { what: 'the end at x10' });
      assert.equal(await page.textContent('#replay-state'), `ended · ${n}/${n} · ×10`);
      assert.deepEqual(await page.evaluate(() => window.ratatoskrConsole.replay.turns()), doc.turns, 'paused, stepped and resumed: the same recording');
      assert.deepEqual(await boxes(), before, 'the replay bar and the transcript did not move');
      // Leaving the recording stops the replay mid-way, without a request.
      await page.click('#replay-restart');
      await page.click('#replay-play');
      await h.sleep(150);
      await page.click('#replay-close');
      assert.equal(await page.isHidden('#replay-bar'), true);
      assert.equal(await page.$$eval('#transcript .msg', (m) => m.length), 0);
      await h.sleep(300);
      assert.equal(await page.$$eval('#transcript .msg', (m) => m.length), 0, 'nothing more is drawn once left');
      assert.deepEqual(apiAfter(problems, importAt), []);
      const rec = await h.assertClean(assert, page, problems);
      assert.equal(rec.activeIntervals, 0);
    } finally {
      await context.close();
    }
  });

  test('an import over 32 MiB is refused (import_too_large) before it is read, and nothing changes', async () => {
    const { page, problems, context } = await h.openConsole(browser, host.url);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-big-'));
    try {
      // A sparse file of 32 MiB + 1 byte: no huge string in the test or the page.
      const file = path.join(dir, 'big.json');
      fs.writeFileSync(file, '');
      fs.truncateSync(file, 32 * 1024 * 1024 + 1);
      await importText(page, JSON.stringify(shortDoc()), 'short.json');
      const before = await panes(page);
      await page.setInputFiles('#import-file', file);
      await h.waitFor(page, () => !document.getElementById('import-error').hidden, undefined, { what: 'the refusal' });
      assert.equal(await page.getAttribute('#import-error', 'data-error-code'), 'import_too_large');
      assert.match(await page.textContent('#import-error'), /^Import refused: import_too_large — the file is larger than 32 MiB\. Nothing was changed\.$/);
      assert.deepEqual(await panes(page), before, 'the recording shown stays');
      assert.equal(await page.isVisible('#replay-bar'), true);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
