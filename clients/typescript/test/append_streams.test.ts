/**
 * How appends travel, against a real session-svc (sled, and PostgreSQL when $ADK_TEST_POSTGRES
 * is set): over one AppendEvents stream per session, in order, through a server restart, a
 * deadline, an idle period, a second writer, hostile input and a server without the stream.
 * The calls the client makes are seen through a grpc-js interceptor.
 */
import { createEvent, createEventActions, type Event, type Session } from "@google/adk";
import {
  credentials,
  InterceptingCall,
  ListenerBuilder,
  RequesterBuilder,
  Server as GrpcServer,
  ServerCredentials,
  status,
  type handleUnaryCall,
  type Interceptor,
} from "@grpc/grpc-js";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  SessionServiceClient,
  SessionServiceService,
  type AppendEventRequest,
  type AppendEventResponse,
  type CreateSessionRequest,
  type Event as EventMessage,
  type Session as SessionMessage,
} from "../src/gen/adk/session/v1/session.js";
import { GrpcServiceError, GrpcSessionService, type SessionServiceOptions } from "../src/index.js";
import { freshApp, Server, startPostgresSessionServer } from "./servers.js";

/** One call the client made: its method, the codes of an AppendEvents stream's responses, its status. */
interface CallRecord {
  method: string;
  codes: number[];
  status?: status;
}

/** Records every call of the clients it is given to. */
class Recorder {
  readonly calls: CallRecord[] = [];
  readonly interceptor: Interceptor = (options, nextCall) => {
    const record: CallRecord = { method: options.method_definition.path.split("/").at(-1) ?? "", codes: [] };
    this.calls.push(record);
    const listener = new ListenerBuilder()
      .withOnReceiveMessage((message: AppendEventResponse, next) => {
        if (record.method === "AppendEvents") record.codes.push(message.code);
        next(message);
      })
      .withOnReceiveStatus((received, next) => {
        record.status = received.code;
        next(received);
      })
      .build();
    const requester = new RequesterBuilder()
      .withStart((metadata, _, next) => {
        next(metadata, listener);
      })
      .build();
    return new InterceptingCall(nextCall(options), requester);
  };

  /** The calls of `method`, in the order they were made. */
  of(method: "AppendEvents" | "AppendEvent"): CallRecord[] {
    return this.calls.filter((call) => call.method === method);
  }

  /** A service on `uri` whose calls this records. */
  service(uri: string, options: Omit<SessionServiceOptions, "uri"> = {}): GrpcSessionService {
    return new GrpcSessionService({ uri, ...options, channelOptions: { interceptors: [this.interceptor] } });
  }
}

const stores: [string, () => Promise<Server | undefined>][] = [
  ["sled", () => Server.start("session-svc")],
  ...(process.env["ADK_TEST_POSTGRES"]
    ? [["PostgreSQL", startPostgresSessionServer] as [string, () => Promise<Server | undefined>]]
    : []),
];

