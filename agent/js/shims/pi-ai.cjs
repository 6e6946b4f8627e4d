// A small stand-in for `@earendil-works/pi-ai` as extensions use it: the schema builders, a
// few helpers, and what a custom provider's `streamSimple` needs (the event stream, the
// transcript readers, streaming tool arguments, cost), and `createProvider` for provider
// objects. Pi's built-in provider APIs (`anthropicMessagesApi()`, …) are stand-ins the Rust
// host runs; model registries are not available.
"use strict";
const { Type } = require("./typebox.cjs");
const crypto = require("node:crypto");

function StringEnum(values, options) {
  return {
    type: "string",
    enum: values,
    ...(options && options.description ? { description: options.description } : {}),
    ...(options && options.default ? { default: options.default } : {}),
  };
}
function uuidv7() {
  const bytes = crypto.randomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const h = bytes.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// ---- Event streams (what `createAssistantMessageEventStream()` returns) ----

// An async-iterable queue: `push` delivers to a waiting reader or queues; after `end`
// readers finish once the queue is drained. `result()` resolves with the final message.
class EventStream {
  constructor(isFinal, finalOf) {
    this.isFinal = isFinal;
    this.finalOf = finalOf;
    this.queue = [];
    this.readers = [];
    this.ended = false;
    this.final = new Promise((resolve) => {
      this.resolveFinal = resolve;
    });
  }
  push(event) {
    if (this.ended) return;
    if (this.isFinal(event)) {
      this.ended = true;
      this.resolveFinal(this.finalOf(event));
    }
    const reader = this.readers.shift();
    if (reader) reader({ value: event, done: false });
    else this.queue.push(event);
  }
  end(result) {
    this.ended = true;
    if (result !== undefined) this.resolveFinal(result);
    for (const reader of this.readers.splice(0)) reader({ value: undefined, done: true });
  }
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this.queue.length > 0) {
        yield this.queue.shift();
      } else if (this.ended) {
        return;
      } else {
        const next = await new Promise((resolve) => this.readers.push(resolve));
        if (next.done) return;
        yield next.value;
      }
    }
  }
  result() {
    return this.final;
  }
}

// One assistant response; the final message gets `durationMs` measured from the stream's
// creation, unless it has one or started before the stream (forwarded from elsewhere).
class AssistantMessageEventStream extends EventStream {
  constructor() {
    super(
      (e) => e.type === "done" || e.type === "error",
      (e) => (e.type === "done" ? e.message : e.error),
    );
    this.createdAt = Date.now();
    this.createdMono = performance.now();
  }
  push(event) {
    if (event && event.type === "done") this.stampDuration(event.message);
    else if (event && event.type === "error") this.stampDuration(event.error);
    super.push(event);
  }
  end(result) {
    if (result !== undefined) this.stampDuration(result);
    super.end(result);
  }
  stampDuration(message) {
    if (this.ended || !message || message.durationMs !== undefined || message.timestamp < this.createdAt) return;
    message.durationMs = Math.max(0, Math.round(performance.now() - this.createdMono));
  }
}
const createAssistantMessageEventStream = () => new AssistantMessageEventStream();

// ---- Transcripts: the prompt and tools travel in system messages ----

