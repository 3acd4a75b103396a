// The replay scheduler (docs/flight-recorder.md, "Replay"): steps with their recorded
// times (ms from the start of the recording) applied at that pace or faster, with
// pause, resume, step and restart. Pure: no DOM, no import; its wall clock and timer
// are injectable, so a test can drive it deterministically.
//
// The replay clock: `now()` is the recording's time, which runs at `speed` times the
// wall clock while playing, stands still while paused, and never passes the next
// step's due time. While a step is applied it reads exactly that step's due time, so
// what the step computes from the clock (silences, a timeline's times) is the
// recording's own, whatever the speed or the machine's lateness.

export const SPEEDS = [1, 2, 10, Infinity]; // Infinity: as fast as possible

// As fast as possible yields to the page after this much wall time of steps.
const BATCH_MS = 12;

/**
 * steps: [{ due, run }] in order, due in ms of the recording, non-decreasing.
 * Options: now() (wall ms, performance.now), setTimer(fn, ms) / clearTimer(id)
 * (setTimeout), onChange(scheduler) after every change of state or position,
 * onApplied(step, index, wallMs) after each step is applied.
 */
export function createScheduler(steps, {
  now = () => performance.now(), setTimer = (fn, ms) => setTimeout(fn, ms), clearTimer = (id) => clearTimeout(id),
  onChange = () => {}, onApplied = () => {},
} = {}) {
  let pos = 0;           // the next step to apply
  let speed = 1;
  let playing = false;
  let virtual = 0;       // the recording's time when anchored (or frozen, while paused)
  let wallAnchor = 0;    // the wall time matching `virtual` while playing
  let timer = null;
  let stopped = false;
  let applying = null;   // the due time of the step being applied: the clock reads it
  const nextDue = () => (pos < steps.length ? steps[pos].due : Infinity);

  /** The recording's time: never past the next step's due time. */
  function clock() {
    if (applying !== null) return applying;
    if (!playing || speed === Infinity) return Math.min(virtual, nextDue());
    return Math.min(virtual + (now() - wallAnchor) * speed, nextDue());
  }

  function cancelTimer() { if (timer !== null) { clearTimer(timer); timer = null; } }

  /** Applies the next step; `jump`: the clock stays at its due time afterwards (step, as fast as possible). */
  function apply(jump) {
    const step = steps[pos];
    applying = step.due;
    try { step.run(); } finally { applying = null; }
    onApplied(step, pos, now());
    pos += 1;
    if (jump) virtual = Math.max(virtual, step.due);
  }

  /** Applies every step that is due, then sets one timer to the next one's absolute wall time. */
  function pump() {
    timer = null;
    if (!playing || stopped) return;
    const started = now();
    while (pos < steps.length) {
      const due = steps[pos].due;
      if (speed === Infinity) {
        if (now() - started >= BATCH_MS) { timer = setTimer(pump, 0); onChange(api); return; }
        apply(true);
        continue;
      }
      const dueWall = wallAnchor + (due - virtual) / speed; // anchored at play: no drift from chained delays
      const wait = dueWall - now();
      if (wait > 0) { timer = setTimer(pump, wait); onChange(api); return; }
      // Applied on time or late: the clock reads `due` while it runs, and the anchor
      // stays, so a late step does not delay the next ones.
      apply(false);
    }
    playing = false;
    virtual = steps.length ? Math.max(virtual, steps[steps.length - 1].due) : virtual;
    onChange(api);
  }

  function anchor() { virtual = clock(); wallAnchor = now(); }

  const api = {
    get position() { return pos; },
    get length() { return steps.length; },
    get speed() { return speed; },
    get playing() { return playing; },
    get ended() { return pos >= steps.length; },
    now: clock,
    /** The wall time a step is due at, while playing at a finite speed (for the pacing test). */
    dueWall(due) { return wallAnchor + (due - virtual) / speed; },
    play() {
      if (stopped || playing || pos >= steps.length) return;
      anchor();
      playing = true;
      pump();
      onChange(api);
    },
    pause() {
      if (!playing) return;
      anchor();
      playing = false;
      cancelTimer();
      onChange(api);
    },
    setSpeed(s) {
      if (!SPEEDS.includes(s)) return;
      if (playing) { anchor(); speed = s; cancelTimer(); pump(); } else { speed = s; }
      onChange(api);
    },
    /** One step while paused: the clock jumps to its due time. */
    step() {
      if (stopped || playing || pos >= steps.length) return;
      apply(true);
      onChange(api);
    },
    /** Every remaining step at once (the import's first drawing). */
    finish() {
      if (stopped) return;
      cancelTimer();
      playing = false;
      while (pos < steps.length) apply(true);
      onChange(api);
    },
    stop() { stopped = true; playing = false; cancelTimer(); },
  };
  return api;
}
