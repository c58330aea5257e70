// A session's event stream for its page: through the worker the browser's pages share
// (stream_worker.js, one connection for all of them), or, where the browser has no
// SharedWorker or it failed, an EventSource of the page's own. Either answers as an
// EventSource does: onmessage with lastEventId and data, a "session_ended" event, onerror.

let port = null;
let shared = typeof SharedWorker === "function";
const listeners = new Map(); // key -> SharedStream
// Streams closed as their page went away: a page the back-forward cache restores opens them
// again, where it stayed stale until reloaded in a browser that told it nothing else.
const suspended = new Set();
let made = 0;
let lock = null; // the name of the Web Lock this page holds (holdLock)
let release = null;

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
  holdLock();
  // A page that goes away closes its streams, so the worker stops asking for them; one that
  // comes back from the back-forward cache opens them again, each from the last event it gave.
  addEventListener("pagehide", () => {
    for (const stream of [...listeners.values()]) stream.suspend();
    releaseLock();
  });
  addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    holdLock();
    for (const stream of [...suspended]) stream.resume();
  });
  return port;
}

// The Web Lock this page holds while it lives, named in each stream it opens: the worker waits
// for it, so a page gone without pagehide (a crashed renderer, a discarded tab) has its streams
// dropped. Given up at pagehide (its streams are closed then), and taken anew under another
// name if the page comes back. No lock outside a secure context, where browsers have none.
function holdLock() {
  if (!navigator.locks) return;
  const name = `dex-agents page ${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  lock = name;
  navigator.locks.request(name, () => new Promise((done) => {
    if (lock !== name) { done(); return; } // let go before it was granted
    release = done;
    // Only once held: the worker's wait, asked first, would be granted at once.
    port.postMessage({ op: "page", lock: name });
  }));
}

function releaseLock() {
  lock = null;
  if (release) { release(); release = null; }
}

class SharedStream {
  constructor(sessionId, resumeToken) {
    this.sessionId = sessionId;
    this.token = resumeToken; // the last event given to the page, else the one opened from
    this.onmessage = null;
    this.onerror = null;
    this.ended = [];
    this.open();
  }

  // Under a new key each time: frames the worker sent under an earlier one, which the page
  // reads only once it is back, are another connection's and were sent again on this one.
  open() {
    const worker = workerPort();
    this.key = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}-${++made}`;
    listeners.set(this.key, this);
    worker.postMessage({ op: "open", key: this.key, lock, session_id: this.sessionId, resume_token: this.token });
  }

  addEventListener(type, listener) {
    if (type === "session_ended") this.ended.push(listener);
  }

  receive(frame) {
    if (frame.kind === "event") {
      if (frame.id) this.token = frame.id;
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

  // Closed as its page goes away, to be opened again if the page comes back.
  suspend() {
    if (!listeners.delete(this.key)) return;
    suspended.add(this);
    port.postMessage({ op: "close", key: this.key });
  }

  resume() {
    suspended.delete(this);
    if (shared) this.open();
    else if (this.onerror) this.onerror(new Event("error")); // the worker failed meanwhile
  }

  close() {
    suspended.delete(this);
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
