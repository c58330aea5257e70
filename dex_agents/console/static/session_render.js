// One session's page drawn from its snapshot: the transcript, the composer, and the cards for
// what needs the person (approvals, questions), the turn's tool calls, the plan and the queue.
// Each function takes the SessionView, for its data, its drafts and its controls.

import { el, notice, steady, when } from "./dom.js";

// last_turn_failed of dex_agents.domain.attention: a later steered or cancelled turn
// keeps last_turn_error, but only the turn in failed_turn_id failed.
function lastTurnFailed(state) {
  if (!state.last_turn_error) return false;
  return !state.failed_turn_id || state.failed_turn_id === `turn-${state.turn_count}`;
}

export function renderSession(view) {
  const { snapshot, console: info } = view.data;
  const state = snapshot.state || {};
  const writable = info.writable;
  const transcript = view.earlier.transcript(view.data);
  const left = el("section", {},
    el("h2", {}, "Conversation"),
    renderOlder(view, transcript),
    el("div", { id: "messages" }, transcript.messages.map((m) => renderMessage(m, transcript.approvals))),
    el("div", { id: "live" }, renderLive(view)),
    writable ? renderComposer(view, state, info.plan_mode) : el("p", { class: "muted", id: "read-only" }, `Read-only: ${info.read_only}.`));
  const right = el("section", {},
    renderInterrupts(view, snapshot, writable),
    renderToolCalls(view, snapshot),
    renderPlan(view, snapshot, writable, state),
    renderQueue(view, snapshot, writable),
    el("div", { id: "worker-setup" }, renderWorker(writable ? view.worker : null)),
    el("h2", {}, "Usage"),
    el("p", { class: "muted" }, `${snapshot.usage.model_calls} model calls, ${snapshot.usage.input_tokens} in / ${snapshot.usage.output_tokens} out tokens`));
  return [
    el("h1", {}, info.session_id, " ", el("span", { class: "badge" }, info.flow_type)),
    el("p", { id: "status" }, info.status, lastTurnFailed(state) ? failedTurnBadge(info, state) : null),
    el("div", { class: "columns" }, left, right)];
}

// The tab's title: the session, and first whether it waits for the person, as the inbox marks
// it. Every tab was titled "dex-agents console", so among many open tabs none could be told
// from another, nor the one that needed an answer.
export function pageTitle(view) {
  const { snapshot, console: info } = view.data;
  const waiting = snapshot.pending_interrupts.length && info.running !== false ? "needs you: " : "";
  return `${waiting}${info.session_id} - dex-agents console`;
}

// A running session's status already says its last turn failed: the badge adds only the error.
// One that no longer runs says only how it ended, so the badge says which turn failed too.
function failedTurnBadge(info, state) {
  const text = info.running ? state.last_turn_error : `last turn failed: ${state.last_turn_error}`;
  return [" ", el("span", { class: "badge bad" }, text)];
}

// The worker's card drawn again on its own, when its read comes back: drawing the whole page
// for it would replace every message under the person's eyes (and a selection in them).
export function renderWorkerSetup(view, root) {
  const slot = root.querySelector("#worker-setup");
  if (slot) slot.replaceChildren(...[renderWorker(view.data.console.writable ? view.worker : null)].flat().filter(Boolean));
}

// The model and MCP servers this console's worker runs the turns with (never a key: the server
// sends URLs without credentials and no stdio command line).
function renderWorker(worker) {
  if (!worker) return null;
  if (worker.unreadable) {
    return [el("h2", {}, "Model and tools"), el("div", { class: "card", id: "worker" },
      el("p", { class: "muted" }, worker.unreadable))];
  }
  const model = worker.model_server ? `${worker.model} at ${worker.model_server}` : worker.model;
  const tools = (server) => server.tools === null ? "listing its tools…"
    : server.tools.length ? server.tools.join(", ") : "no tools: it could not be listed, or offers none";
  return [el("h2", {}, "Model and tools"), el("div", { class: "card", id: "worker" },
    el("p", {}, `Turns this console's worker runs use ${model}; a chat on the same file runs those it takes with its own.`),
    worker.tool_servers.length ? el("ul", {}, worker.tool_servers.map((server) =>
      el("li", { "data-tool-server": server.name }, `MCP ${server.name} (${server.url || "stdio"}): ${tools(server)}`))) : null)];
}

// The model's text and reasoning that the stream carried and no stored message holds yet. The
// page's render draws it too: drawn empty there and again after, it lost a selection in it.
export function renderLive(view) {
  const parts = [...view.live.values()].filter((p) => !p.stored && (p.text || p.reasoning));
  // A session that no longer runs replays its last turn's unstored text too: no model writes it now.
  const ended = view.data && view.data.console.running === false;
  const role = ended ? "assistant (unfinished when the session ended)" : "assistant (streaming)";
  return parts.map((p) => el("div", { class: "msg live" },
    el("span", { class: "role" }, role),
    p.reasoning ? el("div", { class: "muted" }, p.reasoning) : null, p.text));
}

