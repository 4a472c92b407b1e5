/**
 * A listing of 1,000 sessions taken apart, in one process against one session-svc: the same
 * ListSessions call through the client's `listSessions`, through the raw generated stub (the
 * reply decoded, nothing mapped) and through a stub that leaves the reply undecoded (the call
 * and the server alone), taking turns one call each so that the machine's load weighs on them
 * alike, and a raw call for 10 sessions (what any call costs). Then the generated decoder alone,
 * on a reply already received. CPU per listing is this process's own and session-svc's (from
 * /proc), over a run of each alone.
 *
 *   ADK_SERVICES_BIN_DIR=DIR npm run listing        (in this folder, after npm ci)
 */
import { credentials, makeGenericClientConstructor, type ServiceError } from "@grpc/grpc-js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  ListSessionsRequest,
  ListSessionsResponse,
  SessionServiceClient,
  SessionServiceService,
} from "../src/gen/adk/session/v1/session.js";
import { channelOptions } from "../src/connection.js";
import { GrpcSessionService } from "../src/index.js";
import { startServer } from "./servers.js";

const SESSIONS = 1000;
const WARM_UP = 50;
const TURNS = 200;
const CPU_CALLS = 100;
// Milliseconds of pause before each timed call (IDLE_MS=30 in the environment): the bench's
// listings run in turn with the other contender's, after such a pause.
const IDLE_MS = Number(process.env["IDLE_MS"] ?? 0);
const APP = "listing";
const USER = "lister";
// Clock ticks per second of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const TICKS_PER_SECOND = 100;

const percentile = (xs: number[], p: number): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? Number.NaN;

async function timed(run: () => unknown): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

/** Milliseconds of CPU (user and system) a process has used, from /proc. */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "adk-listing-"));
  const { process: server, address } = await startServer("session-svc", join(dir, "data"));
  try {
    const client = new GrpcSessionService({ uri: `grpc://${address}` });
    for (let i = 0; i < SESSIONS; i++) await client.createSession({ appName: APP, userId: USER, state: { i } });

    const options = channelOptions("adk.session.v1.SessionService", []);
    const stub = new SessionServiceClient(address, credentials.createInsecure(), options);
    const Raw = makeGenericClientConstructor(
      { listSessions: { ...SessionServiceService.listSessions, responseDeserialize: (bytes: Buffer) => bytes } },
      "RawSessionService",
    );
    const raw = new Raw(address, credentials.createInsecure(), options);
    const request: ListSessionsRequest = {
      appName: APP,
      userId: USER,
      pageSize: SESSIONS,
      pageToken: "",
      order: 0,
      offset: 0,
      includeTotalSize: false,
    };
    const viaClient = () => client.listSessions({ appName: APP, userId: USER });
    const viaStub = () =>
      new Promise<ListSessionsResponse>((done, fail) => {
        stub.listSessions(request, (error, reply) => {
          if (error === null) done(reply);
          else fail(error);
        });
      });
    // The generic client's methods are not typed: this one sends a ListSessionsRequest and
    // answers with the reply's bytes.
    const rawList = (
      raw as unknown as Record<
        string,
        (r: ListSessionsRequest, cb: (e: ServiceError | null, b: Buffer) => void) => void
      >
    )["listSessions"];
    const viaRawOf = (message: ListSessionsRequest) => () =>
      new Promise<Buffer>((done, fail) => {
        rawList?.call(raw, message, (error, bytes) => {
          if (error === null) done(bytes);
          else fail(error);
        });
      });
    const viaRaw = viaRawOf(request);
    const viaRawSmall = viaRawOf({ ...request, pageSize: 10 });
    const calls = { client: viaClient, stub: viaStub, raw: viaRaw, "raw, 10": viaRawSmall };
    for (let i = 0; i < WARM_UP; i++) for (const call of Object.values(calls)) await call();
    const load = loadavg()[0] ?? Number.NaN;
    const times: Record<keyof typeof calls, number[]> = { client: [], stub: [], raw: [], "raw, 10": [] };
    for (let i = 0; i < TURNS; i++) {
      for (const [name, call] of Object.entries(calls)) {
        if (IDLE_MS > 0) await new Promise((done) => setTimeout(done, IDLE_MS));
        times[name as keyof typeof calls].push(await timed(call));
      }
    }
    const cpu: Record<string, { node: number; server: number }> = {};
    for (const [name, call] of Object.entries(calls)) {
      const node = process.cpuUsage();
      const serverBefore = processCpuMs(server.pid ?? 0);
      for (let i = 0; i < CPU_CALLS; i++) await call();
      const used = process.cpuUsage(node);
      cpu[name] = {
        node: (used.user + used.system) / 1000 / CPU_CALLS,
        server: (processCpuMs(server.pid ?? 0) - serverBefore) / CPU_CALLS,
      };
    }
    const bytes = await viaRaw();
    const decoding: number[] = [];
    for (let i = 0; i < TURNS; i++) decoding.push(await timed(() => ListSessionsResponse.decode(bytes)));

    console.log(
      `pause ${IDLE_MS} ms, load ${load.toFixed(1)} -> ${(loadavg()[0] ?? Number.NaN).toFixed(1)}, ${SESSIONS} sessions, reply ${bytes.length} bytes, ${TURNS} turns`,
    );
    for (const name of Object.keys(calls) as (keyof typeof calls)[]) {
      console.log(
        `${name.padEnd(8)} p50 ${percentile(times[name], 0.5).toFixed(2)} ms  p90 ${percentile(times[name], 0.9).toFixed(2)} ms  CPU node ${cpu[name]?.node.toFixed(2)} ms, session-svc ${cpu[name]?.server.toFixed(2)} ms`,
      );
    }
    console.log(`decoding alone (the generated decoder), p50 ${percentile(decoding, 0.5).toFixed(2)} ms`);
    client.close();
    stub.close();
    raw.close();
  } finally {
    server.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
