/**
 * The servers the benches run against: the binaries of `ADK_SERVICES_BIN_DIR` (release builds
 * for figures worth keeping; the repository's debug build when unset), each started on port 0
 * over a data directory of its own.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";

export const BIN_DIR =
  process.env["ADK_SERVICES_BIN_DIR"] ?? resolve(import.meta.dirname, "..", "..", "..", "..", "..", "target", "debug");

/** A started server and the `host:port` it listens on. */
export interface Server {
  process: ChildProcess;
  address: string;
}

/** Starts `name` (`session-svc`, `memory-svc`) on port 0 over `dataDir`, once it listens. */
export function startServer(name: string, dataDir: string): Promise<Server> {
  const child = spawn(join(BIN_DIR, name), ["--listen", "127.0.0.1:0", "--data-dir", dataDir], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  return new Promise((done, fail) => {
    let output = "";
    const prefix = `${name} listening on `;
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const newline = output.indexOf("\n");
      if (newline < 0) return;
      child.stdout?.off("data", read);
      child.stdout?.resume();
      const line = output.slice(0, newline).trim();
      if (line.startsWith(prefix)) done({ process: child, address: line.slice(prefix.length) });
      else fail(new Error(`${name}: unexpected first line: ${line}`));
    };
    child.stdout?.on("data", read);
    child.once("exit", (code) => {
      fail(new Error(`${name} exited with ${code}`));
    });
  });
}
