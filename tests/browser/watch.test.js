'use strict';
// "Watch session…" (docs/console-api.md, Watching a session) in Chromium against the
// mock upstream: a session started elsewhere (created on the mock directly) watched by
// its id; only its admin events reach the pane (the server filters the whole firehose);
// the banner; the flight recorder's export and OTLP export of what was shown; the typed
// states of an unknown id (the upstream's 404) and of an invalid one (nothing asked).

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./lib/harness');
const { MockUpstream } = require('./lib/mock-upstream');

const ALLOWED = [
  { path: /^\/api\/affect\?agent_id=\w+$/, status: 404 },
  { path: /^\/api\/sessions\/s_nope\/bifrost$/, status: 404 },
];

function scenario(sessions) {
  return {
    agents: [{ agent_id: 'sindra', display_name: 'Sindra' }],
    tools: (session) => ({ session_id: session.session_id, agent_id: session.agent_id, tools: [] }),
    bifrost: (session) => ({
      session_id: session.session_id, agent_id: session.agent_id, endpoint: 'http://mock.invalid/v1', model: 'm-' + session.session_id,
      caps: {}, tools: [], bound_at: '2026-11-01T09:00:00Z', inflight_turns: 1, last_dispatch: null,
    }),
    affect: () => ({ status: 404 }),
    // The whole firehose: events of both sessions and a system event, every time a stream opens.
    adminEvents: () => {
      const [a, b] = sessions();
      return [
        { type: 'turn.started', data: { session_id: b, turn_id: 't_b' } },
        { type: 'turn.started', data: { session_id: a, turn_id: 't_a' } },
        { type: 'system.notice', data: { note: 'deploy' } },
        { type: 'tool.called', data: { session_id: b, name: 'other' } },
        { type: 'tool.called', data: { session_id: a, name: 'lookup' } },
      ];
    },
    async turn(ctx) { ctx.send('done', { turn_id: ctx.turnId }); },
  };
}

/** A session started by someone else: created on the mock, as their console would. */
async function createElsewhere(mock) {
  const r = await fetch(mock.origin + '/v1/sessions', {
    method: 'POST', headers: { authorization: 'Bearer ' + mock.consumerKey, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'sindra', end_user_id: 'someone-else' }),
  });
  assert.equal(r.status, 201);
  return (await r.json()).session_id;
}

describe('watching a session not started here (mock upstream)', () => {
  let mock;
  let host;
  let browser;
  const ids = [];

  h.suiteSetup(async (own) => {
    mock = own(await new MockUpstream(scenario(() => ids)).start());
    host = own(await h.startHost({ variables: mock.variables() }));
    browser = own(await h.launchBrowser());
    ids.push(await createElsewhere(mock), await createElsewhere(mock));
  });

  test('only the watched session\'s events reach the pane; BifrostState, the banner, the export and OTLP hold what was shown', async () => {
    const [watched, other] = ids;
    const { context, page, problems } = await h.openConsole(browser, host.url, { allowNetworkErrors: ALLOWED });
    try {
      await page.fill('#watch-id', watched);
      await page.click('#watch-go');
      await h.waitFor(page, () => document.querySelectorAll('#admin-events li').length >= 3, undefined, { what: 'the watched session\'s admin events' });
      await h.waitFor(page, () => /m-s_/.test(document.getElementById('bifrost').textContent), undefined, { what: 'its BifrostState' });
      const shown = await page.evaluate(() => [...document.querySelectorAll('#admin-events li')].map((li) => li.textContent));
      assert.equal(shown.length, 3, shown.join('\n'));
      assert.ok(shown.every((t) => !t.includes(other)), 'no event of the other session');
      assert.deepEqual(shown.map((t) => t.split(' ')[0]).sort(), ['system.notice', 'tool.called', 'turn.started']);
      assert.match(await page.textContent('#bifrost'), new RegExp('m-' + watched));
      // The server filtered: the page asked for this session, the upstream was asked for the whole firehose.
      assert.ok(problems.requests.some((r) => r.url.endsWith('/api/admin/events?session_id=' + watched)));
      assert.ok(mock.requests.some((r) => r.path === '/v1/admin/events'));
      assert.ok(!mock.requests.some((r) => r.path.includes(other)), 'nothing of the other session was asked for');
      // The banner: watching, the transcript not available; no composer.
      const banner = await page.evaluate(() => { const b = document.getElementById('watch-banner'); return { hidden: b.hidden, state: b.dataset.state, text: b.textContent }; });
      assert.equal(banner.hidden, false);
      assert.equal(banner.state, 'watching');
      assert.match(banner.text, /did not start: its transcript is not available here/);
      assert.equal(await page.isDisabled('#message'), true);
      assert.equal(await page.textContent('#session-id'), watched);
      // The flight recorder recorded what was shown; the document imports back and exports as OTLP.
      const out = await page.evaluate(() => {
        const c = window.ratatoskrConsole;
        const doc = c.flight.buildExport();
        c.flight.parseSessionDocument(JSON.stringify(doc));
        const otlp = c.otlp.sessionToOtlp(doc);
        return { doc, spans: otlp.resourceSpans[0].scopeSpans[0].spans.length };
      });
      assert.equal(out.doc.session_id, watched);
      assert.equal(out.doc.agent.agent_id, 'sindra', 'learnt from its BifrostState');
      assert.deepEqual(out.doc.turns, []);
      assert.equal(out.doc.admin_events.length, 3);
      assert.ok(out.doc.admin_events.every((a) => a.event.data.session_id === undefined || a.event.data.session_id === watched));
      assert.equal(out.doc.bifrost_snapshots[0].status, 200);
      assert.ok(out.spans >= 1);
      // Starting a session of this console's own ends the watch.
      await h.startSession(page, 'sindra');
      assert.equal(await page.isHidden('#watch-banner'), true);
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });

  test('typed states: an unknown id is the upstream\'s 404, an invalid id is refused before any request', async () => {
    const { context, page, problems } = await h.openConsole(browser, host.url, { allowNetworkErrors: ALLOWED });
    try {
      await page.fill('#watch-id', 's_nope');
      await page.click('#watch-go');
      await h.waitFor(page, () => document.getElementById('watch-banner').dataset.state === 'unknown', undefined, { what: 'the unknown state' });
      assert.match(await page.textContent('#watch-banner'), /No live session s_nope upstream \(bifrost_state_unavailable \(HTTP 404\)\)/);
      assert.match(await page.textContent('#bifrost'), /not bound/);
      const before = problems.requests.length;
      for (const bad of ['s_1/../x', 'a b', 'x'.repeat(129), '']) {
        await page.fill('#watch-id', bad);
        await page.click('#watch-go');
        await h.waitFor(page, () => document.getElementById('watch-banner').dataset.state === 'invalid', undefined, { what: 'the invalid state' });
        assert.equal(await page.getAttribute('#watch-banner', 'data-error-code'), 'invalid_session_id');
      }
      await h.sleep(200);
      assert.deepEqual(problems.requests.slice(before).filter((r) => new URL(r.url).pathname.startsWith('/api/')), [], 'nothing asked for an invalid id');
      await h.assertClean(assert, page, problems);
    } finally {
      await context.close();
    }
  });
});
