// The extension sidecar: loads Pi extensions (TypeScript through the vendored jiti, as Pi
// loads them) and runs their factories, hooks, tools and commands for the Rust host.
//
// Protocol: one JSON object per line on stdin/stdout (see docs/extensions.md).
//   host → sidecar: {id, method, params}            requests (load, emit, tool, abort_tool, prepare_loadout, reaches_tools, execute_tool_update, command)
//                   {id, result} | {id, error}       answers to the sidecar's requests (ui dialogs)
//   sidecar → host: {id, result} | {id, error}       answers to the host's requests
//                   {method, params}                 notifications (ui, extension_error, append_entry, …)
//                   {id, method, params}             requests the host answers (ui dialogs)
// Everything an extension writes to stdout goes to stderr, so the protocol stays clean.
"use strict";

const path = require("node:path");

const { spawn } = require("node:child_process");
const { EventEmitter } = require("node:events");

const writeOut = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);
console.log = console.error;
console.info = console.error;
console.debug = console.error;

function send(record) {
  writeOut(`${JSON.stringify(record)}\n`);
}
function notify(method, params) {
  send({ method, params });
}
const errorText = (err) => (err instanceof Error ? err.message : String(err));

// Requests this side sends to the host (dialogs), by id.
let nextOwnId = 1;
const ownPending = new Map();
// Set when a reload replaced this process's extensions (Pi's runner.invalidate): what the
// old context asks of the host from then on fails with Pi's message.
let staleMessage;
// A session replacement a command asked for (`ctx.newSession`, `ctx.fork`,
// `ctx.switchSession`) loads the extensions afresh in a new process and turns this one stale;
// the command's `setup` and `withSession` callbacks still run here, against the new session
// (Pi hands them the new runtime's session manager and context). What they start runs in
// this scope, which stale does not stop.
const { AsyncLocalStorage } = require("node:async_hooks");
const replacedSessionScope = new AsyncLocalStorage();
function requestHost(method, params) {
  if (staleMessage && !replacedSessionScope.getStore()) return Promise.reject(new Error(staleMessage));
  const id = `s${nextOwnId++}`;
  return new Promise((resolve) => {
    ownPending.set(id, resolve);
    send({ id, method, params });
  });
}

// Where Pi's process has its cli.js: extensions that start Pi again from
// `process.execPath` and `process.argv[1]` (the subagent example) start this pi binary.
process.argv[1] = path.join(__dirname, "pi-cli.cjs");

const shimDir = path.join(__dirname, "shims");
const shim = (name) => path.join(shimDir, name);
const aliases = {};
for (const scope of ["@earendil-works", "@mariozechner"]) {
  aliases[`${scope}/pi-coding-agent`] = shim("pi-coding-agent.cjs");
  aliases[`${scope}/pi-agent-core`] = shim("pi-coding-agent.cjs");
  aliases[`${scope}/pi-ai/compat`] = shim("pi-ai.cjs");
  aliases[`${scope}/pi-ai`] = shim("pi-ai.cjs");
  aliases[`${scope}/pi-tui`] = shim("pi-tui.cjs");
}
for (const name of ["typebox", "@sinclair/typebox"]) aliases[name] = shim("typebox.cjs");

const state = {
  cwd: process.cwd(),
  mode: "print",
  hasUI: false,
  extensions: [],
  tools: new Map(), // name → {definition, extension}
  commands: new Map(), // name → {options, extension}
  flags: new Map(),
  cliFlags: new Map(), // --name[=value] from the command line, until an extension registers name
  activeTools: [],
  allTools: [],
  /** Commands the host lists after the extensions' (`get_commands` order). */
  hostCommands: [],
  builtinDefs: [], // every built-in tool, for createReadTool(cwd) and friends
  sessionName: undefined,
  // The session as the host last synced it (set_state): entries are append-only.
  entries: [],
  byId: new Map(),
  labels: new Map(), // entry id → label
  leafId: null,
  header: null,
  sessionFile: undefined,
  sessionId: undefined,
  model: undefined,
  models: [],
  themes: [], // the TUI's themes, [{name, path}] (set_state)
  thinkingLevel: "off",
  isIdle: true,
  running: new Map(), // toolCallId → AbortController
  virtualModels: new Map(), // "provider/id" → {definition, extension}
  contextUsage: undefined, // {tokens, contextWindow, percent} as the host last computed it
  providers: new Map(), // name → {name, config}: pi.registerProvider in the config form
  streamApis: new Map(), // api → {provider, streamSimple, extension}: providers that stream here
  providerStreams: new Map(), // streamId → AbortController of a running provider stream
  oauthProviders: new Map(), // provider → {oauth, extension}: registerProvider's `oauth` (/login)
  modelRefreshers: new Map(), // provider → {refreshModels, extension}: registerProvider's `refreshModels`
  oauthLogins: new Map(), // loginId → AbortController of a running oauth.login
  nativeProviders: new Map(), // id → {provider, extension, apis}: pi.registerProvider(providerObject)
  shortcuts: new Map(), // lower-cased key → {shortcut, options, extension}
};
const providerDeclarations = () => [...state.providers.values()];

// What the host needs to list a virtual model; `route` stays here.
function virtualDeclaration(definition) {
  return {
    provider: definition.provider,
    id: definition.id,
    name: definition.name || definition.id,
    thinkingLevels: Array.isArray(definition.thinkingLevels) ? definition.thinkingLevels : undefined,
    contextWindow: definition.contextWindow,
    maxTokens: definition.maxTokens,
    input: Array.isArray(definition.input) ? definition.input : undefined,
  };
}
const virtualDeclarations = () => [...state.virtualModels.values()].map(({ definition }) => virtualDeclaration(definition));

function addEntry(entry) {
  state.entries.push(entry);
  if (entry && typeof entry.id === "string") state.byId.set(entry.id, entry);
  if (entry && entry.type === "label" && typeof entry.targetId === "string") {
    if (entry.label) state.labels.set(entry.targetId, entry.label);
    else state.labels.delete(entry.targetId);
  }
}

// The path from the root to `fromId` (default: the leaf), as Pi's getBranch.
function branchOf(fromId) {
  const out = [];
  const seen = new Set();
  let id = fromId === undefined ? state.leafId : fromId;
  while (id && !seen.has(id)) {
    seen.add(id);
    const entry = state.byId.get(id);
    if (!entry) break;
    out.push(entry);
    id = entry.parentId;
  }
  return out.reverse();
}

function treeOf() {
  const nodes = new Map();
  const roots = [];
  for (const entry of state.entries) {
    nodes.set(entry.id, { entry, children: [], label: state.labels.get(entry.id) });
  }
  for (const entry of state.entries) {
    const node = nodes.get(entry.id);
    const parent = entry.parentId ? nodes.get(entry.parentId) : undefined;
    if (parent) parent.children.push(node);
    else roots.push(node);
  }
  return roots;
}

// Pi's buildContextEntries: the leaf's path, or after a compaction on it the latest
// compaction, the entries it kept (from firstKeptEntryId, without system messages) and
// everything after it.
function contextEntriesOf() {
  const path = branchOf();
  let at = -1;
  path.forEach((entry, i) => {
    if (entry.type === "compaction") at = i;
  });
  if (at < 0) return path;
  const compaction = path[at];
  const out = [compaction];
  let kept = false;
  for (const entry of path.slice(0, at)) {
    if (entry.id === compaction.firstKeptEntryId) kept = true;
    if (kept && !(entry.type === "message" && entry.message && entry.message.role === "system")) out.push(entry);
  }
  return out.concat(path.slice(at + 1));
}

const sessionManager = {
  getCwd: () => state.cwd,
  getSessionDir: () => (state.sessionFile ? path.dirname(state.sessionFile) : undefined),
  getSessionId: () => state.sessionId,
  getSessionFile: () => state.sessionFile,
  getSessionName: () => state.sessionName,
  getHeader: () => state.header,
  getEntries: () => state.entries.slice(),
  getEntry: (id) => state.byId.get(id),
  getBranch: (fromId) => branchOf(fromId),
  buildContextEntries: () => contextEntriesOf(),
  getTree: () => treeOf(),
  getChildren: (parentId) => state.entries.filter((e) => e.parentId === parentId),
  getLeafId: () => state.leafId,
  getLeafEntry: () => (state.leafId ? state.byId.get(state.leafId) : undefined),
  getLabel: (id) => state.labels.get(id),
};

const modelRegistry = {
  find: (provider, id) => state.models.find((m) => m.provider === provider && m.id === id),
  getAll: () => state.models.slice(),
  getAvailable: () => state.models.slice(),
  // Pi's `modelRegistry.complete`: one request with the model's own credentials (the
  // host fills in the key and headers it has for the provider), the final message back.
  complete: (model, context, options) => builtinEvents(model, context, { ...(options || {}), useProviderAuth: true }).result(),
  completeSimple: (model, context, options) => builtinEvents(model, context, { ...(options || {}), useProviderAuth: true }).result(),
  stream: (model, context, options) => builtinEvents(model, context, { ...(options || {}), useProviderAuth: true }),
  streamSimple: (model, context, options) => builtinEvents(model, context, { ...(options || {}), useProviderAuth: true }),
};
const bus = new EventEmitter();

// What the shims need from the host: the built-in tools, run by the host.
globalThis.__piHost = {
  builtinTools: () => state.builtinDefs,
  async runBuiltin(name, toolCallId, params) {
    const r = await requestHost("run_builtin", { name, toolCallId, params });
    if (r && r.error) throw new Error(r.error);
    return r;
  },
};

function reportError(extensionPath, event, err) {
  notify("extension_error", { extensionPath, event, error: errorText(err) });
}

// A component factory's lines at one width: the text a TUI component shows, once. Its
// `tui` and `theme` arguments are stand-ins (no terminal here); a factory that needs more
// shows nothing rather than failing the extension.
function renderOnce(factory) {
  const theme = new Proxy({}, { get: () => (...args) => args[args.length - 1] });
  const tui = { requestRender: () => {}, terminal: { columns: 80, rows: 24 } };
  const footerData = { getGitBranch: () => null, getExtensionStatuses: () => new Map(), onBranchChange: () => () => {} };
  try {
    const component = factory(tui, theme, footerData);
    const lines = component && typeof component.render === "function" ? component.render(80) : [];
    if (component && typeof component.dispose === "function") component.dispose();
    return Array.isArray(lines) ? lines.map(String) : [];
  } catch (err) {
    return [];
  }
}

