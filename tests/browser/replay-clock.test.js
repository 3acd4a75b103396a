'use strict';
// The replay scheduler (static/js/replay-clock.js) in Node, driven by an injected
// fake wall clock and timer: pacing at x1 / x2 / x10 from absolute due times (a
// late step does not delay the next ones), as fast as possible, pause / resume,
// step, and the replay clock that reads each step's due time while it runs and
// never passes the next one. The module is imported as it is (copied beside a
// package.json that makes it an ES module, as compare-model.test.js does).

const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { MODULES_DIR } = require('./lib/harness');

let createScheduler;
before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-modules-'));
  fs.copyFileSync(path.join(MODULES_DIR, 'replay-clock.js'), path.join(dir, 'replay-clock.js'));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  ({ createScheduler } = await import(pathToFileURL(path.join(dir, 'replay-clock.js'))));
});

/** A fake wall clock with timers: advance(ms) fires due timers in order (late by `lag` ms each, if set). */
function fakeClock() {
  const c = { t: 1000, timers: [], lag: 0 };
  c.now = () => c.t;
  c.setTimer = (fn, ms) => { const id = { at: c.t + Math.max(0, ms), fn }; c.timers.push(id); return id; };
  c.clearTimer = (id) => { c.timers = c.timers.filter((x) => x !== id); };
  c.advance = (ms) => {
    const end = c.t + ms;
    for (;;) {
      c.timers.sort((a, b) => a.at - b.at);
      const next = c.timers[0];
      if (!next || next.at + c.lag > end) break;
      c.timers.shift();
      c.t = Math.max(c.t, next.at + c.lag);
      next.fn();
    }
    c.t = Math.max(c.t, end);
  };
  return c;
}

/** Steps at the given due times; each records the wall time and the replay clock it ran at. */
function script(dues, c, sched) {
  const ran = [];
  const steps = dues.map((due, i) => ({ due, run: () => ran.push({ i, wall: c.now(), clock: sched().now() }) }));
  return { steps, ran };
}

function make(dues, opts = {}) {
  const c = fakeClock();
  let s;
  const { steps, ran } = script(dues, c, () => s);
  s = createScheduler(steps, { now: c.now, setTimer: c.setTimer, clearTimer: c.clearTimer, ...opts });
  return { c, s, ran };
}

test('x1: every step at its recorded time from play, the clock reading its due time', () => {
  const { c, s, ran } = make([0, 100, 250, 250, 1000]);
  s.play();
  assert.deepEqual(ran.map((r) => r.i), [0], 'the step due at 0 runs at once');
  c.advance(99);
  assert.equal(ran.length, 1);
  assert.equal(s.now(), 99, 'the replay clock runs with the wall clock at x1');
  c.advance(1);
  c.advance(150);
  assert.deepEqual(ran.map((r) => [r.i, r.wall - 1000, r.clock]), [[0, 0, 0], [1, 100, 100], [2, 250, 250], [3, 250, 250]]);
  c.advance(750);
  assert.equal(ran.length, 5);
  assert.equal(ran[4].wall - 1000, 1000);
  assert.equal(s.ended, true);
  assert.equal(s.playing, false);
});

test('x2 and x10: the same steps in half and a tenth of the time; the clock keeps the recording\'s times', () => {
  for (const speed of [2, 10]) {
    const { c, s, ran } = make([0, 100, 400, 2000]);
    s.setSpeed(speed);
    s.play();
    c.advance(2000 / speed);
    assert.deepEqual(ran.map((r) => r.wall - 1000), [0, 100 / speed, 400 / speed, 2000 / speed], `x${speed}`);
    assert.deepEqual(ran.map((r) => r.clock), [0, 100, 400, 2000]);
  }
});

