/**
 * Memories in time and by rule, through GrpcMemoryService against a real memory-svc: validity
 * (`validFrom`, `invalidAt`, `asOf`, `includeSuperseded`), filters (every metadata operator on
 * numbers, times, strings and booleans, OR of ANDs, topics, kind, author, time range) on
 * listings and searches, and purges (a dry run, then forced). On sled, and on PostgreSQL when
 * $ADK_TEST_POSTGRES is set: both stores give the same answers.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  GrpcMemoryService,
  GrpcServiceError,
  MemoryKind,
  type GrpcMemoryEntry,
  type MemoryFilterOptions,
  type MetadataCondition,
  type NewMemory,
  type ValidityOptions,
  type Where,
} from "../src/index.js";
import { freshApp, Server, startPostgresServer } from "./servers.js";

const text = (m: GrpcMemoryEntry): string => m.content.parts?.[0]?.text ?? "";

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

describe.each([
  { store: "sled", start: () => Server.start("memory-svc") },
  ...(process.env["ADK_TEST_POSTGRES"]
    ? [{ store: "PostgreSQL", start: () => startPostgresServer("memory-svc") }]
    : []),
])("memory-svc on $store", ({ start }) => {
  let server: Server | undefined;
  let memory: GrpcMemoryService;
  let app: string;

  beforeAll(async () => {
    server = await start();
    if (server === undefined) throw new Error("ADK_TEST_POSTGRES is unset");
    memory = new GrpcMemoryService({ uri: server.uri });
  });
  afterAll(async () => {
    memory.close();
    await server?.dispose();
  });
  beforeEach(() => {
    app = freshApp();
  });

  describe("validity in time", () => {
    const BERLIN_FROM = "2024-01-10T09:00:00.000Z";
    const MOVED = "2025-05-01T00:00:00.000Z";
    const movedMs = Date.parse(MOVED);

    beforeEach(async () => {
      await memory.addMemory({
        appName: app,
        userId: "alice",
        memories: [
          {
            id: "berlin",
            content: { role: "user", parts: [{ text: "Alice lives in Berlin." }] },
            validFrom: BERLIN_FROM,
            invalidAt: MOVED,
          },
          { id: "lisbon", content: { role: "user", parts: [{ text: "Alice lives in Lisbon." }] }, validFrom: MOVED },
        ],
      });
    });

    const search = async (validity: ValidityOptions = {}) =>
      (await memory.searchMemory({ appName: app, userId: "alice", query: "Alice lives", ...validity })).memories
        .map(text)
        .sort();

    it("answers each period of a move with asOf, and now by default", async () => {
      expect(await search()).toEqual(["Alice lives in Lisbon."]);
      expect(await search({ asOf: movedMs - 24 * 3600 * 1000 })).toEqual(["Alice lives in Berlin."]);
      expect(await search({ asOf: new Date(MOVED) })).toEqual(["Alice lives in Lisbon."]);
      expect(await search({ asOf: Date.parse(BERLIN_FROM) - 1000 })).toEqual([]);
      expect(await search({ includeSuperseded: true })).toEqual(["Alice lives in Berlin.", "Alice lives in Lisbon."]);
    });

    it("lists with each entry's validity", async () => {
      const listed = await collect(memory.listMemories({ appName: app, userId: "alice", includeSuperseded: true }));
      expect(listed.map((m) => [m.id, m.validFrom, m.invalidAt])).toEqual([
        ["berlin", BERLIN_FROM, MOVED],
        ["lisbon", MOVED, undefined],
      ]);
      expect((await collect(memory.listMemories({ appName: app, userId: "alice" }))).map((m) => m.id)).toEqual([
        "lisbon",
      ]);
      const then = await collect(memory.listMemories({ appName: app, userId: "alice", asOf: new Date(BERLIN_FROM) }));
      expect(then.map((m) => m.id)).toEqual(["berlin"]);
    });

    it("refuses a validity that ends before it begins, and writes nothing", async () => {
      const backwards: NewMemory = {
        content: { parts: [{ text: "A fact." }] },
        validFrom: MOVED,
        invalidAt: BERLIN_FROM,
      };
      const refused = memory.addMemory({ appName: app, userId: "bob", memories: [backwards] });
      await expect(refused).rejects.toBeInstanceOf(GrpcServiceError);
      await expect(refused).rejects.toThrow(/INVALID_ARGUMENT.*memories\[0\]\.invalid_at/);
      await expect(
        memory.addMemory({ appName: app, userId: "bob", memories: [{ ...backwards, validFrom: "last spring" }] }),
      ).rejects.toThrow(/MemoryEntry.validFrom must be an ISO 8601 date-time/);
      expect(await collect(memory.listMemories({ appName: app, userId: "bob", includeSuperseded: true }))).toEqual([]);
    });
  });

  describe("filters and purges", () => {
    const USER = "filter-user";
    const T0 = Date.parse("2026-01-01T00:00:00Z");
    const HOUR = 3600 * 1000;
    const N = 20;

    /** Entries m00..m19 with metadata to filter on, and m20 without any. */
    function entry(i: number): NewMemory {
      const metadata: Record<string, unknown> = {
        n: i,
        color: ["red", "green", "blue"][i % 3],
        seen: new Date(T0 + i * HOUR).toISOString(),
        even: i % 2 === 0,
      };
      if (i % 5 === 0) {
        metadata["topic"] = "pets";
        metadata["vip"] = true;
      }
      return {
        id: `m${String(i).padStart(2, "0")}`,
        author: i % 2 ? "alice" : "bob",
        timestamp: new Date(T0 + i * 1000).toISOString(),
        content: { role: "user", parts: [{ text: `garden note ${i}` }] },
        customMetadata: metadata,
      };
    }
    const bare: NewMemory = {
      id: "m20",
      author: "carol",
      timestamp: new Date(T0 + N * 1000).toISOString(),
      content: { role: "user", parts: [{ text: "garden note without metadata" }] },
    };
    /** The ids of m00..m19 that `keep` keeps, and m20 when `bareToo`. */
    const ids = (keep: (i: number) => boolean, bareToo = false): string[] => [
      ...Array.from({ length: N }, (_, i) => i)
        .filter(keep)
        .map((i) => `m${String(i).padStart(2, "0")}`),
      ...(bareToo ? ["m20"] : []),
    ];

    beforeEach(async () => {
      await memory.addMemory({
        appName: app,
        userId: USER,
        memories: [...Array.from({ length: N }, (_, i) => entry(i)), bare],
      });
    });

    // A small page size so that listings with filters page too.
    const listed = async (options: MemoryFilterOptions) =>
      (await collect(memory.listMemories({ appName: app, userId: USER, pageSize: 3, ...options }))).map((m) => m.id);
    const where = (...conditions: MetadataCondition[]): { where: Where } => ({ where: [conditions] });
    const at = (hours: number) => new Date(T0 + hours * HOUR);

    it.each<[string, MetadataCondition, (i: number) => boolean, boolean]>([
      ["number ==", { key: "n", op: "==", value: 7 }, (i) => i === 7, false],
      ["number !=", { key: "n", op: "!=", value: 7 }, (i) => i !== 7, true],
      ["number <", { key: "n", op: "<", value: 3 }, (i) => i < 3, false],
      ["number <=", { key: "n", op: "<=", value: 3 }, (i) => i <= 3, false],
      ["number >", { key: "n", op: ">", value: 17.5 }, (i) => i > 17.5, false],
      ["number >=", { key: "n", op: ">=", value: 17 }, (i) => i >= 17, false],
      ["time ==", { key: "seen", op: "==", value: at(4) }, (i) => i === 4, false],
      ["time !=", { key: "seen", op: "!=", value: at(4) }, (i) => i !== 4, true],
      ["time <", { key: "seen", op: "<", value: at(2) }, (i) => i < 2, false],
      ["time <=", { key: "seen", op: "<=", value: at(2) }, (i) => i <= 2, false],
      ["time >", { key: "seen", op: ">", value: at(17) }, (i) => i > 17, false],
      ["time >=", { key: "seen", op: ">=", value: at(17) }, (i) => i >= 17, false],
      ["string ==", { key: "color", op: "==", value: "blue" }, (i) => i % 3 === 2, false],
      ["string !=", { key: "color", op: "!=", value: "blue" }, (i) => i % 3 !== 2, true],
      ["bool ==", { key: "even", op: "==", value: false }, (i) => i % 2 === 1, false],
      ["bool !=", { key: "even", op: "!=", value: false }, (i) => i % 2 === 0, true],
      ["exists", { key: "vip", op: "exists" }, (i) => i % 5 === 0, false],
      // A value of another type than the key's fails every operator but !=.
      ["a string against numbers", { key: "n", op: "==", value: "7" }, () => false, false],
    ])("%s keeps exactly the matching memories", async (_, condition, keep, bareToo) => {
      expect(await listed(where(condition))).toEqual(ids(keep, bareToo));
    });

    it("combines conditions as an OR of AND groups, with topics, author, kind and time range", async () => {
      expect(
        await listed({
          where: [
            [
              { key: "color", op: "==", value: "red" },
              { key: "n", op: ">=", value: 10 },
            ],
            [{ key: "vip", op: "exists" }],
            [
              { key: "even", op: "==", value: false },
              { key: "seen", op: "<", value: at(4) },
              { key: "n", op: "!=", value: 1 },
            ],
          ],
        }),
      ).toEqual(ids((i) => (i % 3 === 0 && i >= 10) || i % 5 === 0 || i === 3));
      expect(await listed({ topics: ["pets"], author: "bob" })).toEqual(ids((i) => i % 5 === 0 && i % 2 === 0));
      expect(await listed({ after: T0 + 5000, before: new Date(T0 + 8000) })).toEqual(ids((i) => i >= 5 && i < 8));
      expect(await listed({ kind: MemoryKind.MEMORY_KIND_RAW, ...where({ key: "n", op: "<", value: 2 }) })).toEqual([
        "m00",
        "m01",
      ]);
      expect(await listed({ kind: MemoryKind.MEMORY_KIND_GENERATED })).toEqual([]);
    });

    it("searches among the memories that pass, the limit applying after filtering", async () => {
      const found = await memory.searchMemory({
        appName: app,
        userId: USER,
        query: "garden note",
        limit: 3,
        ...where({ key: "n", op: ">=", value: 15 }, { key: "even", op: "==", value: true }),
      });
      expect(found.memories.map((m) => m.id).sort()).toEqual(["m16", "m18"]);
      expect(found.memories.every((m) => (m.customMetadata["n"] as number) >= 15)).toBe(true);
    });

    it("refuses conditions it cannot send, and leaves limits to the server", async () => {
      const list = (condition: unknown) => listed({ where: [[condition as MetadataCondition]] });
      await expect(list({ key: "n", op: "<" })).rejects.toThrow(/where\[0\]\[0\]\.value: the operator < needs/);
      await expect(list({ key: "n", op: "==", value: Number.NaN })).rejects.toThrow(RangeError);
      await expect(list({ key: "n", op: ">", value: Number.POSITIVE_INFINITY })).rejects.toThrow(/finite number/);
      await expect(list({ key: "seen", op: ">", value: new Date("not a date") })).rejects.toThrow(
        /where\[0\]\[0\]\.value must be a valid Date/,
      );
      await expect(list({ key: "n", op: "~", value: 1 })).rejects.toThrow(/"~" is not an operator/);
      await expect(list({ key: "n", op: "==", value: null })).rejects.toThrow(TypeError);
      // The server's judgement: an ordering operator on a string, and an empty key.
      await expect(list({ key: "color", op: "<", value: "red" })).rejects.toThrow(
        /INVALID_ARGUMENT.*filter\.any_of\[0\]\.all_of\[0\]\.value/,
      );
      await expect(list({ key: "", op: "exists" })).rejects.toThrow(/INVALID_ARGUMENT.*key/);
      await expect(
        memory.searchMemory({ appName: app, userId: USER, query: "garden", asOf: Number.NaN }),
      ).rejects.toThrow(/asOf must be a valid Date or finite epoch milliseconds/);
    });

    it("purges as a dry run unless forced, then deletes exactly the matches", async () => {
      await memory.addMemory({ appName: app, userId: "other", memories: [entry(16)] });
      const rule = where({ key: "n", op: ">=", value: 15 });
      const dry = await memory.purgeMemories({ appName: app, ...rule });
      // Every user of the app: m15..m19 of USER, m16 of "other".
      expect(dry.count).toBe(6);
      expect(dry.sample.map((m) => m.id)).toEqual(["m15", "m16", "m17", "m18", "m19", "m16"]);
      expect(dry.operationId).toBeUndefined();
      expect(await listed({})).toEqual(ids(() => true, true));

      const forced = await memory.purgeMemories({ appName: app, userId: USER, force: true, ...rule });
      expect(forced.count).toBe(5);
      expect(forced.operationId).toMatch(/.+/);
      expect(await listed({})).toEqual(ids((i) => i < 15, true));
      expect((await collect(memory.listMemories({ appName: app, userId: "other" }))).map((m) => m.id)).toEqual(["m16"]);

      await expect(memory.purgeMemories({ appName: app, force: true })).rejects.toThrow(/INVALID_ARGUMENT/);
      expect(await listed({})).toHaveLength(16);
    });
  });
});