// Pi's `ui_prompt_start` / `ui_prompt_end` around a blocking dialog: one span for nested or
// overlapping dialogs (counted across every extension's context), both ends delivered on a
// microtask and not awaited, so handlers never delay the dialog. The end names the dialog
// that opened the span.
const uiPrompts = { depth: 0, active: undefined };

function emitUiPrompt(type, prompt) {
  const fields = { reason: "ui_prompt", kind: prompt.kind };
  if (prompt.title) fields.title = prompt.title;
  queueMicrotask(() => {
    void emit(type, fields);
  });
}

function withUiPrompt(kind, title, run) {
  if (uiPrompts.depth++ === 0) {
    uiPrompts.active = { kind, title };
    emitUiPrompt("ui_prompt_start", uiPrompts.active);
  }
  const finish = () => {
    if (--uiPrompts.depth > 0) return;
    uiPrompts.depth = 0;
    const prompt = uiPrompts.active || { kind, title };
    uiPrompts.active = undefined;
    emitUiPrompt("ui_prompt_end", prompt);
  };
  try {
    return run().finally(finish);
  } catch (err) {
    finish();
    throw err;
  }
}

// ctx.ui: dialogs go to the host when there is a UI, else answer as Pi's no-UI context does
// (without a UI, Pi's no-op context emits no prompt events either).
function makeUi() {
  const dialog = (method, fields, fallback) => {
    if (!state.hasUI) return Promise.resolve(fallback);
    return withUiPrompt(method, fields.title, () => requestHost("ui", { method, ...fields }));
  };
  const theme = new Proxy({}, { get: () => (...args) => args[args.length - 1] });
  const ui = {
    theme,
    notify: (message, type) => {
      if (state.hasUI) notify("ui", { method: "notify", message, notifyType: type || "info" });
    },
    confirm: async (title, message, opts) => {
      const r = await dialog("confirm", { title, message, timeout: opts && opts.timeout }, { confirmed: false });
      return !!(r && r.confirmed);
    },
    select: async (title, options, opts) => {
      const r = await dialog("select", { title, options, timeout: opts && opts.timeout }, {});
      return r && !r.cancelled ? r.value : undefined;
    },
    input: async (title, placeholder, opts) => {
      const r = await dialog("input", { title, placeholder, timeout: opts && opts.timeout }, {});
      return r && !r.cancelled ? r.value : undefined;
    },
    editor: async (title, prefill) => {
      const r = await dialog("editor", { title, prefill }, {});
      return r && !r.cancelled ? r.value : undefined;
    },
    setStatus: (statusKey, statusText) => {
      if (state.hasUI) notify("ui", { method: "setStatus", statusKey, statusText });
    },
    setWidget: (widgetKey, content, options) => {
      if (!state.hasUI) return;
      // RPC carries string lines only; the TUI shows a component's lines once.
      if (typeof content === "function" && state.mode !== "tui") return;
      const lines = typeof content === "function" ? renderOnce(content) : content;
      if (lines !== undefined && !Array.isArray(lines)) return;
      notify("ui", { method: "setWidget", widgetKey, widgetLines: lines, widgetPlacement: options && options.placement });
    },
    // Header and footer components are drawn once, as text lines (the TUI shows them as such).
    setHeader: (factory) => {
      if (state.mode === "tui") notify("ui", { method: "setHeader", lines: factory ? renderOnce(factory) : null });
    },
    setFooter: (factory) => {
      if (state.mode === "tui") notify("ui", { method: "setFooter", lines: factory ? renderOnce(factory) : null });
    },
    setTitle: (title) => {
      if (state.hasUI) notify("ui", { method: "setTitle", title });
    },
    setEditorText: (text) => {
      if (state.hasUI) notify("ui", { method: "set_editor_text", text });
    },
    getEditorText: () => "",
    custom: async () => (state.hasUI ? withUiPrompt("custom", undefined, async () => undefined) : undefined),
    getToolsExpanded: () => false,
    // Themes: the TUI's list (the host sends it with the state), `system` first and the
    // rest by name as Pi lists them; RPC and print mode answer as Pi's do there.
    getAllThemes: () =>
      state.mode === "tui"
        ? state.themes
            .map(({ name, path }) => ({ name, path: path ?? undefined }))
            .sort((a, b) => (a.name === "system" ? -1 : b.name === "system" ? 1 : a.name.localeCompare(b.name)))
        : [],
    getTheme: (name) => {
      if (state.mode !== "tui") return undefined;
      const found = state.themes.find((t) => t.name === name);
      return found ? themeObject(found) : undefined;
    },
    setTheme: (themeOrName) => {
      if (state.mode === "rpc") return { success: false, error: "Theme switching not supported in RPC mode" };
      if (state.mode !== "tui") return { success: false, error: "UI not available" };
      // A theme getTheme() gave is shown as it is, and not saved (Pi's in-memory theme).
      if (themeOrName && typeof themeOrName === "object" && themeOrName[THEME_MARK]) {
        notify("ui", { method: "setTheme", theme: themeOrName.name, save: false });
        return { success: true };
      }
      const name = String(themeOrName);
      const known = state.themes.some((t) => t.name === name);
      // Pi's fallback: an unknown theme shows the default one and leaves the setting alone.
      notify("ui", { method: "setTheme", theme: known ? name : "", save: known });
      return known ? { success: true } : { success: false, error: `Theme not found: ${name}` };
    },
    onTerminalInput: () => () => {},
  };
  // Methods this host does not offer are no-ops, as RPC mode makes TUI-only methods.
  return new Proxy(ui, { get: (t, k) => (k in t ? t[k] : () => undefined) });
}

// A theme as getTheme() returns it: Pi's Theme has the name and source path of the
// theme plus styling methods; here the methods leave text as it is (lines reach the
// screen as text, as the `theme` stand-ins above).
const THEME_MARK = Symbol("pi.theme");
function themeObject({ name, path }) {
  const same = (text) => text;
  return {
    [THEME_MARK]: true,
    name,
    sourcePath: path ?? undefined,
    fg: (_color, text) => text,
    bg: (_color, text) => text,
    bold: same,
    italic: same,
    underline: same,
    inverse: same,
    strikethrough: same,
    getFgAnsi: () => "",
    getBgAnsi: () => "",
    getColorMode: () => "truecolor",
    getThinkingBorderColor: () => same,
    getBashModeBorderColor: () => same,
  };
}

function makeContext(signal) {
  return {
    cwd: state.cwd,
    mode: state.mode,
    hasUI: state.hasUI,
    ui: makeUi(),
    signal,
    get model() {
      return state.model;
    },
    get thinkingLevel() {
      return state.thinkingLevel;
    },
    isIdle: () => state.isIdle,
    abort: () => notify("abort", {}),
    hasPendingMessages: () => false,
    shutdown: () => notify("shutdown", {}),
    getContextUsage: () => (state.contextUsage ? { ...state.contextUsage } : undefined),
    // Pi's compact(): not awaited; the outcome goes to onComplete / onError.
    compact: (options) => {
      const o = options || {};
      requestHost("compact", { customInstructions: o.customInstructions }).then((r) => {
        try {
          if (r && r.error !== undefined) {
            if (typeof o.onError === "function") o.onError(new Error(r.error));
          } else if (typeof o.onComplete === "function") {
            o.onComplete(r && r.result);
          }
        } catch (err) {
          reportError("<extension>", "compact", err);
        }
      });
    },
    getSystemPrompt: () => "",
    modelRegistry,
    sessionManager,
  };
}

// A command's context adds session control (Pi's ExtensionCommandContext).
function makeCommandContext() {
  const ctx = makeContext(undefined);
  ctx.navigateTree = async (targetId, options) => {
    const o = options || {};
    const r = await requestHost("navigate_tree", {
      targetId,
      summarize: !!o.summarize,
      customInstructions: o.customInstructions,
      replaceInstructions: o.replaceInstructions,
      label: o.label,
    });
    if (r && r.error) throw new Error(r.error);
    return { cancelled: !!(r && r.cancelled) };
  };
  ctx.waitForIdle = async () => {
    await requestHost("wait_for_idle", {});
  };
  // Session replacement through the host's own /new, /fork, /resume (with their events).
  // `newSession`'s `setup` writes into the new session (after its session_start, as in
  // Pi); `withSession` then runs here with a fresh context.
  const replace = async (params, options) => {
    const r = await requestHost("replace_session", params);
    if (r && r.error) throw new Error(r.error);
    const cancelled = !!(r && r.cancelled);
    if (cancelled) return { cancelled };
    await replacedSessionScope.run(true, async () => {
      if (params.op === "new" && options && typeof options.setup === "function") {
        await runSetup(options.setup);
      }
      if (options && typeof options.withSession === "function") {
        await options.withSession(makeCommandContext());
      }
    });
    return { cancelled };
  };
  ctx.newSession = (options) => replace({ op: "new", parentSession: options && options.parentSession }, options);
  ctx.fork = (entryId, options) => replace({ op: "fork", entryId, position: (options && options.position) || "before" }, options);
  ctx.switchSession = (sessionPath, options) => replace({ op: "switch", sessionPath }, options);
  ctx.reload = async () => {
    const r = await requestHost("reload", {});
    if (r && r.error) throw new Error(r.error);
  };
  return ctx;
}

