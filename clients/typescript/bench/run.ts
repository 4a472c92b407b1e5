/**
 * GrpcSessionService and GrpcMemoryService side by side with ADK TypeScript's own services, in
 * one run, on loopback: DatabaseSessionService on SQLite (a file, MikroORM's better-sqlite
 * driver) for sessions, InMemoryMemoryService for memory.
 *
 *   ADK_SERVICES_BIN_DIR=DIR npm run bench          (in this folder, after npm ci)
 *
 * Workloads: appends one at a time (c=1) and from 8 concurrent writers each on its own session
 * (c=8); getSession of a 1,000-event session; listSessions of 1,000 sessions; searchMemory
 * over 10,000 entries. Each is bounded in count; figures are medians of repeated calls.
 */
import {
  createEvent,
  createEventActions,
  InMemoryMemoryService,
  InMemorySessionService,
  type BaseMemoryService,
  type BaseSessionService,
  type Event,
} from "@google/adk";
import { DatabaseSessionService } from "@google/adk/sessions/database";
import { BetterSqliteDriver } from "@mikro-orm/better-sqlite";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { GrpcMemoryService, GrpcSessionService } from "../src/index.js";

const BIN_DIR =
  process.env["ADK_SERVICES_BIN_DIR"] ?? resolve(import.meta.dirname, "..", "..", "..", "..", "..", "target", "debug");
const APPENDS = 600;
const WRITERS = 8;
const SESSION_EVENTS = 1000;
const LISTED_SESSIONS = 1000;
const MEMORY_SESSIONS = 100;
const EVENTS_PER_MEMORY_SESSION = 100;
const READS = 25;
const SEARCHES = 50;
const WORDS =
  "apple river mountain violin harbor lantern meadow copper falcon orchard pepper glacier velvet thunder saffron compass".split(
    " ",
  );

function text(i: number): string {
  return `turn ${i}: ${WORDS[i % WORDS.length]} ${WORDS[(i * 7) % WORDS.length]} and ${WORDS[(i * 3 + 1) % WORDS.length]} near the ${WORDS[(i * 5 + 2) % WORDS.length]}`;
}

