/**
 * What GrpcSessionService does beyond the conformance cases, against a real session-svc:
 * concurrent writers, sessions larger than one reply, watches, hostile input, a server restart
 * in the middle of a stream, and connection settings.
 */
import { createEvent, createEventActions, type Event } from "@google/adk";
import { status } from "@grpc/grpc-js";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { credentials } from "@grpc/grpc-js";
import { SessionServiceClient } from "../src/gen/adk/session/v1/session.js";
import { eventToProto, GrpcServiceError, GrpcSessionService, type AppEvent, type SessionChange } from "../src/index.js";
import { freshApp, Server } from "./servers.js";

let server: Server;
let service: GrpcSessionService;
let app: string;

beforeAll(async () => {
  server = await Server.start("session-svc");
  service = new GrpcSessionService({ uri: server.uri });
});
afterAll(async () => {
  service.close();
  await server.dispose();
});
beforeEach(() => {
  app = freshApp();
});

/** The first `count` items of an iterator, then aborts it. */
async function take<T>(items: AsyncIterable<T>, count: number, controller: AbortController): Promise<T[]> {
  const seen: T[] = [];
  for await (const item of items) {
    seen.push(item);
    if (seen.length === count) controller.abort();
  }
  return seen;
}

describe("two writers of one session", () => {
  it("never lose an event: a stale writer's session is reloaded and its event appended after", async () => {
    const created = await service.createSession({ appName: app, userId: "u", sessionId: "s", state: { n: 0 } });
    const other = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    if (other === undefined) throw new Error("no session");
    await service.appendEvent({
      session: other,
      event: createEvent({ id: "theirs", actions: createEventActions({ stateDelta: { theirs: 1 } }) }),
    });
    await service.appendEvent({
      session: created,
      event: createEvent({ id: "mine", actions: createEventActions({ stateDelta: { mine: 1 } }) }),
    });
    // The stale copy was brought up to date: it holds both events and both keys.
    expect(created.events.map((e) => e.id)).toEqual(["theirs", "mine"]);
    expect(created.state).toEqual({ n: 0, theirs: 1, mine: 1 });
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    expect(stored?.events.map((e) => e.id)).toEqual(["theirs", "mine"]);
    expect(service.sequenceOf(created)).toBe(2);
  });

  it("a listed session is checked against storage at its first append, and reloaded when older", async () => {
    await service.createSession({ appName: app, userId: "u", sessionId: "s", state: { n: 0 } });
    const [listed] = (await service.listSessions({ appName: app, userId: "u" })).sessions;
    const other = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    if (listed === undefined || other === undefined) throw new Error("no session");
    expect(service.sequenceOf(listed)).toBeUndefined();
    await service.appendEvent({
      session: other,
      event: createEvent({
        id: "theirs",
        timestamp: listed.lastUpdateTime + 1000,
        actions: createEventActions({ stateDelta: { theirs: 1 } }),
      }),
    });
    await service.appendEvent({
      session: listed,
      event: createEvent({
        id: "mine",
        timestamp: listed.lastUpdateTime + 2000,
        actions: createEventActions({ stateDelta: { mine: 1 } }),
      }),
    });
    expect(listed.events.map((e) => e.id)).toEqual(["theirs", "mine"]);
    expect(listed.state).toEqual({ n: 0, theirs: 1, mine: 1 });
    expect(service.sequenceOf(listed)).toBe(2);
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: "s" });
    expect(stored?.events.map((e) => e.id)).toEqual(["theirs", "mine"]);
  });

  it("appending concurrently through one session object keeps every event", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    const events = Array.from({ length: 8 }, (_, i) =>
      createEvent({ id: `e${i}`, actions: createEventActions({ stateDelta: { [`k${i}`]: i } }) }),
    );
    await Promise.all(events.map((event) => service.appendEvent({ session, event })));
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    expect(stored?.events.map((e) => e.id).sort()).toEqual(events.map((e) => e.id).sort());
    expect(Object.keys(stored?.state ?? {}).sort()).toEqual(events.map((_, i) => `k${i}`).sort());
  });

  it("an event appended again (same id and payload) changes nothing", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    const event = createEvent({ id: "once", actions: createEventActions({ stateDelta: { count: 1 } }) });
    await service.appendEvent({ session, event });
    const reread = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    if (reread === undefined) throw new Error("no session");
    await service.appendEvent({ session: reread, event: { ...event } });
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    expect(stored?.events).toHaveLength(1);
  });
});