// The snapshot holds the last 200 messages, and retention may have deleted older ones: a
// transcript that does not start at message 1 says so, not as if the session began there,
// and offers the stored ones a page at a time (view.showEarlier).
function renderOlder(view, transcript) {
  const { messages } = transcript;
  const first = messages.length ? messages[0].sequence : null;
  if (first === null || first <= 1) return null;
  const hidden = first - 1;
  const deleted = transcript.deletedBefore ? Math.min(transcript.deletedBefore, first) - 1 : 0;
  const text = deleted >= hidden
    ? `${hidden} earlier message${hidden === 1 ? " was" : "s were"} deleted by the session's retention.`
    : `${hidden} earlier message${hidden === 1 ? " is" : "s are"} not shown: this page holds the last ${messages.length}`
      + (deleted > 0 ? `, and retention deleted ${deleted} of them.` : ".");
  return [el("p", { class: "muted", id: "older" }, text),
    deleted >= hidden ? null : el("button", { type: "button", id: "show-earlier", disabled: view.earlier.loading,
      onclick: () => view.showEarlier() }, "Show earlier messages")];
}

// Each is marked with its sequence: showEarlier keeps the first one shown where it was.
function renderMessage(m, approvals) {
  const node = messageNode(m, approvals);
  node.dataset.sequence = m.sequence;
  return node;
}

// approvals: {sequence: revision} of the user messages the session wrote for a plan's approval,
// by the server's rule (executed_plan_revision): the session's words, not the person's.
function messageNode(m, approvals) {
  const revision = m.role === "user" ? approvals[String(m.sequence)] : undefined;
  if (revision !== undefined) {
    return el("div", { class: "msg plan", "data-plan-approval": revision }, el("span", { class: "role" }, "plan"),
      `plan revision ${revision} approved; the agent executes it`);
  }
  if (m.tool_name && m.role === "assistant") {
    return el("div", { class: "msg tool" }, el("span", { class: "role" }, `tool call ${m.tool_name}`), m.tool_arguments || "");
  }
  if (m.tool_name) {
    return el("div", { class: "msg tool" }, el("span", { class: "role" }, `${m.tool_name} result`), m.tool_output || m.text || "",
      renderImages(m.images));
  }
  return el("div", { class: `msg ${m.role}` }, el("span", { class: "role" }, m.role), m.text || "", renderImages(m.images));
}

// A message's images live in a media store the page cannot read, so each is named by its type
// and size: without this a message sent with a picture looked as if it had none.
function renderImages(images) {
  if (!images || !images.length) return null;
  return el("ul", { class: "images" }, images.map((image) =>
    el("li", { "data-image": image.sha256 }, `${image.mime_type} image, ${byteSize(image.size_bytes)}`)));
}

