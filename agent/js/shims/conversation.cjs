// Pi's `convertToLlm` and `serializeConversation` for extensions (custom compaction): the
// same conversions the host makes in Rust (engine/src/context/convert.rs,
// engine/src/compaction/serialize.rs), so a summary an extension asks for reads the
// conversation as the built-in compaction does.
"use strict";

const COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUMMARY_SUFFIX = "\n</summary>";
const BRANCH_SUMMARY_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUMMARY_SUFFIX = "</summary>";
const TOOL_RESULT_MAX_CHARS = 2000;

function bashExecutionToText(m) {
  let text = `Ran \`${m.command}\`\n`;
  text += m.output ? `\`\`\`\n${m.output}\n\`\`\`` : "(no output)";
  if (m.cancelled) text += "\n\n(command cancelled)";
  else if (m.exitCode !== null && m.exitCode !== undefined && m.exitCode !== 0) text += `\n\nCommand exited with code ${m.exitCode}`;
  if (m.truncated && m.fullOutputPath) text += `\n\n[Output truncated. Full output: ${m.fullOutputPath}]`;
  return text;
}
const userText = (text, timestamp) => ({ role: "user", content: [{ type: "text", text }], timestamp });

// Session-level messages as a provider gets them; roles a model does not know are dropped.
function convertToLlm(messages) {
  const out = [];
  for (const m of messages || []) {
    switch (m && m.role) {
      case "bashExecution":
        if (!m.excludeFromContext) out.push(userText(bashExecutionToText(m), m.timestamp));
        break;
      case "custom":
        out.push({ role: "user", content: typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content, timestamp: m.timestamp });
        break;
      case "branchSummary":
        out.push(userText(`${BRANCH_SUMMARY_PREFIX}${m.summary}${BRANCH_SUMMARY_SUFFIX}`, m.timestamp));
        break;
      case "compactionSummary":
        out.push(userText(`${COMPACTION_SUMMARY_PREFIX}${m.summary}${COMPACTION_SUMMARY_SUFFIX}`, m.timestamp));
        break;
      case "system":
      case "user":
      case "assistant":
      case "toolResult":
        out.push(m);
        break;
      default:
        break;
    }
  }
  return out;
}

const textOf = (content, separator) =>
  typeof content === "string" ? content : Array.isArray(content) ? content.filter((b) => b.type === "text").map((b) => b.text).join(separator) : "";
function truncateForSummary(text, max) {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n\n[... ${text.length - max} more characters truncated]`;
}
const formatToolCall = (b) =>
  `${b.name}(${Object.entries(b.arguments || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")})`;

// Provider-level messages as tagged plain text (`[User]: …`), so a summarizer describes
// the conversation rather than continuing it. Thinking is left out.
function serializeConversation(messages) {
  const parts = [];
  for (const m of messages || []) {
    if (m.role === "user") {
      const text = textOf(m.content, "");
      if (text) parts.push(`[User]: ${text}`);
    } else if (m.role === "assistant") {
      const blocks = Array.isArray(m.content) ? m.content : [];
      if (blocks.some((b) => b.type === "text")) parts.push(`[Assistant]: ${textOf(blocks, "\n")}`);
      const calls = blocks.filter((b) => b.type === "toolCall").map(formatToolCall);
      if (calls.length > 0) parts.push(`[Assistant tool calls]: ${calls.join("; ")}`);
    } else if (m.role === "toolResult") {
      const text = textOf(m.content, "");
      if (text) parts.push(`[Tool result]: ${truncateForSummary(text, TOOL_RESULT_MAX_CHARS)}`);
    }
  }
  return parts.join("\n\n");
}

module.exports = { convertToLlm, serializeConversation };
