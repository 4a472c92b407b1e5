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
 *
 * Each contender runs in a Node process of its own (this script, forked with a role), so that
 * neither pays for the other's heap and collector; this process starts the servers, tells the
 * two what to run, one call at a time and in turn for the reads and listings (so that the
 * machine's load weighs on both alike), and prints what they timed.
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
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { GrpcMemoryService, GrpcSessionService } from "../src/index.js";
import { startServer } from "./servers.js";

const APPENDS = 600;
const WRITERS = 8;
const SESSION_EVENTS = 1000;
const LISTED_SESSIONS = 1000;
const MEMORY_SESSIONS = 100;
const EVENTS_PER_MEMORY_SESSION = 100;
const READS = 50;
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

async function elapsed(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
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

/** What the parent asks a contender to do; each answer is a number (a rate or milliseconds). */
type Step = "appends c=1" | "appends c=8" | "fill" | "read" | "list" | "fill memory" | "searches";

/** One contender's services and what each step does with them, in its own process. */
function contender(
  name: string,
  sessions: BaseSessionService,
  memory: BaseMemoryService,
): Record<Step, () => Promise<number>> {
  const app = `bench-${name}`;
  let long: string | undefined;
  let q = 0;
  return {
    "appends c=1": () => appendRate(sessions, `${app}-c1`, 1),
    "appends c=8": () => appendRate(sessions, `${app}-c8`, WRITERS),
    // A 1,000-event session and 1,000 sessions to read (not timed).
    fill: async () => {
      const session = await sessions.createSession({ appName: app, userId: "long" });
      for (let i = 0; i < SESSION_EVENTS; i++) await sessions.appendEvent({ session, event: event(i) });
      long = session.id;
      for (let i = 0; i < LISTED_SESSIONS; i++) {
        await sessions.createSession({ appName: `${app}-list`, userId: "lister", state: { i } });
      }
      return 0;
    },
    read: () =>
      elapsed(async () => {
        const got = await sessions.getSession({ appName: app, userId: "long", sessionId: long ?? "" });
        if (got?.events.length !== SESSION_EVENTS) throw new Error(`${name}: read ${got?.events.length} events`);
      }),
    list: () =>
      elapsed(async () => {
        const listed = await sessions.listSessions({ appName: `${app}-list`, userId: "lister" });
        if (listed.totalItems !== LISTED_SESSIONS) throw new Error(`${name}: listed ${listed.totalItems}`);
      }),
    "fill memory": async () => {
      const scratch = new InMemorySessionService();
      let counter = 0;
      for (let s = 0; s < MEMORY_SESSIONS; s++) {
        const session = await scratch.createSession({ appName: `${app}-memory`, userId: "u" });
        for (let i = 0; i < EVENTS_PER_MEMORY_SESSION; i++) session.events.push(event(counter++));
        await memory.addSessionToMemory(session);
      }
      return 0;
    },
    // Searches one after another (a search is a fraction of a millisecond: alternating each one
    // with the other process's would time wake-ups more than searches).
    searches: async () => {
      const ms: number[] = [];
      for (let i = 0; i < SEARCHES; i++) {
        const query = `${WORDS[q % WORDS.length]} ${WORDS[(q * 5 + 3) % WORDS.length]}`;
        q++;
        ms.push(await elapsed(() => memory.searchMemory({ appName: `${app}-memory`, userId: "u", query })));
      }
      return median(ms);
    },
  };
}

/** A forked contender: answers each step the parent sends with its number, until disconnected. */
async function serve(role: string): Promise<void> {
  const { BENCH_SESSION_URI = "", BENCH_MEMORY_URI = "", BENCH_DIR = "" } = process.env;
  let steps: Record<Step, () => Promise<number>>;
  let close: () => Promise<void>;
  if (role === "grpc") {
    const sessions = new GrpcSessionService({ uri: BENCH_SESSION_URI });
    const memory = new GrpcMemoryService({ uri: BENCH_MEMORY_URI });
    steps = contender(role, sessions, memory);
    close = () => {
      sessions.close();
      memory.close();
      return Promise.resolve();
    };
  } else {
    const database = new DatabaseSessionService({
      dbName: join(BENCH_DIR, "adk.sqlite"),
      driver: BetterSqliteDriver,
      allowGlobalContext: true,
    });
    await database.init();
    steps = contender(role, database, new InMemoryMemoryService());
    close = async () => {
      await (database as unknown as { orm?: { close(): Promise<void> } }).orm?.close();
    };
  }
  process.on("message", (step: Step) => {
    steps[step]().then(
      (value) => process.send?.({ value }),
      (e: unknown) => process.send?.({ error: String(e) }),
    );
  });
  process.once("disconnect", () => void close());
  process.send?.({ value: 0 });
}

/** A contender process of this script, and a way to run one step in it. */
function forkContender(
  role: string,
  env: Record<string, string>,
): { run: (step: Step) => Promise<number>; child: ChildProcess } {
  const child = fork(import.meta.filename, ["--contender", role], { env: { ...process.env, ...env } });
  let waiting: { done: (value: number) => void; fail: (e: Error) => void } | undefined;
  const ready = new Promise<number>((done, fail) => (waiting = { done, fail }));
  child.on("message", (answer: { value?: number; error?: string }) => {
    const waiter = waiting;
    waiting = undefined;
    if (answer.error !== undefined) waiter?.fail(new Error(`${role}: ${answer.error}`));
    else waiter?.done(answer.value ?? Number.NaN);
  });
  child.once("exit", (code) => waiting?.fail(new Error(`the ${role} contender exited with ${code}`)));
  const run = async (step: Step): Promise<number> => {
    await ready;
    return new Promise((done, fail) => {
      waiting = { done, fail };
      child.send(step);
    });
  };
  return { run, child };
}

/** Medians of `times` runs of `step` in each contender, taken in turn. */
async function inTurn(
  contenders: { run: (step: Step) => Promise<number> }[],
  step: Step,
  times: number,
): Promise<number[]> {
  const ms: number[][] = contenders.map(() => []);
  for (let i = 0; i < times; i++) {
    for (const [index, { run }] of contenders.entries()) ms[index]?.push(await run(step));
  }
  return ms.map(median);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "adk-ts-bench-"));
  const { process: sessionSvc, address: sessionAddress } = await startServer("session-svc", join(dir, "session-svc"));
  const { process: memorySvc, address: memoryAddress } = await startServer("memory-svc", join(dir, "memory-svc"));
  const env = {
    BENCH_SESSION_URI: `grpc://${sessionAddress}`,
    BENCH_MEMORY_URI: `grpc://${memoryAddress}`,
    BENCH_DIR: dir,
  };
  const grpc = forkContender("grpc", env);
  const database = forkContender("database", env);
  const both = [grpc, database];
  try {
    const figures: Record<string, string>[] = [{}, {}];
    for (const [index, { run }] of both.entries()) {
      const into = figures[index] ?? {};
      into["appends c=1 (events/s)"] = (await run("appends c=1")).toFixed(0);
      into[`appends c=${WRITERS} (events/s)`] = (await run("appends c=8")).toFixed(0);
      await run("fill");
    }
    const reads = await inTurn(both, "read", READS);
    const lists = await inTurn(both, "list", READS);
    const searches: number[] = [];
    for (const { run } of both) {
      await run("fill memory");
      searches.push(await run("searches"));
    }
    for (const [index, into] of figures.entries()) {
      into[`getSession, ${SESSION_EVENTS} events (ms)`] = (reads[index] ?? Number.NaN).toFixed(1);
      into[`listSessions, ${LISTED_SESSIONS} sessions (ms)`] = (lists[index] ?? Number.NaN).toFixed(1);
    }
    const entries = `searchMemory, ${MEMORY_SESSIONS * EVENTS_PER_MEMORY_SESSION} entries (ms)`;
    const rows: [string, Record<string, string>][] = [
      ["session-svc (GrpcSessionService)", figures[0] ?? {}],
      ["DatabaseSessionService (SQLite)", figures[1] ?? {}],
      ["memory-svc (GrpcMemoryService)", { [entries]: (searches[0] ?? Number.NaN).toFixed(2) }],
      ["InMemoryMemoryService", { [entries]: (searches[1] ?? Number.NaN).toFixed(2) }],
    ];
    console.log(
      `node ${process.version}, ${cpus().length} cores, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}, each contender in its own process`,
    );
    for (const [name, values] of rows) {
      console.log(`\n${name}`);
      for (const [what, value] of Object.entries(values)) console.log(`  ${what.padEnd(42)} ${value}`);
    }
  } finally {
    for (const { child } of both) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once("exit", done));
        child.disconnect();
        await exited;
      }
    }
    sessionSvc.kill();
    memorySvc.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

const role = process.argv.indexOf("--contender");
if (role >= 0) await serve(process.argv[role + 1] ?? "");
else await main();
