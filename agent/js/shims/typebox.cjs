// A small stand-in for `typebox` (1.x): builders that return the same JSON Schema objects
// (same key order) for what extensions declare as tool parameters. Validation is done by the
// Rust host against the schema, so no compiler or Value module is needed here.
"use strict";
const OPTIONAL = "~optional";

function withOptions(schema, options) {
  return Object.assign(schema, options || {});
}
function markOptional(schema) {
  Object.defineProperty(schema, OPTIONAL, { value: true, enumerable: false, configurable: true });
  return schema;
}
const Type = {
  String: (o) => withOptions({ type: "string" }, o),
  Number: (o) => withOptions({ type: "number" }, o),
  Integer: (o) => withOptions({ type: "integer" }, o),
  Boolean: (o) => withOptions({ type: "boolean" }, o),
  Null: (o) => withOptions({ type: "null" }, o),
  Any: (o) => withOptions({}, o),
  Unknown: (o) => withOptions({}, o),
  Literal: (value, o) => withOptions({ type: typeof value === "number" ? "number" : typeof value === "boolean" ? "boolean" : "string", const: value }, o),
  Array: (items, o) => withOptions({ type: "array", items }, o),
  Union: (anyOf, o) => withOptions({ anyOf }, o),
  Intersect: (allOf, o) => withOptions({ allOf }, o),
  Enum: (values, o) => withOptions({ enum: Object.values(values) }, o),
  Record: (_key, value, o) => withOptions({ type: "object", patternProperties: { "^.*$": value } }, o),
  Tuple: (items, o) => withOptions({ type: "array", prefixItems: items, minItems: items.length, maxItems: items.length }, o),
  Optional: (schema) => markOptional(schema),
  Readonly: (schema) => schema,
  Ref: (ref, o) => withOptions({ $ref: typeof ref === "string" ? ref : ref.$id }, o),
  Unsafe: (o) => withOptions({}, o),
  Object: (properties, o) => {
    const required = Object.keys(properties).filter((k) => !(properties[k] && properties[k][OPTIONAL]));
    const schema = { type: "object" };
    if (required.length > 0) schema.required = required;
    schema.properties = properties;
    return withOptions(schema, o);
  },
  Partial: (schema) => {
    const copy = { ...schema };
    delete copy.required;
    return copy;
  },
};
module.exports = { Type, default: Type, Kind: Symbol.for("TypeBox.Kind") };
