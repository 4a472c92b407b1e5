package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import adk.memory.v1.Memory;
import adk.session.v1.SessionOuterClass;
import com.fasterxml.jackson.databind.JsonNode;
import com.google.adk.events.Event;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Generation through {@link GrpcMemoryService}: a real memory-svc started with {@code --generator}
 * pointing at a local HTTP server that stands in for an OpenAI-compatible chat model and answers as
 * each test scripts it. Covers rollback, facts given by the caller (a move, answered per period
 * with asOf) and event streams.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MemoryGenerationTest {
  private static final String USER = "u";

  private final StandIn model = new StandIn();
  private final String triggerApp = "trigger-" + UUID.randomUUID();
  private HttpServer http;
  private ServerProcess server;
  private GrpcMemoryService memory;
  private String app;

  /** The scripted model: answers are taken in order; every request body is kept. */
  static final class StandIn {
    private final Deque<String> answers = new ArrayDeque<>();
    private final List<JsonNode> requests = new ArrayList<>();

    synchronized void facts(String topic, String fact, String... sourceEventIds) {
      answers.add(
          JsonText.write(
              Map.of(
                  "facts",
                  List.of(
                      Map.of(
                          "topic",
                          topic,
                          "fact",
                          fact,
                          "source_event_ids",
                          List.of(sourceEventIds))))));
    }

    synchronized void decision(String action, String memoryId, String text) {
      answers.add(
          JsonText.write(
              Map.of(
                  "decisions",
                  List.of(
                      Map.of("fact", 0, "action", action, "memory_id", memoryId, "text", text)))));
    }

    synchronized int requestCount() {
      return requests.size();
    }

    synchronized JsonNode lastRequest() {
      return requests.get(requests.size() - 1);
    }

    void handle(HttpExchange exchange) throws IOException {
      JsonNode body = JsonText.MAPPER.readTree(exchange.getRequestBody().readAllBytes());
      String answer;
      synchronized (this) {
        requests.add(body);
        answer = answers.poll();
      }
      if (answer == null) {
        exchange.sendResponseHeaders(418, -1);
        exchange.close();
        return;
      }
      byte[] reply =
          JsonText.write(
                  Map.of(
                      "choices",
                      List.of(
                          Map.of(
                              "index",
                              0,
                              "message",
                              Map.of("role", "assistant", "content", answer)))))
              .getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().add("Content-Type", "application/json");
      exchange.sendResponseHeaders(200, reply.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(reply);
      }
    }
  }

  @BeforeAll
  void start() throws Exception {
    http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    http.createContext("/", model::handle);
    http.start();
    String baseUrl = "http://127.0.0.1:" + http.getAddress().getPort() + "/v1";
    server =
        ServerProcess.memory(
            List.of(
                "--generator",
                "openai:" + baseUrl,
                "--generator-model",
                "stand-in",
                "--stream-trigger-events",
                "20," + triggerApp + "=2"));
    memory = new GrpcMemoryService(server.endpoint());
  }

  @AfterAll
  void stop() throws Exception {
    memory.close();
    server.close();
    http.stop(0);
  }

  @BeforeEach
  void freshApp() {
    app = "generation-" + UUID.randomUUID();
  }

  private static SessionOuterClass.Event wireEvent(String id, String text) {
    return SessionOuterClass.Event.newBuilder()
        .setId(id)
        .setAuthor("user")
        .setTimestamp(Timestamps.ofMillis(1_000_000L))
        .setContent(
            SessionOuterClass.Content.newBuilder()
                .setRole("user")
                .addParts(SessionOuterClass.Part.newBuilder().setText(text)))
        .build();
  }

  private static Event event(String id, String text) {
    return Event.builder()
        .id(id)
        .invocationId("inv-" + id)
        .author("user")
        .timestamp(1_000_000L)
        .content(Content.fromParts(Part.fromText(text)))
        .build();
  }

  private Memory.GenerationJob generate(SessionOuterClass.Event event) {
    return memory
        .generateMemories(
            Memory.GenerateMemoriesRequest.newBuilder()
                .setAppName(app)
                .setUserId(USER)
                .setEvents(Memory.EventList.newBuilder().addEvents(event))
                .setOptions(Memory.GenerateOptions.newBuilder().setWait(true))
                .build())
        .blockingGet();
  }

  private List<String> generatedTexts(String query, SearchOptions options) {
    return memory
        .search(app, USER, query, options.withKind(Memory.MemoryKind.MEMORY_KIND_GENERATED))
        .blockingGet()
        .stream()
        .map(f -> f.entry().content().parts().get().get(0).text().get())
        .sorted()
        .toList();
  }

  private Memory.GenerationJob finished(String appName, Memory.GenerationJob job)
      throws InterruptedException {
    Instant deadline = Instant.now().plus(Duration.ofSeconds(20));
    while (job.getState() != Memory.GenerationState.GENERATION_STATE_SUCCEEDED
        && job.getState() != Memory.GenerationState.GENERATION_STATE_FAILED
        && Instant.now().isBefore(deadline)) {
      Thread.sleep(50);
      job = memory.getGenerationJob(appName, USER, job.getId()).blockingGet();
    }
    return job;
  }

  @Test
  void aRollbackRestoresAFact() {
    model.facts("personal_facts", "The user lives in Berlin.", "r1");
    generate(wireEvent("r1", "I live in Berlin."));
    List<Memory.MemoryRevision> first =
        memory.listMemoryRevisions(app, USER, Optional.empty()).toList().blockingGet();
    assertEquals(1, first.size());
    Memory.MemoryRevision berlin = first.get(0);
    assertEquals(Memory.RevisionAction.REVISION_ACTION_ADDED, berlin.getAction());

    model.facts("personal_facts", "The user lives in Lisbon.", "r2");
    model.decision("update", berlin.getMemoryId(), "The user lives in Lisbon.");
    generate(wireEvent("r2", "I moved to Lisbon."));
    assertEquals(
        List.of("The user lives in Lisbon."), generatedTexts("lives", SearchOptions.defaults()));

    Memory.MemoryRevision rolled =
        memory
            .rollbackMemory(app, USER, berlin.getMemoryId(), berlin.getRevisionId())
            .blockingGet();
    assertEquals(Memory.RevisionAction.REVISION_ACTION_ROLLED_BACK, rolled.getAction());
    assertEquals(berlin.getRevisionId(), rolled.getRestoredRevisionId());
    assertEquals("The user lives in Lisbon.", rolled.getPreviousFact());
    assertEquals("The user lives in Berlin.", rolled.getNewFact());
    assertEquals(
        List.of("The user lives in Berlin."), generatedTexts("lives", SearchOptions.defaults()));
    assertEquals(
        List.of(
            Memory.RevisionAction.REVISION_ACTION_ADDED,
            Memory.RevisionAction.REVISION_ACTION_UPDATED,
            Memory.RevisionAction.REVISION_ACTION_ROLLED_BACK),
        memory
            .listMemoryRevisions(app, USER, Optional.of(berlin.getMemoryId()))
            .map(Memory.MemoryRevision::getAction)
            .toList()
            .blockingGet());

    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () -> memory.rollbackMemory(app, USER, berlin.getMemoryId(), "none").blockingGet());
    assertTrue(refused.getMessage().contains("revision_id"), refused.getMessage());
  }

  @Test
  void givenFactsAreConsolidatedWithoutExtraction() {
    Instant berlinFrom = Instant.parse("2024-01-10T09:00:00Z");
    Instant moved = Instant.parse("2025-05-01T00:00:00Z");
    Memory.GenerateOptions wait = Memory.GenerateOptions.newBuilder().setWait(true).build();
    int asked = model.requestCount();
    Memory.GenerationJob job =
        memory
            .generateMemoriesFromFacts(
                app,
                USER,
                List.of(
                    GrpcMemoryService.ExtractedFact.of("The user lives in Berlin.")
                        .withTopic("personal_facts")
                        .withCustomMetadata(Map.of("source", "crm"))
                        .withValidFrom(berlinFrom)),
                wait)
            .blockingGet();
    assertEquals(1, job.getAdded());
    // Nothing to compare with, nothing to extract: the model was not asked.
    assertEquals(asked, model.requestCount());

    GrpcMemoryService.FoundMemory berlin =
        memory
            .listMemories(
                app, USER, ListOptions.defaults().withKind(Memory.MemoryKind.MEMORY_KIND_GENERATED))
            .toList()
            .blockingGet()
            .get(0);
    assertEquals(Optional.of(berlinFrom), berlin.validFrom());
    assertEquals("crm", berlin.metadata().get("source"));
    assertEquals("personal_facts", berlin.metadata().get("topic"));

    // The move: the model, asked only to consolidate, supersedes Berlin with Lisbon.
    model.decision("supersede", berlin.id(), "The user lives in Lisbon.");
    job =
        memory
            .generateMemoriesFromFacts(
                app,
                USER,
                List.of(
                    GrpcMemoryService.ExtractedFact.of("The user lives in Lisbon.")
                        .withValidFrom(moved)),
                wait)
            .blockingGet();
    assertEquals(Memory.GenerationState.GENERATION_STATE_SUCCEEDED, job.getState());
    assertEquals(1, job.getInvalidated());
    assertEquals(asked + 1, model.requestCount());

    assertEquals(
        List.of("The user lives in Lisbon."), generatedTexts("lives", SearchOptions.defaults()));
    assertEquals(
        List.of("The user lives in Berlin."),
        generatedTexts("lives", SearchOptions.defaults().withAsOf(moved.minusSeconds(1))));
    assertEquals(
        List.of("The user lives in Lisbon."),
        generatedTexts("lives", SearchOptions.defaults().withAsOf(moved)));
    List<GrpcMemoryService.FoundMemory> both =
        memory
            .listMemories(app, USER, ListOptions.defaults().withIncludeSuperseded(true))
            .toList()
            .blockingGet();
    assertEquals(2, both.size());
    assertEquals(Optional.of(moved), both.get(0).invalidAt());
    assertEquals(Optional.of(moved), both.get(1).validFrom());
  }

  @Test
  void aStreamBuffersEachEventOnceAndAFlushGenerates() throws InterruptedException {
    model.facts("preferences", "The user drinks oat milk.", "o1");
    Event silent = Event.builder().id("o0").invocationId("inv-o0").author("user").build();
    GrpcMemoryService.StreamAppend appended =
        memory
            .appendMemoryStream(
                app,
                USER,
                "chat",
                List.of(event("o1", "Oat milk, please."), event("o1", "Oat milk, please."), silent))
            .blockingGet();
    assertEquals(new GrpcMemoryService.StreamAppend(1, 1, Optional.empty()), appended);
    GrpcMemoryService.StreamAppend again =
        memory
            .appendMemoryStream(app, USER, "chat", List.of(event("o1", "Oat milk, please.")))
            .blockingGet();
    assertEquals(0, again.appended());
    assertEquals(1, again.buffered());

    List<GrpcMemoryService.MemoryStream> streams =
        memory.listMemoryStreams(app, USER).blockingGet();
    assertEquals(1, streams.size());
    assertEquals("chat", streams.get(0).streamId());
    assertEquals(1, streams.get(0).buffered());
    assertTrue(
        Duration.between(streams.get(0).lastAppendTime(), Instant.now()).abs().getSeconds() < 60);

    Memory.GenerationJob job =
        finished(app, memory.flushMemoryStream(app, USER, "chat").blockingGet());
    assertEquals(Memory.GenerationState.GENERATION_STATE_SUCCEEDED, job.getState());
    assertEquals(1, job.getAdded());
    String prompt = model.lastRequest().get("messages").get(1).get("content").asText();
    assertEquals(prompt.indexOf("Oat milk, please."), prompt.lastIndexOf("Oat milk, please."));
    assertTrue(prompt.contains("Oat milk, please."));
    assertTrue(memory.flushMemoryStream(app, USER, "chat").isEmpty().blockingGet());
    assertEquals(List.of(), memory.listMemoryStreams(app, USER).blockingGet());

    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                memory.appendMemoryStream(app, USER, "", List.of(event("o2", "x"))).blockingGet());
    assertTrue(refused.getMessage().startsWith("stream_id: "), refused.getMessage());
  }

  @Test
  void aStreamGeneratesByItselfAtItsTriggerCount() throws InterruptedException {
    model.facts("preferences", "The user likes jazz.", "j1");
    GrpcMemoryService.StreamAppend first =
        memory
            .appendMemoryStream(triggerApp, USER, "s1", List.of(event("j1", "I like jazz.")))
            .blockingGet();
    assertEquals(Optional.empty(), first.job());
    GrpcMemoryService.StreamAppend second =
        memory
            .appendMemoryStream(triggerApp, USER, "s1", List.of(event("j2", "Mostly bebop.")))
            .blockingGet();
    assertTrue(second.job().isPresent());
    assertEquals(0, second.buffered());
    Memory.GenerationJob job = finished(triggerApp, second.job().get());
    assertEquals(Memory.GenerationState.GENERATION_STATE_SUCCEEDED, job.getState());
    assertEquals(1, job.getAdded());
    assertEquals(List.of(), memory.listMemoryStreams(triggerApp, USER).blockingGet());
  }
}
