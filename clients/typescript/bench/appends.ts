/**
 * Appends one at a time, measured apart from ADK's services: GrpcSessionService.appendEvent
 * (over its AppendEvents stream) against the raw generated stub's unary AppendEvent with the
 * same kind of message, and an empty unary call (GetAppState), in one process against one
 * session-svc. The three take turns, one call each, so that the machine's load weighs on them
 * alike; CPU time is this process's own, over a run of each alone.
 *
 *   ADK_SERVICES_BIN_DIR=DIR npm run appends        (in this folder, after npm ci)
 */
import { createEvent, createEventActions, type Event } from "@google/adk";
import { credentials } from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { SessionServiceClient } from "../src/gen/adk/session/v1/session.js";
import { eventToProto, GrpcSessionService } from "../src/index.js";
import { startServer } from "./servers.js";

const WARM_UP = 200;
const TURNS = 1000;
const CPU_CALLS = 500;

function event(i: number): Event {
  return createEvent({
    author: i % 2 === 0 ? "user" : "agent",
    invocationId: `inv-${Math.floor(i / 2)}`,
    content: { role: i % 2 === 0 ? "user" : "model", parts: [{ text: `turn ${i}: apple river mountain` }] },
    actions: createEventActions({ stateDelta: { turn: i } }),
  });
}

const percentile = (xs: number[], p: number): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? Number.NaN;

async function timed(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

/** Milliseconds of this process's CPU per call over `count` calls of `run`. */
async function cpuPerCall(count: number, run: (i: number) => Promise<unknown>): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) await run(i);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / count;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "adk-appends-"));
  const { process: server, address } = await startServer("session-svc", join(dir, "data"));
  try {
    const client = new GrpcSessionService({ uri: `grpc://${address}` });
    const stub = new SessionServiceClient(address, credentials.createInsecure());
    const app = "appends";
    const session = await client.createSession({ appName: app, userId: "u", sessionId: "client" });
    await client.createSession({ appName: app, userId: "u", sessionId: "stub" });
    let next = 0;
    const viaClient = () => client.appendEvent({ session, event: event(next++) });
    const viaStub = (message = eventToProto(event(next++))) =>
      new Promise((done, fail) => {
        stub.appendEvent({ appName: app, userId: "u", sessionId: "stub", event: message }, (error, reply) => {
          if (error === null) done(reply);
          else fail(error);
        });
      });
    const empty = () =>
      new Promise((done, fail) => {
        stub.getAppState({ appName: app }, (error, reply) => {
          if (error === null) done(reply);
          else fail(error);
        });
      });
    for (let i = 0; i < WARM_UP; i++) {
      await viaClient();
      await viaStub();
      await empty();
    }
    const times: Record<"client" | "stub" | "empty", number[]> = { client: [], stub: [], empty: [] };
    const load = loadavg()[0] ?? Number.NaN;
    for (let i = 0; i < TURNS; i++) {
      // Events are made before the clock starts, as a caller's are.
      const made = event(next++);
      times.client.push(await timed(() => client.appendEvent({ session, event: made })));
      const message = eventToProto(event(next++));
      times.stub.push(await timed(() => viaStub(message)));
      times.empty.push(await timed(empty));
    }
    const cpu = {
      client: await cpuPerCall(CPU_CALLS, viaClient),
      stub: await cpuPerCall(CPU_CALLS, () => viaStub()),
      empty: await cpuPerCall(CPU_CALLS, empty),
    };
    console.log(`load ${load.toFixed(1)} -> ${(loadavg()[0] ?? Number.NaN).toFixed(1)}, ${TURNS} turns`);
    for (const name of ["client", "stub", "empty"] as const) {
      console.log(
        `${name.padEnd(6)} p50 ${percentile(times[name], 0.5).toFixed(3)} ms  p99 ${percentile(times[name], 0.99).toFixed(3)} ms  CPU ${cpu[name].toFixed(3)} ms/call`,
      );
    }
    client.close();
    stub.close();
  } finally {
    server.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