const textOf = (content) =>
  typeof content === "string" ? content : (content || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
const isSystem = (m) => m && m.role === "system";

function getSystemMessageText(message) {
  const parts = [textOf(message.content), ...Object.values(message.sections || {}).filter((t) => t !== null)];
  return parts.filter((p) => p.length > 0).join("\n\n");
}
function getInitialSystemMessage(messages) {
  return isSystem(messages[0]) ? messages[0] : undefined;
}
// The tools in force after every system message's removals and additions, in order.
function getCurrentTools(messages) {
  const tools = new Map();
  for (const m of messages.filter(isSystem)) {
    for (const t of m.toolsRemoved || []) tools.delete(t.name);
    for (const t of m.toolsAdded || []) tools.set(t.name, t);
  }
  return [...tools.values()];
}
// Every system message folded into one: texts appended, sections patched by name.
function getCurrentSystemMessage(messages) {
  const texts = [];
  const sections = new Map();
  let timestamp;
  for (const m of messages.filter(isSystem)) {
    if (timestamp === undefined) timestamp = m.timestamp;
    const text = textOf(m.content);
    if (text) texts.push(text);
    for (const [name, value] of Object.entries(m.sections || {})) {
      if (value === null) sections.delete(name);
      else sections.set(name, value);
    }
  }
  const tools = getCurrentTools(messages);
  if (timestamp === undefined && tools.length === 0) return undefined;
  const folded = { role: "system", content: texts.join("\n\n") };
  if (sections.size > 0) folded.sections = Object.fromEntries(sections);
  if (tools.length > 0) folded.toolsAdded = tools;
  folded.timestamp = timestamp === undefined ? 0 : timestamp;
  return folded;
}
function getCurrentSystemPrompt(messages) {
  const m = getCurrentSystemMessage(messages);
  return m ? getSystemMessageText(m) : "";
}
// For APIs with one system prompt: the folded system message leads, the others go.
function collapseSystemMessages(context) {
  const head = getCurrentSystemMessage(context.messages);
  const rest = context.messages.filter((m) => !isSystem(m));
  return { messages: head ? [head, ...rest] : rest };
}
function withoutInitialSystemMessage(messages) {
  return getInitialSystemMessage(messages) ? messages.slice(1) : messages;
}
// A `Context` with `systemPrompt`/`tools` as a transcript.
function normalizeContext(context) {
  const prompt = context.systemPrompt || "";
  const tools = context.tools || [];
  if (!prompt && tools.length === 0) return { messages: context.messages };
  const head = { role: "system", content: prompt };
  if (tools.length > 0) head.toolsAdded = tools;
  head.timestamp = 0;
  return { messages: [head, ...context.messages] };
}

// ---- Tool-call arguments as they stream ----

// The value of possibly unfinished JSON text: the text closed as it stands, else cut back
// to the last point between members; `{}` when neither parses.
function parseStreamingJson(text) {
  if (!text || !text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {}
  const stack = [];
  let inString = false;
  let escaped = false;
  let cut = null; // {at, closers}: a prefix that ends between members
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === "\\") escaped = true;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{" || ch === "[") {
      stack.push(ch === "{" ? "}" : "]");
      cut = { at: i + 1, closers: [...stack].reverse().join("") };
    } else if (ch === "}" || ch === "]") {
      stack.pop();
      cut = { at: i + 1, closers: [...stack].reverse().join("") };
    } else if (ch === ",") cut = { at: i, closers: [...stack].reverse().join("") };
  }
  const closers = [...stack].reverse().join("");
  const attempts = [text + (inString ? (escaped ? '\\"' : '"') : "") + closers];
  if (cut) attempts.push(text.slice(0, cut.at) + cut.closers);
  for (const attempt of attempts) {
    try {
      return JSON.parse(attempt);
    } catch {}
  }
  return {};
}
function parseToolCallArguments(text) {
  if (!text || !text.trim()) return { arguments: {} };
  try {
    const value = JSON.parse(text);
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("Tool arguments must be a JSON object");
    return { arguments: value };
  } catch (err) {
    return { arguments: {}, argumentsError: `${err instanceof Error ? err.message : String(err)}\n\nReceived arguments:\n${text}` };
  }
}
class ToolCallArgumentsStream {
  constructor() {
    this.raw = "";
    this.partial = {};
  }
  get text() {
    return this.raw;
  }
  append(delta) {
    this.raw += delta;
    const value = parseStreamingJson(this.raw);
    this.partial = typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
    return this.partial;
  }
  replace(text) {
    if (text.startsWith(this.raw)) {
      const delta = text.slice(this.raw.length);
      return { delta, arguments: delta === "" ? this.partial : this.append(delta) };
    }
    this.raw = "";
    return { delta: undefined, arguments: this.append(text) };
  }
  finish() {
    return parseToolCallArguments(this.raw);
  }
}

// ---- Cost ----

// usage.cost from the model's prices per million tokens; the highest whole-request tier
// the input passes applies, and 1h cache writes cost twice the input price.
function calculateCost(model, usage) {
  const input = usage.input + usage.cacheRead + usage.cacheWrite;
  let rates = model.cost || { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
  let above = -1;
  for (const tier of rates.tiers || []) {
    if (input > tier.inputTokensAbove && tier.inputTokensAbove > above) {
      rates = tier;
      above = tier.inputTokensAbove;
    }
  }
  const longWrite = usage.cacheWrite1h || 0;
  usage.cost.input = (rates.input / 1e6) * usage.input;
  usage.cost.output = (rates.output / 1e6) * usage.output;
  usage.cost.cacheRead = (rates.cacheRead / 1e6) * usage.cacheRead;
  usage.cost.cacheWrite = (rates.cacheWrite * (usage.cacheWrite - longWrite) + rates.input * 2 * longWrite) / 1e6;
  usage.cost.total = usage.cost.input + usage.cost.output + usage.cost.cacheRead + usage.cost.cacheWrite;
  usage.cost.totalFromProvider = false;
  return usage.cost;
}

// ---- Pi's built-in provider APIs, run by the host ----

// A stream the host fills by running its own provider for `model` (its `api`, `baseUrl`,
// `headers`), with the key and headers in `options`.
function hostStream(model, context, options) {
  const events = createAssistantMessageEventStream();
  const host = globalThis.__piHost;
  if (host && host.streamBuiltin) {
    host.streamBuiltin(events, model, context, options || {});
  } else {
    const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
    const error = { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id, usage, stopReason: "error", errorMessage: "Provider APIs need the pi host", timestamp: Date.now() };
    events.push({ type: "error", reason: "error", error });
    events.end();
  }
  return events;
}
const streamSimple = (model, context, options) => hostStream(model, context, options);
const complete = (model, context, options) => hostStream(model, context, options).result();
// `anthropicMessagesApi()` and friends: an API object whose stream functions use that wire
// API whatever the model says, as Pi's do. The marker tells the sidecar which of the host's
// protocols it stands for, so a provider object's models can be streamed by the host.
const BUILTIN_API = Symbol.for("pi.builtinApi");
const builtinApi = (api) => () => ({
  api,
  [BUILTIN_API]: api,
  stream: (model, context, options) => hostStream({ ...model, api }, context, options),
  streamSimple: (model, context, options) => hostStream({ ...model, api }, context, options),
});

// ---- Provider objects (`createProvider`, for `pi.registerProvider(provider)`) ----

// What `createProvider` was given, for the sidecar: which implementation streams each model.
const PROVIDER_PARTS = Symbol.for("pi.providerParts");
const modelType = (model) => (model && typeof model.type === "string" ? model.type : "chat");
const KNOWN_MODEL_TYPES = ["chat", "image", "classifier"];
function errorStream(model, message) {
  const events = createAssistantMessageEventStream();
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  const error = { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id, usage, stopReason: "error", errorMessage: message, timestamp: Date.now() };
  events.push({ type: "error", reason: "error", error });
  events.end(error);
  return events;
}
// Pi's `createProvider(input)`: a Provider whose chat models stream through `api` (one
// implementation for all, or a map by `model.api`); `fetchModels` makes it dynamic (its
// `refreshModels` restores `context.stored` and publishes what it fetched).
function createProvider(input) {
  const single = input.api && typeof input.api.stream === "function" ? input.api : undefined;
  const byApi = single || !input.api ? undefined : input.api;
  const streams = single ? [single] : Object.values(byApi || {}).filter((entry) => entry !== undefined);
  const others = [...Object.values(input.images || {}), ...Object.values(input.classifiers || {})].filter((e) => e !== undefined);
  if (streams.length === 0 && others.length === 0) {
    throw new Error(`Provider ${input.id}: at least one of "api", "images", or "classifiers" is required.`);
  }
  const baseline = input.models || [];
  let dynamic = [];
  const current = () => {
    const merged = [...baseline];
    for (const model of dynamic) {
      const at = merged.findIndex((m) => modelType(m) === modelType(model) && m.id === model.id);
      if (at >= 0) merged[at] = model;
      else merged.push(model);
    }
    return merged;
  };
  const apiFor = (model) => single || (byApi && byApi[model.api]);
  const dispatch = (model, run) => {
    const impl = apiFor(model);
    return impl ? run(impl) : errorStream(model, `Provider ${input.id} has no API implementation for "${model.api}"`);
  };
  const fetchModels = input.fetchModels;
  const provider = {
    id: input.id,
    name: input.name === undefined ? input.id : input.name,
    baseUrl: input.baseUrl,
    headers: input.headers,
    auth: input.auth,
    getModels: () => current().filter((m) => modelType(m) === "chat"),
    getAllModels: current,
    refreshModels: fetchModels
      ? async (context) => {
          if (context.stored) {
            const restored = (context.stored.models || []).filter((m) => m.provider === input.id);
            if (!(await context.publish({ update: () => { dynamic = restored; } }))) return;
          }
          if (!context.allowNetwork || context.signal.aborted) return;
          const fetched = await fetchModels(context);
          if (context.signal.aborted) return;
          const refreshed = (fetched || []).filter((m) => KNOWN_MODEL_TYPES.includes(modelType(m)));
          await context.publish({ persist: { models: refreshed, checkedAt: Date.now() }, update: () => { dynamic = refreshed; } });
        }
      : undefined,
    filterModels: input.filterModels,
    filterAllModels: input.filterAllModels,
    stream: (model, context, options) => dispatch(model, (impl) => impl.stream(model, context, options)),
    streamSimple: (model, context, options) => dispatch(model, (impl) => impl.streamSimple(model, context, options)),
  };
  Object.defineProperty(provider, PROVIDER_PARTS, { value: { single, byApi }, enumerable: false });
  return provider;
}

module.exports = {
  Type,
  StringEnum,
  uuidv7,
  EventStream,
  AssistantMessageEventStream,
  createAssistantMessageEventStream,
  getSystemMessageText,
  getInitialSystemMessage,
  getCurrentTools,
  getCurrentSystemMessage,
  getCurrentSystemPrompt,
  collapseSystemMessages,
  withoutInitialSystemMessage,
  normalizeContext,
  parseStreamingJson,
  parseToolCallArguments,
  ToolCallArgumentsStream,
  calculateCost,
  stream: streamSimple,
  streamSimple,
  complete,
  completeSimple: complete,
  anthropicMessagesApi: builtinApi("anthropic-messages"),
  openAICompletionsApi: builtinApi("openai-completions"),
  openAIResponsesApi: builtinApi("openai-responses"),
  azureOpenAIResponsesApi: builtinApi("azure-openai-responses"),
  openAICodexResponsesApi: builtinApi("openai-codex-responses"),
  googleGenerativeAIApi: builtinApi("google-generative-ai"),
  googleVertexApi: builtinApi("google-vertex"),
  mistralConversationsApi: builtinApi("mistral-conversations"),
  piMessagesApi: builtinApi("pi-messages"),
  bedrockConverseStreamApi: builtinApi("bedrock-converse-stream"),
  createProvider,
  BUILTIN_API,
  PROVIDER_PARTS,
};