// `newSession({setup})`: the callback gets a SessionManager over the new session whose
// appends build the entries here, as Pi's SessionManager builds them (ids, parent = leaf),
// so the ids they return are the ones written; the host then writes them verbatim.
const { randomUUID } = require("node:crypto");
function newEntryId() {
  for (let i = 0; i < 100; i++) {
    const id = randomUUID().slice(0, 8);
    if (!state.byId.has(id)) return id;
  }
  return randomUUID();
}
async function runSetup(setup) {
  const written = [];
  const append = (fields, tail) => {
    const entry = { ...fields };
    const base = { id: newEntryId(), parentId: state.leafId, timestamp: new Date().toISOString() };
    // Pi's field order: most entries put the base first, custom entries after their type.
    const ordered = tail ? { ...entry, ...base, ...tail } : { type: entry.type, ...base, ...entry };
    addEntry(ordered);
    state.leafId = ordered.id;
    written.push(ordered);
    return ordered.id;
  };
  const unsupported = (name) => () => {
    throw new Error(`SessionManager.${name} is not supported in newSession setup`);
  };
  const sm = {
    ...sessionManager,
    appendMessage: (message) => append({ type: "message", message }),
    appendThinkingLevelChange: (thinkingLevel) => append({ type: "thinking_level_change", thinkingLevel }),
    appendModelChange: (provider, modelId) => append({ type: "model_change", provider, modelId }),
    appendCustomEntry: (customType, data) => append({ type: "custom", customType, data }, {}),
    appendSessionInfo: (name) => append({ type: "session_info", name: String(name).replace(/[\r\n]+/g, " ").trim() }),
    appendCustomMessageEntry: (customType, content, display, details) =>
      append({ type: "custom_message", customType, content, display, details }, {}),
    appendLabelChange: (targetId, label) => {
      if (!state.byId.has(targetId)) throw new Error(`Entry ${targetId} not found`);
      return append({ type: "label", targetId, label });
    },
    appendCompaction: unsupported("appendCompaction"),
    appendContextEdit: unsupported("appendContextEdit"),
    branch: unsupported("branch"),
    resetLeaf: unsupported("resetLeaf"),
  };
  try {
    await setup(sm);
  } finally {
    // What setup wrote before it failed is kept, as Pi's appends are immediate.
    if (written.length > 0) {
      const r = await requestHost("append_entries", { entries: written });
      if (r && r.error) throw new Error(r.error);
    }
  }
}

function execCommand(command, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args || [], { cwd: options.cwd || state.cwd, shell: false });
    let stdout = "";
    let stderr = "";
    let killed = false;
    const timer = options.timeout ? setTimeout(() => { killed = true; child.kill("SIGTERM"); }, options.timeout) : null;
    if (options.signal) options.signal.addEventListener("abort", () => { killed = true; child.kill("SIGTERM"); }, { once: true });
    child.stdout.on("data", (d) => { stdout += d; });
    child.stderr.on("data", (d) => { stderr += d; });
    child.on("error", (e) => { stderr += e.message; });
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      resolve({ stdout, stderr, code: code ?? 1, killed });
    });
  });
}

function toolInfo(definition, extension) {
  return {
    sourceInfo: extension.sourceInfo,
    name: definition.name,
    label: definition.label || definition.name,
    description: definition.description || "",
    parameters: definition.parameters,
    promptSnippet: definition.promptSnippet,
    promptGuidelines: Array.isArray(definition.promptGuidelines) ? definition.promptGuidelines : undefined,
    exposure: typeof definition.exposure === "string" ? definition.exposure : undefined,
    defaultActive: definition.defaultActive === false ? false : undefined,
    executionMode: definition.executionMode === "sequential" ? "sequential" : undefined,
    namespace: namespaceInfo(definition.namespace),
    annotations: definition.annotations && typeof definition.annotations === "object" ? { ...definition.annotations } : undefined,
    reachesTools: typeof definition.reachesTools === "function" ? true : undefined,
    prepareLoadout: typeof definition.prepareLoadout === "function" ? true : undefined,
  };
}

function namespaceInfo(namespace) {
  if (!namespace || typeof namespace !== "object" || typeof namespace.name !== "string") return undefined;
  return {
    name: namespace.name,
    aliases: Array.isArray(namespace.aliases) ? namespace.aliases.filter((a) => typeof a === "string") : [],
    ...(typeof namespace.description === "string" ? { description: namespace.description } : {}),
    ...(typeof namespace.instructions === "string" ? { instructions: namespace.instructions } : {}),
  };
}

/** Script globals after which a codemode script may call any tool (Pi's `getScriptReach`). */
const CODEMODE_DISCOVERY = /\b(searchTools|describeNamespace|describeTool|ALL_TOOLS)\b/;

/**
 * `reachesTools` of a tool `pi.getAllTools()` lists with one: an extension tool's own
 * function, codemode's (every tool for scripts that search or list tools, else the script's
 * words), and `() => "all"` for tool_search.
 */
function reachFunction(name) {
  const own = state.tools.get(name);
  if (own && typeof own.definition.reachesTools === "function") {
    return (input) => own.definition.reachesTools(input);
  }
  if (name === "codemode") {
    return (input) => {
      const code = input ? input.code : undefined;
      if (typeof code !== "string") return [];
      return CODEMODE_DISCOVERY.test(code) ? "all" : code.match(/\w+/g) ?? [];
    };
  }
  return () => "all";
}

function makeApi(extension) {
  const api = {
    on(event, handler) {
      const list = extension.handlers.get(event) || [];
      list.push(handler);
      extension.handlers.set(event, list);
      // Handlers added after loading (say from session_start) must reach the host too.
      if (extension.loaded) notify("handles", { event });
      return () => {
        const l = extension.handlers.get(event) || [];
        const i = l.indexOf(handler);
        if (i >= 0) l.splice(i, 1);
      };
    },
    registerTool(tool) {
      if (typeof tool.parameters !== "object" || tool.parameters === null || Array.isArray(tool.parameters)) {
        throw new Error(`Tool "${tool.name}" registered by extension "${extension.path}" must define an object parameter schema.`);
      }
      const known = state.tools.has(tool.name);
      state.tools.set(tool.name, { definition: tool, extension });
      if (extension.loaded) notify("tools_changed", { tool: toolInfo(tool, extension), replaced: known });
    },
    registerShortcut(shortcut, options) {
      if (typeof shortcut !== "string" || !options || typeof options.handler !== "function") return;
      state.shortcuts.set(shortcut.toLowerCase(), { shortcut, options, extension });
    },
    registerCommand(name, options) {
      if (typeof name !== "string" || name.length === 0) {
        throw new Error(`Command registered by extension "${extension.path}" must have a non-empty string name. Use pi.registerCommand("name", { description, handler }).`);
      }
      if (!options || typeof options.handler !== "function") {
        throw new Error(`Command "/${name}" registered by extension "${extension.path}" must define handler().`);
      }
      state.commands.set(name, { options, extension });
    },
    registerFlag(name, options) {
      const given = state.cliFlags.get(name);
      if (given !== undefined) {
        state.cliFlags.delete(name);
        const boolean = !options || options.type !== "string";
        if (boolean) state.flags.set(name, given === true ? true : given !== "false");
        else state.flags.set(name, given === true ? "" : given);
      } else if (options && options.default !== undefined && !state.flags.has(name)) {
        state.flags.set(name, options.default);
      }
    },
    getFlag: (name) => state.flags.get(name),
    registerMessageRenderer() {},
    registerEntryRenderer() {},
    registerToolRenderer() {},
    registerMarkdownTransformer() {},
    sendMessage(message, options) {
      notify("send_message", { message, options: options || {} });
    },
    sendUserMessage(content, options) {
      notify("send_user_message", { content, options: options || {} });
    },
    appendEntry(customType, data) {
      notify("append_entry", { customType, data });
    },
    setSessionName(name) {
      state.sessionName = name;
      notify("set_session_name", { name });
    },
    getSessionName: () => state.sessionName,
    setLabel(entryId, label) {
      notify("set_label", { entryId, label });
    },
    exec: (command, args, options) => execCommand(command, args, options),
    getActiveTools: () => state.activeTools.slice(),
    getAllTools: () =>
      state.allTools.map((t) => {
        const { reachesTools, ...rest } = t;
        return {
          ...rest,
          ...(t.namespace ? { namespace: { ...t.namespace, aliases: [...(t.namespace.aliases || [])] } } : {}),
          ...(t.annotations ? { annotations: { ...t.annotations } } : {}),
          ...(reachesTools ? { reachesTools: reachFunction(t.name) } : {}),
        };
      }),
    setActiveTools(names) {
      const known = new Set(state.allTools.map((t) => t.name));
      state.activeTools = (Array.isArray(names) ? names : []).filter((n) => known.has(n));
      notify("set_active_tools", { names: state.activeTools });
    },
    // Extension commands, then what the host lists after them (built-in extensions'
    // commands, prompt templates, skills), as Pi's getCommands().
    getCommands: () => [
      ...[...state.commands.entries()].map(([name, c]) => ({ name, description: c.options.description, source: "extension", sourceInfo: c.extension.sourceInfo })),
      ...state.hostCommands.map((c) => ({ ...c, sourceInfo: { ...c.sourceInfo } })),
    ],
    getThinkingLevel: () => state.thinkingLevel,
    setThinkingLevel(level) {
      state.thinkingLevel = level;
      notify("set_thinking_level", { level });
    },
    async setModel(model) {
      if (!model || typeof model.provider !== "string" || typeof model.id !== "string") return false;
      const ok = await requestHost("set_model", { provider: model.provider, id: model.id });
      if (ok) state.model = model;
      return !!ok;
    },
    // The config form joins the host's catalog (models.json's fields). A `streamSimple`
    // (or `stream`) function stays here and answers the requests of the provider's `api`
    // (the host's `stream` calls). A pi-ai Provider object (`createProvider`) is mapped
    // onto the same declaration (see `registerNativeProvider`).
    registerProvider(name, config) {
      if (name && typeof name === "object") {
        registerNativeProvider(extension, name);
        return;
      }
      if (typeof name !== "string" || !name) {
        reportError(extension.path, "registerProvider", "pi.registerProvider needs a provider name and config, or a Provider object");
        return;
      }
      state.nativeProviders.delete(name);
      const c = config || {};
      const streamFn = typeof c.streamSimple === "function" ? c.streamSimple : typeof c.stream === "function" ? c.stream : undefined;
      if (streamFn && (typeof c.api !== "string" || !c.api)) {
        reportError(extension.path, "registerProvider", `Provider "${name}": "api" is required when registering streamSimple`);
        return;
      }
      for (const [api, entry] of state.streamApis) if (entry.provider === name) state.streamApis.delete(api);
      if (streamFn) state.streamApis.set(c.api, { provider: name, streamSimple: streamFn, extension });
      // Functions (oauth, refreshModels, the stream) cannot cross to the host; the data can.
      const plain = JSON.parse(JSON.stringify({ ...c, oauth: undefined, refreshModels: undefined, streamSimple: undefined, stream: undefined }));
      if (streamFn) plain.streamSimple = true;
      // The login flow stays here too; the host learns its display name (for /login and
      // `pi auth login`) and calls login / refreshToken / getApiKey through oauth_* requests.
      state.oauthProviders.delete(name);
      if (c.oauth && typeof c.oauth.login === "function") {
        state.oauthProviders.set(name, { oauth: c.oauth, extension });
        plain.oauth = { name: typeof c.oauth.name === "string" && c.oauth.name ? c.oauth.name : name };
        // `modifyModels(models, credentials)` stays here: the host asks it (modify_models)
        // whenever the provider's stored OAuth credential is known or changes.
        if (typeof c.oauth.modifyModels === "function") plain.oauth.modifyModels = true;
      }
      // `refreshModels` stays here too: the host's model refreshes call it (refresh_models).
      state.modelRefreshers.delete(name);
      if (typeof c.refreshModels === "function") {
        state.modelRefreshers.set(name, { refreshModels: c.refreshModels, extension });
        plain.refreshModels = true;
      }
      state.providers.set(name, { name, config: plain });
      if (extension.loaded) notify("providers_changed", { providers: providerDeclarations() });
    },
    unregisterProvider(name) {
      state.nativeProviders.delete(name);
      state.oauthProviders.delete(name);
      state.modelRefreshers.delete(name);
      for (const [api, entry] of state.streamApis) if (entry.provider === name) state.streamApis.delete(api);
      if (state.providers.delete(name) && extension.loaded) {
        notify("providers_changed", { providers: providerDeclarations() });
      }
    },
    registerVirtualModel(definition) {
      if (!definition || typeof definition.provider !== "string" || !definition.provider || typeof definition.id !== "string" || !definition.id) {
        throw new Error(`Virtual model registered by extension "${extension.path}" must have a provider and an id.`);
      }
      if (typeof definition.route !== "function") {
        throw new Error(`Virtual model "${definition.provider}/${definition.id}" registered by extension "${extension.path}" must define route().`);
      }
      state.virtualModels.set(`${definition.provider}/${definition.id}`, { definition, extension });
      if (extension.loaded) notify("virtual_models_changed", { models: virtualDeclarations() });
    },
    unregisterVirtualModel(provider, id) {
      if (state.virtualModels.delete(`${provider}/${id}`) && extension.loaded) {
        notify("virtual_models_changed", { models: virtualDeclarations() });
      }
    },
    events: {
      emit: (channel, data) => bus.emit(channel, data),
      on(channel, handler) {
        const wrapped = async (data) => {
          try {
            await handler(data);
          } catch (err) {
            reportError(extension.path, `events:${channel}`, err);
          }
        };
        bus.on(channel, wrapped);
        return () => bus.off(channel, wrapped);
      },
    },
  };
  // Methods this host does not offer yet answer undefined instead of throwing at load.
  return new Proxy(api, { get: (t, k) => (k in t ? t[k] : () => undefined) });
}

