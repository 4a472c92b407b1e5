/**
 * Generated memories through GrpcMemoryService against a real memory-svc started with
 * `--generator` and a local stand-in model: generation from facts the caller extracted (a move,
 * Berlin then Lisbon, answered per period), revisions and rollback, and event streams.
 */
import { createEvent, type Event } from "@google/adk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  GenerationState,
  GrpcMemoryService,
  MemoryKind,
  RevisionAction,
  toMillis,
  type GenerationJob,
  type MemoryRevision,
} from "../src/index.js";
import { freshApp, type Server } from "./servers.js";
import { StandInModel } from "./stand_in_model.js";

const USER = "u";
const TRIGGERED = "triggered-app";
let model: StandInModel;
let server: Server;
let memory: GrpcMemoryService;
let app: string;

beforeAll(async () => {
  model = await StandInModel.start();
  // Streams are handed to generation by a flush, or for the app TRIGGERED by its second event;
  // never by a quiet time running out while a test runs.
  server = await model.memoryServer(["--stream-quiet", "1h", "--stream-trigger-events", `${TRIGGERED}=2`]);
  memory = new GrpcMemoryService({ uri: server.uri });
});
afterAll(async () => {
  memory.close();
  await server.dispose();
  await model.close();
});
beforeEach(() => {
  app = freshApp();
  model.answers.length = 0;
});

const said = (id: string, text: string): Event =>
  createEvent({ id, author: "user", content: { role: "user", parts: [{ text }] }, timestamp: 1_000_000 });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

async function generated(options: { query?: string; asOf?: number; includeSuperseded?: boolean } = {}) {
  const { query = "lives", ...validity } = options;
  const found = await memory.searchMemory({
    appName: app,
    userId: USER,
    query,
    kind: MemoryKind.MEMORY_KIND_GENERATED,
    ...validity,
  });
  return found.memories.map((m) => m.content.parts?.[0]?.text).sort();
}

/** Polls a job until it has finished; its last state. */
async function finished(job: GenerationJob): Promise<GenerationJob> {
  for (let i = 0; i < 200; i++) {
    job = await memory.getGenerationJob({ appName: app, userId: USER, jobId: job.id });
    if (
      job.state === GenerationState.GENERATION_STATE_SUCCEEDED ||
      job.state === GenerationState.GENERATION_STATE_FAILED
    )
      return job;
    await new Promise((done) => setTimeout(done, 50));
  }
  return job;
}

describe("facts from outside", () => {
  const BERLIN_FROM = "2024-01-10T09:00:00.000Z";
  const MOVED = "2025-05-01T00:00:00.000Z";

  it("consolidates given facts without extraction: a move answered per period", async () => {
    const asked = model.requests.length;
    const first = await memory.generateMemories({
      appName: app,
      userId: USER,
      facts: [{ text: "Alice lives in Berlin.", topic: "personal_facts", validFrom: Date.parse(BERLIN_FROM) }],
      options: { wait: true },
    });
    expect([first.state, first.added]).toEqual([GenerationState.GENERATION_STATE_SUCCEEDED, 1]);
    // Nothing to extract, nothing to compare with: the model was not asked.
    expect(model.requests).toHaveLength(asked);
    const [berlin] = await collect(memory.listMemories({ appName: app, userId: USER }));
    expect(berlin?.customMetadata["topic"]).toBe("personal_facts");

    model.decisions({ fact: 0, action: "supersede", memory_id: berlin?.id ?? "", text: "Alice lives in Lisbon." });
    const second = await memory.generateMemories({
      appName: app,
      userId: USER,
      facts: [{ text: "Alice lives in Lisbon.", validFrom: new Date(MOVED), customMetadata: { source: "crm" } }],
      options: { wait: true },
    });
    expect([second.added, second.invalidated]).toEqual([1, 1]);
    // One consolidation call, no extraction.
    expect(model.requests).toHaveLength(asked + 1);

    expect(await generated()).toEqual(["Alice lives in Lisbon."]);
    expect(await generated({ asOf: Date.parse("2024-06-01T00:00:00Z") })).toEqual(["Alice lives in Berlin."]);
    expect(await generated({ asOf: Date.parse(MOVED) })).toEqual(["Alice lives in Lisbon."]);
    expect(await generated({ includeSuperseded: true })).toEqual(["Alice lives in Berlin.", "Alice lives in Lisbon."]);
    const both = await collect(memory.listMemories({ appName: app, userId: USER, includeSuperseded: true }));
    expect(both.map((m) => [m.content.parts?.[0]?.text, m.validFrom, m.invalidAt])).toEqual([
      ["Alice lives in Berlin.", BERLIN_FROM, MOVED],
      ["Alice lives in Lisbon.", MOVED, undefined],
    ]);
    expect(both[1]?.customMetadata["source"]).toBe("crm");

    const revisions = await collect(memory.listMemoryRevisions({ appName: app, userId: USER, memoryId: berlin?.id }));
    const invalidated = revisions.at(-1);
    expect(invalidated?.action).toBe(RevisionAction.REVISION_ACTION_INVALIDATED);
    expect(invalidated?.supersededBy).toBe(both[1]?.id);
    expect(toMillis(invalidated?.invalidAt)).toBe(Date.parse(MOVED));
  });

  it("takes plain text facts, and refuses facts with events", async () => {
    const job = await memory.generateMemories({
      appName: app,
      userId: USER,
      facts: ["The user speaks Portuguese."],
      options: { wait: true },
    });
    expect(job.added).toBe(1);
    expect(await generated({ query: "Portuguese" })).toEqual(["The user speaks Portuguese."]);
    await expect(
      memory.generateMemories({ appName: app, userId: USER, facts: ["x"], events: [said("p1", "Olá")] }),
    ).rejects.toThrow(/give events or facts, not both/);
    await expect(
      memory.generateMemories({ appName: app, userId: USER, facts: [""], options: { wait: true } }),
    ).rejects.toThrow(/INVALID_ARGUMENT/);
  });
});

