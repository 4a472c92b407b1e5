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
      "create_session",
      "delete_memory",
      "get_session",
      "list_apps",
      "list_memories",
      "list_sessions",
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
