/**
 * The session services the conformance cases run against: this package's client on a real
 * session-svc (sled, and PostgreSQL when $ADK_TEST_POSTGRES is set), and ADK TypeScript's own
 * InMemorySessionService, to show the two agree.
 */
import { InMemorySessionService, type BaseSessionService } from "@google/adk";
import { GrpcSessionService } from "../src/index.js";
import { Server, startPostgresSessionServer } from "./servers.js";

export interface Backend {
  name: string;
  /** This package's client (true) or ADK's in-memory service (false). */
  grpc: boolean;
  start(): Promise<void>;
  /** A service for one test (ADK's in-memory service: a fresh, empty one). */
  service(): BaseSessionService;
  stop(): Promise<void>;
}

function grpcBackend(name: string, startServer: () => Promise<Server | undefined>): Backend {
  let server: Server | undefined;
  let client: GrpcSessionService | undefined;
  return {
    name,
    grpc: true,
    async start() {
      server = await startServer();
      if (server !== undefined) client = new GrpcSessionService({ uri: server.uri });
    },
    service() {
      if (client === undefined) throw new Error(`${name} is not running`);
      return client;
    },
    async stop() {
      client?.close();
      await server?.dispose();
    },
  };
}

export const backends: Backend[] = [
  grpcBackend("session-svc on sled", () => Server.start("session-svc")),
  ...(process.env["ADK_TEST_POSTGRES"] ? [grpcBackend("session-svc on PostgreSQL", startPostgresSessionServer)] : []),
  {
    name: "ADK InMemorySessionService",
    grpc: false,
    start: () => Promise.resolve(),
    service: () => new InMemorySessionService(),
    stop: () => Promise.resolve(),
  },
];
