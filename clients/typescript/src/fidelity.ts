#!/usr/bin/env node
/**
 * The cross-language fidelity tool (clients/fidelity/README.md), through GrpcSessionService:
 *
 *   fidelity write --uri URI --app APP --user USER --session ID --fixture session.json
 *   fidelity read  --uri URI --app APP --user USER --session ID
 *
 * `write` parses each fixture event into an ADK Event (epoch seconds become epoch
 * milliseconds), creates the session with the fixture's state and appends the events in order;
 * `read` prints the session as {"state": ..., "events": [...]}, each event as ADK TypeScript
 * serializes it (camelCase, timestamp in epoch milliseconds).
 */
import { createEvent, type Event } from "@google/adk";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { GrpcSessionService } from "./session_service.js";

interface Fixture {
  state: Record<string, unknown>;
  events: (Partial<Event> & { timestamp: number })[];
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      uri: { type: "string" },
      app: { type: "string" },
      user: { type: "string" },
      session: { type: "string" },
      fixture: { type: "string" },
    },
    strict: true,
  });
  const { uri, app, user, session: sessionId } = values;
  if (
    (command !== "write" && command !== "read") ||
    !uri ||
    !app ||
    !user ||
    !sessionId ||
    (command === "write" && !values.fixture)
  ) {
    throw new Error("usage: fidelity write|read --uri URI --app APP --user USER --session ID [--fixture FILE]");
  }
  const service = new GrpcSessionService({ uri });
  try {
    if (command === "write") {
      const fixture = JSON.parse(readFileSync(values.fixture as string, "utf8")) as Fixture;
      const session = await service.createSession({ appName: app, userId: user, sessionId, state: fixture.state });
      for (const event of fixture.events) {
        await service.appendEvent({
          session,
          event: createEvent({ ...event, timestamp: Math.round(event.timestamp * 1000) }),
        });
      }
      return;
    }
    const session = await service.getSession({ appName: app, userId: user, sessionId });
    if (session === undefined) {
      throw new Error(`session ${sessionId} not found`);
    }
    process.stdout.write(`${JSON.stringify({ state: session.state, events: session.events })}\n`);
  } finally {
    service.close();
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  process.stderr.write(`fidelity: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exitCode = 1;
});
