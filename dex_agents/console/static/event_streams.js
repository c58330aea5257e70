// A session's event stream for its page: through the worker the browser's pages share
// (stream_worker.js, one connection for all of them), or, where the browser has no
// SharedWorker or it failed, an EventSource of the page's own. Either answers as an
// EventSource does: onmessage with lastEventId and data, a "session_ended" event, onerror.

let port = null;
let shared = typeof SharedWorker === "function";
const listeners = new Map(); // key -> SharedStream
let made = 0;

function workerPort() {
  if (port) return port;
  const worker = new SharedWorker("/static/stream_worker.js", { name: "dex-agents event streams" });
  // A worker that failed to start: its streams fail, and later ones are the page's own.
  worker.onerror = () => {
    shared = false;
    for (const stream of [...listeners.values()]) stream.fail();
  };
  port = worker.port;
  port.onmessage = ({ data }) => { const stream = listeners.get(data.key); if (stream) stream.receive(data); };
  port.start();
  // A page that goes away closes its streams, so the worker stops asking for them.
  addEventListener("pagehide", () => { for (const stream of [...listeners.values()]) stream.close(); });
  return port;
}

class SharedStream {
  constructor(sessionId, resumeToken) {
    this.key = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${++made}`;
    this.onmessage = null;
    this.onerror = null;
    this.ended = [];
    const worker = workerPort();
    listeners.set(this.key, this);
    worker.postMessage({ op: "open", key: this.key, session_id: sessionId, resume_token: resumeToken });
  }

  addEventListener(type, listener) {
    if (type === "session_ended") this.ended.push(listener);
  }

  receive(frame) {
    if (frame.kind === "event") {
      if (this.onmessage) this.onmessage({ lastEventId: frame.id, data: frame.data });
    } else if (frame.kind === "session_ended") {
      listeners.delete(this.key);
      for (const listener of this.ended) listener({ data: frame.data });
    } else {
      this.fail();
    }
  }

  fail() {
    if (!listeners.delete(this.key)) return;
    if (this.onerror) this.onerror(new Event("error"));
  }

  close() {
    if (listeners.delete(this.key) && port) port.postMessage({ op: "close", key: this.key });
  }
}

// The stream of session `sessionId` from `resumeToken` (base: the session's API path).
export function openEventStream(base, sessionId, resumeToken) {
  if (shared) {
    try {
      return new SharedStream(sessionId, resumeToken);
    } catch (error) {
      shared = false; // refused by the browser: the page's own stream from now on
    }
  }
  return new EventSource(`${base}/events?resume_token=${encodeURIComponent(resumeToken)}`);
}
