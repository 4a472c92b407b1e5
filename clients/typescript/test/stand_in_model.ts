/**
 * A local HTTP server standing in for an OpenAI-compatible chat model, for memory-svc
 * `--generator`: it answers each request with the next scripted answer (418 when none is
 * left) and keeps every request body, so a test can say what the model was asked.
 */
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "./servers.js";

export class StandInModel {
  /** The answers' message contents, in the order they are given. */
  readonly answers: string[] = [];
  /** The request bodies received, in order. */
  readonly requests: unknown[] = [];

  private constructor(private readonly http: HttpServer) {}

  static async start(): Promise<StandInModel> {
    const model: StandInModel = new StandInModel(
      createServer((request, response) => {
        const chunks: Buffer[] = [];
        request.on("data", (chunk: Buffer) => chunks.push(chunk));
        request.on("end", () => {
          model.requests.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
          const content = model.answers.shift();
          if (content === undefined) {
            response.writeHead(418).end();
            return;
          }
          response.writeHead(200, { "content-type": "application/json" });
          response.end(JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content } }] }));
        });
      }),
    );
    await new Promise<void>((done) => model.http.listen(0, "127.0.0.1", done));
    return model;
  }

  /** Scripts an extraction answer: facts as `[topic, fact, source event ids]`. */
  facts(...facts: [string, string, string[]][]): void {
    this.answers.push(
      JSON.stringify({ facts: facts.map(([topic, fact, ids]) => ({ topic, fact, source_event_ids: ids })) }),
    );
  }

  /** Scripts a consolidation answer. */
  decisions(...decisions: { fact: number; action: string; memory_id: string; text: string }[]): void {
    this.answers.push(JSON.stringify({ decisions }));
  }

  /** A memory-svc generating with this model, with further `args`. */
  memoryServer(args: string[] = []): Promise<Server> {
    const { port } = this.http.address() as AddressInfo;
    return Server.start("memory-svc", [
      "--generator",
      `openai:http://127.0.0.1:${port}/v1`,
      "--generator-model",
      "stand-in",
      ...args,
    ]);
  }

  close(): Promise<void> {
    return new Promise((done) => {
      this.http.close(() => {
        done();
      });
    });
  }
}
