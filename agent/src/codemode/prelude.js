// Evaluated in the QuickJS VM before a codemode script (see sandbox.rs). It evaluates to a
// function that receives the host bridge and the JSON of the tools, the globals and the store,
// defines the script's globals and returns { settle, run, stalled } to the host.
//
// bridge(kind, a, b, c) takes strings only:
//   "call" / "global": id, name, JSON of the arguments (or undefined)
//   "output": "text" | "console" | "image", text or base64 data, MIME type of an image
//   "done": "1" | "0", JSON of the returned value or of the error, JSON of the store writes
// The bridge itself stays in this closure, so a script cannot call it.
(function (bridge, toolsJson, globalsJson, storeJson) {
	"use strict";
	// Captured before the script runs: a script that patches JSON or Promise must not change
	// what this prelude reports to the host.
	const stringify = JSON.stringify;
	const parse = JSON.parse;
	const promiseThen = Promise.prototype.then;
	const ErrorCtor = Error;
	const TypeErrorCtor = TypeError;
	const RangeErrorCtor = RangeError;
	const defineGlobal = (name, value) =>
		Object.defineProperty(globalThis, name, { value, enumerable: true, writable: false, configurable: false });

	const MAX_STORE_VALUE_CHARS = 262144;
	const MAX_STORE_TOTAL_CHARS = 1048576;
	const MAX_OUTPUT_CHARS = 16777216;
	const MAX_OUTPUT_ITEMS = 100000;

	const waiting = new Map();
	let nextCallId = 1;
	let finished = false;
	// exit() throws this to unwind the script after it reported success.
	const EXIT_SIGNAL = Object.freeze({});

	function done(ok, payload, writes) {
		if (finished) return;
		finished = true;
		bridge("done", ok ? "1" : "0", payload, writes);
	}

	// "Name: message" followed by the stack frames, without this prelude's frames.
	function errorText(error) {
		const head = error.message ? error.name + ": " + error.message : String(error.name);
		const frames =
			typeof error.stack === "string"
				? error.stack.split("\n").filter((line) => line.trim() !== "" && line.indexOf("codemode-prelude.js") === -1)
				: [];
		return [head].concat(frames).join("\n");
	}

	function format(value) {
		if (typeof value === "string") return value;
		if (value instanceof ErrorCtor) return errorText(value);
		if (typeof value === "number") return String(value);
		try {
			const json = stringify(value);
			return json === undefined ? String(value) : json;
		} catch (error) {
			return String(value);
		}
	}

	function describeError(error) {
		try {
			if (error instanceof ErrorCtor) {
				return stringify({ name: String(error.name), message: String(error.message), stack: errorText(error) });
			}
			return stringify({ message: String(format(error)) });
		} catch (failure) {
			return stringify({ message: "The script threw a value that cannot be described" });
		}
	}

	function makeCaller(kind, name, spread) {
		return (...args) =>
			new Promise((resolve, reject) => {
				let json;
				try {
					const value = spread ? args : args[0];
					json = value === undefined ? undefined : stringify(value);
				} catch (error) {
					reject(error);
					return;
				}
				const id = nextCallId++;
				waiting.set(id, { resolve, reject });
				bridge(kind, String(id), name, json);
			});
	}

	// tools.<identifier> and tools[<registered name>] call a tool; ALL_TOOLS lists them.
	const tools = Object.create(null);
	const allTools = [];
	for (const tool of parse(toolsJson)) {
		const call = makeCaller("call", tool.name, false);
		if (!(tool.jsName in tools)) {
			tools[tool.jsName] = call;
			allTools.push(Object.freeze({ name: tool.jsName, description: tool.description }));
		}
		if (!(tool.name in tools)) tools[tool.name] = call;
	}
	Object.freeze(tools);
	Object.freeze(allTools);

	// A missing member throws an error naming close matches instead of a later "not a function".
	const squash = (name) => name.toLowerCase().replace(/[^a-z0-9]/g, "");
	function guarded(target, label, names, hint) {
		return new Proxy(target, {
			get(object, property, receiver) {
				if (
					typeof property !== "string" ||
					property in object ||
					property in Object.prototype ||
					property === "then" ||
					property === "toJSON"
				) {
					return Reflect.get(object, property, receiver);
				}
				const wanted = squash(property);
				const same = names.filter((name) => squash(name) === wanted);
				const close =
					same.length > 0
						? same
						: names.filter((name) => wanted && (squash(name).includes(wanted) || wanted.includes(squash(name))));
				let message = label + "." + property + " does not exist.";
				if (close.length > 0) {
					message += " Did you mean " + close.slice(0, 5).map((name) => label + "." + name).join(", ") + "?";
				} else if (names.length <= 20) {
					message += " Available: " + names.join(", ") + ".";
				}
				if (hint) message += " " + hint;
				message += ' Check for a member with "' + property + '" in ' + label + ".";
				throw new TypeErrorCtor(message);
			},
		});
	}
	const toolsProxy = guarded(
		tools,
		"tools",
		allTools.map((tool) => tool.name),
		"ALL_TOOLS lists every tool; searchTools(query) finds tools by topic.",
	);

	const namespaces = new Map();
	for (const global of parse(globalsJson)) {
		const call = makeCaller("global", global.name, global.spread);
		const dot = global.name.indexOf(".");
		if (dot === -1) {
			defineGlobal(global.name, call);
			continue;
		}
		const namespace = global.name.slice(0, dot);
		if (!namespaces.has(namespace)) namespaces.set(namespace, Object.create(null));
		namespaces.get(namespace)[global.name.slice(dot + 1)] = call;
	}
	for (const [namespace, members] of namespaces) {
		Object.freeze(members);
		defineGlobal(namespace, guarded(members, namespace, Object.keys(members)));
	}

	// The store: key -> JSON text; sizes count the key and the JSON.
	const stored = new Map(Object.entries(parse(storeJson)));
	const writes = new Map();
	let storedChars = 0;
	for (const [key, json] of stored) storedChars += key.length + json.length;
	const STORE_HINT =
		"store() is for small state such as IDs or summaries. Show images with image(), keep large data in variables, or write it to a file with a tool.";

	function requireKey(fn, key) {
		if (typeof key !== "string") throw new TypeErrorCtor(fn + "() key must be a string");
	}

	function store(key, value) {
		requireKey("store", key);
		const before = stored.has(key) ? key.length + stored.get(key).length : 0;
		if (value === undefined) {
			stored.delete(key);
			storedChars -= before;
			writes.set(key, undefined);
			return;
		}
		let json;
		try {
			json = stringify(value);
		} catch (error) {
			throw new TypeErrorCtor("store(" + stringify(key) + ") value is not JSON-serializable: " + format(error));
		}
		if (json === undefined) throw new TypeErrorCtor("store(" + stringify(key) + ") value is not JSON-serializable");
		if (json.length > MAX_STORE_VALUE_CHARS) {
			throw new RangeErrorCtor(
				"store(" +
					stringify(key) +
					") value has " +
					json.length +
					" characters of JSON, more than the limit of " +
					MAX_STORE_VALUE_CHARS +
					". " +
					STORE_HINT,
			);
		}
		const after = storedChars - before + key.length + json.length;
		if (after > MAX_STORE_TOTAL_CHARS) {
			throw new RangeErrorCtor(
				"store is full: stored values would exceed " +
					MAX_STORE_TOTAL_CHARS +
					" characters of JSON. Delete keys with store(key, undefined). " +
					STORE_HINT,
			);
		}
		stored.set(key, json);
		storedChars = after;
		writes.set(key, json);
	}

	function load(key) {
		requireKey("load", key);
		const json = stored.get(key);
		return json === undefined ? undefined : parse(json);
	}

	// [[key, json]] for a write, [[key]] for a delete.
	function writesJson() {
		const entries = [];
		for (const [key, json] of writes) entries.push(json === undefined ? [key] : [key, json]);
		return stringify(entries);
	}

	let outputChars = 0;
	let outputItems = 0;
	function emit(kind, data, mimeType) {
		if (finished) return;
		outputChars += data.length;
		outputItems++;
		if (outputChars > MAX_OUTPUT_CHARS || outputItems > MAX_OUTPUT_ITEMS) {
			const error = new RangeErrorCtor(
				"script output exceeded the limit of " +
					MAX_OUTPUT_CHARS +
					" characters or " +
					MAX_OUTPUT_ITEMS +
					" text(), image(), and console calls. Print a summary instead, or write large data to a file with a tool.",
			);
			done(false, describeError(error));
			throw error;
		}
		bridge("output", kind, data, mimeType);
	}

	function text(value) {
		let rendered;
		try {
			if (value === undefined || value === null || (typeof value !== "object" && typeof value !== "function")) {
				rendered = String(value);
			} else {
				const json = stringify(value);
				rendered = json === undefined ? String(value) : json;
			}
		} catch (error) {
			throw new TypeErrorCtor(error instanceof ErrorCtor ? error.message : String(error));
		}
		emit("text", rendered);
	}

	const IMAGE_EXPECTS =
		'image expects a non-empty image URL string, an object with image_url, or an image block { type: "image", data, mimeType }';
	function imageUrl(value) {
		if (typeof value === "string") return value;
		if (typeof value !== "object" || value === null || Array.isArray(value)) throw new TypeErrorCtor(IMAGE_EXPECTS);
		if (value.image_url !== undefined) {
			if (typeof value.image_url !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
			return value.image_url;
		}
		if (typeof value.type !== "string") throw new TypeErrorCtor(IMAGE_EXPECTS);
		if (value.type !== "image") throw new TypeErrorCtor('image only accepts image blocks, got "' + value.type + '"');
		if (typeof value.data !== "string" || value.data === "") throw new TypeErrorCtor("image expected image block data");
		if (value.data.toLowerCase().startsWith("data:")) return value.data;
		return "data:;base64," + value.data;
	}

	// Base64 prefixes of the PNG, JPEG, GIF and WebP signatures: the detected type wins over the
	// declared one, since providers reject mismatches.
	const SIGNATURES = [
		["image/png", /^iVBORw0KGg/],
		["image/jpeg", /^[/]9j[/](?!9)/],
		["image/gif", /^R0lGOD[dl]h/],
		["image/webp", /^UklG.{8}RUJQ/],
	];
	function image(value) {
		const url = imageUrl(value);
		if (url === "") throw new TypeErrorCtor(IMAGE_EXPECTS);
		const colon = url.indexOf(":");
		const scheme = colon === -1 ? "" : url.slice(0, colon).toLowerCase();
		if (scheme === "http" || scheme === "https") {
			throw new TypeErrorCtor("remote image URLs are not supported in tool outputs. Pass a base64 data URI instead");
		}
		const comma = url.indexOf(",");
		const params = comma === -1 ? [] : url.slice(colon + 1, comma).split(";");
		if (scheme !== "data" || comma === -1 || params.slice(1).every((part) => part.toLowerCase() !== "base64")) {
			throw new TypeErrorCtor("invalid image output. Pass a base64 data URI instead");
		}
		const data = url.slice(comma + 1).replace(/\s+/g, "");
		if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(data)) {
			throw new TypeErrorCtor("invalid image output. The image data is not valid base64 (truncated or corrupted?)");
		}
		const head = data.slice(0, 16);
		const found = SIGNATURES.find((entry) => entry[1].test(head));
		if (!found) throw new TypeErrorCtor("invalid image output. The image data is not a PNG, JPEG, GIF, or WebP image");
		emit("image", data, found[0]);
	}

	function exit() {
		let json;
		try {
			json = writesJson();
		} catch (error) {
			done(false, describeError(error));
			throw EXIT_SIGNAL;
		}
		done(true, undefined, json);
		throw EXIT_SIGNAL;
	}

	const consoleObject = {};
	for (const level of ["log", "info", "warn", "error", "debug"]) {
		consoleObject[level] = (...args) => emit("console", args.map(format).join(" "));
	}
	Object.freeze(consoleObject);

	defineGlobal("store", store);
	defineGlobal("load", load);
	defineGlobal("tools", toolsProxy);
	defineGlobal("ALL_TOOLS", allTools);
	defineGlobal("console", consoleObject);
	defineGlobal("text", text);
	defineGlobal("image", image);
	defineGlobal("exit", exit);

	return {
		settle(id, ok, payload) {
			const key = Number(id);
			const entry = waiting.get(key);
			if (!entry) return;
			waiting.delete(key);
			if (!ok) {
				entry.reject(new ErrorCtor(payload));
				return;
			}
			let value;
			try {
				value = payload === undefined ? undefined : parse(payload);
			} catch (error) {
				entry.reject(error);
				return;
			}
			entry.resolve(value);
		},
		run(fn) {
			let promise;
			try {
				promise = fn(toolsProxy, consoleObject);
			} catch (error) {
				if (error !== EXIT_SIGNAL) done(false, describeError(error));
				return;
			}
			promiseThen.call(
				promise,
				(value) => {
					let json;
					try {
						json = value === undefined ? undefined : stringify(value);
					} catch (error) {
						done(false, describeError(error));
						return;
					}
					done(true, json, writesJson());
				},
				(error) => {
					if (error !== EXIT_SIGNAL) done(false, describeError(error));
				},
			);
		},
		// No timers or I/O exist here: a script that waits while no call is pending never resumes.
		stalled() {
			if (finished || waiting.size > 0) return false;
			done(
				false,
				stringify({
					name: "Error",
					message:
						"The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here.",
				}),
			);
			return true;
		},
	};
})
