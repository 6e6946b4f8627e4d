// A small stand-in for `@earendil-works/pi-coding-agent` as extensions import it: helpers
// that need no agent internals. The agent itself is the Rust host; the API object an
// extension receives comes from the sidecar, not from this module.
"use strict";
const os = require("node:os");
const path = require("node:path");
const tui = require("./pi-tui.cjs");

const DEFAULT_MAX_LINES = 2000;
const DEFAULT_MAX_BYTES = 50 * 1024;
function formatSize(bytes) {
  if (bytes < 1024) return `${bytes}B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}
function truncateHead(content, options = {}) {
  const maxLines = options.maxLines ?? DEFAULT_MAX_LINES;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const lines = String(content).split("\n");
  const out = [];
  let bytes = 0;
  let truncatedBy = null;
  for (const line of lines) {
    const size = Buffer.byteLength(line, "utf8") + (out.length > 0 ? 1 : 0);
    if (out.length >= maxLines) { truncatedBy = "lines"; break; }
    if (bytes + size > maxBytes) { truncatedBy = "bytes"; break; }
    out.push(line);
    bytes += size;
  }
  const text = out.join("\n");
  return {
    content: text, truncated: truncatedBy !== null, truncatedBy,
    totalLines: lines.length, totalBytes: Buffer.byteLength(String(content), "utf8"),
    outputLines: out.length, outputBytes: Buffer.byteLength(text, "utf8"),
    lastLinePartial: false, firstLineExceedsLimit: false, maxLines, maxBytes,
  };
}
function truncateLine(line, max = 500) {
  return line.length > max ? { text: line.slice(0, max) + "... [truncated]", wasTruncated: true } : { text: line, wasTruncated: false };
}
function getAgentDir() {
  return process.env.PI_CODING_AGENT_DIR || path.join(os.homedir(), ".pi", "agent");
}
const queues = new Map();
async function withFileMutationQueue(file, fn) {
  const key = path.resolve(file);
  const previous = queues.get(key) || Promise.resolve();
  const next = previous.catch(() => {}).then(fn);
  queues.set(key, next.catch(() => {}));
  return next;
}
function parseFrontmatter(content) {
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?/.exec(content);
  if (!m) return { frontmatter: {}, body: content };
  const frontmatter = {};
  for (const line of m[1].split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0) frontmatter[line.slice(0, i).trim()] = line.slice(i + 1).trim().replace(/^["']|["']$/g, "");
  }
  return { frontmatter, body: content.slice(m[0].length) };
}
class DynamicBorder extends tui.Component {}
class BorderedLoader extends tui.Component { constructor() { super(); this.signal = new AbortController().signal; } }
class CustomEditor extends tui.Editor {}
// Built-in tool definitions (`createReadTool(cwd)`, `createBashToolDefinition(cwd)`, …): the
// host's own tools, declared with the host's schema and run by the host. Custom
// `operations` (remote execution) cannot be honoured and are ignored.
function builtinTool(name) {
  return (_cwd, _options) => {
    const host = globalThis.__piHost;
    const info = (host && host.builtinTools().find((t) => t.name === name)) || { name, description: "", parameters: { type: "object", properties: {} } };
    return {
      name: info.name,
      label: info.name,
      description: info.description,
      parameters: info.parameters,
      execute: (toolCallId, params) => host.runBuiltin(name, toolCallId, params),
    };
  };
}
const builtinFactories = {};
for (const name of ["read", "write", "edit", "bash", "grep", "find", "ls"]) {
  const cap = name[0].toUpperCase() + name.slice(1);
  builtinFactories[`create${cap}Tool`] = builtinTool(name);
  builtinFactories[`create${cap}ToolDefinition`] = builtinTool(name);
}
builtinFactories.createCodingTools = (cwd) => ["read", "bash", "edit", "write"].map((n) => builtinTool(n)(cwd));
builtinFactories.createReadOnlyTools = (cwd) => ["read", "grep", "find", "ls"].map((n) => builtinTool(n)(cwd));

const { convertToLlm, serializeConversation } = require("./conversation.cjs");

module.exports = {
  ...builtinFactories,
  VERSION: "1.6.0",
  CONFIG_DIR_NAME: ".pi",
  defineTool: (tool) => tool,
  isToolCallEventType: (name, event) => event && event.toolName === name,
  isBashToolResult: (e) => e && e.toolName === "bash",
  isReadToolResult: (e) => e && e.toolName === "read",
  isEditToolResult: (e) => e && e.toolName === "edit",
  isWriteToolResult: (e) => e && e.toolName === "write",
  DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, formatSize, truncateHead, truncateTail: truncateHead, truncateLine,
  getAgentDir, withFileMutationQueue, parseFrontmatter,
  DynamicBorder, BorderedLoader, CustomEditor,
  getMarkdownTheme: () => ({}), getSettingsListTheme: () => ({}),
  convertToLlm,
  serializeConversation,
};
