// The console view's state, shared by its panes, its transcript, the flight
// recorder and the replay of an imported session (the Playground keeps its own).

// The admin events pane, its pause queue and a recording keep at most this many events.
export const ADMIN_EVENTS_CAP = 200;

// The console view's state; the Playground's is `pg` (playground.js).
export const state = {
  agents: [], agentId: null, sessionId: null, adminConfigured: false,
  turnId: null, turnRunning: false, turnAbort: null, turnNodes: null, turnView: null,
  thinking: null, awaiting: null, lastAffectAt: null, padTimers: [],
  affectHist: new Map(), lastHistAt: null,
  adminES: null, adminPaused: false, adminPending: [], adminFilter: '',
  watching: null, // the id of a session watched, not started here (watch.js)
};
