#!/usr/bin/env node
// Regenerates agent/src/llm/catalog.json, the built-in provider and model catalog, from the
// compiled catalog that ships in Pi's npm package @earendil-works/pi-ai.
//
// Usage (Node >= 22, the version Pi 1.6.0 needs):
//   node scripts/gen-model-catalog.mjs /path/to/node_modules/@earendil-works/pi-ai \
//     > agent/src/llm/catalog.json
//
// Only facts are taken over: each provider's id, name, default base URL and the environment
// variables Pi reads its API key from, and each chat model's catalog entry. Image and classifier models are
// left out: `pi --list-models` shows chat models only.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const pkgDir = resolve(process.argv[2] ?? "node_modules/@earendil-works/pi-ai");
const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const load = (rel) => import(pathToFileURL(join(pkgDir, "dist", rel)).href);

const { builtinProviders } = await load("providers/all.js");
const { findEnvKeys } = await load("env-api-keys.js");
const manifest = JSON.parse(readFileSync(join(pkgDir, "dist/providers/data/.manifest.json"), "utf8"));

// The model fields our Rust `Model` understands; anything else (gateway routing tables,
// input limits, …) stays out of the data file.
const MODEL_FIELDS = [
  "id", "name", "api", "baseUrl", "reasoning", "input", "cost", "contextWindow", "maxTokens",
  "headers", "compat", "thinkingLevelMap",
];

/**
 * The environment variables Pi reads `provider`'s API key from, in lookup order: Pi's own
 * `findEnvKeys` asked with an environment in which every variable is set.
 */
function envVarsOf(providerId) {
  const everySet = new Proxy({}, { get: (_t, name) => (typeof name === "string" ? "set" : undefined) });
  return findEnvKeys(providerId, everySet) ?? [];
}

/**
 * Variables besides the key that `provider` cannot work without (Cloudflare's account and
 * gateway ids): those its resolver asks for when only the key is set and fails, and with
 * which it then succeeds.
 */
async function requiredEnvOf(provider, keyVars) {
  const resolve = provider.auth?.apiKey?.resolve;
  if (keyVars.length === 0 || !resolve) return [];
  const attempt = async (set) => {
    const asked = [];
    const ctx = {
      env: async (name) => {
        if (!asked.includes(name)) asked.push(name);
        return set.has(name) ? "set" : undefined;
      },
    };
    let resolved;
    try {
      resolved = await resolve({ ctx, credential: undefined, signal: new AbortController().signal });
    } catch {
      resolved = undefined;
    }
    return { resolved, asked };
  };
  const keyOnly = await attempt(new Set(keyVars));
  if (keyOnly.resolved) return [];
  const extras = keyOnly.asked.filter((name) => !keyVars.includes(name));
  const withExtras = await attempt(new Set([...keyVars, ...extras]));
  return withExtras.resolved ? extras : [];
}

/**
 * What `provider`'s API-key login (`pi auth login <p> --api-key`) asks, in order: each prompt's
 * text, whether it is a secret (read without echo), and where the answer goes in the stored
 * credential (`key`, or `env.NAME`). Found by running Pi's own `login` with an interaction
 * that answers prompt i with a marker. Logins that ask for a choice (Vertex, Bedrock) are
 * recorded as `interactive: true` with no prompts; providers without one get nothing.
 */
async function apiKeyLoginOf(provider) {
  const login = provider.auth?.apiKey?.login;
  if (!login) return undefined;
  const asked = [];
  const interaction = {
    signal: new AbortController().signal,
    notify: () => {},
    prompt: async (p) => {
      if (p.type !== "secret" && p.type !== "text") throw new Error("choice");
      asked.push({ message: p.message, secret: p.type === "secret" });
      return `\u0001${asked.length - 1}`;
    },
  };
  let credential;
  try {
    credential = await login(interaction);
  } catch {
    return { interactive: true, prompts: [] };
  }
  const prompts = asked.map((p, i) => {
    const marker = `\u0001${i}`;
    const env = Object.entries(credential.env ?? {}).find(([, v]) => v === marker);
    return { ...p, into: credential.key === marker ? "key" : env ? `env.${env[0]}` : "none" };
  });
  return { interactive: false, prompts };
}

const providers = [];
for (const provider of builtinProviders()) {
  const chatModels = provider.getModels();
  if (chatModels.length === 0) continue;
  // The most common api/baseUrl become the provider defaults; models only carry differences.
  const mostCommon = (key) => {
    const counts = new Map();
    for (const m of chatModels) counts.set(m[key], (counts.get(m[key]) ?? 0) + 1);
    return [...counts.entries()].sort((a, b) => b[1] - a[1])[0][0];
  };
  const api = mostCommon("api");
  const baseUrl = provider.baseUrl ?? mostCommon("baseUrl");
  const models = chatModels.map((m) => {
    const out = {};
    for (const key of MODEL_FIELDS) {
      if (m[key] === undefined) continue;
      if (key === "api" && m.api === api) continue;
      if (key === "baseUrl" && m.baseUrl === baseUrl) continue;
      out[key] = m[key];
    }
    return out;
  });
  providers.push({
    id: provider.id,
    name: provider.name,
    api,
    baseUrl,
    envVars: envVarsOf(provider.id),
    requiredEnv: await requiredEnvOf(provider, envVarsOf(provider.id)),
    oauth: Boolean(provider.auth?.oauth),
    apiKeyLogin: await apiKeyLoginOf(provider),
    models,
  });
}

const catalog = {
  source: `${pkg.name}@${pkg.version}`,
  catalogGeneratedAt: manifest.generatedAt,
  extractedAt: new Date().toISOString().slice(0, 10),
  providers,
};
// One provider header and one model per line: small, and readable in a diff.
const lines = ["{"];
for (const key of ["source", "catalogGeneratedAt", "extractedAt"]) {
  lines.push(`  ${JSON.stringify(key)}: ${JSON.stringify(catalog[key])},`);
}
lines.push('  "providers": [');
catalog.providers.forEach((provider, i) => {
  const { models, ...header } = provider;
  const head = JSON.stringify(header);
  lines.push(`    ${head.slice(0, -1)}, "models": [`);
  models.forEach((model, j) => lines.push(`      ${JSON.stringify(model)}${j + 1 < models.length ? "," : ""}`));
  lines.push(`    ]}${i + 1 < catalog.providers.length ? "," : ""}`);
});
lines.push("  ]", "}");
process.stdout.write(lines.join("\n") + "\n");