// ---- Provider objects: `pi.registerProvider(provider)` ----

// A provider object is declared to the host as the config form is: its models (from
// `getModels()`), `baseUrl` and `headers` join the catalog, and `nativeAuth` tells the host
// that its requests resolve their auth here (`resolve_auth`: `auth.apiKey.resolve` or
// `auth.oauth.toAuth`). A model that one of Pi's APIs streams (`createProvider` with
// `openAICompletionsApi()` and friends) keeps that API, which the host runs itself; any
// other model is streamed by the provider's own `streamSimple`, here, under an API of the
// provider's (its own `api` restored before the call). The login (`auth.oauth.login`, else
// `auth.apiKey.login`) and `refreshModels` use the config form's machinery.
const BUILTIN_API = Symbol.for("pi.builtinApi");
const PROVIDER_PARTS = Symbol.for("pi.providerParts");
const nativeApi = (id) => `pi-extension-provider:${id}`;

function nativeModels(entry) {
  const p = entry.provider;
  const parts = p[PROVIDER_PARTS];
  let list;
  try {
    list = p.getModels();
  } catch {
    list = []; // Pi: a throwing getModels() means no models
  }
  entry.apis = new Map();
  const out = [];
  for (const m of Array.isArray(list) ? list : []) {
    if (!m || typeof m.id !== "string" || !m.id) continue;
    const impl = parts ? parts.single || (parts.byApi && parts.byApi[m.api]) : undefined;
    const builtin = impl && impl[BUILTIN_API];
    const model = JSON.parse(JSON.stringify({ ...m, provider: p.id }));
    if (!model.baseUrl && p.baseUrl) model.baseUrl = p.baseUrl;
    if (builtin) {
      model.api = builtin;
    } else {
      entry.apis.set(m.id, m.api);
      model.api = nativeApi(p.id);
    }
    out.push(model);
  }
  return out;
}

function nativeConfig(entry) {
  const p = entry.provider;
  const auth = p.auth || {};
  const headers = {};
  for (const [k, v] of Object.entries(p.headers || {})) if (typeof v === "string") headers[k] = v;
  const config = {
    name: typeof p.name === "string" ? p.name : p.id,
    baseUrl: typeof p.baseUrl === "string" ? p.baseUrl : undefined,
    headers,
    api: nativeApi(p.id),
    streamSimple: true,
    models: nativeModels(entry),
    nativeAuth: { apiKey: !!auth.apiKey, oauth: !!auth.oauth, check: !!(auth.apiKey && typeof auth.apiKey.check === "function") },
  };
  // `filterModels(models, credential)` stays here: the host asks it (filter_models) for the
  // provider's available models.
  if (typeof p.filterModels === "function") config.filterModels = true;
  if (p.refreshModelsAuth === "configured") config.refreshModelsAuth = "configured";
  if (auth.oauth && typeof auth.oauth.login === "function") {
    config.oauth = { name: auth.oauth.name || p.name || p.id };
  } else if (auth.apiKey && typeof auth.apiKey.login === "function") {
    config.oauth = { name: auth.apiKey.name || p.name || p.id, apiKey: true };
  }
  if (typeof p.refreshModels === "function") config.refreshModels = true;
  return JSON.parse(JSON.stringify(config));
}

function registerNativeProvider(extension, p) {
  const fail = (message) => reportError(extension.path, "registerProvider", message);
  const id = typeof p.id === "string" ? p.id : "";
  if (!id.trim()) return fail("Provider id must not be empty.");
  const auth = p.auth || {};
  if (!auth.apiKey && !auth.oauth) return fail(`Provider ${id}: "auth" needs "apiKey" or "oauth"`);
  if (auth.apiKey && typeof auth.apiKey.resolve !== "function") return fail(`Provider ${id}: auth.apiKey.resolve() is required`);
  if (auth.oauth && (typeof auth.oauth.toAuth !== "function" || typeof auth.oauth.refresh !== "function")) {
    return fail(`Provider ${id}: auth.oauth needs login(), refresh() and toAuth()`);
  }
  if (typeof p.getModels !== "function") return fail(`Provider ${id}: getModels() is required`);
  if (typeof p.streamSimple !== "function") return fail(`Provider ${id}: streamSimple() is required`);
  // What this host does not do with a provider object is said, not silently dropped.
  // (`filterAllModels` only shapes Pi's every-type lists; the chat lists use `filterModels`.)
  const extras = ["generateImages", "classify", "fetchDeferred"].filter((k) => typeof p[k] === "function");
  if (extras.length > 0) fail(`Provider ${id}: ${extras.join(", ")} not supported; only chat models are used`);

  const entry = { provider: p, extension, apis: new Map() };
  for (const [api, e] of state.streamApis) if (e.provider === id) state.streamApis.delete(api);
  state.oauthProviders.delete(id);
  state.modelRefreshers.delete(id);
  state.nativeProviders.set(id, entry);
  state.streamApis.set(nativeApi(id), {
    provider: id,
    extension,
    streamSimple: (model, context, options) => {
      const api = entry.apis.get(model.id);
      return p.streamSimple(api === undefined ? model : { ...model, api }, context, options);
    },
  });
  if (auth.oauth && typeof auth.oauth.login === "function") {
    state.oauthProviders.set(id, { native: "oauth", auth: auth.oauth, extension });
  } else if (auth.apiKey && typeof auth.apiKey.login === "function") {
    state.oauthProviders.set(id, { native: "api_key", auth: auth.apiKey, extension });
  }
  if (typeof p.refreshModels === "function") {
    // Pi's refreshModels publishes through `update` and returns nothing: the provider's
    // models afterwards are the new list.
    state.modelRefreshers.set(id, {
      refreshModels: async (context) => {
        await p.refreshModels(context);
        return nativeModels(entry);
      },
      extension,
    });
  }
  state.providers.set(id, { name: id, config: nativeConfig(entry) });
  if (extension.loaded) notify("providers_changed", { providers: providerDeclarations() });
}

// Pi's auth context of `resolve`/`check`: the environment (blank counts as unset) and files.
const authContext = {
  async env(name) {
    const value = process.env[name];
    return typeof value === "string" && value.trim().length > 0 ? value : undefined;
  },
  async fileExists(file) {
    const resolved = typeof file === "string" && file.startsWith("~") ? require("node:os").homedir() + file.slice(1) : file;
    try {
      await require("node:fs/promises").access(resolved);
      return true;
    } catch {
      return false;
    }
  },
};

