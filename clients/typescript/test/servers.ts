/**
 * Runs the real session-svc and memory-svc binaries for the tests: from $ADK_SERVICES_BIN_DIR
 * (default <repo>/target/debug), on a free loopback port, each with its own temporary data
 * directory. Tests keep out of each other's way with fresh app names, not fresh servers.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomUUID } from "node:crypto";

const REPO_ROOT = resolve(import.meta.dirname, "..", "..", "..");
export const BIN_DIR = process.env["ADK_SERVICES_BIN_DIR"] ?? join(REPO_ROOT, "target", "debug");
const STARTUP_MS = 30_000;

export class Server {
  private constructor(
    readonly name: string,
    readonly address: string,
    private process: ChildProcess,
    private readonly args: string[],
    readonly dir: string,
  ) {}

  /** Starts `name` on 127.0.0.1:0 (or `listen`) and waits for its `NAME listening on ADDR` line. */
  static async start(name: string, args: string[] = [], dir?: string, listen = "127.0.0.1:0"): Promise<Server> {
    const binary = join(BIN_DIR, name);
    if (!existsSync(binary)) {
      throw new Error(
        `${binary} is missing: build it with \`cargo build -p ${name}\` or point ADK_SERVICES_BIN_DIR at the folder holding it`,
      );
    }
    const workdir = dir ?? mkdtempSync(join(tmpdir(), `${name}-`));
    const allArgs = ["--data-dir", join(workdir, "data"), ...args];
    const [process, address] = await launch(name, binary, workdir, listen, allArgs);
    return new Server(name, address, process, allArgs, workdir);
  }

  get uri(): string {
    return `grpc://${this.address}`;
  }

  /** Stops the server (SIGKILL when `crash`, else SIGTERM) and waits for it to exit. */
  async stop(crash = false): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) {
      return;
    }
    const exited = new Promise((done) => this.process.once("exit", done));
    this.process.kill(crash ? "SIGKILL" : "SIGTERM");
    await exited;
  }

  /** Starts the server again on the same address and data. */
  async restart(): Promise<void> {
    await this.stop();
    const binary = join(BIN_DIR, this.name);
    [this.process] = await launch(this.name, binary, this.dir, this.address, this.args);
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function launch(
  name: string,
  binary: string,
  workdir: string,
  listen: string,
  args: string[],
): Promise<[ChildProcess, string]> {
  const log = join(workdir, `${name}.log`);
  const child = spawn(binary, ["--listen", listen, ...args], { stdio: ["ignore", "pipe", openSync(log, "a")] });
  const prefix = `${name} listening on `;
  const address = await new Promise<string>((done, fail) => {
    let line = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(
        new Error(`${name} did not report its address within ${STARTUP_MS} ms; its log:\n${readFileSync(log, "utf8")}`),
      );
    }, STARTUP_MS);
    child.stdout?.on("data", (chunk: Buffer) => {
      line += chunk.toString();
      const end = line.indexOf("\n");
      if (end >= 0) {
        clearTimeout(timer);
        const first = line.slice(0, end).trim();
        if (first.startsWith(prefix)) done(first.slice(prefix.length));
        else fail(new Error(`unexpected first line from ${name}: ${first}`));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`${name} exited with ${code}; its log:\n${readFileSync(log, "utf8")}`));
    });
  });
  child.stdout?.resume();
  return [child, address];
}

/** A session-svc on PostgreSQL in a fresh schema of $ADK_TEST_POSTGRES, or undefined when unset. */
export function startPostgresSessionServer(): Promise<Server | undefined> {
  return startPostgresServer("session-svc");
}

/** How old a test schema is when a later run drops it: older than any test run lasts. */
const LEFT_BEHIND_MS = 60 * 60 * 1000;
let swept = false;

/**
 * Drops the schemas (`ts_<ms made at>_<random>`) earlier runs left in the database at `url`: a
 * server's schema outlives it, as its data directory does, so the first PostgreSQL server of each
 * test process sweeps what runs before it left.
 */
export function sweepSchemas(url: string): void {
  const listed = execFileSync(
    "psql",
    [
      url,
      "-v",
      "ON_ERROR_STOP=1",
      "-qAt",
      "-c",
      "SELECT nspname FROM pg_namespace WHERE nspname ~ '^ts_[0-9]+_[0-9a-f]+$'",
    ],
    { encoding: "utf8" },
  );
  const before = Date.now() - LEFT_BEHIND_MS;
  const old = listed.split("\n").filter((schema) => Number(schema.split("_")[1]) < before);
  for (const schema of old) {
    try {
      execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", `DROP SCHEMA IF EXISTS ${schema} CASCADE`]);
    } catch {
      // Another process sweeping at the same time dropped it first.
    }
  }
}

/** `name` (session-svc or memory-svc) on PostgreSQL in a fresh schema of $ADK_TEST_POSTGRES, or undefined when unset. */
export async function startPostgresServer(name: string): Promise<Server | undefined> {
  const url = process.env["ADK_TEST_POSTGRES"];
  if (!url) {
    return undefined;
  }
  if (!swept) {
    sweepSchemas(url);
    swept = true;
  }
  const schema = `ts_${Date.now()}_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
  execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", `CREATE SCHEMA ${schema}`]);
  const separator = url.includes("?") ? "&" : "?";
  return Server.start(name, ["--store", `${url}${separator}options=-csearch_path%3D${schema}`]);
}

/** An app name no other test uses. */
export function freshApp(): string {
  return `app-${randomUUID().slice(0, 12)}`;
}
