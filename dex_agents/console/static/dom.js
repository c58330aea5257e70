// Building the page: elements from values, the notice line, dates. Text from the server is
// only ever set as textContent, never as HTML.

// The elements el() gave a listener: its function closes over the render that built it, so
// patch() keeps such an element only when it is equal to its new one, and then every value
// the function uses must be in its attributes (data-turn, data-message, ...) or its text.
const handled = new WeakSet();

// Listeners made once and reading all they use when called (steady()), and the elements given
// them: patch() keeps such an element as it keeps one with no listener, where its new one has
// the same listeners, and brings its attributes up to date.
const steadyFunctions = new WeakSet();
const steadyListeners = new WeakMap(); // element -> [name, function, name, function, ...]

// `fn`, marked as a listener that closes over no render: made once (per view) and reading
// what it needs from the page or its event when called.
export function steady(fn) {
  steadyFunctions.add(fn);
  return fn;
}

// Attributes that say what an element is: one whose own differ is replaced, never updated.
// A field's listener keeps its draft under data-draft, as a value or a checkbox by its type.
const IDENTITY = ["id", "type", "data-draft", "data-sequence"];

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) {
      node.addEventListener(key.slice(2), value);
      if (!steadyFunctions.has(value)) handled.add(node);
      else steadyListeners.set(node, [...(steadyListeners.get(node) || []), key, value]);
    }
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A child's key: a message's sequence, or an element's id; others are matched by position.
function keyOf(node) {
  if (node.nodeType !== Node.ELEMENT_NODE) return null;
  if (node.dataset.sequence !== undefined) return `sequence ${node.dataset.sequence}`;
  return node.id ? `id ${node.id}` : null;
}

function sameListeners(a, b) {
  const [mine, theirs] = [steadyListeners.get(a) || [], steadyListeners.get(b) || []];
  return mine.length === theirs.length && mine.every((item, index) => item === theirs[index]);
}

function sameIdentity(a, b) {
  return IDENTITY.every((name) => a.getAttribute(name) === b.getAttribute(name));
}

// `old`'s attributes made `fresh`'s (a button enabled, a turn's id), keeping the node.
function takeAttributes(old, fresh) {
  for (const name of old.getAttributeNames()) if (!fresh.hasAttribute(name)) old.removeAttribute(name);
  for (const { name, value } of fresh.attributes) if (old.getAttribute(name) !== value) old.setAttribute(name, value);
}

// The node to show for `fresh` where `old` is: `old` when it is equal, or `old` with its
// attributes and children brought up to date when it has no listener that closes over a
// render and is the same element (IDENTITY); else `fresh`.
function merged(old, fresh) {
  if (old.nodeType !== fresh.nodeType) return fresh;
  if (fresh.nodeType === Node.TEXT_NODE) {
    // Text that grew (the model's live text) is appended: setting all of it moved a selection
    // in it to its start, so a person selecting the model's words lost them at its next word.
    if (fresh.data.startsWith(old.data)) { if (fresh.data !== old.data) old.appendData(fresh.data.slice(old.data.length)); }
    else old.data = fresh.data;
    return old;
  }
  if (fresh.nodeType !== Node.ELEMENT_NODE) return fresh;
  if (old.tagName !== fresh.tagName || !sameListeners(old, fresh)) return fresh;
  if (old.isEqualNode(fresh)) return old;
  if (handled.has(old) || handled.has(fresh) || !sameIdentity(old, fresh)) return fresh;
  takeAttributes(old, fresh);
  patch(old, [...fresh.childNodes]);
  return old;
}

// `parent`'s children made those of `fresh` (nodes, arrays, null), keeping in place each one
// that did not change: every event drew the session's page anew, which unselected any text the
// person had selected and dropped a click pressed across it (its button was gone at the release).
export function patch(parent, fresh) {
  const old = [...parent.childNodes];
  const keyed = new Map();
  for (const node of old) { const key = keyOf(node); if (key !== null) keyed.set(key, node); }
  const nodes = [fresh].flat(Infinity).filter((node) => node !== null && node !== undefined && node !== false)
    .map((node, index) => {
      const key = keyOf(node);
      const candidate = key !== null ? keyed.get(key) : old[index];
      if (!candidate || (key === null && keyOf(candidate) !== null)) return node;
      keyed.delete(key);
      return merged(candidate, node);
    });
  nodes.forEach((node, index) => {
    const here = parent.childNodes[index];
    if (here !== node) parent.insertBefore(node, here || null);
  });
  while (parent.childNodes.length > nodes.length) parent.lastChild.remove();
}

export function notice(text, kind) {
  const node = document.getElementById("notice");
  node.textContent = text || "";
  node.className = kind || "";
}

export function when(iso) {
  if (!iso) return "-";
  const date = new Date(iso);
  return date.toLocaleString();
}
