/**
 * Which memories a search, a listing or a purge considers: conditions on `customMetadata` keys
 * as an OR of AND groups, topics, kind, author and a time range, and how they become the
 * contract's `MemoryFilter`. The server judges limits (how many conditions, key lengths, an
 * ordering operator on a string); the client refuses only what it could not put on the wire
 * faithfully (an unknown operator, a missing value, a non-finite number, an invalid date).
 */
import {
  MemoryKind,
  MetadataOperator,
  type MemoryFilter,
  type MetadataCondition as MetadataConditionMessage,
} from "./gen/adk/memory/v1/memory.js";
import type { Timestamp } from "./gen/google/protobuf/timestamp.js";
import { toTimestamp } from "./timestamps.js";

/** A time: epoch milliseconds (as ADK TypeScript holds times) or a `Date`. */
export type Instant = number | Date;

/**
 * A value a key is compared with: a JSON string, number or boolean, or a time (a `Date`),
 * which matches a JSON string holding an RFC 3339 time.
 */
export type MetadataValue = string | number | boolean | Date;

/**
 * A condition on one top-level key of a memory's `customMetadata`. A key that is absent, or
 * holds a value of another type than the condition's, fails every operator but `"!="`.
 *
 * ```ts
 * { key: "color", op: "==", value: "red" }
 * { key: "n", op: ">=", value: 3 }
 * { key: "seen", op: "<", value: new Date("2026-05-01T12:00:00Z") }
 * { key: "vip", op: "exists" }
 * ```
 */
export type MetadataCondition =
  | { key: string; op: "==" | "!="; value: MetadataValue }
  | { key: string; op: "<" | "<=" | ">" | ">="; value: number | Date }
  | { key: string; op: "exists" };

/** Conditions as an OR of AND groups: a memory passes when every condition of one group holds. */
export type Where = readonly (readonly MetadataCondition[])[];

/** Which memories a call considers; each option given must hold. */
export interface MemoryFilterOptions {
  /** Conditions on `customMetadata` keys (see `Where`). */
  where?: Where;
  /** Only memories of one of these topics (their `"topic"` metadata key). */
  topics?: readonly string[];
  /** Raw entries, generated memories, or both (the default). */
  kind?: MemoryKind;
  /** Only entries by this author. */
  author?: string;
  /** Only entries at or after this time. */
  after?: Instant;
  /** Only entries before this time. */
  before?: Instant;
}

const OPERATORS: Record<MetadataCondition["op"], MetadataOperator> = {
  "==": MetadataOperator.METADATA_OPERATOR_EQUAL,
  "!=": MetadataOperator.METADATA_OPERATOR_NOT_EQUAL,
  "<": MetadataOperator.METADATA_OPERATOR_LESS,
  "<=": MetadataOperator.METADATA_OPERATOR_LESS_OR_EQUAL,
  ">": MetadataOperator.METADATA_OPERATOR_GREATER,
  ">=": MetadataOperator.METADATA_OPERATOR_GREATER_OR_EQUAL,
  exists: MetadataOperator.METADATA_OPERATOR_EXISTS,
};

/** The Timestamp of `value`; `field` names it in the error for a non-finite or invalid time. */
export function instantToTimestamp(value: Instant, field: string): Timestamp {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== "number" || !Number.isFinite(ms)) {
    throw new RangeError(`${field} must be a valid Date or finite epoch milliseconds, got ${String(value)}`);
  }
  return toTimestamp(ms);
}

/** The optional Timestamp of `value`. */
export function optionalTimestamp(value: Instant | undefined, field: string): Timestamp | undefined {
  return value === undefined ? undefined : instantToTimestamp(value, field);
}

/** The request fields the filter options fill, as SearchMemory, ListMemories and PurgeMemories name them. */
export function filterFields(options: MemoryFilterOptions): {
  filter: MemoryFilter | undefined;
  kind: MemoryKind;
  author: string;
  afterTimestamp: Timestamp | undefined;
  beforeTimestamp: Timestamp | undefined;
} {
  const where = options.where ?? [];
  const topics = options.topics ?? [];
  return {
    filter:
      where.length === 0 && topics.length === 0
        ? undefined
        : {
            anyOf: where.map((group, g) => ({
              allOf: group.map((condition, c) => conditionMessage(condition, `where[${g}][${c}]`)),
            })),
            topics: [...topics],
          },
    kind: options.kind ?? MemoryKind.MEMORY_KIND_UNSPECIFIED,
    author: options.author ?? "",
    afterTimestamp: optionalTimestamp(options.after, "after"),
    beforeTimestamp: optionalTimestamp(options.before, "before"),
  };
}

function conditionMessage(condition: MetadataCondition, field: string): MetadataConditionMessage {
  // Checked at run time too: callers in JavaScript, or with values built from untyped data.
  const operator = Object.hasOwn(OPERATORS, condition.op) ? OPERATORS[condition.op] : undefined;
  if (operator === undefined) {
    throw new TypeError(
      `${field}.op: ${JSON.stringify(condition.op)} is not an operator (${Object.keys(OPERATORS).join(", ")})`,
    );
  }
  const message: MetadataConditionMessage = { key: condition.key, operator, value: undefined };
  if (condition.op === "exists") {
    return message;
  }
  const value: unknown = (condition as { value?: unknown }).value;
  if (typeof value === "string") {
    message.value = { $case: "stringValue", value };
  } else if (typeof value === "boolean") {
    message.value = { $case: "boolValue", value };
  } else if (typeof value === "number") {
    if (!Number.isFinite(value)) {
      throw new RangeError(`${field}.value must be a finite number, got ${value}`);
    }
    message.value = { $case: "numberValue", value };
  } else if (value instanceof Date) {
    message.value = { $case: "timeValue", value: instantToTimestamp(value, `${field}.value`) };
  } else {
    throw new TypeError(
      `${field}.value: the operator ${condition.op} needs a string, number, boolean or Date, got ${
        value === undefined ? "none" : typeof value
      }`,
    );
  }
  return message;
}
