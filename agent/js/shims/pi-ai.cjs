// A small stand-in for `@earendil-works/pi-ai` as extensions use it: the schema builders and
// a few helpers. Provider APIs (streaming, model registries) are not available to extensions
// run by the Rust host.
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
module.exports = { Type, StringEnum, uuidv7 };
