/** The tests' own PostgreSQL schemas: those earlier runs left are swept, those of a run still going kept. */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { sweepSchemas } from "./servers.js";

const url = process.env["ADK_TEST_POSTGRES"] ?? "";

function psql(sql: string): string {
  return execFileSync("psql", [url, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql], { encoding: "utf8" }).trim();
}

const exists = (schema: string): boolean =>
  psql(`SELECT count(*) FROM pg_namespace WHERE nspname = '${schema}'`) === "1";

describe.skipIf(!url)("test schemas on PostgreSQL", () => {
  it("drops those made more than an hour ago and keeps the others", () => {
    const dayOld = `ts_${Date.now() - 24 * 3600 * 1000}_0a`;
    const minuteOld = `ts_${Date.now() - 60 * 1000}_0b`;
    for (const schema of [dayOld, minuteOld]) psql(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.t (x int)`);
    sweepSchemas(url);
    expect(exists(dayOld)).toBe(false);
    expect(exists(minuteOld)).toBe(true);
    psql(`DROP SCHEMA ${minuteOld} CASCADE`);
  });
});
