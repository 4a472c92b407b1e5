/**
 * JSON text as the contract carries it, and the key spelling of ADK objects on the wire.
 *
 * The wire names ADK's fields in snake_case (the Python client writes `model_dump` output), and
 * ADK TypeScript names them in camelCase. Free-form values (state, deltas, tool arguments and
 * responses, custom metadata, node output, routes, agent state) keep their keys exactly: the
 * paths in {@link PRESERVED_PATHS}, the same list ADK TypeScript's own event serializer uses.
 */
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
const snakeKey = (key) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelKey = (key) => key.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
/** Sets an own property, also for the key `__proto__` (assignment would re-parent the object). */
export function setOwn(target, key, value) {
    if (key === "__proto__") {
        Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
    }
    else {
        target[key] = value;
    }
}
function convert(value, rename, path, snakePath) {
    if (Array.isArray(value)) {
        return value.map((item) => convert(item, rename, path, snakePath));
    }
    if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) {
        return value;
    }
    const result = {};
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
/** `value` with ADK's camelCase keys in snake_case, free-form values left as they are. */
export function toSnake(value, path = "") {
    return convert(value, snakeKey, path, false);
}
/** `value` with snake_case keys in ADK TypeScript's camelCase, free-form values left as they are. */
export function toCamel(value, path = "") {
    return convert(value, camelKey, path, true);
}
/**
 * Compact JSON text of `value`. Refused (a `TypeError` naming `field`): numbers that are not
 * finite (JSON.stringify would silently write `null`), BigInts and cycles. `undefined` and
 * functions are left out, as JSON.stringify does.
 */
export function dumps(value, field) {
    try {
        return JSON.stringify(value, (key, item) => {
            if (typeof item === "number" && !Number.isFinite(item)) {
                throw new TypeError(`${key === "" ? "the value" : `key ${JSON.stringify(key)}`} is ${item}, which JSON cannot hold`);
            }
            return item;
        });
    }
    catch (e) {
        throw new TypeError(`${field} is not JSON: ${e.message}`, { cause: e });
    }
}
/** JSON text of an object field, or "" (absent) for an empty or missing object. */
export function dumpsObject(value, field) {
    if (value === undefined || value === null) {
        return "";
    }
    if (typeof value !== "object" || Array.isArray(value)) {
        throw new TypeError(`${field} must be an object`);
    }
    return Object.keys(value).length === 0 ? "" : dumps(value, field);
}
/** Parses a JSON-object text field; the empty string means absent and reads as `{}`. */
export function loadsObject(text, field) {
    if (text === "") {
        return {};
    }
    const value = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
        throw new TypeError(`${field} holds JSON that is not an object: ${text.slice(0, 80)}`);
    }
    return value;
}
/** Merges `patch` into `base`: objects key by key, any other value replaced. */
export function merge(base, patch) {
    for (const [key, value] of Object.entries(patch)) {
        const current = Object.hasOwn(base, key) ? base[key] : undefined;
        if (isObject(value) && isObject(current)) {
            merge(current, value);
        }
        else {
            setOwn(base, key, value);
        }
    }
    return base;
}
export function isObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value) && !ArrayBuffer.isView(value);
}