// Pi's built-in provider APIs as the pi-ai shim offers them (`anthropicMessagesApi()`,
// `streamSimple`, …): the host runs its own provider for the model and streams the events
// back (`builtin_stream_event`) into the stream the extension reads.
const builtinStreams = new Map(); // id → AssistantMessageEventStream
let nextBuiltinStream = 1;
globalThis.__piHost.streamBuiltin = (events, model, context, options) => {
  const id = `b${nextBuiltinStream++}`;
  builtinStreams.set(id, events);
  const { signal: given, ...rest } = options || {};
  // Only a real AbortSignal can be listened to (an event payload may carry a plain value).
  const signal = given && typeof given.addEventListener === "function" ? given : undefined;
  // Callbacks (onPayload, fetch, …) cannot cross to the host; the data can.
  const plain = JSON.parse(JSON.stringify(rest));
  const onAbort = () => notify("abort_builtin_stream", { id });
  if (signal) signal.addEventListener("abort", onAbort, { once: true });
  requestHost("builtin_stream", { id, model, context, options: plain }).then((answer) => {
    builtinStreams.delete(id);
    if (signal) signal.removeEventListener("abort", onAbort);
    if (answer && answer.error) {
      const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
      const error = { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id, usage, stopReason: "error", errorMessage: answer.error, timestamp: Date.now() };
      events.push({ type: "error", reason: "error", error });
    }
    events.end();
  });
  if (signal && signal.aborted) onAbort();
};

// The stream of a request the host makes (see `streamBuiltin`).
function builtinEvents(model, context, options) {
  const { createAssistantMessageEventStream } = require(shim("pi-ai.cjs"));
  const events = createAssistantMessageEventStream();
  globalThis.__piHost.streamBuiltin(events, model, context, options);
  return events;
}

let jiti;
function loader() {
  if (!jiti) {
    const { createJiti } = require("./vendor/jiti/lib/jiti.cjs");
    jiti = createJiti(__filename, { moduleCache: false, fsCache: false, alias: aliases });
  }
  return jiti;
}

async function loadOne(extensionPath, sourceInfo) {
  const resolved = path.resolve(state.cwd, extensionPath);
  const extension = {
    path: extensionPath,
    resolvedPath: resolved,
    // Where the host found it (Pi's provenance); a file found no other way is temporary.
    sourceInfo: sourceInfo || { path: extensionPath, source: "local", scope: "temporary", origin: "top-level", baseDir: path.dirname(resolved) },
    handlers: new Map(),
    loaded: false,
  };
  try {
    const factory = await loader().import(resolved, { default: true });
    if (typeof factory !== "function") {
      return { error: `Extension does not export a valid factory function: ${extensionPath}` };
    }
    const toolsBefore = new Map(state.tools);
    const commandsBefore = new Map(state.commands);
    const virtualBefore = new Map(state.virtualModels);
    const providersBefore = new Map(state.providers);
    const streamApisBefore = new Map(state.streamApis);
    const nativeBefore = new Map(state.nativeProviders);
    try {
      await factory(makeApi(extension));
    } catch (err) {
      // A factory that fails leaves nothing registered.
      state.tools = toolsBefore;
      state.commands = commandsBefore;
      state.virtualModels = virtualBefore;
      state.providers = providersBefore;
      state.streamApis = streamApisBefore;
      state.nativeProviders = nativeBefore;
      throw err;
    }
    extension.loaded = true;
    state.extensions.push(extension);
    return { error: null };
  } catch (err) {
    return { error: `Failed to load extension: ${errorText(err)}` };
  }
}

function handlersOf(event) {
  const out = [];
  for (const extension of state.extensions) {
    for (const handler of extension.handlers.get(event) || []) out.push({ extension, handler });
  }
  return out;
}

// The AbortControllers of emits the host may abort (`session_before_*`), by emit id.
const abortableEmits = new Map();

// Pi's context of `project_trust` handlers (its cli/project-trust.js): `cwd`, `mode`,
// `hasUI` and a `ui` of `select`, `confirm`, `input` and `notify`. With `hasUI` (the
// interactive mode's start, before the session's screen exists) the dialogs are the host's
// start-up questions (`trust_dialog`); without, they answer at once as Pi's do, and
// `notify` writes to stderr outside the interactive mode.
function projectTrustContext(hasUI) {
  const ask = (fields) => (hasUI ? requestHost("trust_dialog", fields) : Promise.resolve(null));
  return {
    cwd: state.cwd,
    mode: state.mode,
    hasUI,
    ui: {
      select: async (title, options) => {
        const r = await ask({ title: String(title), options: (options || []).map(String) });
        return r && typeof r.value === "string" ? r.value : undefined;
      },
      confirm: async (title, message) => {
        const r = await ask({ title: `${title}\n${message}`, options: ["Yes", "No"] });
        return !!(r && r.value === "Yes");
      },
      input: async (title, placeholder) => {
        const r = await ask({ title: String(title), placeholder: placeholder === undefined ? undefined : String(placeholder), input: true });
        return r && typeof r.value === "string" ? r.value : undefined;
      },
      notify: (message, type) => {
        // The running screen shows it (a session replacement's context); a start-up screen
        // ignores it, as Pi's does.
        if (hasUI) {
          requestHost("trust_dialog", { title: String(message), notify: true, type: type === undefined ? "info" : String(type) }).catch(() => {});
        } else if (state.mode !== "tui") process.stderr.write(`${message}\n`);
      },
    },
  };
}

// Keys Pi's session events always carry, `undefined` when they have no value (the host's
// JSON cannot say undefined: it leaves them out or sends null). Real Pi 1.6.0, recorded with
// fixtures/extensions/session-events-log.ts: `"targetSessionFile" in event` is true for a
// `/new`, `preparation.previousSummary` is there before a first compaction, and so on.
const SESSION_EVENT_KEYS = {
  session_before_switch: ["targetSessionFile"],
  session_before_compact: ["customInstructions"],
  session_compact_failed: ["errorMessage"],
  session_tree: ["summaryEntry", "fromExtension"],
};
// The entry a compaction or a branch summary just appended, as Pi builds it in memory
// (`appendCompaction`, `branchWithSummary`): `details`, `usage` and `fromHook` always there.
const NEW_ENTRY_KEYS = {
  session_compact: ["compactionEntry", ["details", "usage", "fromHook"]],
  session_tree: ["summaryEntry", ["details", "usage", "fromHook"]],
};
const PREPARATION_KEYS = {
  session_before_compact: ["previousSummary"],
  session_before_tree: ["customInstructions", "replaceInstructions", "label"],
};

function withOptionalKeys(object, keys) {
  const out = { ...object };
  for (const key of keys) if (out[key] === null || out[key] === undefined) out[key] = undefined;
  return out;
}

// A session event's payload in Pi's shape: its optional keys present, and a compaction
// preparation's `fileOps` as Pi's Sets of paths (`read`, `written`, `edited`).
function sessionEventPayload(event, payload) {
  let out = SESSION_EVENT_KEYS[event] ? withOptionalKeys(payload, SESSION_EVENT_KEYS[event]) : payload;
  const newEntry = NEW_ENTRY_KEYS[event];
  if (newEntry && out[newEntry[0]] && typeof out[newEntry[0]] === "object") {
    out = { ...out, [newEntry[0]]: withOptionalKeys(out[newEntry[0]], newEntry[1]) };
  }
  // A cleared name (the host's empty string) is undefined, as Pi's getSessionName() says.
  if (event === "session_info_changed" && !out.name) out = { ...out, name: undefined };
  const prep = out.preparation;
  if (PREPARATION_KEYS[event] && prep && typeof prep === "object") {
    const preparation = withOptionalKeys(prep, PREPARATION_KEYS[event]);
    if (preparation.fileOps && typeof preparation.fileOps === "object") {
      const ops = preparation.fileOps;
      preparation.fileOps = {
        read: new Set(ops.read || []),
        written: new Set(ops.written || []),
        edited: new Set(ops.edited || []),
      };
    }
    out = { ...out, preparation };
  }
  return out;
}

