// Building the page: elements from values, the notice line, dates. Text from the server is
// only ever set as textContent, never as HTML.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
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
