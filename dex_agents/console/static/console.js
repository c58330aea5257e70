// The dex-agents console: the inbox, and one session rendered from its snapshot and events.
// Plain JavaScript modules, no build step: this one picks the view from the address.

import { el } from "./dom.js";
import { startInbox } from "./inbox.js";
import { SessionView } from "./session_view.js";

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

// A module runs once the document is parsed, before DOMContentLoaded: #main is there already.
boot();
