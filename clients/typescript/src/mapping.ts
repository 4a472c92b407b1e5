/**
 * Lossless mapping between ADK TypeScript's objects (`Event`, genai `Content`, `Session`) and the
 * `adk.session.v1` messages, in the same wire form as the project's Python client, so that
 * sessions written in one language read back in the other.
 *
 * An event is first put in ADK's snake_case form ({@link toSnake}); its typed fields fill the
 * message's typed fields and whatever has no typed field (`output`, `nodeInfo`, `route`,
 * transcriptions, a second data field of a part, a value of the wrong type for its field...)
 * goes, still snake_case, into the `extra` JSON object of the level it belongs to (event,
 * actions, part, function call or response). Reading builds ADK's camelCase objects straight
 * from the typed fields (whose names are ADK's) and merges each level's `extra`, renamed to
 * camelCase, back over them (objects key by key).
 */
import { createEvent, type Event } from "@google/adk";
import type { Content as GenaiContent } from "@google/genai";
import {
  type Content,
  type EventActions,
  Event as EventMessage,
  type FunctionCall,
  type FunctionResponse,
  type Part,
} from "./gen/adk/session/v1/session.js";
import { dumps, dumpsObject, isObject, loadsObject, merge, setOwn, toCamel, toSnake, type JsonObject } from "./json.js";
import { toMillis, toTimestamp } from "./timestamps.js";