async function emit(event, payload, emitId, trustUI) {
  const ctx = makeContext(undefined);
  if (event.startsWith("session_")) payload = sessionEventPayload(event, payload);
  if (event === "tool_call") {
    let result;
    for (const { handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload }, ctx);
        if (r) {
          result = r;
          if (r.block) return { block: true, reason: r.reason };
        }
      } catch (err) {
        // Pi: a throwing tool_call handler blocks the call with its message.
        return { block: true, reason: errorText(err) };
      }
    }
    return result ? { block: !!result.block, reason: result.reason } : {};
  }
  if (event === "input") {
    let text = payload.text;
    let images = payload.images;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: "input", ...payload, text, images }, ctx);
        if (r && r.action === "handled") return { action: "handled" };
        if (r && r.action === "transform") {
          text = r.text;
          images = r.images ?? images;
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return text !== payload.text || images !== payload.images ? { action: "transform", text, images } : { action: "continue" };
  }
  if (event === "tool_result") {
    // Pi's chain: each handler sees what the previous ones returned; a replaced `content`
    // without a `structuredContent` of its own drops the old one (it may no longer match).
    const current = { content: payload.content, details: payload.details, structuredContent: payload.structuredContent, isError: payload.isError, usage: payload.usage };
    let changed = false;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload, ...current }, ctx);
        if (r && typeof r === "object") {
          if (r.content !== undefined && r.structuredContent === undefined) current.structuredContent = undefined;
          for (const key of ["content", "details", "structuredContent", "isError", "usage"]) {
            if (r[key] !== undefined) {
              current[key] = r[key];
              changed = true;
            }
          }
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return changed ? current : {};
  }
  if (event === "context") {
    let messages = payload.messages;
    let changed = false;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, messages }, ctx);
        if (r && Array.isArray(r.messages)) {
          messages = r.messages;
          changed = true;
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return changed ? { messages } : {};
  }
  if (event === "context_with_system") {
    // Pi's second request-time phase: the full transcript, system messages included; each
    // handler sees the previous one's result (or its in-place edits), and the last list is
    // sent as it is. Dropping the leading system message is reported, not undone.
    let messages = payload.messages;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const hadLeadingSystem = messages[0] && messages[0].role === "system";
        const r = await handler({ type: event, messages }, ctx);
        if (r && Array.isArray(r.messages)) messages = r.messages;
        if (hadLeadingSystem && !(messages[0] && messages[0].role === "system")) {
          reportError(
            extension.path,
            event,
            "Handler removed the leading system message; the request has no prompt or initial tool declarations. Keep it at index 0 or replace a dropped prefix with getCurrentSystemMessage().",
          );
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return { messages };
  }
  if (event === "before_provider_headers") {
    // Handlers edit `event.headers` in place (a string sets a header, null removes it); the
    // object as the last handler left it is the request's.
    const headers = payload.headers && typeof payload.headers === "object" ? payload.headers : {};
    for (const { extension, handler } of handlersOf(event)) {
      try {
        await handler({ type: event, headers }, ctx);
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return { headers };
  }
  if (event === "before_provider_request") {
    // Chained: each handler sees the payload the previous one returned; returning
    // undefined keeps it. `{payload}` is answered only when some handler replaced it.
    let current = payload.payload;
    let replaced = false;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, payload: current }, ctx);
        if (r !== undefined) {
          current = r;
          replaced = true;
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return replaced ? { payload: current } : {};
  }
  if (event === "resources_discover") {
    // Every handler contributes; paths are collected in load order.
    // `contributors` names the extension behind each path (its sourceInfo), the first one
    // when several contribute the same path.
    const found = { skillPaths: [], promptPaths: [], themePaths: [] };
    const contributors = {};
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload }, ctx);
        if (!r || typeof r !== "object") continue;
        for (const key of Object.keys(found)) {
          if (!Array.isArray(r[key])) continue;
          for (const path of r[key].filter((p) => typeof p === "string" && p)) {
            found[key].push(path);
            if (!(path in contributors)) contributors[path] = extension.path;
          }
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return { ...found, contributors };
  }
  if (event === "project_trust") {
    // The first "yes" or "no" decides; "undecided" (or nothing) lets later handlers, then
    // the built-in flow, decide. Handlers get Pi's project-trust context, not the session's.
    const trustCtx = projectTrustContext(!!trustUI);
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload }, trustCtx);
        if (r && (r.trusted === "yes" || r.trusted === "no")) {
          return { trusted: r.trusted, remember: r.remember === true };
        }
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return { trusted: "undecided" };
  }
  if (event === "before_agent_start") {
    const messages = [];
    let systemPrompt;
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload, systemPrompt: systemPrompt ?? payload.systemPrompt }, ctx);
        if (r && r.message) messages.push(r.message);
        if (r && r.systemPrompt !== undefined) systemPrompt = r.systemPrompt;
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return { messages, systemPrompt };
  }
  if (event === "turn_end" || event === "agent_before_settle") return emitBoundary(event, payload, ctx);
  if (event === "user_bash") {
    // The first handler with a `result` decides: the command is recorded with it and not
    // run. (`operations` backends are functions; they cannot cross to the host yet.)
    for (const { extension, handler } of handlersOf(event)) {
      try {
        const r = await handler({ type: event, ...payload }, ctx);
        if (r && r.result && typeof r.result === "object") return { result: r.result };
      } catch (err) {
        reportError(extension.path, event, err);
      }
    }
    return {};
  }
  if (event.startsWith("session_before_")) {
    // Gates: the first handler that cancels decides; otherwise the last result counts
    // (a custom compaction or tree summary). A throwing handler is reported and skipped.
    // `event.signal` aborts when the host aborts the operation (`abort_emit` with this
    // emit's id); it goes last so nothing in the payload can replace it.
    let result = {};
    const controller = new AbortController();
    if (emitId !== undefined) abortableEmits.set(emitId, controller);
    try {
      for (const { extension, handler } of handlersOf(event)) {
        try {
          // Pi passes a signal to the compaction and tree gates only, not to switch or fork.
          const signal = event === "session_before_compact" || event === "session_before_tree" ? { signal: controller.signal } : {};
          const r = await handler({ type: event, ...payload, ...signal }, ctx);
          if (r && typeof r === "object") {
            if (r.cancel) return { ...r, cancel: true };
            result = r;
          }
        } catch (err) {
          reportError(extension.path, event, err);
        }
      }
    } finally {
      if (emitId !== undefined) abortableEmits.delete(emitId);
    }
    return result;
  }
  for (const { extension, handler } of handlersOf(event)) {
    try {
      await handler({ type: event, ...payload }, ctx);
    } catch (err) {
      reportError(extension.path, event, err);
    }
  }
  return {};
}

// Pi's actionable boundaries: each handler sees the entries and the continuation proposed
// so far (`event.entries`, `event.continue`) and `event.context` rebuilt from them by the
// host (`contextEntries`, `contextMessages`, `llmMessages`, `pendingMessages`,
// `canContinue`, as if the proposal were written); returning `entries` or `continue`
// replaces just that field. The host checks and writes the final proposal.
async function emitBoundary(event, payload, ctx) {
  let entries = [];
  let shouldContinue = false;
  let context = payload.context || { contextEntries: [], contextMessages: [], llmMessages: [], pendingMessages: [], canContinue: false };
  let valid = true;
  for (const { extension, handler } of handlersOf(event)) {
    try {
      const r = await handler({ type: event, ...payload, entries, continue: shouldContinue, context }, ctx);
      if (r && r.entries !== undefined) entries = r.entries;
      if (r && r.continue !== undefined) shouldContinue = r.continue;
    } catch (err) {
      reportError(extension.path, event, err);
    }
    // As Pi rebuilds the context after each handler: a proposal that cannot be applied is
    // reported (by the handler's extension) and, if still so at the end, dropped whole.
    const rebuilt = Array.isArray(entries)
      ? await requestHost("boundary_context", { event, entries })
      : { error: "entries must be an array" };
    if (rebuilt && rebuilt.context) {
      context = rebuilt.context;
      valid = true;
    } else {
      valid = false;
      reportError(extension.path, event, `Invalid boundary entries: ${(rebuilt && rebuilt.error) || "the host did not answer"}`);
    }
  }
  if (!valid) return { entries: [], continue: false };
  return { entries: Array.isArray(entries) ? entries : [], continue: shouldContinue === true };
}

// A tool's context adds `tools` and `executeTool()` (Pi's ExtensionToolContext): other
// tools run through the host's nested-call path as `<toolCallId>/<n>`; the answer is Pi's
// outcome `{toolCall, result, isError, durationMs?}` and never a rejection.
const nestedUpdates = new Map();
let nextNestedKey = 1;

function makeToolContext(toolCallId, signal, tools) {
  const ctx = makeContext(signal);
  const callable = Array.isArray(tools) ? tools : [];
  Object.defineProperty(ctx, "tools", { enumerable: true, get: () => callable.map((t) => ({ ...t })) });
  ctx.executeTool = async (name, args, options) => {
    const o = options || {};
    const callSignal = o.signal || signal;
    const key = nextNestedKey++;
    if (typeof o.onUpdate === "function") nestedUpdates.set(key, o.onUpdate);
    const onAbort = () => notify("abort_execute_tool", { toolCallId, key });
    if (callSignal && !callSignal.aborted) callSignal.addEventListener("abort", onAbort, { once: true });
    try {
      return await requestHost("execute_tool", {
        toolCallId,
        key,
        name,
        args: args === undefined ? {} : args,
        aborted: !!(callSignal && callSignal.aborted),
      });
    } finally {
      nestedUpdates.delete(key);
      if (callSignal) callSignal.removeEventListener("abort", onAbort);
    }
  };
  return ctx;
}

async function runTool(params) {
  const entry = state.tools.get(params.name);
  if (!entry) throw new Error(`Tool ${params.name} not found`);
  const controller = new AbortController();
  state.running.set(params.toolCallId, controller);
  try {
    const onUpdate = (partial) => notify("tool_update", { toolCallId: params.toolCallId, partial });
    const ctx = makeToolContext(params.toolCallId, controller.signal, params.tools);
    const result = await entry.definition.execute(params.toolCallId, params.params, controller.signal, onUpdate, ctx);
    return {
      content: Array.isArray(result && result.content) ? result.content : [],
      details: result ? result.details : undefined,
      isError: !!(result && result.isError),
      usage: result && result.usage && typeof result.usage === "object" ? result.usage : undefined,
    };
  } finally {
    state.running.delete(params.toolCallId);
  }
}