describe("correction", () => {
  it("rolls a memory back to a revision, recording the rollback", async () => {
    model.facts(["personal_facts", "The user lives in Berlin.", ["r1"]]);
    await memory.generateMemories({
      appName: app,
      userId: USER,
      events: [said("r1", "I live in Berlin.")],
      options: { wait: true },
    });
    const [berlin] = await collect(memory.listMemoryRevisions({ appName: app, userId: USER }));
    if (berlin === undefined) throw new Error("no revision");
    expect([berlin.action, berlin.newFact, berlin.sourceEventIds]).toEqual([
      RevisionAction.REVISION_ACTION_ADDED,
      "The user lives in Berlin.",
      ["r1"],
    ]);

    model.facts(["personal_facts", "The user lives in Lisbon.", ["r2"]]);
    model.decisions({ fact: 0, action: "update", memory_id: berlin.memoryId, text: "The user lives in Lisbon." });
    await memory.generateMemories({
      appName: app,
      userId: USER,
      events: [said("r2", "I moved to Lisbon.")],
      options: { wait: true },
    });
    expect(await generated()).toEqual(["The user lives in Lisbon."]);

    const rolled = await memory.rollbackMemory({
      appName: app,
      userId: USER,
      memoryId: berlin.memoryId,
      revisionId: berlin.revisionId,
    });
    expect([rolled.action, rolled.restoredRevisionId, rolled.previousFact, rolled.newFact]).toEqual([
      RevisionAction.REVISION_ACTION_ROLLED_BACK,
      berlin.revisionId,
      "The user lives in Lisbon.",
      "The user lives in Berlin.",
    ]);
    expect(await generated()).toEqual(["The user lives in Berlin."]);
    const history: MemoryRevision[] = await collect(
      memory.listMemoryRevisions({ appName: app, userId: USER, memoryId: berlin.memoryId }),
    );
    expect(history.map((r) => r.action)).toEqual([
      RevisionAction.REVISION_ACTION_ADDED,
      RevisionAction.REVISION_ACTION_UPDATED,
      RevisionAction.REVISION_ACTION_ROLLED_BACK,
    ]);
    await expect(
      memory.rollbackMemory({ appName: app, userId: USER, memoryId: berlin.memoryId, revisionId: "none" }),
    ).rejects.toThrow(/revision_id/);
  });
});

describe("event streams", () => {
  it("buffers each event once, lists the stream, and a flush generates from it", async () => {
    model.facts(["preferences", "The user drinks oat milk.", ["o1"]]);
    const silent = createEvent({ id: "o0", author: "user" });
    const oat = said("o1", "Oat milk, please.");
    const appended = await memory.appendMemoryStream({
      appName: app,
      userId: USER,
      streamId: "chat",
      events: [oat, oat, silent],
    });
    expect(appended).toEqual({ appended: 1, buffered: 1 });
    const again = await memory.appendMemoryStream({ appName: app, userId: USER, streamId: "chat", events: [oat] });
    expect(again).toEqual({ appended: 0, buffered: 1 });

    const [listed, ...others] = await memory.listMemoryStreams({ appName: app, userId: USER });
    expect(others).toEqual([]);
    expect([listed?.streamId, listed?.buffered]).toEqual(["chat", 1]);
    expect(Math.abs((listed?.lastAppendTime ?? 0) - Date.now())).toBeLessThan(60_000);

    const job = await memory.flushMemoryStream({ appName: app, userId: USER, streamId: "chat" });
    if (job === undefined) throw new Error("the flush started no job");
    const done = await finished(job);
    expect([done.state, done.added]).toEqual([GenerationState.GENERATION_STATE_SUCCEEDED, 1]);
    expect(await generated({ query: "oat milk" })).toEqual(["The user drinks oat milk."]);
    expect(await memory.flushMemoryStream({ appName: app, userId: USER, streamId: "chat" })).toBeUndefined();
    expect(await memory.listMemoryStreams({ appName: app, userId: USER })).toEqual([]);
    // The event went to the model once, though appended twice.
    const prompt = JSON.stringify(model.requests.at(-1));
    expect(prompt.split("Oat milk, please.")).toHaveLength(2);

    await expect(
      memory.appendMemoryStream({ appName: app, userId: USER, streamId: "", events: [said("o2", "x")] }),
    ).rejects.toThrow(/INVALID_ARGUMENT.*stream_id/);
  });

  it("starts generation by itself once the stream holds its app's trigger count", async () => {
    app = TRIGGERED;
    model.facts(["plans", "The user flies to Oslo in March.", ["t1", "t2"]]);
    const first = await memory.appendMemoryStream({
      appName: app,
      userId: USER,
      streamId: "trip",
      events: [said("t1", "I fly to Oslo.")],
    });
    expect(first).toEqual({ appended: 1, buffered: 1 });
    const second = await memory.appendMemoryStream({
      appName: app,
      userId: USER,
      streamId: "trip",
      events: [said("t2", "In March.")],
    });
    expect(second.appended).toBe(1);
    if (second.job === undefined) throw new Error("the trigger count started no job");
    const done = await finished(second.job);
    expect([done.state, done.added]).toEqual([GenerationState.GENERATION_STATE_SUCCEEDED, 1]);
    expect(await generated({ query: "Oslo" })).toEqual(["The user flies to Oslo in March."]);
    expect(await memory.listMemoryStreams({ appName: app, userId: USER })).toEqual([]);
  });
});
