// The TypeScript MCP SDK against the real gateway (its URL and a token come from the
// environment, set by the Python suite that boots the services): list the tools, add a memory,
// find it, read a session resource, delete the memory.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.env.GATEWAY_URL;
const token = process.env.GATEWAY_TOKEN;

interface TextBlock {
  type: string;
  text?: string;
}

function textOf(result: Record<string, unknown>): string {
  const blocks = (result["content"] ?? []) as TextBlock[];
  return blocks.map((b) => b.text ?? "").join("\n");
}

test("the TypeScript SDK round trip", { skip: !url || !token }, async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url ?? ""), {
    requestInit: { headers: { Authorization: `Bearer ${token ?? ""}` } },
  });
  const client = new Client({ name: "ts-test", version: "1.0.0" });
  await client.connect(transport);
  try {
    const tools = await client.listTools();
    const names = tools.tools.map((t) => t.name).sort();
    assert.deepEqual(names, [
      "add_memory",
      "append_event",
      "append_memory_stream",
      "create_session",
      "delete_memory",
      "flush_memory_stream",
      "generate_memories",
      "get_session",
      "list_apps",
      "list_memories",
      "list_sessions",
      "purge_memories",
      "search_memory",
    ]);

    const marker = randomUUID().slice(0, 8);
    const fact = `Alice learns the ${marker} dialect of Portuguese`;
    const added = await client.callTool({ name: "add_memory", arguments: { text: fact } });
    assert.notEqual(added.isError, true, textOf(added));
    const id = (added.structuredContent as { id: string }).id;

    const found = await client.callTool({
      name: "search_memory",
      arguments: { query: `${marker} dialect`, limit: 3 },
    });
    const memories = (found.structuredContent as { memories: { id: string }[] }).memories;
    assert.deepEqual(
      memories.map((m) => m.id),
      [id],
    );
    assert.match(textOf(found), new RegExp(marker));

    // A search filtered by metadata, then a purge: a dry run first, then forced.
    const batch = { key: "batch", op: "=", value: marker };
    const tagged = await client.callTool({
      name: "add_memory",
      arguments: { text: `Alice flies a ${marker} kite`, metadata: { batch: marker, n: 3 } },
    });
    const taggedId = (tagged.structuredContent as { id: string }).id;
    const rule = { metadata: [[batch, { key: "n", op: ">=", value: 3 }]] };
    const filtered = await client.callTool({
      name: "search_memory",
      arguments: { query: "kite", filters: rule },
    });
    assert.deepEqual(
      (filtered.structuredContent as { memories: { id: string }[] }).memories.map((m) => m.id),
      [taggedId],
    );
    interface Purged {
      count: number;
      deleted: boolean;
      sample: { id: string }[];
    }
    const dry = await client.callTool({ name: "purge_memories", arguments: { filters: rule } });
    const dryRun = dry.structuredContent as unknown as Purged;
    assert.equal(dryRun.count, 1);
    assert.equal(dryRun.deleted, false);
    assert.deepEqual(
      dryRun.sample.map((m) => m.id),
      [taggedId],
    );
    const forced = await client.callTool({
      name: "purge_memories",
      arguments: { filters: rule, force: true },
    });
    const purged = forced.structuredContent as unknown as Purged;
    assert.equal(purged.count, 1);
    assert.equal(purged.deleted, true);
    const gone = await client.callTool({
      name: "search_memory",
      arguments: { query: "kite", filters: rule },
    });
    assert.deepEqual((gone.structuredContent as { memories: unknown[] }).memories, []);

    const session = `ts-${marker}`;
    await client.callTool({ name: "create_session", arguments: { session_id: session } });
    await client.callTool({
      name: "append_event",
      arguments: { session_id: session, author: "user", text: "Olá!" },
    });
    const resource = await client.readResource({
      uri: `adk://apps/demo/users/alice/sessions/${session}`,
    });
    const first = resource.contents[0] as { text?: string } | undefined;
    assert.match(first?.text ?? "", /1\. user: Olá!/);

    const deleted = await client.callTool({ name: "delete_memory", arguments: { memory_id: id } });
    assert.deepEqual(deleted.structuredContent, { deleted: 1 });
  } finally {
    await client.close();
  }
});
