/**
 * An agent that remembers a fact across sessions: ADK TypeScript's Runner with sessions in
 * session-svc and memory in memory-svc. The model is a stand-in (a BaseLlm answering from the
 * conversation and the memories ADK's PreloadMemoryTool puts in its instructions), so the
 * example runs without a model endpoint.
 *
 *   ADK_SESSION_URI=grpc://localhost:50051 ADK_MEMORY_URI=grpc://localhost:50052 npm run example
 */
import {
  BaseLlm,
  LlmAgent,
  PreloadMemoryTool,
  Runner,
  type BaseLlmConnection,
  type LlmRequest,
  type LlmResponse,
} from "@google/adk";
import { GrpcMemoryService, GrpcSessionService } from "../src/index.js";

/** Notes "My favourite city is X." and answers "What is my favourite city?" from memory. */
class StandInModel extends BaseLlm {
  // eslint-disable-next-line @typescript-eslint/require-await
  override async *generateContentAsync(request: LlmRequest): AsyncGenerator<LlmResponse, void> {
    const said =
      request.contents
        .at(-1)
        ?.parts?.map((p) => p.text ?? "")
        .join(" ") ?? "";
    const remembered = JSON.stringify(request.config?.systemInstruction ?? "");
    const stated = /favourite city is (\w+)/.exec(said);
    const recalled = /favourite city is (\w+)/.exec(remembered);
    const text = stated
      ? `Noted: ${stated[1]}.`
      : recalled
        ? `Your favourite city is ${recalled[1]}.`
        : "I don't know yet.";
    yield { content: { role: "model", parts: [{ text }] }, turnComplete: true };
  }

  override connect(): Promise<BaseLlmConnection> {
    return Promise.reject(new Error("the stand-in model has no live connection"));
  }
}

/** Tells the agent a fact in one session and asks for it in another; returns the two answers. */
export async function remember(sessionUri: string, memoryUri: string, appName = "remember"): Promise<string[]> {
  const sessionService = new GrpcSessionService({ uri: sessionUri });
  const memoryService = new GrpcMemoryService({ uri: memoryUri });
  const agent = new LlmAgent({
    name: "recall",
    model: new StandInModel({ model: "stand-in" }),
    instruction: "Remember what the user tells you.",
    tools: [new PreloadMemoryTool()],
  });
  const runner = new Runner({ appName, agent, sessionService, memoryService });
  const ask = async (sessionId: string, text: string): Promise<string> => {
    let answer = "";
    for await (const event of runner.runAsync({
      userId: "alice",
      sessionId,
      newMessage: { role: "user", parts: [{ text }] },
    })) {
      answer = event.content?.parts?.map((p) => p.text ?? "").join("") || answer;
    }
    return answer;
  };
  try {
    const first = await sessionService.createSession({ appName, userId: "alice" });
    const noted = await ask(first.id, "My favourite city is Lisbon.");
    const done = await sessionService.getSession({ appName, userId: "alice", sessionId: first.id });
    if (done !== undefined) await memoryService.addSessionToMemory(done);
    const second = await sessionService.createSession({ appName, userId: "alice" });
    const recalled = await ask(second.id, "What is my favourite city?");
    return [noted, recalled];
  } finally {
    sessionService.close();
    memoryService.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"))) {
  const answers = await remember(
    process.env["ADK_SESSION_URI"] ?? "grpc://localhost:50051",
    process.env["ADK_MEMORY_URI"] ?? "grpc://localhost:50052",
  );
  console.log(answers.join("\n"));
}