function byteSize(bytes) {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

// Plan mode is offered only where the Flow has it: any other refuses a message sent in it.
function renderComposer(view, state, planMode) {
  const text = view.field("textarea", "message", { id: "message", class: "grow", rows: 2, placeholder: "Message the agent" });
  const plan = planMode ? view.field("input", "plan-mode", { type: "checkbox", id: "plan-mode" }) : null;
  const active = state.active_turn_id;
  const controls = composerControls(view);
  return el("form", { id: "composer", onsubmit: controls.send }, text,
    planMode ? el("label", {}, plan, " plan mode") : null,
    el("button", { class: "primary", type: "submit", id: "send" }, "Send"),
    el("button", { type: "button", id: "steer", onclick: controls.steer, disabled: !active }, "Steer"),
    el("button", { type: "button", id: "cancel-turn", class: "danger", disabled: !active || !state.accepts_turn_control, "data-turn": active,
      onclick: controls.cancel }, "Cancel turn"));
}

// The composer's listeners, made once per page and reading the fields and the turn when called,
// so a render keeps the composer's nodes (dom.steady): a turn that started drew it anew, and
// Send pressed before that render and released after it sent nothing.
const composers = new WeakMap();

function composerControls(view) {
  if (composers.has(view)) return composers.get(view);
  const field = (id) => view.main.querySelector(`#${id}`);
  // A blank message is refused by every session: said here, where the refusal that came back
  // could not tell it from plan mode being off.
  const sendAs = async (name, done) => {
    const text = field("message").value;
    if (!text.trim()) { notice("Type a message first.", "bad"); return; }
    const plan = field("plan-mode");
    const answer = await view.control(name, { text, plan_mode: plan ? plan.checked : false }, done);
    if (answer.ok) view.clearDraft("message");
  };
  const controls = {
    send: steady((event) => { event.preventDefault(); return sendAs("send_user_message", "message queued"); }),
    steer: steady(() => sendAs("steer_user_message", "turn steered")),
    cancel: steady((event) => view.control("cancel_turn", { turn_id: event.currentTarget.dataset.turn }, "cancel requested")),
  };
  composers.set(view, controls);
  return controls;
}

function renderInterrupts(view, snapshot, writable) {
  if (!snapshot.pending_interrupts.length) return null;
  // A stopped or failed session never takes the answer: nobody is needed, as the inbox says.
  const heading = view.data.console.running === false ? "Pending when the session ended" : "Needs you";
  return [el("h2", {}, heading), snapshot.pending_interrupts.map((i) => {
    const body = [el("strong", {}, i.kind === "question" ? "Question" : `Approve ${i.tool_name}?`),
      i.question ? el("p", {}, i.question) : null,
      i.arguments && i.kind !== "question" ? el("pre", {}, i.arguments) : null,
      i.deadline ? el("p", { class: "muted" }, `deadline ${when(i.deadline)}`) : null];
    if (writable && i.kind === "question") {
      const key = `answer:${i.interrupt_id}`;
      const answer = view.field("input", key, { type: "text", class: "grow", placeholder: "your answer" });
      const submit = async (e) => {
        e.preventDefault();
        const done = await view.control("answer_question", { interrupt_id: i.interrupt_id, answer: answer.value }, "answered");
        if (done.ok) view.clearDraft(key);
      };
      body.push(el("form", { onsubmit: submit, "data-interrupt": i.interrupt_id },
        i.choices.map((c) => el("button", { type: "button", onclick: () => view.control("answer_question", { interrupt_id: i.interrupt_id, answer: c }, "answered") }, c)),
        i.allows_free_text ? [answer, el("button", { class: "primary", type: "submit" }, "Answer")] : null,
        el("button", { type: "button", class: "danger", onclick: () => view.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: false }, "declined") }, "Decline")));
    } else if (writable) {
      const why = view.field("input", `rejection:${i.interrupt_id}`, { type: "text", class: "grow", placeholder: "message with a rejection (optional)" });
      body.push(el("form", { onsubmit: (e) => e.preventDefault(), "data-interrupt": i.interrupt_id },
        el("button", { type: "button", class: "primary", "data-approve": i.interrupt_id,
          onclick: () => view.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: true }, "approved") }, "Approve"),
        why,
        el("button", { type: "button", class: "danger", "data-reject": i.interrupt_id,
          onclick: () => view.control("resolve_interrupt", { interrupt_id: i.interrupt_id, approved: false, rejection_message: why.value }, "rejected") }, "Reject")));
    }
    return el("div", { class: "card attention" }, body);
  })];
}

function renderToolCalls(view, snapshot) {
  if (!snapshot.tool_calls.length) return null;
  return [el("h2", {}, "Tool calls of this turn"), snapshot.tool_calls.map((c) => el("div", { class: "card" },
    el("strong", {}, c.tool_name), " ", el("span", { class: "badge", "data-tool-status": c.tool_call_id }, view.toolStatus.get(c.tool_call_id) || c.status),
    c.output ? el("pre", {}, c.output) : null, c.error ? el("pre", { class: "muted" }, c.error) : null,
    c.rejection_message ? el("p", { class: "muted" }, `rejected: ${c.rejection_message}`) : null))];
}

function renderPlan(view, snapshot, writable, state) {
  const plan = snapshot.plan;
  if (!plan) return null;
  const todos = plan.todos || [];
  return [el("h2", {}, `Plan (revision ${plan.revision}, ${plan.status})`), el("div", { class: "card" },
    el("ul", {}, todos.map((t) => el("li", {}, `[${t.status}] ${t.content}`))),
    writable && plan.status === "draft" ? el("button", { class: "primary", id: "execute-plan", disabled: Boolean(state.active_turn_id), "data-revision": plan.revision,
      onclick: () => view.control("execute_plan", { revision: plan.revision }, "plan approved") }, "Execute plan") : null)];
}

function renderQueue(view, snapshot, writable) {
  const queued = snapshot.queued_messages || [];
  const steered = snapshot.steered_messages || [];
  if (!queued.length && !steered.length) return null;
  return [el("h2", {}, "Queued"),
    queued.map((q) => el("div", { class: "card" }, q.text, renderImages(q.images),
      writable ? el("div", {},
        el("button", { type: "button", "data-message": q.message_id, onclick: () => view.control("steer_user_message", { message_id: q.message_id }, "steered into the turn") }, "Steer now"), " ",
        el("button", { type: "button", class: "danger", "data-message": q.message_id, onclick: () => view.control("delete_queued_message", { message_id: q.message_id }, "deleted") }, "Delete")) : null)),
    steered.map((s) => el("div", { class: "card muted" }, `steered: ${s.text}`, renderImages(s.images)))];
}