describe("events read back", () => {
  it("are ADK events: the fields, keys and brand (symbol) createEvent gives", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    const event = createEvent({ author: "user", content: { role: "user", parts: [{ text: "hi" }] } });
    await service.appendEvent({ session, event });
    const read = (await service.getSession({ appName: app, userId: "u", sessionId: session.id }))?.events[0];
    if (read === undefined) throw new Error("no event");
    expect(read).toEqual(event);
    expect(Object.keys(read).sort()).toEqual(Object.keys(event).sort());
    expect(Object.getOwnPropertySymbols(read)).toEqual(Object.getOwnPropertySymbols(createEvent()));
  });
});

describe("an event another language wrote with removed_state_keys (ADK Java's State.REMOVED)", () => {
  it("is read with its keys kept on the actions, and the session's state lacks them", async () => {
    const session = await service.createSession({
      appName: app,
      userId: "u",
      state: { keep: 1, gone: 2, "user:old": 3 },
    });
    const message = eventToProto(createEvent({ id: "java-1", author: "agent" }));
    if (message.actions === undefined) throw new Error("an ADK event always has actions");
    message.actions.removedStateKeys = ["gone", "user:old"];
    const raw = new SessionServiceClient(server.address, credentials.createInsecure());
    try {
      await new Promise((done, fail) => {
        raw.appendEvent({ appName: app, userId: "u", sessionId: session.id, event: message }, (error, reply) => {
          if (error === null) done(reply);
          else fail(error);
        });
      });
    } finally {
      raw.close();
    }
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    expect((stored?.events[0]?.actions as unknown as Record<string, unknown>)["removedStateKeys"]).toEqual([
      "gone",
      "user:old",
    ]);
    expect(stored?.state).toEqual({ keep: 1 });
  });
});

describe("sessions larger than one reply", () => {
  it("reads every event of a session past the reply budget through ListEvents", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    const big = "x".repeat(1 << 20);
    for (let i = 0; i < 6; i++) {
      await service.appendEvent({
        session,
        event: createEvent({ id: `big${i}`, content: { role: "user", parts: [{ text: big }] } }),
      });
    }
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    expect(stored?.events.map((e) => e.id)).toEqual(["big0", "big1", "big2", "big3", "big4", "big5"]);
    expect(stored?.events[5]?.content?.parts?.[0]?.text).toHaveLength(1 << 20);
  });

  it("lists more sessions than one ListSessions page holds (1,000), each once and in order", async () => {
    const ids = Array.from({ length: 1003 }, (_, i) => `s${String(i).padStart(4, "0")}`);
    for (let i = 0; i < ids.length; i += 100) {
      await Promise.all(
        ids.slice(i, i + 100).map((sessionId) => service.createSession({ appName: app, userId: "u", sessionId })),
      );
    }
    const all = await service.listSessions({ appName: app, userId: "u" });
    expect(all.totalItems).toBe(ids.length);
    expect(all.sessions.map((s) => s.id).sort()).toEqual(ids);
    const newest = await service.listSessions({ appName: app, userId: "u", limit: 1002, order: "desc" });
    expect([newest.totalItems, newest.totalPages]).toEqual([ids.length, 2]);
    expect(new Set(newest.sessions.map((s) => s.id)).size).toBe(1002);
    const times = newest.sessions.map((s) => s.lastUpdateTime);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });
});

describe("watches", () => {
  it("watchSession replays, follows live appends and ends on abort", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    await service.appendEvent({ session, event: createEvent({ id: "before" }) });
    const controller = new AbortController();
    const seen = take(
      service.watchSession({ appName: app, userId: "u", sessionId: session.id, signal: controller.signal }),
      2,
      controller,
    );
    await service.appendEvent({ session, event: createEvent({ id: "live" }) });
    const changes = await seen;
    expect(changes.map((c) => (c.kind === "event" ? [c.event.id, c.sequence] : c.kind))).toEqual([
      ["before", 1],
      ["live", 2],
    ]);
  });

  it("watchSession reports a deletion and ends", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    const changes: SessionChange[] = [];
    const watching = (async () => {
      for await (const change of service.watchSession({ appName: app, userId: "u", sessionId: session.id }))
        changes.push(change);
    })();
    await service.appendEvent({ session, event: createEvent({ id: "one" }) });
    await waitFor(() => changes.length === 1);
    await service.deleteSession({ appName: app, userId: "u", sessionId: session.id });
    await watching;
    expect(changes.map((c) => c.kind)).toEqual(["event", "deleted"]);
  });

  it("watchEvents follows an app's sessions with cursors to resume from", async () => {
    const controller = new AbortController();
    const seen: AppEvent[] = [];
    const watching = (async () => {
      for await (const item of service.watchEvents({ appName: app, signal: controller.signal })) {
        seen.push(item);
        if (item.event.id === "b1") controller.abort();
      }
    })();
    const a = await service.createSession({ appName: app, userId: "ua" });
    const b = await service.createSession({ appName: app, userId: "ub" });
    // The feed starts from now: append to a until the watch has seen one of them.
    await waitFor(async () => {
      await service.appendEvent({ session: a, event: createEvent() });
      return seen.length > 0;
    });
    await service.appendEvent({ session: b, event: createEvent({ id: "b1" }) });
    await watching;
    const last = seen.at(-1);
    expect(seen.slice(0, -1).every((e) => e.userId === "ua")).toBe(true);
    expect([last?.userId, last?.sessionId, last?.sequence]).toEqual(["ub", b.id, 1]);
    await service.appendEvent({ session: b, event: createEvent({ id: "b2" }) });
    const resumed = new AbortController();
    const after = await take(
      service.watchEvents({ appName: app, cursor: last?.cursor ?? "", signal: resumed.signal }),
      1,
      resumed,
    );
    expect(after.map((e) => e.event.id)).toEqual(["b2"]);
  });

  it("an aborted signal ends a watch before it starts", async () => {
    const items: unknown[] = [];
    for await (const item of service.watchSession({
      appName: app,
      userId: "u",
      sessionId: "s",
      signal: AbortSignal.abort(),
    }))
      items.push(item);
    expect(items).toEqual([]);
  });
});