test('a late timer does not delay the steps after it (absolute due times, not chained delays)', () => {
  const { c, s, ran } = make([0, 100, 200, 300]);
  c.lag = 30; // every timer fires 30 ms late
  s.play();
  c.advance(400);
  assert.deepEqual(ran.map((r) => r.wall - 1000), [0, 130, 230, 330], 'each late by the same 30 ms, not 30, 60, 90');
  assert.deepEqual(ran.map((r) => r.clock), [0, 100, 200, 300], 'the clock reads the due time, not the late wall time');
});

test('the replay clock never passes the next step\'s due time', () => {
  const { c, s } = make([0, 100]);
  s.play();
  c.lag = 500;
  c.advance(400); // the timer for 100 has not fired yet (it is late)
  assert.equal(s.now(), 100);
  c.advance(200);
  assert.equal(s.ended, true);
});

test('pause, resume and step: the clock stands still while paused; step applies one step and jumps to it', () => {
  const { c, s, ran } = make([0, 100, 200, 300, 400]);
  s.play();
  c.advance(150);
  s.pause();
  assert.equal(s.playing, false);
  assert.equal(s.now(), 150);
  c.advance(1000);
  assert.equal(ran.length, 2, 'nothing runs while paused');
  assert.equal(s.now(), 150, 'the clock stands still');
  s.step();
  assert.equal(ran.length, 3);
  assert.equal(ran[2].clock, 200);
  assert.equal(s.position, 3);
  s.play();
  c.advance(99);
  assert.equal(ran.length, 3);
  c.advance(1);
  assert.equal(ran.length, 4, 'resumed from 200: the step at 300 runs 100 ms later');
  assert.equal(ran[3].wall - ran[2].wall, 100);
  s.pause();
  s.step();
  assert.equal(s.ended, true);
  s.step(); // nothing left
  assert.equal(ran.length, 5);
});

test('as fast as possible: every step in order without waiting for their times, yielding to the page in batches', () => {
  const dues = Array.from({ length: 50 }, (_, i) => i * 1000);
  const c = fakeClock();
  let s;
  const ran = [];
  // Each step takes 1 ms of wall time: the scheduler yields every ~12 ms.
  const steps = dues.map((due, i) => ({ due, run: () => { ran.push({ i, clock: s.now() }); c.t += 1; } }));
  s = createScheduler(steps, { now: c.now, setTimer: c.setTimer, clearTimer: c.clearTimer });
  s.setSpeed(Infinity);
  s.play();
  assert.ok(ran.length > 0 && ran.length < 50, `a first batch: ${ran.length}`);
  c.advance(0);
  for (let k = 0; k < 10 && !s.ended; k += 1) c.advance(0);
  assert.equal(s.ended, true);
  assert.deepEqual(ran.map((r) => r.i), dues.map((_, i) => i));
  assert.deepEqual(ran.map((r) => r.clock), dues, 'the clock still reads each due time');
});

test('speed change while playing: re-anchored, no step skipped or repeated', () => {
  const { c, s, ran } = make([0, 1000, 2000, 3000]);
  s.play();
  c.advance(500);
  s.setSpeed(10); // 500 ms left to 1000 at x10: 50 ms
  c.advance(50);
  assert.equal(ran.length, 2);
  c.advance(200);
  assert.equal(ran.length, 4);
  assert.deepEqual(ran.map((r) => r.i), [0, 1, 2, 3]);
  assert.equal(s.setSpeed(3), undefined);
  assert.equal(s.speed, 10, 'only x1, x2, x10 and as fast as possible');
});

test('finish applies the rest at once; stop ends the replay for good', () => {
  const { c, s, ran } = make([0, 10, 20]);
  s.finish();
  assert.equal(ran.length, 3);
  assert.equal(s.ended, true);
  const other = make([0, 10, 20]);
  other.s.play();
  other.s.stop();
  other.c.advance(100);
  assert.equal(other.ran.length, 1);
  other.s.play();
  other.s.step();
  assert.equal(other.ran.length, 1);
  assert.equal(c.timers.length, 0);
});
