// The dex-agents console: the inbox, and one session rendered from its snapshot and events.
// Plain JavaScript, no build step. Text from the server is only ever set as textContent.
"use strict";

const CONTROL_HEADERS = { "Content-Type": "application/json", "X-Dex-Agents-Console": "1" };
const INBOX_POLL_MS = 2000;
const RETRY_MS = 1000; // after a lost stream or a failed snapshot: a local server restarts in seconds
const GAP_MS = 20000; // a timer late by this much means the machine slept: reload
const TERMINAL_EVENTS = new Set(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"]);

// last_turn_failed of dex_agents.domain.attention: a later steered or cancelled turn
// keeps last_turn_error, but only the turn in failed_turn_id failed.
function lastTurnFailed(state) {
  if (!state.last_turn_error) return false;
  return !state.failed_turn_id || state.failed_turn_id === `turn-${state.turn_count}`;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function notice(text, kind) {
  const node = document.getElementById("notice");
  node.textContent = text || "";
  node.className = kind || "";
}

async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
  const body = await response.json().catch(() => ({ ok: false, reason: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(body.reason || `HTTP ${response.status}`);
  return body;
}

// The controls in flight, by URL and body: a double click sends one, not two (a message
// queued twice, two sessions started, a refusal shown for an approval that went through).
const inFlight = new Set();

// Every control answers {ok, reason}; a False answer is shown, never swallowed.
async function post(url, body, done) {
  const key = `${url} ${JSON.stringify(body)}`;
  if (inFlight.has(key)) return { ok: false, repeated: true };
  inFlight.add(key);
  let answer;
  try {
    const response = await fetch(url, { method: "POST", headers: CONTROL_HEADERS, body: JSON.stringify(body) });
    answer = await response.json().catch(() => ({ ok: false, reason: `HTTP ${response.status}` }));
  } catch (error) {
    answer = { ok: false, reason: String(error) };
  } finally {
    inFlight.delete(key);
  }
  if (answer.ok) notice(done || "done", "good");
  else notice(`Not done: ${answer.reason || "refused"}`, "bad");
  return answer;
}

function when(iso) {
  if (!iso) return "-";
  const date = new Date(iso);
  return date.toLocaleString();
}

// ---- Inbox ----------------------------------------------------------------

function attentionBadge(row) {
  if (!row.attention) return el("span", { class: "badge" }, row.needs_person ? "" : "working");
  const kind = row.attention === "turn_failed" ? "bad" : row.attention === "idle" ? "good" : "warn";
  return el("span", { class: `badge ${kind}` }, row.attention.replace("_", " "));
}

function renderInbox(main, data) {
  const rows = data.sessions.map((row) =>
    el("tr", { class: row.needs_person ? "needs" : "", "data-session": row.session_id },
      el("td", {}, el("a", { href: `/sessions/${encodeURIComponent(row.session_id)}` }, row.session_id)),
      el("td", {}, row.flow_type, row.writable ? "" : el("span", { class: "badge" }, " read-only")),
      el("td", {}, attentionBadge(row), " ", row.status),
      el("td", {}, row.waits_for || el("span", { class: "muted" }, "-")),
      el("td", {}, when(row.last_activity))));
  const table = el("table", { id: "inbox" },
    el("thead", {}, el("tr", {}, ["Session", "Flow type", "Status", "Waits for", "Last activity"].map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 5, class: "muted" }, "No sessions yet."))));
  const holder = document.getElementById("inbox-holder");
  holder.replaceChildren(table);
  const select = document.getElementById("new-flow");
  if (select && select.options.length !== data.flow_types.length) {
    select.replaceChildren(...data.flow_types.map((t) => el("option", { value: t }, t)));
    document.getElementById("new-session").hidden = data.flow_types.length === 0;
  }
}

function startInbox(main) {
  const id = el("input", { type: "text", id: "new-id", placeholder: "session ID (optional)" });
  const message = el("input", { type: "text", id: "new-message", class: "grow", placeholder: "first message, e.g. refund order 7" });
  const plan = el("input", { type: "checkbox", id: "new-plan" });
  const form = el("form", { id: "new-session", hidden: true, onsubmit: async (event) => {
    event.preventDefault();
    const answer = await post("/api/sessions", {
      flow_type: document.getElementById("new-flow").value, session_id: id.value.trim(),
      message: message.value, plan_mode: plan.checked }, "session started");
    if (answer.ok) location.href = `/sessions/${encodeURIComponent(answer.session_id)}`;
  } }, el("select", { id: "new-flow" }), id, message, el("label", {}, plan, " plan mode"),
  el("button", { class: "primary", type: "submit" }, "Start session"));
  main.replaceChildren(el("h1", {}, "Sessions"), el("div", { id: "inbox-holder" }), el("h2", {}, "New session"), form);
  let lost = false; // the last refresh failed: the next one that works says "reconnected"
  const refresh = async () => {
    try {
      renderInbox(main, await getJson("/api/sessions"));
      if (lost) { lost = false; notice("reconnected", "good"); }
    } catch (error) {
      lost = true;
      notice(`Cannot list sessions: ${error.message}; retrying…`, "bad");
    }
  };
  // The next refresh waits for this one: with many sessions a rebuild can take longer than the period.
  const loop = async () => { await refresh(); setTimeout(loop, INBOX_POLL_MS); };
  loop();
}

// ---- One session -----------------------------------------------------------

class SessionView {
  constructor(main, sessionId) {
    this.main = main;
    this.sessionId = sessionId;
    this.base = `/api/sessions/${encodeURIComponent(sessionId)}`;
    this.data = null;
    this.snapshotsAsked = 0; // snapshots asked for, in order; the one shown is snapshotShown
    this.snapshotShown = 0;
    this.events = null;
    this.live = new Map(); // step_execution_id -> {attempt, turn_id, text, reasoning, stored}
    this.toolStatus = new Map(); // tool_call_id -> status seen on the stream
    this.softTimer = null;
    this.retryTimer = null;
    this.lost = false; // the last stream or snapshot failed: the next snapshot says "reconnected"
    this.lastTick = Date.now();
    // What the person is typing, by field: every event renders the page anew, and a draft
    // kept only in the DOM would be wiped by the render that follows it.
    this.drafts = new Map();
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
      if (now - this.lastTick > GAP_MS) this.hardReload();
      this.lastTick = now;
    }, 1000);
  }

  // The snapshot again, and the stream again from its token: the token replays the active turn.
  // Until the server answers again (a restart, a dropped network), it tries every RETRY_MS.
  async hardReload() {
    clearTimeout(this.retryTimer);
    if (this.events) { this.events.close(); this.events = null; }
    this.live.clear();
    this.toolStatus.clear();
    const data = await this.loadSnapshot();
    if (data) this.openEvents(data.resume_token);
    else this.retryTimer = setTimeout(() => this.hardReload(), RETRY_MS);
  }

  // The snapshot only: the stream and the live text go on. One that fails is asked for again
  // while the stream is open: an idle session sends no event that would, and the page would
  // keep the state it had, under a notice that it is reconnecting.
  softReload(delay = 150) {
    clearTimeout(this.softTimer);
    this.softTimer = setTimeout(async () => {
      const data = await this.loadSnapshot();
      if (!data && this.events) this.softReload(RETRY_MS);
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
      this.lost = true;
      notice(`Cannot load the session: ${error.message}; reconnecting…`, "bad");
      return null;
    }
    if (asked < this.snapshotShown) return data;
    this.snapshotShown = asked;
    this.data = data;
    if (this.lost) { this.lost = false; notice("reconnected", "good"); }
    this.render();
    return data;
  }

  openEvents(token) {
    const url = `${this.base}/events?resume_token=${encodeURIComponent(token || "")}`;
    if (this.events) this.events.close();
    const source = new EventSource(url);
    this.events = source;
    source.onmessage = (message) => this.apply(JSON.parse(message.data));
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

  control(name, body, done) {
    return post(`${this.base}/controls/${name}`, body, done).then((answer) => { this.softReload(); return answer; });
  }

  renderLive() {
    const holder = document.getElementById("live");
    if (!holder) return;
    const parts = [...this.live.values()].filter((p) => !p.stored && (p.text || p.reasoning));
    // A session that no longer runs replays its last turn's unstored text too: no model writes it now.
    const ended = this.data && this.data.console.running === false;
    const role = ended ? "assistant (unfinished when the session ended)" : "assistant (streaming)";
    holder.replaceChildren(...parts.map((p) => el("div", { class: "msg live" },
      el("span", { class: "role" }, role),
      p.reasoning ? el("div", { class: "muted" }, p.reasoning) : null, p.text)));
    // The stream's status of a call, else its snapshot's: one the stream dropped shows the snapshot's again.
    for (const call of this.data ? this.data.snapshot.tool_calls : []) {
      const cell = document.querySelector(`[data-tool-status="${CSS.escape(call.tool_call_id)}"]`);
      if (cell) cell.textContent = this.toolStatus.get(call.tool_call_id) || call.status;
    }
  }

  render() {
    const { snapshot, console: info } = this.data;
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.draft : undefined;
    const selection = focused !== undefined ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null;
    const state = snapshot.state || {};
    const writable = info.writable;
    const left = el("section", {},
      el("h2", {}, "Conversation"),
      el("div", { id: "messages" }, snapshot.messages.map((m) => this.renderMessage(m))),
      el("div", { id: "live" }),
      writable ? this.renderComposer(state) : el("p", { class: "muted", id: "read-only" }, `Read-only: ${info.read_only}.`));
    const right = el("section", {},
      this.renderInterrupts(snapshot, writable),
      this.renderToolCalls(snapshot),
      this.renderPlan(snapshot, writable, state),
      this.renderQueue(snapshot, writable),
      el("h2", {}, "Usage"),
      el("p", { class: "muted" }, `${snapshot.usage.model_calls} model calls, ${snapshot.usage.input_tokens} in / ${snapshot.usage.output_tokens} out tokens`));
    this.main.replaceChildren(
      el("h1", {}, info.session_id, " ", el("span", { class: "badge" }, info.flow_type)),
      el("p", { id: "status" }, info.status, lastTurnFailed(state) ? el("span", { class: "badge bad" }, ` last turn failed: ${state.last_turn_error}`) : null),
      el("div", { class: "columns" }, left, right));
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

  renderMessage(m) {
    if (m.tool_name && m.role === "assistant") {
      return el("div", { class: "msg tool" }, el("span", { class: "role" }, `tool call ${m.tool_name}`), m.tool_arguments || "");
    }
    if (m.tool_name) {
      return el("div", { class: "msg tool" }, el("span", { class: "role" }, `${m.tool_name} result`), m.tool_output || m.text || "");
    }
    return el("div", { class: `msg ${m.role}` }, el("span", { class: "role" }, m.role), m.text || "");
  }

  renderComposer(state) {
    const text = this.field("textarea", "message", { id: "message", class: "grow", rows: 2, placeholder: "Message the agent" });
    const plan = this.field("input", "plan-mode", { type: "checkbox", id: "plan-mode" });
    const active = state.active_turn_id;
    const send = async (event) => {
      event.preventDefault();
      const answer = await this.control("send_user_message", { text: text.value, plan_mode: plan.checked }, "message queued");
      if (answer.ok) this.clearDraft("message");
    };
    const steer = async () => {
      const answer = await this.control("steer_user_message", { text: text.value, plan_mode: plan.checked }, "turn steered");
      if (answer.ok) this.clearDraft("message");
    };
    return el("form", { id: "composer", onsubmit: send }, text,
      el("label", {}, plan, " plan mode"),
      el("button", { class: "primary", type: "submit", id: "send" }, "Send"),
      el("button", { type: "button", id: "steer", onclick: steer, disabled: !active }, "Steer"),
      el("button", { type: "button", id: "cancel-turn", class: "danger", disabled: !active || !state.accepts_turn_control,
        onclick: () => this.control("cancel_turn", { turn_id: active }, "cancel requested") }, "Cancel turn"));
  }

  renderInterrupts(snapshot, writable) {
    if (!snapshot.pending_interrupts.length) return null;
    // A stopped or failed session never takes the answer: nobody is needed, as the inbox says.
    const heading = this.data.console.running === false ? "Pending when the session ended" : "Needs you";
    return [el("h2", {}, heading), snapshot.pending_interrupts.map((i) => {
      const body = [el("strong", {}, i.kind === "question" ? "Question" : `Approve ${i.tool_name}?`),
        i.question ? el("p", {}, i.question) : null,
        i.arguments && i.kind !== "question" ? el("pre", {}, i.arguments) : null,
        i.deadline ? el("p", { class: "muted" }, `deadline ${when(i.deadline)}`) : null];
      if (writable && i.kind === "question") {
        const key = `answer:${i.interrupt_id}`;
        const answer = this.field("input", key, { type: "text", class: "grow", placeholder: "your answer" });
        const submit = async (e) => {
          e.preventDefault();
          const done = await this.control("answer_question", { interrupt_id: i.interrupt_id, answer: answer.value }, "answered");
          if (done.ok) this.clearDraft(key);
        };
        body.push(el("form", { onsubmit: submit },
          i.choices.map((c) => el("button", { type: "button", onclick: () => this.control("answer_question", { interrupt_id: i.interrupt_id, answer: c }, "answered") }, c)),
          i.allows_free_text ? [answer, el("button", { class: "primary", type: "submit" }, "Answer")] : null,
          el("button", { type: "button", class: "danger", onclick: () => this.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: false }, "declined") }, "Decline")));
      } else if (writable) {
        const why = this.field("input", `rejection:${i.interrupt_id}`, { type: "text", class: "grow", placeholder: "message with a rejection (optional)" });
        body.push(el("form", { onsubmit: (e) => e.preventDefault() },
          el("button", { type: "button", class: "primary", "data-approve": i.interrupt_id,
            onclick: () => this.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: true }, "approved") }, "Approve"),
          why,
          el("button", { type: "button", class: "danger", "data-reject": i.interrupt_id,
            onclick: () => this.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: false, rejection_message: why.value }, "rejected") }, "Reject")));
      }
      return el("div", { class: "card attention" }, body);
    })];
  }

  renderToolCalls(snapshot) {
    if (!snapshot.tool_calls.length) return null;
    return [el("h2", {}, "Tool calls of this turn"), snapshot.tool_calls.map((c) => el("div", { class: "card" },
      el("strong", {}, c.tool_name), " ", el("span", { class: "badge", "data-tool-status": c.tool_call_id }, this.toolStatus.get(c.tool_call_id) || c.status),
      c.output ? el("pre", {}, c.output) : null, c.error ? el("pre", { class: "muted" }, c.error) : null,
      c.rejection_message ? el("p", { class: "muted" }, `rejected: ${c.rejection_message}`) : null))];
  }

  renderPlan(snapshot, writable, state) {
    const plan = snapshot.plan;
    if (!plan) return null;
    const todos = plan.todos || [];
    return [el("h2", {}, `Plan (revision ${plan.revision}, ${plan.status})`), el("div", { class: "card" },
      el("ul", {}, todos.map((t) => el("li", {}, `[${t.status}] ${t.content}`))),
      writable && plan.status === "draft" ? el("button", { class: "primary", id: "execute-plan", disabled: Boolean(state.active_turn_id),
        onclick: () => this.control("execute_plan", { revision: plan.revision }, "plan approved") }, "Execute plan") : null)];
  }

  renderQueue(snapshot, writable) {
    const queued = snapshot.queued_messages || [];
    const steered = snapshot.steered_messages || [];
    if (!queued.length && !steered.length) return null;
    return [el("h2", {}, "Queued"),
      queued.map((q) => el("div", { class: "card" }, q.text,
        writable ? el("div", {},
          el("button", { type: "button", onclick: () => this.control("steer_user_message", { message_id: q.message_id }, "steered into the turn") }, "Steer now"), " ",
          el("button", { type: "button", class: "danger", onclick: () => this.control("delete_queued_message", { message_id: q.message_id }, "deleted") }, "Delete")) : null)),
      steered.map((s) => el("div", { class: "card muted" }, `steered: ${s.text}`))];
  }
}

function boot() {
  const main = document.getElementById("main");
  const match = location.pathname.match(/^\/sessions\/(.+)$/);
  if (!match) { startInbox(main); return; }
  let sessionId;
  try {
    sessionId = decodeURIComponent(match[1]);
  } catch (error) {
    // A typed address such as /sessions/100% names no session: say so, where the page stopped at "Loading…".
    main.replaceChildren(el("h1", {}, "No such session"),
      el("p", {}, `${location.pathname} is not a session's address: write a % in a session ID as %25.`),
      el("p", {}, el("a", { href: "/" }, "All sessions")));
    return;
  }
  new SessionView(main, sessionId).start();
}

document.addEventListener("DOMContentLoaded", boot);