describe("a server restart in the middle of a stream", () => {
  it("ends the watch with UNAVAILABLE, and a resumed watch misses nothing", async () => {
    const own = await Server.start("session-svc");
    const client = new GrpcSessionService({ uri: own.uri });
    try {
      const session = await client.createSession({ appName: app, userId: "u" });
      await client.appendEvent({ session, event: createEvent({ id: "e1" }) });
      const seen: number[] = [];
      // Settles with the error that ends the watch (handled from the start: it comes while
      // the server is being stopped).
      const ended = (async () => {
        for await (const change of client.watchSession({ appName: app, userId: "u", sessionId: session.id })) {
          if (change.kind === "event") seen.push(change.sequence);
        }
      })().then(
        () => undefined,
        (e: unknown) => e,
      );
      await waitFor(() => seen.length === 1);
      await own.stop(true);
      const error = await ended;
      expect(error).toBeInstanceOf(GrpcServiceError);
      expect((error as GrpcServiceError).code).toBe(status.UNAVAILABLE);
      expect((error as GrpcServiceError).message).toMatch(/^WatchSession failed: UNAVAILABLE/);
      await own.restart();
      // Retried on UNAVAILABLE while the server comes back; the event is stored once.
      await client.appendEvent({ session, event: createEvent({ id: "e2" }) });
      const controller = new AbortController();
      const resumed = await take(
        client.watchSession({
          appName: app,
          userId: "u",
          sessionId: session.id,
          afterSequence: seen.at(-1) ?? 0,
          signal: controller.signal,
        }),
        1,
        controller,
      );
      expect(resumed.map((c) => (c.kind === "event" ? c.event.id : c.kind))).toEqual(["e2"]);
    } finally {
      client.close();
      await own.dispose();
    }
  });
});

