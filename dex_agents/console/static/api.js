// The console's JSON API: reads, and controls that answer {ok, reason}.

import { notice } from "./dom.js";

const CONTROL_HEADERS = { "Content-Type": "application/json", "X-Dex-Agents-Console": "1" };

// A refused read throws an Error with the server's reason and the answer's status (none
// when no answer came): the caller tells a lost server from a session that is not there.
export async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
  const body = await response.json().catch(() => ({ ok: false, reason: `HTTP ${response.status}` }));
  if (!response.ok) throw Object.assign(new Error(body.reason || `HTTP ${response.status}`), { status: response.status });
  return body;
}

// The controls in flight, by URL and body: a double click sends one, not two (a message
// queued twice, two sessions started, a refusal shown for an approval that went through).
const inFlight = new Set();

// Every control answers {ok, reason}; a False answer is shown, never swallowed.
export async function post(url, body, done) {
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
