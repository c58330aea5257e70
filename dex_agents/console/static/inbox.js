// The inbox: every session, those that need a person first, and the form that starts one.

import { getJson, post } from "./api.js";
import { el, notice, when } from "./dom.js";

const INBOX_POLL_MS = 2000;

// Only what the session waits for gets a badge: a working session's status says "working"
// itself, and one that no longer runs says how it ended.
function attentionBadge(row) {
  if (!row.attention) return null; // the server gives none to a session that no longer runs
  const kind = row.attention === "turn_failed" ? "bad" : row.attention === "idle" ? "good" : "warn";
  return el("span", { class: `badge ${kind}` }, row.attention.replace("_", " "));
}

function rowNode(row) {
  return el("tr", { class: row.needs_person ? "needs" : "", "data-session": row.session_id },
    el("td", {}, el("a", { href: `/sessions/${encodeURIComponent(row.session_id)}` }, row.session_id)),
    el("td", {}, row.flow_type, row.writable ? "" : el("span", { class: "badge" }, " read-only")),
    el("td", {}, attentionBadge(row), row.attention ? " " : null, row.status),
    el("td", {}, row.waits_for || el("span", { class: "muted" }, "-")),
    el("td", {}, when(row.last_activity)));
}

// The rows drawn, by session ID, with the JSON each was drawn from. A refresh puts in only
// the rows that changed and moves only those out of place: it drew the whole table anew every
// 2 s, which dropped a click pressed across it (the link under the press was gone at its
// release) and any text the person had selected, such as a session ID to copy.
let drawn = new Map();

function renderRows(body, sessions) {
  const next = new Map();
  const nodes = sessions.map((row) => {
    const json = JSON.stringify(row);
    const old = drawn.get(row.session_id);
    const node = old && old.json === json ? old.node : rowNode(row);
    next.set(row.session_id, { json, node });
    return node;
  });
  drawn = next;
  if (!nodes.length) nodes.push(body.querySelector("tr.empty") || el("tr", { class: "empty" }, el("td", { colspan: 5, class: "muted" }, "No sessions yet.")));
  nodes.forEach((node, index) => {
    const here = body.children[index];
    if (here !== node) body.insertBefore(node, here || null);
  });
  while (body.children.length > nodes.length) body.lastElementChild.remove();
}

function renderInbox(data) {
  const holder = document.getElementById("inbox-holder");
  let body = holder.querySelector("#inbox tbody");
  if (!body) {
    body = el("tbody", {});
    holder.replaceChildren(el("table", { id: "inbox" },
      el("thead", {}, el("tr", {}, ["Session", "Flow type", "Status", "Waits for", "Last activity"].map((h) => el("th", {}, h)))),
      body));
  }
  renderRows(body, data.sessions);
  const select = document.getElementById("new-flow");
  planModeFlowTypes = new Set(data.plan_mode_flow_types || []);
  if (select && select.options.length !== data.flow_types.length) {
    select.replaceChildren(...data.flow_types.map((t) => el("option", { value: t }, t)));
    document.getElementById("new-session").hidden = data.flow_types.length === 0;
  }
  showPlanMode();
}

// The Flow types whose sessions take plan mode: the box is offered only for those, since any
// other Flow refuses a message sent in plan mode.
let planModeFlowTypes = new Set();

function showPlanMode() {
  const select = document.getElementById("new-flow");
  const label = document.getElementById("new-plan-label");
  if (select && label) label.hidden = !planModeFlowTypes.has(select.value);
}

export function startInbox(main) {
  document.title = "Sessions - dex-agents console";
  const id = el("input", { type: "text", id: "new-id", placeholder: "session ID (optional)" });
  const message = el("input", { type: "text", id: "new-message", class: "grow", placeholder: "first message, e.g. refund order 7" });
  const plan = el("input", { type: "checkbox", id: "new-plan" });
  const planLabel = el("label", { id: "new-plan-label", hidden: true }, plan, " plan mode");
  const form = el("form", { id: "new-session", hidden: true, onsubmit: async (event) => {
    event.preventDefault();
    const answer = await post("/api/sessions", {
      flow_type: document.getElementById("new-flow").value, session_id: id.value.trim(),
      message: message.value, plan_mode: plan.checked && !planLabel.hidden }, "session started");
    if (answer.ok) location.href = `/sessions/${encodeURIComponent(answer.session_id)}`;
  } }, el("select", { id: "new-flow", onchange: showPlanMode }), id, message, planLabel,
  el("button", { class: "primary", type: "submit" }, "Start session"));
  main.replaceChildren(el("h1", {}, "Sessions"), el("div", { id: "inbox-holder" }), el("h2", {}, "New session"), form);
  let lost = false; // the last refresh failed: the next one that works says "reconnected"
  const refresh = async () => {
    try {
      renderInbox(await getJson("/api/sessions"));
      if (lost) { lost = false; notice("reconnected", "good"); }
    } catch (error) {
      lost = true;
      notice(`Cannot list sessions: ${error.message}; retrying…`, "bad");
    }
  };
  // The next refresh waits for this one: with many sessions a rebuild can take longer than the period.
  // A hidden tab refreshes nothing, where it asked every INBOX_POLL_MS for as long as it stayed
  // open: it refreshes at once when shown again, so the person never reads a stale inbox.
  let timer = null;
  let refreshing = false;
  const hidden = () => document.visibilityState === "hidden";
  const loop = async () => {
    timer = null;
    refreshing = true;
    try { await refresh(); } finally { refreshing = false; }
    if (!hidden()) timer = setTimeout(loop, INBOX_POLL_MS);
  };
  document.addEventListener("visibilitychange", () => {
    if (hidden()) { clearTimeout(timer); timer = null; return; }
    // One in flight schedules the next itself when it ends: a second would run beside it.
    if (!refreshing && timer === null) loop();
  });
  if (!hidden()) loop();
}
