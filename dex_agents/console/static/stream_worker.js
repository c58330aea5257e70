// The event streams the session pages of a browser share (a SharedWorker): a browser opens
// at most six connections to one host, and each shown page's own stream held one, so a seventh
// shown page never loaded. This holds one connection to /api/events for up to MAX_STREAMS
// streams (and MAX_URL of their names in its URL), a stream per page, opened again from each
// stream's last event whenever a page opens or closes a stream in it, so no event is lost or
// sent twice.

// The console's MAX_SHARED_STREAMS: it refuses a connection asking for more, so the streams
// past it go on a second connection (and so on), where the 101st page's refused them all.
const MAX_STREAMS = 100;
// The most a connection's streams may add to its URL: the console's HTTP parser (uvicorn's h11)
// refuses a request head past 16 KiB that comes in pieces, as it may over a network, and 100
// streams of long session IDs (up to 256 bytes, each twice: in its token too) come to 75 KB.
const MAX_URL = 12000;

const streams = new Map(); // key -> {port, lock, session_id, resume_token, connection}
const connections = new Set(); // each {keys, source, reopening}

// One reopen of a connection for the opens and closes of one task: pages that load together
// share it.
function reopen(connection) {
  if (connection.reopening === null) connection.reopening = setTimeout(() => connect(connection), 0);
}

// What a stream adds to its connection's URL.
function cost(key, stream) {
  return encodeURIComponent(JSON.stringify({ [key]: { session_id: stream.session_id, resume_token: stream.resume_token } })).length;
}

function urlSize(connection) {
  let size = 0;
  for (const key of connection.keys) size += cost(key, streams.get(key));
  return size;
}

function room(adding) {
  for (const connection of connections) {
    if (connection.keys.size < MAX_STREAMS && urlSize(connection) + adding <= MAX_URL) return connection;
  }
  const connection = { keys: new Set(), source: null, reopening: null };
  connections.add(connection);
  return connection;
}

function forget(key) {
  const stream = streams.get(key);
  if (!stream) return null;
  streams.delete(key);
  stream.connection.keys.delete(key);
  return stream;
}

function connect(connection) {
  connection.reopening = null;
  if (connection.source) { connection.source.close(); connection.source = null; }
  if (!connection.keys.size) { connections.delete(connection); return; }
  // A stream's token grows with its first events: streams past MAX_URL move to another.
  let size = urlSize(connection);
  for (const key of [...connection.keys].reverse()) {
    if (size <= MAX_URL || connection.keys.size === 1) break;
    const stream = streams.get(key);
    const taken = cost(key, stream);
    connection.keys.delete(key);
    size -= taken;
    stream.connection = room(taken);
    stream.connection.keys.add(key);
    reopen(stream.connection);
  }
  const wanted = {};
  for (const key of connection.keys) {
    const stream = streams.get(key);
    wanted[key] = { session_id: stream.session_id, resume_token: stream.resume_token };
  }
  const opened = new EventSource(`/api/events?streams=${encodeURIComponent(JSON.stringify(wanted))}`);
  connection.source = opened;
  opened.onmessage = (message) => {
    if (connection.source !== opened) return;
    const frame = JSON.parse(message.data);
    const stream = streams.get(frame.stream);
    if (!stream) return; // closed by its page since this connection opened
    if (frame.kind === "event") stream.resume_token = frame.id;
    else forget(frame.stream); // ended, or refused: its page opens it anew if it must
    stream.port.postMessage({ key: frame.stream, kind: frame.kind, id: frame.id, data: frame.data, status: frame.status });
  };
  // The console stopped or the network dropped: every page rebuilds from its snapshot, as a
  // page's own stream does, and opens its stream again.
  opened.onerror = () => {
    if (connection.source !== opened) return;
    opened.close();
    connection.source = null;
    for (const key of [...connection.keys]) {
      const stream = forget(key);
      stream.port.postMessage({ key, kind: "error", status: 0 });
    }
    connections.delete(connection);
  };
}

// A page holds the Web Lock it names while it lives: granted here, the page is gone, and with
// no pagehide (its renderer crashed or was killed, a frozen tab was discarded) it closed none
// of its streams, which stayed in the shared connection until this worker ended.
function watch(lock) {
  navigator.locks.request(lock, () => {
    for (const [key, stream] of [...streams]) {
      if (stream.lock === lock) { forget(key); reopen(stream.connection); }
    }
  });
}

onconnect = (event) => {
  const port = event.ports[0];
  port.onmessage = ({ data }) => {
    if (data.op === "page") { if (navigator.locks) watch(data.lock); return; }
    if (data.op === "open") {
      const stream = { port, lock: data.lock, session_id: data.session_id, resume_token: data.resume_token, connection: null };
      stream.connection = room(cost(data.key, stream));
      stream.connection.keys.add(data.key);
      streams.set(data.key, stream);
      reopen(stream.connection);
    } else if (data.op === "close") {
      const stream = forget(data.key);
      if (stream) reopen(stream.connection);
    }
  };
  port.start();
};