describe("hostile input: a clear error and nothing written", () => {
  const refused: [string, () => Event, RegExp][] = [
    [
      "a state value that is not finite",
      () => createEvent({ actions: createEventActions({ stateDelta: { bad: Number.NaN } }) }),
      /EventActions.stateDelta is not JSON: key "bad" is NaN/,
    ],
    [
      "a BigInt in tool arguments",
      () => createEvent({ content: { parts: [{ functionCall: { name: "f", args: { n: 1n } } }] } }),
      /functionCall.args is not JSON/,
    ],
    [
      "a cycle in custom metadata",
      () => {
        const cycle: Record<string, unknown> = {};
        cycle["self"] = cycle;
        return createEvent({ customMetadata: cycle });
      },
      /Event.customMetadata is not JSON/,
    ],
    [
      "a timestamp that is not a number of milliseconds",
      () => createEvent({ timestamp: Number.POSITIVE_INFINITY }),
      /Event.extra is not JSON|finite/,
    ],
  ];
  it.each(refused)("%s", async (_, make, message) => {
    const session = await service.createSession({ appName: app, userId: "u", state: { n: 0 } });
    await expect(service.appendEvent({ session, event: make() })).rejects.toThrow(message);
    const stored = await service.getSession({ appName: app, userId: "u", sessionId: session.id });
    expect(stored?.events).toEqual([]);
    expect(stored?.state).toEqual({ n: 0 });
    expect(session.events).toEqual([]);
  });

  it("an initial state that is not JSON creates nothing", async () => {
    await expect(
      service.createSession({ appName: app, userId: "u", sessionId: "s", state: { x: Number.NaN } }),
    ).rejects.toThrow(/state is not JSON/);
    expect((await service.listSessions({ appName: app })).totalItems).toBe(0);
  });

  it("names the server refuses become INVALID_ARGUMENT naming the field", async () => {
    const error = await service.createSession({ appName: app, userId: "bad\u0000user" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GrpcServiceError);
    expect((error as GrpcServiceError).code).toBe(status.INVALID_ARGUMENT);
    expect((error as GrpcServiceError).message).toMatch(/user_id/);
    expect((await service.listSessions({ appName: app })).totalItems).toBe(0);
  });

  it("an event id stored with another payload is refused, the session unchanged", async () => {
    const session = await service.createSession({ appName: app, userId: "u" });
    await service.appendEvent({ session, event: createEvent({ id: "same", content: { parts: [{ text: "one" }] } }) });
    const stale = await service.getSession({
      appName: app,
      userId: "u",
      sessionId: session.id,
      config: { numRecentEvents: 1 },
    });
    if (stale === undefined) throw new Error("no session");
    const error = await service
      .appendEvent({ session, event: createEvent({ id: "same", content: { parts: [{ text: "two" }] } }) })
      .catch((e: unknown) => e);
    expect((error as GrpcServiceError).code).toBe(status.ALREADY_EXISTS);
    expect(session.events).toHaveLength(1);
  });
});

describe("connecting", () => {
  it("reads token, timeout and CA file from the URI and the environment, refusing what is wrong", () => {
    const env = { TOKEN_VAR: "secret" };
    expect(() => new GrpcSessionService({ uri: "grpc://localhost?token_env=MISSING", env })).toThrow(
      /token_env names \$MISSING, which is not set/,
    );
    expect(() => new GrpcSessionService({ uri: "grpc://localhost?colour=blue", env })).toThrow(
      /unknown query parameter "colour"/,
    );
    expect(() => new GrpcSessionService({ uri: "grpc://localhost?timeout=-1", env })).toThrow(
      /timeout must be a positive number/,
    );
    expect(() => new GrpcSessionService({ uri: "grpc://localhost", env: { ADK_GRPC_TIMEOUT: "soon" } })).toThrow(
      /timeout must be a positive number/,
    );
    expect(() => new GrpcSessionService({ uri: "grpcs://localhost?ca_file=/nonexistent/ca.pem", env })).toThrow(
      /cannot read ca_file/,
    );
    expect(() => new GrpcSessionService({ uri: "grpc://localhost?ca_file=x", env })).toThrow(
      /ca_file needs a grpcs:\/\/ URI/,
    );
    expect(() => new GrpcSessionService({ uri: "http://localhost", env })).toThrow(
      /expected a grpc:\/\/ or grpcs:\/\/ URI/,
    );
    expect(() => new GrpcSessionService({ uri: "grpc://localhost", env, appendIdleSeconds: 0 })).toThrow(
      /appendIdleSeconds must be a positive number/,
    );
    new GrpcSessionService({ uri: "grpc://localhost:1?token_env=TOKEN_VAR&timeout=2.5", env }).close();
  });

  it("sends the token as a bearer header (the server refuses a wrong one)", async () => {
    const tokens = join(tmpdir(), `tokens-${app}.json`);
    writeFileSync(tokens, JSON.stringify({ tokens: [{ name: "tests", token: "s3cret-token", apps: ["*"] }] }));
    const guarded = await Server.start("session-svc", ["--tokens-file", tokens]);
    try {
      const right = new GrpcSessionService({ uri: `${guarded.uri}?token_env=T`, env: { T: "s3cret-token" } });
      const wrong = new GrpcSessionService({ uri: `${guarded.uri}?token_env=T`, env: { T: "wrong-token" } });
      await expect(wrong.createSession({ appName: app, userId: "u" })).rejects.toThrow(/UNAUTHENTICATED/);
      await expect(right.createSession({ appName: app, userId: "u" })).resolves.toBeDefined();
      right.close();
      wrong.close();
    } finally {
      await guarded.dispose();
    }
  });

  it("a deadline turns a call to a server that does not answer into DEADLINE_EXCEEDED", async () => {
    const own = await Server.start("session-svc");
    // The only call made with the short deadline is the one to the stopped server: a call before
    // it (and the connection it opens) may itself outlast 0.3 s on a busy machine.
    const client = new GrpcSessionService({ uri: `${own.uri}?timeout=0.3` });
    try {
      process.kill(ownPid(own), "SIGSTOP");
      const started = Date.now();
      await expect(client.listSessions({ appName: app })).rejects.toThrow(/DEADLINE_EXCEEDED/);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      process.kill(ownPid(own), "SIGCONT");
      client.close();
      await own.dispose();
    }
  });
});

function ownPid(server: Server): number {
  return (server as unknown as { process: { pid: number } }).process.pid;
}

async function waitFor(condition: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((done) => setTimeout(done, 20));
  }
}
