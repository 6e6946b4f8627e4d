// A small stand-in for `@earendil-works/pi-tui`: components render to plain text lines, key
// helpers match nothing. The Rust host shows extension UI as text, never as components.
"use strict";
const ANSI = /\x1b\[[0-9;]*m/g;
const visibleWidth = (s) => String(s).replace(ANSI, "").length;
const truncateToWidth = (s, width, ellipsis = "…") => {
  const plain = String(s);
  return visibleWidth(plain) <= width ? plain : plain.replace(ANSI, "").slice(0, Math.max(0, width - ellipsis.length)) + ellipsis;
};
const wrapTextWithAnsi = (s, width) => {
  const out = [];
  for (const line of String(s).split("\n")) {
    let rest = line;
    while (visibleWidth(rest) > width && width > 0) {
      out.push(rest.slice(0, width));
      rest = rest.slice(width);
    }
    out.push(rest);
  }
  return out;
};
class Component {
  constructor() { this.children = []; }
  render(_width) { return this.children.flatMap((c) => (c && c.render ? c.render(_width) : [])); }
  invalidate() {}
  addChild(c) { this.children.push(c); }
  removeChild(c) { this.children = this.children.filter((x) => x !== c); }
  clear() { this.children = []; }
  handleInput() {}
}
class Text extends Component {
  constructor(text = "") { super(); this.text = text; }
  setText(t) { this.text = t; }
  render() { return String(this.text).split("\n"); }
}
class Spacer extends Component {
  constructor(n = 1) { super(); this.n = n; }
  render() { return Array(this.n).fill(""); }
}
class Markdown extends Text {}
class Container extends Component {}
class Box extends Component {}
class Editor extends Component { getText() { return ""; } setText() {} }
class Input extends Editor {}
class SelectList extends Component {}
class SettingsList extends Component {}
// `Key.enter` is a key id and `Key.ctrlShift("p")` builds one: each name is both.
const Key = new Proxy({}, {
  get: (_t, k) => {
    if (typeof k !== "string") return undefined;
    const build = (...parts) => [k, ...parts].join("+");
    build.toString = () => k;
    return build;
  },
});
module.exports = {
  visibleWidth, truncateToWidth, wrapTextWithAnsi,
  Component, Text, Spacer, Markdown, Container, Box, Editor, Input, SelectList, SettingsList, Key,
  matchesKey: () => false, parseKey: () => undefined, isKeyRelease: () => false,
  fuzzyFilter: (items) => items, CURSOR_MARKER: "", renderFakeCursor: (s) => s,
};