describe.each(stores)("appends on %s", (_, startServer) => {
  let server: Server;
  let app: string;

  /** A server of this store. */
  async function start(): Promise<Server> {
    const started = await startServer();
    if (started === undefined) throw new Error("no server");
    return started;
  }

  beforeAll(async () => {
    server = await start();
  });
  afterAll(async () => {
    await server.dispose();
  });
  beforeEach(() => {
    app = freshApp();
  });

  /** The stored events of a session as [id, sequence], read with the raw stub. */
  async function stored(on: Server, sessionId: string, userId = "u"): Promise<[string, number][]> {
    const raw = new SessionServiceClient(on.address, credentials.createInsecure());
    const events: EventMessage[] = [];
    try {
      let pageToken = "";
      do {
        const page = await new Promise<{ events: EventMessage[]; nextPageToken: string }>((done, fail) => {
          raw.listEvents(
            { appName: app, userId, sessionId, afterSequence: 0, pageSize: 100, pageToken, maxReplyEventBytes: 0 },
            (error, reply) => {
              if (error === null) done(reply);
              else fail(error);
            },
          );
        });
        events.push(...page.events);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
    } finally {
      raw.close();
    }
    return events.map((event) => [event.id, event.sequence]);
  }

  it("many appends to one session go over one stream, in order, with consecutive sequences", async () => {
    const recorder = new Recorder();
    const service = recorder.service(server.uri);
    try {
      const session = await service.createSession({ appName: app, userId: "u" });
      const ids = Array.from({ length: 300 }, (_, i) => `e${i}`);
      for (const [i, id] of ids.entries()) {
        await service.appendEvent({ session, event: numbered(id, i) });
      }
      expect(await stored(server, session.id)).toEqual(ids.map((id, i) => [id, i + 1]));
      expect(session.events.map((e) => e.id)).toEqual(ids);
      expect(session.state).toEqual({ n: 299 });
      expect(service.sequenceOf(session)).toBe(300);
      expect(recorder.of("AppendEvents")).toHaveLength(1);
      expect(recorder.of("AppendEvent")).toHaveLength(0);
    } finally {
      service.close();
    }
  });

  it("8 sessions appended to at once each get a stream, in order, with consecutive sequences", async () => {
    const recorder = new Recorder();
    const service = recorder.service(server.uri);
    try {
      const sessions: Session[] = [];
      for (let w = 0; w < 8; w++) sessions.push(await service.createSession({ appName: app, userId: "u" }));
      const ids = Array.from({ length: 100 }, (_, i) => `e${i}`);
      await Promise.all(
        sessions.map(async (session) => {
          for (const [i, id] of ids.entries()) await service.appendEvent({ session, event: numbered(id, i) });
        }),
      );
      for (const session of sessions) {
        expect(await stored(server, session.id)).toEqual(ids.map((id, i) => [id, i + 1]));
        expect(session.events.map((e) => e.id)).toEqual(ids);
      }
      expect(recorder.of("AppendEvents")).toHaveLength(8);
      expect(recorder.of("AppendEvent")).toHaveLength(0);
    } finally {
      service.close();
    }
  });

  it("a server killed and restarted mid-burst: appends after it succeed, acknowledged ones are stored once", async () => {
    const own = await start();
    const recorder = new Recorder();
    const service = recorder.service(own.uri);
    const writers = 4;
    const acked: string[][] = Array.from({ length: writers }, () => []);
    const failed: string[][] = Array.from({ length: writers }, () => []);
    const codes = new Set<status>();
    let restarted = false;
    try {
      const sessions: Session[] = [];
      for (let w = 0; w < writers; w++) sessions.push(await service.createSession({ appName: app, userId: "u" }));
      const writing = Promise.all(
        sessions.map(async (session, w) => {
          let afterRestart = 0;
          for (let i = 0; afterRestart < 20; i++) {
            const id = `w${w}-e${i}`;
            try {
              await service.appendEvent({ session, event: numbered(id, i) });
              acked[w]?.push(id);
              if (restarted) afterRestart++;
            } catch (e) {
              failed[w]?.push(id);
              codes.add((e as GrpcServiceError).code);
            }
          }
        }),
      );
      await waitFor(() => acked.flat().length >= 40);
      await own.stop(true);
      await own.restart();
      restarted = true;
      await writing;
      // Only the restart failed appends, and only while the server was away.
      expect([...codes].filter((code) => code !== status.UNAVAILABLE)).toEqual([]);
      // The writers were all waiting for an append when the server was killed: those appends,
      // left unanswered by their broken streams, were sent again as unary calls.
      expect(recorder.of("AppendEvent").length).toBeGreaterThan(0);
      for (const [w, session] of sessions.entries()) {
        const events = await stored(own, session.id);
        const ids = events.map(([id]) => id);
        expect(events.map(([, sequence]) => sequence)).toEqual(ids.map((_, i) => i + 1));
        expect(new Set(ids).size).toBe(ids.length);
        // Every acknowledged append is stored, in the order acknowledged; anything else stored
        // was in flight (it failed to the caller).
        expect(ids.filter((id) => acked[w]?.includes(id))).toEqual(acked[w]);
        expect(ids.filter((id) => !acked[w]?.includes(id) && !failed[w]?.includes(id))).toEqual([]);
        // The writer's own session caught up with what was stored while it failed.
        expect(session.events.map((e) => e.id)).toEqual(ids);
      }
    } finally {
      service.close();
      await own.dispose();
    }
  });

  it("an append whose deadline passes fails DEADLINE_EXCEEDED, and its late response answers nothing", async () => {
    const own = await start();
    const recorder = new Recorder();
    const service = recorder.service(`${own.uri}?timeout=2`);
    const pid = ownPid(own);
    try {
      const session = await service.createSession({ appName: app, userId: "u" });
      await service.appendEvent({ session, event: numbered("before", 0) });
      process.kill(pid, "SIGSTOP");
      let error: unknown;
      const started = Date.now();
      try {
        error = await service.appendEvent({ session, event: numbered("late", 1) }).catch((e: unknown) => e);
      } finally {
        process.kill(pid, "SIGCONT");
      }
      expect(Date.now() - started).toBeLessThan(6000);
      expect(error).toBeInstanceOf(GrpcServiceError);
      expect((error as GrpcServiceError).code).toBe(status.DEADLINE_EXCEEDED);
      expect((error as GrpcServiceError).message).toMatch(/^AppendEvent failed: DEADLINE_EXCEEDED/);
      expect(session.events.map((e) => e.id)).toEqual(["before"]);
      // The server may still store the late append once it runs again: the next one is then
      // appended after it, never answered with its response.
      await service.appendEvent({ session, event: numbered("after", 2) });
      const ids = (await stored(own, session.id)).map(([id]) => id);
      expect(ids.filter((id) => id === "after")).toHaveLength(1);
      expect(service.sequenceOf(session)).toBe(ids.indexOf("after") + 1);
      expect(session.events.map((e) => e.id)).toEqual(ids.slice(0, ids.indexOf("after") + 1));
      const streams = recorder.of("AppendEvents");
      expect(streams).toHaveLength(2);
      expect(streams[0]?.status).toBe(status.CANCELLED);
    } finally {
      service.close();
      await own.dispose();
    }
  });

  it("an idle stream is ended and the next append opens another; close() ends one after its appends", async () => {
    const recorder = new Recorder();
    const service = recorder.service(server.uri, { appendIdleSeconds: 0.2 });
    const session = await service.createSession({ appName: app, userId: "u" });
    await service.appendEvent({ session, event: numbered("e0", 0) });
    await waitFor(() => recorder.of("AppendEvents")[0]?.status === status.OK);
    await service.appendEvent({ session, event: numbered("e1", 1) });
    const pending = service.appendEvent({ session, event: numbered("e2", 2) });
    service.close();
    await pending;
    await waitFor(() => recorder.of("AppendEvents")[1]?.status === status.OK);
    expect(await stored(server, session.id)).toEqual([
      ["e0", 1],
      ["e1", 2],
      ["e2", 3],
    ]);
    expect(recorder.of("AppendEvents").map((call) => call.codes)).toEqual([[0], [0, 0]]);
    expect(recorder.of("AppendEvent")).toHaveLength(0);
    await expect(service.appendEvent({ session, event: numbered("e3", 3) })).rejects.toThrow(/shut down|closed/i);
  });

  it("two writers of one session: the stale one is answered ABORTED on its stream, reloads and appends after", async () => {
    const recorder = new Recorder();
    const first = new GrpcSessionService({ uri: server.uri });
    const second = recorder.service(server.uri);
    try {
      const mine = await first.createSession({ appName: app, userId: "u", sessionId: "s" });
      const theirs = await second.getSession({ appName: app, userId: "u", sessionId: "s" });
      if (theirs === undefined) throw new Error("no session");
      await first.appendEvent({ session: mine, event: numbered("first", 1) });
      await second.appendEvent({ session: theirs, event: numbered("second", 2) });
      expect(recorder.of("AppendEvents").map((call) => call.codes)).toEqual([[status.ABORTED, status.OK]]);
      expect(theirs.events.map((e) => e.id)).toEqual(["first", "second"]);
      expect(await stored(server, "s")).toEqual([
        ["first", 1],
        ["second", 2],
      ]);
      // The first writer's stream is still open; its next append finds the session moved on.
      await first.appendEvent({ session: mine, event: numbered("third", 3) });
      expect(mine.events.map((e) => e.id)).toEqual(["first", "second", "third"]);
      expect(first.sequenceOf(mine)).toBe(3);
    } finally {
      first.close();
      second.close();
    }
  });

  it("hostile input is refused whole, naming the field, and the stream stays usable", async () => {
    const recorder = new Recorder();
    const service = recorder.service(server.uri);
    try {
      const session = await service.createSession({ appName: app, userId: "u", state: { n: -1 } });
      await service.appendEvent({ session, event: numbered("ok1", 1) });
      for (const id of ["bad\u0001id", "x".repeat(300)]) {
        const error = await service.appendEvent({ session, event: numbered(id, 2) }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(GrpcServiceError);
        expect((error as GrpcServiceError).code).toBe(status.INVALID_ARGUMENT);
        expect((error as GrpcServiceError).message).toMatch(/^AppendEvent failed: INVALID_ARGUMENT: .*event\.id/);
      }
      expect(session.events.map((e) => e.id)).toEqual(["ok1"]);
      expect(session.state).toEqual({ n: 1 });
      await service.appendEvent({ session, event: numbered("ok2", 3) });
      expect(await stored(server, session.id)).toEqual([
        ["ok1", 1],
        ["ok2", 2],
      ]);
      expect(recorder.of("AppendEvents").map((call) => call.codes)).toEqual([
        [status.OK, status.INVALID_ARGUMENT, status.INVALID_ARGUMENT, status.OK],
      ]);
      expect(recorder.of("AppendEvent")).toHaveLength(0);
      // An event larger than a message may be: grpc-js ends the stream it was written to, and
      // the unary call it is sent again as fails the same way.
      const huge = createEvent({ id: "huge", content: { role: "user", parts: [{ text: "x".repeat(18 << 20) }] } });
      const error = await service.appendEvent({ session, event: huge }).catch((e: unknown) => e);
      expect((error as GrpcServiceError).code).toBe(status.RESOURCE_EXHAUSTED);
      await service.appendEvent({ session, event: numbered("ok3", 4) });
      expect(session.events.map((e) => e.id)).toEqual(["ok1", "ok2", "ok3"]);
      expect(recorder.of("AppendEvents").map((call) => call.status)).toEqual([status.RESOURCE_EXHAUSTED, undefined]);
      expect(recorder.of("AppendEvent").map((call) => call.status)).toEqual([status.RESOURCE_EXHAUSTED]);
      // A deleted session: NOT_FOUND in today's words.
      await service.deleteSession({ appName: app, userId: "u", sessionId: session.id });
      await expect(service.appendEvent({ session, event: numbered("ok4", 5) })).rejects.toThrow(
        `Session ${session.id} not found for appendEvent`,
      );
    } finally {
      service.close();
    }
  });

  it("a server without AppendEvents (UNIMPLEMENTED) gets unary appends", async () => {
    // A gRPC server of an earlier release, in front of the real one: it serves every call but
    // AppendEvents, which grpc-js answers UNIMPLEMENTED.
    const upstream = new SessionServiceClient(server.address, credentials.createInsecure());
    const earlier = new GrpcServer();
    const createSession: handleUnaryCall<CreateSessionRequest, SessionMessage> = (call, callback) => {
      upstream.createSession(call.request, (error, reply) => {
        callback(error, reply);
      });
    };
    const appendEvent: handleUnaryCall<AppendEventRequest, AppendEventResponse> = (call, callback) => {
      upstream.appendEvent(call.request, (error, reply) => {
        callback(error, reply);
      });
    };
    earlier.addService(SessionServiceService, { createSession, appendEvent });
    const port = await new Promise<number>((done, fail) => {
      earlier.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) => {
        if (error === null) done(bound);
        else fail(error);
      });
    });
    const recorder = new Recorder();
    const service = recorder.service(`grpc://127.0.0.1:${port}`);
    try {
      const session = await service.createSession({ appName: app, userId: "u" });
      for (let i = 0; i < 3; i++) await service.appendEvent({ session, event: numbered(`e${i}`, i) });
      expect(await stored(server, session.id)).toEqual([
        ["e0", 1],
        ["e1", 2],
        ["e2", 3],
      ]);
      expect(recorder.of("AppendEvents").map((call) => call.status)).toEqual([status.UNIMPLEMENTED]);
      expect(recorder.of("AppendEvent")).toHaveLength(3);
    } finally {
      service.close();
      upstream.close();
      earlier.forceShutdown();
    }
  });
});

/** An event setting state `n` to `n`. */
function numbered(id: string, n: number): Event {
  return createEvent({ id, author: "user", actions: createEventActions({ stateDelta: { n } }) });
}

function ownPid(server: Server): number {
  return (server as unknown as { process: { pid: number } }).process.pid;
}

async function waitFor(condition: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((done) => setTimeout(done, 20));
  }
}
