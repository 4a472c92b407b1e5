package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.adk.agents.LlmAgent;
import com.google.adk.events.Event;
import com.google.adk.models.BaseLlm;
import com.google.adk.models.BaseLlmConnection;
import com.google.adk.models.LlmRequest;
import com.google.adk.models.LlmResponse;
import com.google.adk.runner.Runner;
import com.google.adk.sessions.Session;
import com.google.adk.tools.LoadMemoryTool;
import com.google.genai.types.Content;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.Part;
import io.reactivex.rxjava3.core.Flowable;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The README's example: an ADK Java {@link Runner} with both services, remembering a fact across
 * sessions. A stand-in model answers deterministically: it acknowledges a stated fact, and for a
 * question it calls ADK's {@code loadMemory} tool, then answers from what memory returned.
 */
class RememberedFactExampleTest {
  private static final Pattern FACT = Pattern.compile("favourite city is (\\w+)");

  /** A model that needs no network: enough to drive a real Runner through a memory lookup. */
  static final class StandInModel extends BaseLlm {
    StandInModel() {
      super("stand-in");
    }

    @Override
    public Flowable<LlmResponse> generateContent(LlmRequest request, boolean stream) {
      Content last = request.contents().get(request.contents().size() - 1);
      Part part = last.parts().orElse(List.of()).get(0);
      if (part.functionResponse().isPresent()) {
        Matcher fact = FACT.matcher(part.functionResponse().get().response().toString());
        return reply(
            fact.find() ? "Your favourite city is " + fact.group(1) + "." : "I don't know.");
      }
      String text = part.text().orElse("");
      if (text.endsWith("?")) {
        FunctionCall call =
            FunctionCall.builder()
                .name("loadMemory")
                .args(Map.of("query", "favourite city"))
                .build();
        return Flowable.just(
            LlmResponse.builder()
                .content(
                    Content.builder()
                        .role("model")
                        .parts(Part.builder().functionCall(call).build())
                        .build())
                .build());
      }
      return reply("Noted.");
    }

    private static Flowable<LlmResponse> reply(String text) {
      return Flowable.just(
          LlmResponse.builder().content(Content.fromParts(Part.fromText(text))).build());
    }

    @Override
    public BaseLlmConnection connect(LlmRequest request) {
      throw new UnsupportedOperationException("the stand-in model has no live mode");
    }
  }

  @Test
  void aFactToldInOneSessionIsRecalledInAnother() throws Exception {
    try (ServerProcess sessionSvc = ServerProcess.session();
        ServerProcess memorySvc = ServerProcess.memory();
        GrpcSessionService sessions = GrpcSessionService.fromUri(sessionSvc.uri());
        GrpcMemoryService memory = GrpcMemoryService.fromUri(memorySvc.uri())) {
      LlmAgent agent =
          LlmAgent.builder()
              .name("recall")
              .model(new StandInModel())
              .instruction("Remember what the user tells you.")
              .tools(new LoadMemoryTool())
              .build();
      Runner runner =
          Runner.builder()
              .appName("recall-app")
              .agent(agent)
              .sessionService(sessions)
              .memoryService(memory)
              .build();

      Session first = sessions.createSession("recall-app", "alice").blockingGet();
      say(runner, first, "My favourite city is Lisbon.");
      Session told =
          sessions.getSession("recall-app", "alice", first.id(), Optional.empty()).blockingGet();
      memory.addSessionToMemory(told).blockingAwait();

      Session second = sessions.createSession("recall-app", "alice").blockingGet();
      List<Event> answer = say(runner, second, "What is my favourite city?");
      assertEquals(
          "Your favourite city is Lisbon.", answer.get(answer.size() - 1).content().get().text());
      // The whole turn (question, tool call, tool result, answer) is stored.
      assertEquals(
          4,
          sessions
              .getSession("recall-app", "alice", second.id(), Optional.empty())
              .blockingGet()
              .events()
              .size());
    }
  }

  private static List<Event> say(Runner runner, Session session, String text) {
    return runner
        .runAsync(session.userId(), session.id(), Content.fromParts(Part.fromText(text)))
        .toList()
        .blockingGet();
  }
}