function event(i: number): Event {
  return createEvent({
    author: i % 2 === 0 ? "user" : "agent",
    invocationId: `inv-${Math.floor(i / 2)}`,
    content: { role: i % 2 === 0 ? "user" : "model", parts: [{ text: text(i) }] },
    actions: createEventActions({ stateDelta: { turn: i } }),
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function timed(run: () => Promise<unknown>, times: number): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    await run();
    ms.push(performance.now() - start);
  }
  return median(ms);
}

async function appendRate(service: BaseSessionService, app: string, writers: number): Promise<number> {
  // Created one by one: ADK's DatabaseSessionService fails concurrent first sessions of an app
  // (both insert its app_states row). Creation is not timed.
  const sessions = [];
  for (let w = 0; w < writers; w++) sessions.push(await service.createSession({ appName: app, userId: `w${w}` }));
  const each = Math.floor(APPENDS / writers);
  const start = performance.now();
  await Promise.all(
    sessions.map(async (session) => {
      for (let i = 0; i < each; i++) await service.appendEvent({ session, event: event(i) });
    }),
  );
  return (each * writers) / ((performance.now() - start) / 1000);
}

interface Prepared {
  read: () => Promise<unknown>;
  list: () => Promise<unknown>;
  figures: Record<string, string>;
}

/** Appends (timed), then a 1,000-event session and 1,000 sessions to read (not timed). */
async function prepare(name: string, service: BaseSessionService): Promise<Prepared> {
  const app = `bench-${name}`;
  const c1 = await appendRate(service, `${app}-c1`, 1);
  const c8 = await appendRate(service, `${app}-c8`, WRITERS);
  const long = await service.createSession({ appName: app, userId: "long" });
  for (let i = 0; i < SESSION_EVENTS; i++) await service.appendEvent({ session: long, event: event(i) });
  for (let i = 0; i < LISTED_SESSIONS; i++) {
    await service.createSession({ appName: `${app}-list`, userId: "lister", state: { i } });
  }
  return {
    read: async () => {
      const got = await service.getSession({ appName: app, userId: "long", sessionId: long.id });
      if (got?.events.length !== SESSION_EVENTS) throw new Error(`${name}: read ${got?.events.length} events`);
    },
    list: async () => {
      const listed = await service.listSessions({ appName: `${app}-list`, userId: "lister" });
      if (listed.totalItems !== LISTED_SESSIONS) throw new Error(`${name}: listed ${listed.totalItems}`);
    },
    figures: { "appends c=1 (events/s)": c1.toFixed(0), [`appends c=${WRITERS} (events/s)`]: c8.toFixed(0) },
  };
}

/** Reads of both services in turn, so that the machine's load weighs on both alike. */
async function interleavedReads(a: Prepared, b: Prepared): Promise<void> {
  const reads: [number[], number[]] = [[], []];
  const lists: [number[], number[]] = [[], []];
  const time = async (run: () => Promise<unknown>, into: number[]): Promise<void> => {
    const start = performance.now();
    await run();
    into.push(performance.now() - start);
  };
  for (let i = 0; i < READS; i++) {
    await time(a.read, reads[0]);
    await time(b.read, reads[1]);
    await time(a.list, lists[0]);
    await time(b.list, lists[1]);
  }
  for (const [index, prepared] of [a, b].entries()) {
    prepared.figures[`getSession, ${SESSION_EVENTS} events (ms)`] = median(reads[index] ?? []).toFixed(1);
    prepared.figures[`listSessions, ${LISTED_SESSIONS} sessions (ms)`] = median(lists[index] ?? []).toFixed(1);
  }
}

async function memoryFigures(name: string, memory: BaseMemoryService): Promise<Record<string, string>> {
  const sessions = new InMemorySessionService();
  const app = `bench-memory-${name}`;
  let counter = 0;
  for (let s = 0; s < MEMORY_SESSIONS; s++) {
    const session = await sessions.createSession({ appName: app, userId: "u" });
    for (let i = 0; i < EVENTS_PER_MEMORY_SESSION; i++) session.events.push(event(counter++));
    await memory.addSessionToMemory(session);
  }
  let q = 0;
  const search = await timed(async () => {
    const query = `${WORDS[q % WORDS.length]} ${WORDS[(q * 5 + 3) % WORDS.length]}`;
    q++;
    await memory.searchMemory({ appName: app, userId: "u", query });
  }, SEARCHES);
  return { [`searchMemory, ${MEMORY_SESSIONS * EVENTS_PER_MEMORY_SESSION} entries (ms)`]: search.toFixed(2) };
}

function startServer(name: string, dir: string): Promise<[ChildProcess, string]> {
  const child = spawn(join(BIN_DIR, name), ["--listen", "127.0.0.1:0", "--data-dir", join(dir, name)], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  return new Promise((done, fail) => {
    let line = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      line += chunk.toString();
      if (line.includes("\n")) done([child, `grpc://${line.split("\n")[0]?.split(" listening on ")[1] ?? ""}`]);
    });
    child.once("exit", (code) => {
      fail(new Error(`${name} exited with ${code}`));
    });
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "adk-ts-bench-"));
  const [sessionSvc, sessionUri] = await startServer("session-svc", dir);
  const [memorySvc, memoryUri] = await startServer("memory-svc", dir);
  const grpcSessions = new GrpcSessionService({ uri: sessionUri });
  const grpcMemory = new GrpcMemoryService({ uri: memoryUri });
  const database = new DatabaseSessionService({
    dbName: join(dir, "adk.sqlite"),
    driver: BetterSqliteDriver,
    allowGlobalContext: true,
  });
  await database.init();
  try {
    const grpcPrepared = await prepare("grpc", grpcSessions);
    const databasePrepared = await prepare("database", database);
    await interleavedReads(grpcPrepared, databasePrepared);
    const rows: [string, Record<string, string>][] = [
      ["session-svc (GrpcSessionService)", grpcPrepared.figures],
      ["DatabaseSessionService (SQLite)", databasePrepared.figures],
      ["memory-svc (GrpcMemoryService)", await memoryFigures("grpc", grpcMemory)],
      ["InMemoryMemoryService", await memoryFigures("in-memory", new InMemoryMemoryService())],
    ];
    console.log(
      `node ${process.version}, ${cpus().length} cores, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
    for (const [name, figures] of rows) {
      console.log(`\n${name}`);
      for (const [what, value] of Object.entries(figures)) console.log(`  ${what.padEnd(42)} ${value}`);
    }
  } finally {
    grpcSessions.close();
    grpcMemory.close();
    await (database as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
    sessionSvc.kill();
    memorySvc.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
