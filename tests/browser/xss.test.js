'use strict';
// INV-004 in a real browser: a scripted mock upstream puts a corpus of hostile
// strings into every field the console renders. Nothing may execute, the CSP
// must never fire, no markup may appear, and each string must read back
// literally as text.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');
const { PAYLOADS: P, SINGLE_LINE: S } = require('./lib/xss-corpus');

const n = P.length;
const at = (i) => P[((i % n) + n) % n];
const DISPLAY = '<img src=x onerror=window.__xss=1>Sindra\u202E<script>alert(1)</script>';
const ERROR_TURNS = [0, 3, 10, 28, 36, 40, 46, 62, 63, 68];
const PHRASES = ['is thinking', 'is weighing it', 'is reasoning', 'is considering', 'is working it out'];

// The only markup the console itself makes, and the only attributes it sets.
const ALLOWED_TAGS = new Set(['HEADER', 'H1', 'LABEL', 'SELECT', 'OPTION', 'BUTTON', 'SPAN', 'MAIN', 'SECTION', 'H2', 'DIV',
  'FORM', 'TEXTAREA', 'OL', 'UL', 'LI', 'INPUT', 'P', 'PRE', 'DETAILS', 'SUMMARY', 'DL', 'DT', 'DD', 'SCRIPT']);
const ALLOWED_ATTRS = new Set(['id', 'class', 'role', 'aria-label', 'aria-live', 'aria-pressed', 'type', 'disabled', 'placeholder',
  'rows', 'for', 'title', 'value', 'hidden', 'data-search', 'data-error-code', 'tabindex']);

function scenario() {
  const bifrostCaps = Object.fromEntries(S.slice(0, 24).map((p, i) => [p, S[(i + 7) % S.length]]));
  bifrostCaps.nested = { deep: P[10], list: [P[11]] };
  return {
    bifrostCaps,
    agents: [
      { agent_id: 'xss', display_name: DISPLAY },
      ...P.map((p, i) => ({ agent_id: 'p' + i, display_name: p })),
      ...S.map((p) => ({ agent_id: p })),
    ],
    tools: (session) => ({
      session_id: session.session_id,
      agent_id: P[0],
      tools: P.map((p) => ({ name: p, description: p, input_schema: { type: 'object', description: p } })),
    }),
    bifrost: (session) => ({
      session_id: session.session_id,
      agent_id: P[5],
      endpoint: P[30],
      model: P[40],
      caps: bifrostCaps,
      tools: P.map((p, i) => ({ name: p, description: at(i + 1) })),
      bound_at: P[60],
      inflight_turns: P[61],
      last_dispatch: { turn_id: P[62], latency_ms: P[63], status: P[64] },
    }),
    affect: () => ({
      agent_id: P[20],
      emitted_at: P[21],
      pad: { pleasure: 0.125, arousal: -0.25, dominance: 0.5 },
      relations: P.map((p, i) => ({
        target_entity: p,
        relation_context: at(i + 1),
        trust_ability: { value: 0.5, confidence: 0.5, evidence_count: at(i + 2) },
        warmth: { value: 0.4, confidence: 0.25, evidence_count: 3 },
        agency: 0.1,
        obligation_balance: -0.1,
      })),
    }),
    adminEvents: (session) => [
      { type: 'turn.started', data: { session_id: 's_someone_else', marker: 'FOREIGN-SESSION-MARKER' } },
      ...S.map((p, i) => ({
        type: p,
        data: { session_id: session.session_id, note: p, [p]: at(i + 3), timestamp: i % 2 ? p : '2026-11-01T12:00:00Z' },
      })),
    ],
    async turn(ctx) {
      if (ctx.text === 'xss') {
        for (const p of P) ctx.send('thinking', { delta: p + '\n' });
        await ctx.sleep(150);
        P.forEach((p, i) => {
          ctx.send('tool_call', { call_id: 'c' + i, name: p, arguments: { payload: p } });
          ctx.send('tool_result', { call_id: 'c' + i, name: p, output: p, is_error: i % 7 === 0 });
        });
        await ctx.sleep(150);
        for (const p of P) ctx.send('text', { delta: p + '\n' });
        await ctx.sleep(50);
        ctx.send('done', { turn_id: ctx.turnId, usage: { input_tokens: P[1], output_tokens: P[2] }, finish_reason: P[3] });
        return;
      }
      const m = /^err (\d+)$/.exec(ctx.text);
      if (m) {
        const k = Number(m[1]);
        ctx.send('thinking', { delta: at(k) });
        await ctx.sleep(20);
        ctx.send('text', { delta: 'partial answer ' });
        ctx.send('error', { code: at(k), message: at(k + 1) });
        return;
      }
      ctx.send('error', { code: 'unknown_script', message: ctx.text });
    },
  };
}

