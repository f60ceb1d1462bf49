// Small DOM helpers shared by the studio's modules.

/** Makes an element: h("button", {class: "x", onclick: f}, "text", child). */
export function h(tag, attrs = {}, ...children) {
  const svg = ["svg", "g", "path", "rect", "text", "circle", "title", "marker", "defs", "polygon"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** The element with this id (the page's fixed skeleton). */
export const $ = (id) => document.getElementById(id);

/** "3 s ago", "5 min ago", or the date. */
export function ago(iso) {
  const then = Date.parse(iso);
  if (Number.isNaN(then)) return "";
  const s = Math.max(0, Math.round((Date.now() - then) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(then).toLocaleString();
}

/** Pretty JSON. */
export const pretty = (value) => JSON.stringify(value, null, 2);

/** A short id for display. */
export const short = (id) => (id ? String(id).slice(-8) : "");

/** Says something to screen readers and shows it in the status line. */
export function announce(text) {
  const el = $("status");
  if (el) el.textContent = text;
}
