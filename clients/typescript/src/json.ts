/**
 * JSON text as the contract carries it, and the key spelling of ADK objects on the wire.
 *
 * The wire names ADK's fields in snake_case (the Python client writes `model_dump` output), and
 * ADK TypeScript names them in camelCase. Free-form values (state, deltas, tool arguments and
 * responses, custom metadata, node output, routes, agent state) keep their keys exactly: the
 * paths in {@link PRESERVED_PATHS}, the same list ADK TypeScript's own event serializer uses.
 */

export type JsonObject = Record<string, unknown>;

/** Paths (keys joined by dots, array levels skipped) whose values keep their own keys. */
const PRESERVED_PATHS = new Set([
  "actions.state_delta",
  "actions.artifact_delta",
  "actions.requested_auth_configs",
  "actions.requested_tool_confirmations",
  "actions.custom_metadata",
  "actions.agent_state",
  "custom_metadata",
  "content.parts.function_call.args",
  "content.parts.function_response.response",
  "output",
  "route",
]);

// Most keys are one word: they are returned as they are, without a regular expression.
const snakeKey = (key: string): string =>
  key.toLowerCase() === key ? key : key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
// ADK's own field names recur in every event: their camelCase spelling is remembered (up to a
// bound, as keys in `extra` are anyone's).
const camelKeys = new Map<string, string>();
function camelKey(key: string): string {
  if (!key.includes("_")) {
    return key;
  }
  let camel = camelKeys.get(key);
  if (camel === undefined) {
    camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    if (camelKeys.size < 1024) camelKeys.set(key, camel);
  }
  return camel;
}

/** Sets an own property, also for the key `__proto__` (assignment would re-parent the object). */
export function setOwn(target: JsonObject, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

function convert(value: unknown, rename: (key: string) => string, path: string, snakePath: boolean): unknown {
  if (Array.isArray(value)) {
    return value.map((item) => convert(item, rename, path, snakePath));
  }
  if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) {
    return value;
  }
  const result: JsonObject = {};
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined || typeof item === "function") {
      continue;
    }
    const renamed = rename(key);
    const snake = snakePath ? key : renamed;
    const full = path === "" ? snake : `${path}.${snake}`;
    setOwn(result, renamed, PRESERVED_PATHS.has(full) ? item : convert(item, rename, full, snakePath));
  }
  return result;
}

/**
 * `value` (found at `path`, snake_case) with ADK's camelCase keys in snake_case, free-form values
 * left as they are.
 */
export function toSnake(value: JsonObject, path = ""): JsonObject {
  return PRESERVED_PATHS.has(path) ? value : (convert(value, snakeKey, path, false) as JsonObject);
}

/**
 * `value` (found at `path`, snake_case) with snake_case keys in ADK TypeScript's camelCase,
 * free-form values left as they are.
 */
export function toCamel(value: JsonObject, path = ""): JsonObject {
  return PRESERVED_PATHS.has(path) ? value : (convert(value, camelKey, path, true) as JsonObject);
}

/**
 * Compact JSON text of `value`. Refused (a `TypeError` naming `field`): numbers that are not
 * finite (JSON.stringify would silently write `null`), BigInts and cycles. `undefined` and
 * functions are left out, as JSON.stringify does.
 */
export function dumps(value: unknown, field: string): string {
  try {
    return JSON.stringify(value, (key: string, item: unknown) => {
      if (typeof item === "number" && !Number.isFinite(item)) {
        throw new TypeError(
          `${key === "" ? "the value" : `key ${JSON.stringify(key)}`} is ${item}, which JSON cannot hold`,
        );
      }
      return item;
    });
  } catch (e) {
    throw new TypeError(`${field} is not JSON: ${(e as Error).message}`, { cause: e });
  }
}

/** JSON text of an object field, or "" (absent) for an empty or missing object. */
export function dumpsObject(value: unknown, field: string): string {
  if (value === undefined || value === null) {
    return "";
  }
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${field} must be an object`);
  }
  return Object.keys(value).length === 0 ? "" : dumps(value, field);
}

/** Parses a JSON-object text field; the empty string means absent and reads as `{}`. */
export function loadsObject(text: string, field: string): JsonObject {
  if (text === "") {
    return {};
  }
  const value: unknown = JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new TypeError(`${field} holds JSON that is not an object: ${text.slice(0, 80)}`);
  }
  return value as JsonObject;
}

/** Merges `patch` into `base`: objects key by key, any other value replaced. */
export function merge(base: JsonObject, patch: JsonObject): JsonObject {
  for (const [key, value] of Object.entries(patch)) {
    const current = Object.hasOwn(base, key) ? base[key] : undefined;
    if (isObject(value) && isObject(current)) {
      merge(current, value);
    } else {
      setOwn(base, key, value);
    }
  }
  return base;
}

export function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !ArrayBuffer.isView(value);
}