describe('XSS corpus through every rendered upstream field (mock upstream)', () => {
  let mock;
  let host;
  let browser;
  let sc;

  h.suiteSetup(async (own) => {
    sc = scenario();
    mock = own(await new MockUpstream(sc).start());
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
  });

  test(`${P.length} payloads render as literal text, never as markup or script`, async () => {
    assert.ok(P.length >= 60);
    const { page, problems, context } = await h.openConsole(browser, host.url);
    try {
      // The agents list: every payload as a display name, and as a bare agent id.
      const options = await page.$$eval('#agent-select option', (os) => os.map((o) => ({ value: o.value, text: o.textContent })));
      assert.equal(options.length, 1 + P.length + S.length);
      assert.deepEqual(options[0], { value: 'xss', text: DISPLAY });
      P.forEach((p, i) => assert.deepEqual(options[1 + i], { value: 'p' + i, text: p }, `agent display_name #${i}`));
      S.forEach((p, i) => assert.deepEqual(options[1 + P.length + i], { value: p, text: p }, `agent_id #${i}`));

      const sessionId = await h.startSession(page, 'xss');
      await h.waitFor(page, (count) => document.querySelectorAll('#affect .relation').length === count
        && document.querySelector('#bifrost dl.kv')
        && /tools available/.test(document.querySelector('#tools .tools-inventory').textContent)
        && document.querySelectorAll('#admin-events li').length >= count - 3, P.length, { what: 'all panes to render the corpus' });

      // The turn: thinking, tool calls/results, text, done — all payloads.
      await h.sendWithEnter(page, 'xss');
      const done = await h.waitForTerminal(page);
      assert.equal(done.kind, 'done');
      assert.equal(done.text, `done · ${P[1]} in / ${P[2]} out · ${P[3]}`);
      for (const k of ERROR_TURNS) {
        await h.sendWithEnter(page, `err ${k}`);
        const end = await h.waitForTerminal(page);
        assert.equal(end.kind, 'error');
        assert.equal(end.text, `error · ${at(k)} — ${at(k + 1)}`, `error event payload #${k}`);
      }
      await h.waitFor(page, (count) => document.querySelectorAll('#admin-events li').length >= count, S.length, { what: 'every admin event' });

      const dom = await page.evaluate(() => {
        const text = (n) => (n ? n.textContent : null);
        const turn = document.querySelectorAll('#transcript .msg.assistant')[0];
        const kv = {};
        const dts = document.querySelectorAll('#bifrost dl.kv dt');
        for (const dt of dts) kv[dt.textContent] = dt.nextElementSibling.textContent;
        return {
          who: text(turn.querySelector('.who')),
          answer: text(turn.querySelector(':scope > .text')),
          reasoning: text(turn.querySelector('details.reasoning pre')),
          toolDetails: [...turn.querySelectorAll('details.tool')].map((d) => ({ summary: text(d.querySelector('summary')), body: text(d.querySelector('pre')), isError: d.classList.contains('is-error') })),
          toolEvents: [...document.querySelectorAll('#tool-events li')].map((li) => ({ label: text(li.querySelector('.mono')), body: text(li.querySelector('pre')) })),
          inventory: text(document.querySelector('#tools .tools-inventory .mono')),
          kv,
          bifrostTools: [...document.querySelectorAll('#bifrost ul li')].map(text),
          admin: [...document.querySelectorAll('#admin-events li')].map((li) => ({ type: text(li.querySelector('div > .mono')), time: text(li.querySelector('div > .muted')), data: text(li.querySelector('pre')) })),
          affectHead: text(document.querySelector('#affect > div')),
          affect: text(document.getElementById('affect')),
          relations: [...document.querySelectorAll('#affect .relation')].map((r) => ({ entity: text(r.children[0]), context: text(r.children[1]), conf: text(r.querySelector('.metric span')) })),
          sessionShown: text(document.getElementById('session-id')),
        };
      });
      const rec = await h.record(page);

      assert.equal(dom.sessionShown, sessionId);
      // Agent display name: assistant label and the reasoning indicator.
      assert.equal(dom.who, DISPLAY);
      const note = rec.notes.find((x) => x.turn === 1);
      assert.ok(note, 'the reasoning indicator appeared');
      assert.ok(PHRASES.some((ph) => note.text === `✦ ${DISPLAY} ${ph}`), `indicator text: ${JSON.stringify(note.text)}`);
      // Text and thinking deltas, whole corpus, exactly.
      assert.equal(dom.answer, P.map((p) => p + '\n').join(''));
      assert.equal(dom.reasoning, P.map((p) => p + '\n').join(''));
      // Tool calls and results inline: names, arguments (as JSON), outputs.
      assert.equal(dom.toolDetails.length, 2 * P.length);
      P.forEach((p, i) => {
        const call = dom.toolDetails[2 * i];
        const result = dom.toolDetails[2 * i + 1];
        assert.equal(call.summary, `call · ${p}`);
        assert.equal(call.body, JSON.stringify({ payload: p }, null, 2));
        assert.ok(call.body.includes(JSON.stringify(p)));
        assert.equal(result.summary, `result · ${p}` + (i % 7 === 0 ? ' · error' : ''));
        assert.equal(result.body, p);
        assert.equal(result.isError, i % 7 === 0);
      });
      // The Tools pane: inventory names (comma-joined), live events newest first.
      assert.equal(dom.inventory, P.join(', '));
      const liveTools = dom.toolEvents.slice().reverse();
      assert.equal(liveTools.length, 2 * P.length);
      P.forEach((p, i) => {
        assert.equal(liveTools[2 * i].label, `call · ${p}`);
        assert.equal(liveTools[2 * i + 1].label, `result · ${p}` + (i % 7 === 0 ? ' · error' : ''));
        assert.equal(liveTools[2 * i + 1].body, p);
      });
      // BifrostState: every field.
      assert.equal(dom.kv.agent, P[5]);
      assert.equal(dom.kv.endpoint, P[30]);
      assert.equal(dom.kv.model, P[40]);
      assert.equal(dom.kv['bound at'], P[60]);
      assert.equal(dom.kv['inflight turns'], P[61]);
      assert.equal(dom.kv['last dispatch'], `${P[62]} · ${P[63]} ms · ${P[64]}`);
      for (const [k, v] of Object.entries(sc.bifrostCaps)) {
        const shown = k + '=' + (typeof v === 'object' ? JSON.stringify(v) : v);
        assert.ok(dom.kv.caps.includes(shown), `caps shows ${JSON.stringify(shown)}`);
      }
      assert.deepEqual(dom.bifrostTools, P.map((p, i) => `${p} — ${at(i + 1)}`));
      // AdminEvents: type, time and data for every event of this session, nothing from others.
      assert.ok(!dom.admin.some((e) => e.data.includes('FOREIGN-SESSION-MARKER')), 'other sessions\' events are filtered out');
      assert.equal(dom.admin.length, S.length);
      S.forEach((p, i) => {
        const shown = dom.admin[S.length - 1 - i]; // newest first
        assert.equal(shown.type, p, `admin event type #${i}`);
        assert.ok(shown.time.startsWith((i % 2 ? p : '2026-11-01T12:00:00Z') + ' · #'), `admin event time #${i}`);
        const expected = { session_id: sessionId, note: p, [p]: at(i + 3), timestamp: i % 2 ? p : '2026-11-01T12:00:00Z' };
        assert.deepEqual(JSON.parse(shown.data), expected, `admin event data #${i}`);
        assert.ok(shown.data.includes(JSON.stringify(p)), `admin event data #${i} shows the escaped JSON string`);
      });
      // Affect: agent, emitted_at, every relation's target_entity and relation_context.
      assert.equal(dom.affectHead, `${P[20]} · emitted ${P[21]}`);
      assert.equal(dom.relations.length, P.length);
      P.forEach((p, i) => {
        assert.equal(dom.relations[i].entity, p, `target_entity #${i}`);
        assert.equal(dom.relations[i].context, at(i + 1), `relation_context #${i}`);
        assert.equal(dom.relations[i].conf, `trust_ability (conf 0.50, n=${at(i + 2)})`);
      });
      assert.ok(!/valence|dominant_emotion/.test(dom.affect), 'no fabricated affect fields');

      // Structure: only the console's own elements and attributes exist.
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
      // Nothing the payloads name (x, /x.js, javascript:, data:) was ever requested.
      const foreign = problems.requests.filter((r) => {
        if (r.url.startsWith('data:')) return false;
        const u = new URL(r.url);
        return u.origin !== host.url || !(u.pathname === '/' || h.CONSOLE_MODULES.includes(u.pathname) || u.pathname.startsWith('/api/'));
      });
      assert.deepEqual(foreign, []);
      await h.screenshot(page, '10-xss-corpus-wide');
      assert.deepEqual(await h.horizontalOverflow(page), { doc: 0, body: 0, panesOutside: [], scrollers: [] }, 'nothing scrolls sideways at 1280 px');

      // Long unbroken upstream strings do not push the page sideways on a narrow window.
      await page.setViewportSize({ width: 420, height: 800 });
      const NONE = { doc: 0, body: 0, panesOutside: [], scrollers: [] };
      assert.deepEqual(await h.horizontalOverflow(page), NONE, 'nothing scrolls sideways at 420 px');
      await page.evaluate(() => { document.querySelector('.layout').scrollTop = 0; });
      await h.screenshot(page, '11-xss-corpus-narrow');

      const final = await h.assertClean(assert, page, problems);
      assert.equal(final.activeIntervals, 0);
    } finally {
      await context.close();
    }
  });
});
