// Building the page: elements from values, the notice line, dates. Text from the server is
// only ever set as textContent, never as HTML.

// The elements el() gave a listener: its function closes over the render that built it, so
// patch() keeps such an element only when it is equal to its new one, and then every value
// the function uses must be in its attributes (data-turn, data-message, ...) or its text.
const handled = new WeakSet();

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) { node.addEventListener(key.slice(2), value); handled.add(node); }
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

function sameAttributes(a, b) {
  if (a.attributes.length !== b.attributes.length) return false;
  for (const { name, value } of a.attributes) if (b.getAttribute(name) !== value) return false;
  return true;
}

// The node to show for `fresh` where `old` is: `old` when it is equal, or `old` with its
// children patched when only they differ and it has no listener; else `fresh`.
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
  if (old.isEqualNode(fresh)) return old;
  if (old.tagName !== fresh.tagName || handled.has(old) || handled.has(fresh) || !sameAttributes(old, fresh)) return fresh;
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
