// One session's page kept current: its snapshot, and its event stream from the snapshot's token.
// Events show the model's text as it streams; an event that changes the state reads the
// snapshot again, and a turn's end reads it and opens the stream anew.

import { getJson, post } from "./api.js";
import { el, notice, patch } from "./dom.js";
import { EarlierMessages } from "./earlier.js";
import { openEventStream } from "./event_streams.js";
import { pageTitle, renderLive, renderSession, renderWorkerSetup } from "./session_render.js";

const RETRY_MS = 1000; // after a lost stream or a failed snapshot: a local server restarts in seconds
const GAP_MS = 20000; // a timer late by this much means the machine slept: reload
// A hidden tab has no stream: it reads the snapshot this often, so its title still says when the
// session needs the person. A read ends at once: it holds none of the browser's connections.
const HIDDEN_READ_MS = 15000;
const TERMINAL_EVENTS = new Set(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"]);

const hidden = () => document.visibilityState === "hidden";

export class SessionView {
  constructor(main, sessionId) {
    this.main = main;
    this.sessionId = sessionId;
    this.base = `/api/sessions/${encodeURIComponent(sessionId)}`;
    this.data = null;
    this.earlier = new EarlierMessages(this.base); // the messages read back before the snapshot's
    this.snapshotsAsked = 0; // snapshots asked for, in order; the one shown is snapshotShown
    this.snapshotShown = 0;
    this.events = null;
    // The token of the last event drawn (else the snapshot's the stream was opened from): a
    // hidden tab closes its stream and opens it again from here when it is shown. Null while a
    // hard reload runs: its snapshot's token replays the turn into the live text it emptied.
    this.resumeToken = null;
    this.live = new Map(); // step_execution_id -> {attempt, turn_id, text, reasoning, stored}
    this.toolStatus = new Map(); // tool_call_id -> status seen on the stream
    this.softTimer = null;
    this.retryTimer = null;
    this.lost = false; // the last stream or snapshot failed: the next snapshot says "reconnected"
    this.lastTick = Date.now();
    this.gone = false; // the server has no such session: the page asks for nothing more
    this.ended = false; // the session no longer runs and its stream has sent all it will
    // What the person is typing, by field: every event renders the page anew, and a draft
    // kept only in the DOM would be wiped by the render that follows it.
    this.drafts = new Map();
    this.worker = null; // what this console's worker runs the session's turns with, once read
    this.workerAsked = 0;
    this.workerTimer = null;
    this.hiddenTimer = null;
  }

  // A field whose value outlives renders: created with its draft, and its draft kept as it changes.
  field(tag, key, attrs) {
    const node = el(tag, { ...attrs, "data-draft": key });
    const property = node.type === "checkbox" ? "checked" : "value";
    if (this.drafts.has(key)) node[property] = this.drafts.get(key);
    node.addEventListener(property === "checked" ? "change" : "input", () => this.drafts.set(key, node[property]));
    return node;
  }

  // A control that took the draft empties its field, in whichever render shows it now.
  clearDraft(key) {
    this.drafts.delete(key);
    const node = this.main.querySelector(`[data-draft="${CSS.escape(key)}"]`);
    if (!node) return;
    if (node.type === "checkbox") node.checked = false;
    else node.value = "";
  }

  start() {
    this.hardReload();
    setInterval(() => {
      const now = Date.now();
      // A hidden tab has no stream to lose to a sleep: it opens one from its token when shown.
      if (now - this.lastTick > GAP_MS && !this.gone && !this.ended && !hidden()) this.hardReload();
      this.lastTick = now;
    }, 1000);
    // A browser opens at most six connections to one host, and where its pages cannot share
    // one stream (event_streams.js) each page's own holds one for as long as it is open: with six
    // session tabs open a seventh never loaded, and every snapshot read and control of theirs
    // waited. A hidden tab closes its stream (its part of a shared one too) and opens
    // it again from the last event it drew when shown, so the stream sends what it missed,
    // each event once, after the live text it kept.
    document.addEventListener("visibilitychange", () => {
      this.readWhileHidden();
      if (hidden()) {
        if (this.events) { this.events.close(); this.events = null; }
      } else if (!this.events && !this.gone && !this.ended && this.resumeToken !== null) {
        this.openEvents(this.resumeToken);
        if (this.lost) this.softReload(0); // a snapshot that failed while hidden was not asked again
      }
    });
    this.readWhileHidden();
  }

  readWhileHidden() {
    clearInterval(this.hiddenTimer);
    this.hiddenTimer = null;
    if (!hidden()) return;
    this.hiddenTimer = setInterval(() => {
      if (this.gone || this.ended) { clearInterval(this.hiddenTimer); return; }
      this.softReload(0);
    }, HIDDEN_READ_MS);
  }

  // The snapshot again, and the stream again from its token: the token replays the active turn.
  // Until the server answers again (a restart, a dropped network), it tries every RETRY_MS.
  async hardReload() {
    clearTimeout(this.retryTimer);
    if (this.events) { this.events.close(); this.events = null; }
    this.resumeToken = null;
    this.live.clear();
    this.toolStatus.clear();
    const data = await this.loadSnapshot();
    // After the snapshot: a session that is not there (or not for this person) is asked nothing more.
    if (data) { this.loadWorker(); if (!this.ended) this.openEvents(data.resume_token); }
    else if (!this.gone) this.retryTimer = setTimeout(() => this.hardReload(), RETRY_MS);
  }

  // The snapshot only: the stream and the live text go on. One that fails is asked for again
  // while the stream is open: an idle session sends no event that would, and the page would
  // keep the state it had, under a notice that it is reconnecting.
  softReload(delay = 150) {
    clearTimeout(this.softTimer);
    this.softTimer = setTimeout(async () => {
      const data = await this.loadSnapshot();
      if (!data && (this.events || this.ended) && !this.gone) this.softReload(RETRY_MS);
    }, delay);
  }

  // Snapshots can answer out of order; one asked for before the snapshot shown is older than it,
  // and showing it would bring back a state the session has left (a turn ended, an approval
  // answered) until the next event, which an idle session never sends. It still gives its token.
  async loadSnapshot() {
    const asked = ++this.snapshotsAsked;
    let data;
    try {
      data = await getJson(`${this.base}/snapshot`);
    } catch (error) {
      if (error.status === 404 || error.status === 403) { this.showGone(error.status); return null; }
      this.lost = true;
      notice(`Cannot load the session: ${error.message}; reconnecting…`, "bad");
      return null;
    }
    if (this.gone) return null; // asked for before a later one found the session gone
    if (asked < this.snapshotShown) return data;
    this.snapshotShown = asked;
    this.earlier.follow(this.data, data);
    this.data = data;
    if (this.lost) { this.lost = false; notice("reconnected", "good"); }
    this.render();
    return data;
  }

  // The model and MCP tools the console's worker runs the turns with: read with each new
  // snapshot and stream (a turn's end, a reconnect), since a server's tools are listed again,
  // and again after RETRY_MS while a server's first listing runs, which no event ends.
  // A read no server answered keeps what the page showed: the snapshot's own read says the
  // server is gone. One the server refused (the application's worker_setup hook failed) says
  // so in the card, where the card vanished as if the console were told nothing.
  async loadWorker() {
    clearTimeout(this.workerTimer);
    const asked = ++this.workerAsked;
    let body;
    try {
      body = await getJson(`${this.base}/worker`);
    } catch (error) {
      if (error.status !== 500) return; // no answer, a stopping console (503), a session gone
      body = { worker: { unreadable: error.message } };
    }
    if (asked !== this.workerAsked || this.gone) return;
    this.worker = body.worker;
    if (this.data) renderWorkerSetup(this, this.main);
    const listing = this.worker && !this.worker.unreadable && this.worker.tool_servers.some((server) => server.tools === null);
    if (listing) this.workerTimer = setTimeout(() => this.loadWorker(), RETRY_MS);
  }

  // A session that never existed or that retention removed (404), or one the application's
  // authorize hook keeps from this person (403): no retry will change that, so the page stops
  // its stream and its timers and says so, where it retried every RETRY_MS.
  showGone(status) {
    this.gone = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.softTimer);
    clearTimeout(this.workerTimer);
    if (this.events) { this.events.close(); this.events = null; }
    notice("");
    const [heading, why] = status === 403
      ? ["Not allowed", `You are not allowed to see session ${this.sessionId}.`]
      : ["No such session", `The console has no session ${this.sessionId}: it never existed, or it was removed.`];
    this.main.replaceChildren(el("h1", {}, heading), el("p", {}, why),
      el("p", {}, el("a", { href: "/" }, "All sessions")));
  }

  openEvents(token) {
    if (this.events) { this.events.close(); this.events = null; }
    this.resumeToken = token || "";
    if (hidden()) return; // opened from resumeToken when the tab is shown
    const source = openEventStream(this.base, this.sessionId, this.resumeToken);
    this.events = source;
    source.onmessage = (message) => {
      // Before apply: a turn's end reloads, and opens the stream from the new snapshot's token.
      if (message.lastEventId) this.resumeToken = message.lastEventId;
      this.apply(JSON.parse(message.data));
    };
    // The server's last frame once the session no longer runs (stopped, failed, completed or
    // removed), after every event it wrote: the page shows its final state and opens no
    // stream again, where it reconnected for as long as it stayed open. The live text stays.
    source.addEventListener("session_ended", () => {
      if (this.events !== source) return;
      source.close();
      this.events = null;
      this.ended = true;
      this.softReload(0);
    });
    source.onerror = () => {
      // A refused token (400), a stopping server (503) or a dropped connection:
      // rebuild from a fresh snapshot, and say so until it is back.
      if (this.events !== source) return;
      source.close();
      this.events = null;
      this.lost = true;
      notice("Lost the session's live stream: reconnecting…", "bad");
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.hardReload(), RETRY_MS);
    };
  }

  apply(event) {
    const payload = typeof event.payload === "string" ? JSON.parse(event.payload || "{}") : event.payload || {};
    if (TERMINAL_EVENTS.has(event.type)) {
      // Said at once, whichever window cancelled it; the status line says it from the state.
      if (event.type === "turn_cancelled") notice("turn cancelled", "bad");
      this.hardReload();
      return;
    }
    const key = event.step_execution_id;
    let part = this.live.get(key);
    if (part && event.attempt < part.attempt) return; // an older attempt's leftovers
    if (!part || event.attempt > part.attempt) {
      part = { attempt: event.attempt, turn_id: event.turn_id, text: "", reasoning: "", stored: false };
      this.live.set(key, part);
    }
    switch (event.type) {
      case "text_delta": part.text += payload.text || ""; this.renderLive(); return;
      case "reasoning_delta": part.reasoning += payload.text || ""; this.renderLive(); return;
      case "tool_call_started": this.toolStatus.set(payload.tool_call_id, "running"); break;
      case "tool_call_finished": this.toolStatus.set(payload.tool_call_id, payload.status); break;
      // A started call that now waits (a question, a task, a timer) is no longer running: the
      // snapshot that follows names the wait, where "running" would stay until the call ends.
      case "interrupt_raised": case "tool_task_started": case "timer_started":
        if (payload.tool_call_id) this.toolStatus.delete(payload.tool_call_id);
        break;
      case "usage_recorded": part.stored = true; break; // the model call committed: its text is in the messages
      default: break;
    }
    this.renderLive();
    this.softReload();
  }

  // The page of messages before the first one shown, put above it. The first message shown
  // stays where it was on the screen, so the person reads on from where they were; the event
  // stream and the live text are left as they are.
  async showEarlier() {
    const firstShown = () => {
      const { messages } = this.earlier.transcript(this.data);
      return messages.length ? messages[0].sequence : 1;
    };
    const reading = this.earlier.readPage(firstShown);
    this.render(); // shows the button disabled while the page is read
    let read;
    try {
      read = await reading;
    } catch (error) {
      notice(`Cannot load earlier messages: ${error.message}`, "bad");
      this.render();
      return;
    }
    if (!read || this.gone) return;
    const anchor = this.main.querySelector(`#messages [data-sequence="${read.first}"]`);
    const top = anchor ? anchor.getBoundingClientRect().top : null;
    this.earlier.prepend(read.page);
    this.render();
    const moved = this.main.querySelector(`#messages [data-sequence="${read.first}"]`);
    if (top !== null && moved) window.scrollBy(0, moved.getBoundingClientRect().top - top);
  }

  control(name, body, done) {
    return post(`${this.base}/controls/${name}`, body, done).then((answer) => { this.softReload(); return answer; });
  }

  renderLive() {
    const holder = document.getElementById("live");
    if (!holder) return;
    patch(holder, renderLive(this));
    // The stream's status of a call, else its snapshot's: one the stream dropped shows the snapshot's again.
    for (const call of this.data ? this.data.snapshot.tool_calls : []) {
      const cell = document.querySelector(`[data-tool-status="${CSS.escape(call.tool_call_id)}"]`);
      if (cell) cell.textContent = this.toolStatus.get(call.tool_call_id) || call.status;
    }
  }

  render() {
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.draft : undefined;
    const selection = focused !== undefined ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null;
    patch(this.main, renderSession(this));
    document.title = pageTitle(this);
    if (focused !== undefined) this.refocus(focused, selection);
    this.renderLive();
  }

  // The field the person was typing in keeps the caret after a render.
  refocus(key, selection) {
    const node = this.main.querySelector(`[data-draft="${CSS.escape(key)}"]`);
    if (!node) return;
    node.focus();
    if (selection && selection[0] !== null && typeof node.setSelectionRange === "function") {
      node.setSelectionRange(selection[0], selection[1]);
    }
  }
}