type Camel<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<Camel<T>>}` : S;
const camel = <S extends string>(name: S): Camel<S> =>
  name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()) as Camel<S>;
/** Each snake_case name with its camelCase spelling (the message's field), worked out once. */
const named = <S extends string>(names: readonly S[]): readonly (readonly [S, Camel<S>])[] =>
  names.map((name) => [name, camel(name)] as const);

const EVENT_OPTIONAL_STRINGS = named(["branch", "error_code", "error_message", "model_version", "finish_reason"]);
const EVENT_OPTIONAL_BOOLS = named(["partial", "turn_complete", "interrupted"]);
const EVENT_JSON = named(["custom_metadata", "usage_metadata", "grounding_metadata", "citation_metadata"]);
const ACTIONS_OPTIONAL_STRINGS = named(["transfer_to_agent", "transfer_reason", "rewind_before_invocation_id"]);
const ACTIONS_OPTIONAL_BOOLS = named(["skip_summarization", "escalate", "end_of_agent"]);
// EventActions maps ADK always has (createEventActions makes them {}): "" on the wire when empty.
const ACTIONS_JSON = named(["state_delta", "requested_auth_configs", "requested_tool_confirmations"]);

/** Takes `data[name]` out of `data` when `accept` says it fits a typed field. */
function take<T>(data: JsonObject, name: string, accept: (value: unknown) => value is T): T | undefined {
  const value = data[name];
  if (!accept(value)) {
    return undefined;
  }
  Reflect.deleteProperty(data, name);
  return value;
}

const isString = (v: unknown): v is string => typeof v === "string";
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isNumber = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isInt64Map = (v: unknown): v is Record<string, number> =>
  isObject(v) && Object.values(v).every((n) => Number.isSafeInteger(n));

function extraText(rest: JsonObject, field: string): string {
  return Object.keys(rest).length === 0 ? "" : dumps(rest, field);
}

// --------------------------------------------------------------------------------------------
// ADK -> wire

/** The `adk.session.v1.Event` for an ADK event (`sequence` left 0 for the server). */
export function eventToProto(event: Event): EventMessage {
  const data = toSnake(event as unknown as JsonObject);
  const message = EventMessage.create({
    id: take(data, "id", isString) ?? "",
    invocationId: take(data, "invocation_id", isString) ?? "",
    author: take(data, "author", isString) ?? "",
  });
  for (const [name, field] of EVENT_OPTIONAL_STRINGS) {
    message[field] = take(data, name, isString);
  }
  for (const [name, field] of EVENT_OPTIONAL_BOOLS) {
    message[field] = take(data, name, isBool);
  }
  for (const [name, field] of EVENT_JSON) {
    const value = take(data, name, isObject);
    message[field] = value === undefined ? "" : dumps(value, `Event.${field}`);
  }
  const timestamp = take(data, "timestamp", isNumber);
  message.timestamp = timestamp === undefined ? undefined : toTimestamp(timestamp);
  // createEvent always gives [], which the wire cannot tell from absent.
  const ids = take(data, "long_running_tool_ids", isStrings);
  message.longRunningToolIds = ids ?? [];
  const content = take(data, "content", isObject);
  if (content !== undefined) {
    message.content = contentMessage(content);
  }
  const actions = take(data, "actions", isObject);
  if (actions !== undefined) {
    message.actions = actionsMessage(actions);
  }
  message.extra = extraText(data, "Event.extra");
  return message;
}

function actionsMessage(data: JsonObject): EventActions {
  // ADK TypeScript has no "removed" marker: the field is never sent (see the README).
  delete data["removed_state_keys"];
  const message: EventActions = {
    stateDelta: "",
    artifactDelta: {},
    requestedAuthConfigs: "",
    requestedToolConfirmations: "",
    compaction: undefined,
    agentState: "",
    extra: "",
    removedStateKeys: [],
  };
  for (const [name, field] of ACTIONS_OPTIONAL_STRINGS) {
    message[field] = take(data, name, isString);
  }
  for (const [name, field] of ACTIONS_OPTIONAL_BOOLS) {
    message[field] = take(data, name, isBool);
  }
  for (const [name, field] of ACTIONS_JSON) {
    message[field] = dumpsObject(take(data, name, isObject), `EventActions.${field}`);
  }
  const agentState = take(data, "agent_state", isObject);
  message.agentState = agentState === undefined ? "" : dumps(agentState, "EventActions.agentState");
  message.artifactDelta = take(data, "artifact_delta", isInt64Map) ?? {};
  const compaction = data["compaction"];
  if (isObject(compaction)) {
    const start = take(compaction, "start_timestamp", isNumber);
    const end = take(compaction, "end_timestamp", isNumber);
    const content = take(compaction, "compacted_content", isObject);
    message.compaction = {
      startTimestamp: start === undefined ? undefined : toTimestamp(start),
      endTimestamp: end === undefined ? undefined : toTimestamp(end),
      compactedContent: content === undefined ? undefined : contentMessage(content),
    };
    if (Object.keys(compaction).length === 0) {
      delete data["compaction"];
    }
  }
  message.extra = extraText(data, "EventActions.extra");
  return message;
}

/** The `adk.session.v1.Content` for a genai Content. */
export function contentToProto(content: GenaiContent): Content {
  return contentMessage(toSnake(content as JsonObject, "content"));
}

function contentMessage(data: JsonObject): Content {
  const parts = Array.isArray(data["parts"]) ? data["parts"] : [];
  return {
    role: isString(data["role"]) ? data["role"] : undefined,
    parts: parts.filter(isObject).map(partMessage),
  };
}

const DATA_KINDS = [
  "text",
  "inline_data",
  "file_data",
  "function_call",
  "function_response",
  "executable_code",
  "code_execution_result",
] as const;

function partMessage(source: JsonObject): Part {
  const data = { ...source };
  const message: Part = { data: undefined, extra: "" };
  // The contract's oneof holds one data field; genai allows several, and any further one (rare)
  // travels in extra.
  for (const kind of DATA_KINDS) {
    const value = data[kind];
    if (kind === "text") {
      if (isString(value)) {
        message.data = { $case: "text", value };
        Reflect.deleteProperty(data, kind);
        break;
      }
      continue;
    }
    if (!isObject(value)) {
      continue;
    }
    const fields = { ...value };
    Reflect.deleteProperty(data, kind);
    if (kind === "function_call" || kind === "function_response") {
      message.data = callMessage(kind, fields);
    } else if (kind === "inline_data") {
      const bytes = take(fields, "data", isString);
      message.data = {
        $case: "inlineData",
        value: {
          data: bytes === undefined ? undefined : Buffer.from(bytes, "base64"),
          mimeType: take(fields, "mime_type", isString),
          displayName: take(fields, "display_name", isString),
        },
      };
    } else if (kind === "file_data") {
      message.data = {
        $case: "fileData",
        value: {
          fileUri: take(fields, "file_uri", isString),
          mimeType: take(fields, "mime_type", isString),
          displayName: take(fields, "display_name", isString),
        },
      };
    } else if (kind === "executable_code") {
      message.data = {
        $case: "executableCode",
        value: {
          code: take(fields, "code", isString),
          language: take(fields, "language", isString),
          id: take(fields, "id", isString),
        },
      };
    } else {
      message.data = {
        $case: "codeExecutionResult",
        value: {
          outcome: take(fields, "outcome", isString),
          output: take(fields, "output", isString),
          id: take(fields, "id", isString),
        },
      };
    }
    if (Object.keys(fields).length > 0) {
      // Fields of the data message the contract does not name.
      setOwn(data, kind, fields);
    }
    break;
  }
  message.thought = take(data, "thought", isBool);
  const signature = take(data, "thought_signature", isString);
  message.thoughtSignature = signature === undefined ? undefined : Buffer.from(signature, "base64");
  message.extra = extraText(data, "Part.extra");
  return message;
}

function callMessage(
  kind: "function_call" | "function_response",
  data: JsonObject,
): Extract<Part["data"], { $case: "functionCall" | "functionResponse" }> {
  const payloadName = kind === "function_call" ? "args" : "response";
  const payload = take(data, payloadName, isObject);
  const common = {
    id: take(data, "id", isString),
    name: take(data, "name", isString),
    willContinue: take(data, "will_continue", isBool),
  };
  const payloadText = payload === undefined ? "" : dumps(payload, `${camel(kind)}.${payloadName}`);
  const extra = extraText(data, `${camel(kind)}.extra`);
  if (kind === "function_call") {
    const value: FunctionCall = { ...common, args: payloadText, extra };
    return { $case: "functionCall", value };
  }
  const value: FunctionResponse = { ...common, response: payloadText, extra };
  return { $case: "functionResponse", value };
}

// --------------------------------------------------------------------------------------------
// wire -> ADK

// ADK's brand of its events (the `Symbol.for("google.adk.*")` convention of its guards), which
// `createEvent` adds to a copy of its argument. Adding a symbol-keyed property to a fresh copy
// turns it into a slow dictionary-mode object in V8, which cost most of a 1,000-event read; an
// argument that already holds the brand and every field `createEvent` sets is copied as a fast
// object, into the same event.
const EVENT_BRAND = Symbol.for("google.adk.event");

/** The ADK event a message holds, every field as it was sent. */
export function eventFromProto(message: EventMessage): Event {
  const data: JsonObject = {
    [EVENT_BRAND]: true,
    id: message.id,
    invocationId: message.invocationId,
    author: message.author === "" ? undefined : message.author,
    branch: undefined,
    timestamp: message.timestamp === undefined ? undefined : toMillis(message.timestamp),
    longRunningToolIds: [...message.longRunningToolIds],
    actions: message.actions === undefined ? undefined : actionsData(message.actions),
  };
  for (const [, field] of EVENT_OPTIONAL_STRINGS) {
    const value = message[field];
    if (value !== undefined) data[field] = value;
  }
  for (const [, field] of EVENT_OPTIONAL_BOOLS) {
    const value = message[field];
    if (value !== undefined) data[field] = value;
  }
  for (const [name, field] of EVENT_JSON) {
    const text = message[field];
    if (text !== "") data[field] = toCamel(loadsObject(text, `Event.${field}`), name);
  }
  if (message.content !== undefined) {
    data["content"] = contentData(message.content, "content");
  }
  if (message.extra !== "") {
    merge(data, toCamel(loadsObject(message.extra, "Event.extra")));
  }
  return createEvent(data);
}

function actionsData(message: EventActions): JsonObject {
  const data: JsonObject = {};
  for (const [, field] of ACTIONS_OPTIONAL_STRINGS) {
    const value = message[field];
    if (value !== undefined) data[field] = value;
  }
  for (const [, field] of ACTIONS_OPTIONAL_BOOLS) {
    const value = message[field];
    if (value !== undefined) data[field] = value;
  }
  // Free-form values (PRESERVED_PATHS): their keys are the caller's own.
  for (const [, field] of ACTIONS_JSON) {
    data[field] = loadsObject(message[field], `EventActions.${field}`);
  }
  if (message.agentState !== "") {
    data["agentState"] = loadsObject(message.agentState, "EventActions.agentState");
  }
  data["artifactDelta"] = { ...message.artifactDelta };
  if (message.compaction !== undefined) {
    const compaction: JsonObject = {};
    const { startTimestamp, endTimestamp, compactedContent } = message.compaction;
    if (startTimestamp !== undefined) compaction["startTimestamp"] = toMillis(startTimestamp);
    if (endTimestamp !== undefined) compaction["endTimestamp"] = toMillis(endTimestamp);
    if (compactedContent !== undefined) {
      compaction["compactedContent"] = contentData(compactedContent, "actions.compaction.compacted_content");
    }
    data["compaction"] = compaction;
  }
  if (message.removedStateKeys.length > 0) {
    // Kept for the reader; the session's state already lacks these keys.
    data["removedStateKeys"] = [...message.removedStateKeys];
  }
  return message.extra === ""
    ? data
    : merge(data, toCamel(loadsObject(message.extra, "EventActions.extra"), "actions"));
}

/** The genai Content a message holds. */
export function contentFromProto(message: Content): GenaiContent {
  return contentData(message, "content");
}

/** A genai Content in ADK's spelling; `path` (snake_case) places its free-form values. */
function contentData(message: Content, path: string): JsonObject {
  const data: JsonObject = {};
  if (message.role !== undefined) {
    data["role"] = message.role;
  }
  if (message.parts.length > 0) {
    const partsPath = `${path}.parts`;
    data["parts"] = message.parts.map((part) => partData(part, partsPath));
  }
  return data;
}

/** The fields of `source` that are set (the message's names are genai's). */
function defined(source: object): JsonObject {
  const data: JsonObject = {};
  for (const [field, value] of Object.entries(source)) {
    if (value !== undefined) data[field] = value;
  }
  return data;
}

function partData(message: Part, path: string): JsonObject {
  const data: JsonObject = {};
  const part = message.data;
  switch (part?.$case) {
    case "text":
      data["text"] = part.value;
      break;
    case "inlineData": {
      const { data: bytes, ...rest } = part.value;
      data["inlineData"] = { ...(bytes === undefined ? {} : { data: bytes.toString("base64") }), ...defined(rest) };
      break;
    }
    case "fileData":
    case "executableCode":
    case "codeExecutionResult":
      data[part.$case] = defined(part.value);
      break;
    case "functionCall":
    case "functionResponse": {
      const call = part.value;
      const [kind, payloadName, payloadText] =
        part.$case === "functionCall"
          ? (["function_call", "args", part.value.args] as const)
          : (["function_response", "response", part.value.response] as const);
      const callData = defined({ id: call.id, name: call.name, willContinue: call.willContinue });
      // The payload is free-form (PRESERVED_PATHS): its keys are the caller's own.
      if (payloadText !== "") {
        callData[payloadName] = loadsObject(payloadText, `${part.$case}.${payloadName}`);
      }
      data[part.$case] =
        call.extra === ""
          ? callData
          : merge(callData, toCamel(loadsObject(call.extra, `${part.$case}.extra`), `${path}.${kind}`));
      break;
    }
    case undefined:
      break;
  }
  if (message.thought !== undefined) {
    data["thought"] = message.thought;
  }
  if (message.thoughtSignature !== undefined) {
    data["thoughtSignature"] = message.thoughtSignature.toString("base64");
  }
  return message.extra === "" ? data : merge(data, toCamel(loadsObject(message.extra, "Part.extra"), path));
}

/** The events of a memory write: those with content, with what memory-svc reads of them. */
export function memoryEventsToProto(events: readonly Event[]): EventMessage[] {
  return events.filter((event) => event.content !== undefined).map(memoryEventToProto);
}

/** One event as memory-svc reads it: id, author, content (if any) and time. */
export function memoryEventToProto(event: Event): EventMessage {
  const message = EventMessage.create({ id: event.id, author: event.author ?? "" });
  message.content = event.content === undefined ? undefined : contentToProto(event.content);
  message.timestamp = toTimestamp(event.timestamp);
  return message;
}