const methods = {
  async load(params) {
    state.cwd = params.cwd || state.cwd;
    state.mode = params.mode || state.mode;
    state.hasUI = !!params.hasUI;
    state.allTools = params.builtinTools || [];
    state.builtinDefs = params.allBuiltinTools || [];
    for (const flag of params.flags || []) {
      const body = flag.replace(/^--/, "");
      const eq = body.indexOf("=");
      if (eq >= 0) state.cliFlags.set(body.slice(0, eq), body.slice(eq + 1));
      else state.cliFlags.set(body, true);
    }
    const errors = [];
    const sourceInfos = params.sourceInfos || [];
    for (const [i, p] of params.paths.entries()) {
      const { error } = await loadOne(p, sourceInfos[i]);
      if (error) errors.push({ path: p, error });
    }
    return {
      tools: [...state.tools.values()].map(({ definition, extension }) => ({ ...toolInfo(definition, extension), extensionPath: extension.path })),
      commands: [...state.commands.entries()].map(([name, { options, extension }]) => ({ name, description: options.description, extensionPath: extension.path, sourceInfo: extension.sourceInfo })),
      events: [...new Set(state.extensions.flatMap((e) => [...e.handlers.keys()]))],
      unknownFlags: [...state.cliFlags.keys()].map((name) => `--${name}`),
      virtualModels: virtualDeclarations(),
      providers: providerDeclarations(),
      shortcuts: [...state.shortcuts.values()].map(({ shortcut, options, extension }) => ({ shortcut, description: options.description, extensionPath: extension.path })),
      errors,
    };
  },
  async set_state(params) {
    if (params.reset) {
      state.entries = [];
      state.byId = new Map();
      state.labels = new Map();
    }
    for (const entry of params.entries || []) addEntry(entry);
    for (const key of ["leafId", "header", "sessionId", "sessionName", "model", "thinkingLevel", "isIdle", "activeTools", "allTools", "models", "themes", "hostCommands"]) {
      if (key in params) state[key] = params[key];
    }
    if ("contextUsage" in params) state.contextUsage = params.contextUsage ?? undefined;
    if ("sessionFile" in params) state.sessionFile = params.sessionFile ?? undefined;
    if (state.sessionName === null) state.sessionName = undefined;
    if (state.model === null) state.model = undefined;
    return {};
  },
  emit: (params) => emit(params.event, params.payload || {}, params.emitId, params.trustUI),
  // A reload replaced these extensions (after their session_shutdown): as Pi's
  // invalidate(), the old context turns stale and `pi.events` subscriptions end. The
  // process runs on only while the command that called ctx.reload() finishes.
  async invalidate() {
    staleMessage =
      "This extension ctx is stale after session replacement or reload. Do not use a captured pi or command ctx after ctx.newSession(), ctx.fork(), ctx.switchSession(), or ctx.reload(). For newSession, fork, and switchSession, move post-replacement work into withSession and use the ctx passed to withSession. For reload, do not use the old ctx after await ctx.reload().";
    bus.removeAllListeners();
    return {};
  },
  // The host aborted the operation an emit gates (a compaction): its handlers' signal fires.
  async abort_emit(params) {
    const controller = abortableEmits.get(params.emitId);
    if (controller) controller.abort();
    return {};
  },
  tool: (params) => runTool(params),
  // A request made with a virtual model: its router picks the physical model. Returning
  // no state, or `request.state` itself, keeps the stored state (compared by reference,
  // as Pi does); any other value is new state, even when equal.
  async route(params) {
    const key = `${params.model && params.model.provider}/${params.model && params.model.id}`;
    const entry = state.virtualModels.get(key);
    if (!entry) throw new Error(`Virtual model ${key} is not registered`);
    const controller = new AbortController();
    const request = {
      model: params.model,
      thinkingLevel: params.thinkingLevel,
      reason: params.reason,
      messages: params.messages || [],
      signal: controller.signal,
    };
    for (const k of ["previous", "failed", "state"]) {
      if (params[k] !== undefined && params[k] !== null) request[k] = params[k];
    }
    // A previous or failed model is the catalog's own object, as ctx.modelRegistry gives.
    for (const k of ["previous", "failed"]) {
      const m = request[k] && request[k].model;
      if (m) request[k].model = modelRegistry.find(m.provider, m.id) || m;
    }
    let result;
    try {
      result = await entry.definition.route(request, makeContext(controller.signal));
    } catch (err) {
      throw new Error(`Router of ${key} failed: ${errorText(err)}`);
    }
    const model = result && result.model;
    if (!model || typeof model.provider !== "string" || typeof model.id !== "string") {
      throw new Error(`Router of ${key} returned no model`);
    }
    const stateChanged = result.state !== undefined && result.state !== request.state;
    return {
      provider: model.provider,
      id: model.id,
      thinkingLevel: result.thinkingLevel,
      state: stateChanged ? result.state : undefined,
      stateChanged,
    };
  },
  // A partial result of a tool another tool runs through ctx.executeTool(): its onUpdate.
  async execute_tool_update(params) {
    const onUpdate = nestedUpdates.get(params.key);
    if (onUpdate) {
      try {
        onUpdate(params.partial);
      } catch (err) {
        reportError("<extension>", "executeTool onUpdate", err);
      }
    }
    return {};
  },
  // A request for a model whose api an extension streams (`registerProvider` with
  // `streamSimple`): Pi's AssistantMessageEvents go back as `stream_event` notifications,
  // all of them before this answer.
  async stream(params) {
    const api = params.model && params.model.api;
    const entry = state.streamApis.get(api);
    if (!entry) throw new Error(`No API provider registered for api: ${api}`);
    const controller = new AbortController();
    state.providerStreams.set(params.streamId, controller);
    try {
      const options = { ...(params.options || {}), signal: controller.signal };
      const events = await entry.streamSimple(params.model, params.context || { messages: [] }, options);
      for await (const event of events) {
        notify("stream_event", { streamId: params.streamId, event });
        if (event && (event.type === "done" || event.type === "error")) break;
      }
    } finally {
      state.providerStreams.delete(params.streamId);
    }
    return {};
  },
  // `/login` or `pi auth login` for a provider registered with `oauth`: its login(callbacks)
  // runs here. What it shows (onAuth, onDeviceCode, onProgress) goes to the host as
  // `oauth_event` notifications; what it asks (onPrompt, onManualCodeInput, onSelect) is an
  // `oauth_prompt` request the host answers with the user's text or choice.
  async oauth_login(params) {
    const entry = state.oauthProviders.get(params.provider);
    if (!entry) throw new Error(`No OAuth login registered for provider: ${params.provider}`);
    const loginId = params.loginId;
    const controller = new AbortController();
    state.oauthLogins.set(loginId, controller);
    const show = (event) => notify("oauth_event", { loginId, ...event });
    // Pi's prompt types: `text` (onPrompt), `manual_code` (onManualCodeInput) and `select`
    // (onSelect, answered with the chosen option's id).
    const ask = async (prompt) => {
      const answer = await requestHost("oauth_prompt", { loginId, ...prompt });
      if (answer === null || answer === undefined) throw new Error("Login cancelled");
      return String(answer);
    };
    if (entry.native) {
      // A provider object's login(interaction): Pi's AuthInteraction over the same prompts.
      const interaction = {
        signal: controller.signal,
        prompt: (prompt) => ask({
          type: String((prompt && prompt.type) || "text"),
          message: String((prompt && prompt.message) || ""),
          placeholder: prompt && typeof prompt.placeholder === "string" ? prompt.placeholder : undefined,
          options: prompt && Array.isArray(prompt.options)
            ? prompt.options.map((o) => ({ id: String(o && o.id), label: String((o && (o.label ?? o.id)) ?? ""), description: o && typeof o.description === "string" ? o.description : undefined }))
            : undefined,
        }),
        notify: (event) => {
          if (!event) return;
          if (event.type === "auth_url") show({ kind: "auth", url: String(event.url || ""), instructions: event.instructions || "" });
          else if (event.type === "device_code") show({ kind: "device", userCode: String(event.userCode || ""), verificationUri: String(event.verificationUri || "") });
          else show({ kind: "progress", message: String(event.message || "") });
        },
      };
      try {
        const credentials = await entry.auth.login(interaction);
        if (!credentials || typeof credentials !== "object") throw new Error("login returned no credentials");
        return { credentials };
      } finally {
        state.oauthLogins.delete(loginId);
      }
    }
    const callbacks = {
      onAuth: (info) => show({ kind: "auth", url: String((info && info.url) || ""), instructions: (info && info.instructions) || "" }),
      onDeviceCode: (info) => show({ kind: "device", userCode: String((info && info.userCode) || ""), verificationUri: String((info && (info.verificationUri || info.verificationUrl)) || "") }),
      onProgress: (message) => show({ kind: "progress", message: String(message) }),
      onPrompt: (prompt) => ask({ type: "text", message: String((prompt && prompt.message) || ""), placeholder: prompt && typeof prompt.placeholder === "string" ? prompt.placeholder : undefined }),
      onManualCodeInput: () => ask({ type: "manual_code", message: "Paste the authorization code" }),
      onSelect: (prompt) => ask({
        type: "select",
        message: String((prompt && prompt.message) || ""),
        options: (prompt && Array.isArray(prompt.options) ? prompt.options : []).map((o) => ({
          id: String(o && o.id),
          label: String((o && (o.label ?? o.id)) ?? ""),
          description: o && typeof o.description === "string" ? o.description : undefined,
        })),
      }),
      signal: controller.signal,
    };
    try {
      const credentials = await entry.oauth.login(callbacks);
      if (!credentials || typeof credentials !== "object") throw new Error("login returned no credentials");
      return { credentials };
    } finally {
      state.oauthLogins.delete(loginId);
    }
  },
  async abort_oauth_login(params) {
    const c = state.oauthLogins.get(params.loginId);
    if (c) c.abort();
    return {};
  },
  // Pi's model refresh of the providers registered with `refreshModels`: each one's
  // refreshModels(context) with Pi's context (the credential, `allowNetwork`, a signal, the
  // provider's baseUrl, `stored`: the provider's entry of models-store.json). As in Pi it
  // runs first without network with the stored credential, then, when the refresh allows
  // network and the host resolved a credential for it (`networkCredentials`), with network
  // and that credential. `publish({persist, update})` records `persist` (an entry, or null
  // to delete it; the next phase's `stored`), which the host writes to models-store.json
  // when the answer arrives, then applies `update`. A returned list replaces the
  // provider's models; a failing phase keeps them.
  async refresh_models(params) {
    const names = Array.isArray(params.providers) ? params.providers : [...state.modelRefreshers.keys()];
    const credentials = params.credentials || {};
    const storedEntries = params.stored || {};
    const persist = {};
    let changed = false;
    const errors = {};
    await Promise.all(names.map(async (name) => {
      const refresher = state.modelRefreshers.get(name);
      const entry = state.providers.get(name);
      if (!refresher || !entry) return;
      const signal = AbortSignal.timeout(15_000);
      let stored = storedEntries[name];
      let mine; // the declaration this refresh set (the network phase may replace it)
      const networkCredentials = params.networkCredentials || {};
      const phase = async (allowNetwork, credential) => {
        const models = await refresher.refreshModels({
          credential,
          stored: stored && typeof stored === "object" ? JSON.parse(JSON.stringify(stored)) : undefined,
          allowNetwork,
          force: undefined,
          signal,
          baseUrl: entry.config.baseUrl,
          publish: async (publication) => {
            if (signal.aborted) return false;
            if (publication && publication.persist === null) {
              persist[name] = null;
              stored = undefined;
            } else if (publication && publication.persist !== undefined) {
              persist[name] = JSON.parse(JSON.stringify(publication.persist));
              stored = persist[name];
            }
            if (publication && typeof publication.update === "function") publication.update();
            return true;
          },
        });
        if (signal.aborted || !Array.isArray(models)) return;
        // The registration may have changed meanwhile: only its current entry is updated.
        const current = state.providers.get(name);
        if (current !== entry && current !== mine) return;
        mine = { name, config: { ...entry.config, models: JSON.parse(JSON.stringify(models)) } };
        state.providers.set(name, mine);
        changed = true;
      };
      try {
        await phase(false, credentials[name]);
        if (params.allowNetwork && !signal.aborted && networkCredentials[name] !== undefined) {
          // `null`: Pi's `refreshModelsAuth: "configured"`, a network phase without credential.
          await phase(true, networkCredentials[name] ?? undefined);
        }
      } catch (err) {
        errors[name] = errorText(err);
      }
    }));
    return { changed, errors, persist, providers: providerDeclarations() };
  },
  // Pi's `oauth.modifyModels(models, credentials)` of a provider whose stored credential is
  // an OAuth one: the host sends the provider's models (Pi's Model objects, as the catalog
  // has them without this step) and takes the returned list.
  async modify_models(params) {
    const entry = state.oauthProviders.get(params.provider);
    if (!entry || !entry.oauth || typeof entry.oauth.modifyModels !== "function") return { models: null };
    const models = entry.oauth.modifyModels(Array.isArray(params.models) ? params.models : [], params.credentials || {});
    if (!Array.isArray(models)) throw new Error("modifyModels returned no list");
    return { models: JSON.parse(JSON.stringify(models)) };
  },
  // An expired credential of such a provider: its refreshToken(credentials, signal).
  async oauth_refresh(params) {
    const entry = state.oauthProviders.get(params.provider);
    if (!entry) throw new Error(`No OAuth login registered for provider: ${params.provider}`);
    if (entry.native === "oauth") {
      const credentials = await entry.auth.refresh({ ...(params.credentials || {}), type: "oauth" }, AbortSignal.timeout(15_000));
      if (!credentials || typeof credentials !== "object") throw new Error("refresh returned no credentials");
      return { credentials };
    }
    if (entry.native || typeof entry.oauth.refreshToken !== "function") return { credentials: params.credentials };
    const credentials = await entry.oauth.refreshToken(params.credentials, new AbortController().signal);
    if (!credentials || typeof credentials !== "object") throw new Error("refreshToken returned no credentials");
    return { credentials };
  },
  // The key a request sends: getApiKey(credentials), else the access token.
  async oauth_api_key(params) {
    const entry = state.oauthProviders.get(params.provider);
    const creds = params.credentials || {};
    if (entry && entry.native === "oauth") {
      const auth = await entry.auth.toAuth({ ...creds, type: "oauth" });
      return { key: auth && typeof auth.apiKey === "string" ? auth.apiKey : creds.access };
    }
    if (!entry || entry.native || typeof entry.oauth.getApiKey !== "function") return { key: creds.access };
    return { key: await entry.oauth.getApiKey(creds) };
  },
  // A request to a provider object's model: its auth as Pi's `resolveProviderAuth` makes it.
  // A stored credential owns the provider (OAuth → `oauth.toAuth`, API key →
  // `apiKey.resolve` with it); without one `apiKey.resolve` sees only the environment.
  // `result: null` when the provider is not configured.
  async resolve_auth(params) {
    const entry = state.nativeProviders.get(params.provider);
    if (!entry) return { result: null };
    const auth = entry.provider.auth || {};
    const stored = params.credential && typeof params.credential === "object" ? params.credential : undefined;
    if (stored && stored.type === "oauth") {
      if (!auth.oauth) return { result: null };
      let resolved;
      try {
        resolved = await auth.oauth.toAuth(stored);
      } catch (err) {
        throw new Error(`OAuth auth derivation failed for ${params.provider}: ${errorText(err)}`);
      }
      return { result: { auth: resolved || {}, source: "OAuth" } };
    }
    if (stored && stored.type !== "api_key") return { result: null };
    if (!auth.apiKey) return { result: null };
    let result;
    try {
      result = await auth.apiKey.resolve({ ctx: authContext, credential: stored, signal: AbortSignal.timeout(30_000) });
    } catch (err) {
      throw new Error(`API key auth failed for provider ${params.provider}: ${errorText(err)}`);
    }
    return { result: result && typeof result === "object" ? JSON.parse(JSON.stringify(result)) : null };
  },
  // Whether a provider object is configured (Pi's `checkProviderAuth`), without resolving
  // its key when it can say so: a stored OAuth login counts when the provider has
  // `auth.oauth`; otherwise `auth.apiKey.check` with the stored API key, else `resolve`.
  async check_auth(params) {
    const entry = state.nativeProviders.get(params.provider);
    if (!entry) return { configured: false };
    const auth = entry.provider.auth || {};
    const stored = params.credential && typeof params.credential === "object" ? params.credential : undefined;
    if (stored && stored.type === "oauth") return { configured: !!auth.oauth };
    if (!auth.apiKey) return { configured: false };
    if (typeof auth.apiKey.check !== "function") {
      const resolved = await methods.resolve_auth(params);
      return { configured: !!resolved.result };
    }
    let result;
    try {
      result = await auth.apiKey.check({
        ctx: authContext,
        credential: stored && stored.type === "api_key" ? stored : undefined,
        signal: AbortSignal.timeout(30_000),
      });
    } catch (err) {
      throw new Error(`API key auth check failed for provider ${params.provider}: ${errorText(err)}`);
    }
    return { configured: !!result };
  },
  // A provider object's `filterModels(models, credential)` (Pi's `getAvailable`): the ids of
  // the models it keeps, handed the provider's models and its stored credential.
  async filter_models(params) {
    const entry = state.nativeProviders.get(params.provider);
    const filter = entry && entry.provider.filterModels;
    if (typeof filter !== "function") return { ids: null };
    const stored = params.credential && typeof params.credential === "object" ? params.credential : undefined;
    const kept = filter.call(entry.provider, Array.isArray(params.models) ? params.models : [], stored);
    if (!Array.isArray(kept)) throw new Error("filterModels returned no list");
    return { ids: kept.filter((m) => m && typeof m.id === "string").map((m) => m.id) };
  },
  async builtin_stream_event(params) {
    const events = builtinStreams.get(params.id);
    if (events) events.push(params.event);
    return {};
  },
  async abort_stream(params) {
    const c = state.providerStreams.get(params.streamId);
    if (c) c.abort();
    return {};
  },
  // The active tools changed: an extension tool's `prepareLoadout(loadout)` with the declared,
  // callable and registered tools (exposure, namespace and prompt guidelines by name). A hook
  // that throws is reported as Pi reports it (event `prepare_loadout`) and changes nothing.
  async prepare_loadout(params) {
    const entry = state.tools.get(params.name);
    const hook = entry && entry.definition.prepareLoadout;
    if (typeof hook !== "function") return {};
    const registered = Array.isArray(params.registered) ? params.registered : [];
    const byName = new Map(registered.map((t) => [t.name, t]));
    const loadout = {
      declared: params.declared || [],
      callable: params.callable || [],
      registered,
      getExposure: (name) => byName.get(name)?.exposure ?? "direct",
      getNamespace: (name) => byName.get(name)?.namespace,
      getPromptGuidelines: (name) => byName.get(name)?.promptGuidelines ?? [],
    };
    try {
      const changes = await hook.call(entry.definition, loadout);
      const descriptions = {};
      for (const [name, text] of Object.entries(changes?.descriptions ?? {})) {
        if (typeof text === "string") descriptions[name] = text;
      }
      const hidden = Array.isArray(changes?.hiddenDeclarations)
        ? changes.hiddenDeclarations.filter((n) => typeof n === "string")
        : [];
      return { descriptions, hiddenDeclarations: hidden };
    } catch (err) {
      reportError(entry.extension.path, "prepare_loadout", err);
      return {};
    }
  },
  // Which tools a call of an extension tool may reach: its `reachesTools(input)`, "all" or
  // a list of words (null without the function; "all" when it throws).
  async reaches_tools(params) {
    const entry = state.tools.get(params.name);
    const reach = entry && entry.definition.reachesTools;
    if (typeof reach !== "function") return { reach: null };
    try {
      const answer = reach.call(entry.definition, params.input);
      return { reach: answer === "all" || Array.isArray(answer) ? answer : null };
    } catch (err) {
      reportError(entry.extension.path, "reaches_tools", err);
      return { reach: "all" };
    }
  },
  async abort_tool(params) {
    const c = state.running.get(params.toolCallId);
    if (c) c.abort();
    return {};
  },
  // A registered shortcut was pressed (TUI): its handler gets the event context, as Pi's.
  async shortcut(params) {
    const entry = state.shortcuts.get(String(params.shortcut || "").toLowerCase());
    if (!entry) throw new Error(`Unknown shortcut: ${params.shortcut}`);
    try {
      await entry.options.handler(makeContext(undefined));
    } catch (err) {
      reportError(entry.extension.path, `shortcut:${entry.shortcut}`, err);
    }
    return {};
  },
  async command(params) {
    const entry = state.commands.get(params.name);
    if (!entry) throw new Error(`Unknown command: /${params.name}`);
    try {
      await entry.options.handler(params.args || "", makeCommandContext());
    } catch (err) {
      reportError(entry.extension.path, `command:${params.name}`, err);
    }
    return {};
  },
};

function handleLine(line) {
  if (!line.trim()) return;
  let record;
  try {
    record = JSON.parse(line);
  } catch {
    return;
  }
  if (record.method === undefined && record.id !== undefined) {
    const resolve = ownPending.get(record.id);
    if (resolve) {
      ownPending.delete(record.id);
      resolve(record.result);
    }
    return;
  }
  const method = methods[record.method];
  if (!method) {
    send({ id: record.id, error: `Unknown method: ${record.method}` });
    return;
  }
  Promise.resolve()
    .then(() => method(record.params || {}))
    .then(
      (result) => send({ id: record.id, result: result === undefined ? null : result }),
      (err) => send({ id: record.id, error: errorText(err) }),
    );
}

let buffer = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let i;
  while ((i = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, i);
    buffer = buffer.slice(i + 1);
    handleLine(line);
  }
});
// The host closed the pipe: the session is over.
process.stdin.on("end", () => process.exit(0));
// An extension's stray rejection or throw is reported, never fatal.
process.on("unhandledRejection", (err) => reportError("<unknown>", "unhandledRejection", err));
process.on("uncaughtException", (err) => reportError("<unknown>", "uncaughtException", err));

