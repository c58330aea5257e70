// The one event stream the session pages of a browser share (a SharedWorker): a browser opens
// at most six connections to one host, and each shown page's own stream held one, so a seventh
// shown page never loaded. This holds one connection to /api/events with a stream per page in
// it, opened again from each stream's last event whenever a page opens or closes its stream,
// so no event is lost or sent twice.

const streams = new Map(); // key -> {port, session_id, resume_token}
let source = null;
let reopening = null;

// One reopen for the opens and closes of one task: pages that load together share it.
function reopen() {
  if (reopening === null) reopening = setTimeout(connect, 0);
}

function connect() {
  reopening = null;
  if (source) { source.close(); source = null; }
  if (!streams.size) return;
  const wanted = {};
  for (const [key, stream] of streams) wanted[key] = { session_id: stream.session_id, resume_token: stream.resume_token };
  const opened = new EventSource(`/api/events?streams=${encodeURIComponent(JSON.stringify(wanted))}`);
  source = opened;
  opened.onmessage = (message) => {
    if (source !== opened) return;
    const frame = JSON.parse(message.data);
    const stream = streams.get(frame.stream);
    if (!stream) return; // closed by its page since this connection opened
    if (frame.kind === "event") stream.resume_token = frame.id;
    else streams.delete(frame.stream); // ended, or refused: its page opens it anew if it must
    stream.port.postMessage({ key: frame.stream, kind: frame.kind, id: frame.id, data: frame.data, status: frame.status });
  };
  // The console stopped or the network dropped: every page rebuilds from its snapshot, as a
  // page's own stream does, and opens its stream again.
  opened.onerror = () => {
    if (source !== opened) return;
    opened.close();
    source = null;
    for (const [key, stream] of streams) stream.port.postMessage({ key, kind: "error", status: 0 });
    streams.clear();
  };
}

onconnect = (connection) => {
  const port = connection.ports[0];
  port.onmessage = ({ data }) => {
    if (data.op === "open") streams.set(data.key, { port, session_id: data.session_id, resume_token: data.resume_token });
    else if (data.op === "close" && !streams.delete(data.key)) return;
    reopen();
  };
  port.start();
};
