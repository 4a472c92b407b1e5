/** The README's example, against real servers: a fact told in one session is recalled in another. */
import { afterAll, beforeAll, expect, it } from "vitest";
import { remember } from "../examples/remember.js";
import { freshApp, Server } from "./servers.js";

let sessions: Server;
let memory: Server;
beforeAll(async () => {
  sessions = await Server.start("session-svc");
  memory = await Server.start("memory-svc");
});
afterAll(async () => {
  await sessions.dispose();
  await memory.dispose();
});

it("remembers a fact across sessions", async () => {
  expect(await remember(sessions.uri, memory.uri, freshApp())).toEqual([
    "Noted: Lisbon.",
    "Your favourite city is Lisbon.",
  ]);
});
