package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.events.Event;
import com.google.adk.memory.MemoryEntry;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** ADK's memory cases against a real memory-svc. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class GrpcMemoryServiceTest {
  private ServerProcess server;
  private GrpcMemoryService memory;
  private String app;

  @BeforeAll
  void start() throws Exception {
    server = ServerProcess.memory();
    memory = new GrpcMemoryService(server.endpoint());
  }

  @AfterAll
  void stop() throws Exception {
    memory.close();
    server.close();
  }

  @BeforeEach
  void freshApp() {
    app = "memApp-" + UUID.randomUUID();
  }

  private Session session(String userId, String id, String... texts) {
    Session session = Session.builder(id).appName(app).userId(userId).build();
    long at = Instant.parse("2025-01-01T00:00:00Z").toEpochMilli();
    for (int i = 0; i < texts.length; i++) {
      session
          .events()
          .add(
              Event.builder()
                  .id(id + "-" + i)
                  .author(i % 2 == 0 ? "user" : "model")
                  .timestamp(at + i * 1000L)
                  .content(Content.fromParts(Part.fromText(texts[i])))
                  .build());
    }
    // An event without content is never remembered.
    session.events().add(Event.builder().id(id + "-empty").author("user").build());
    return session;
  }

  private List<MemoryEntry> search(String userId, String query) {
    return memory.searchMemory(app, userId, query).blockingGet().memories();
  }

  @Test
  void addedSessionIsFound() {
    memory
        .addSessionToMemory(
            session("u1", "s1", "My favourite city is Lisbon.", "Noted, Lisbon it is."))
        .blockingAwait();
    List<MemoryEntry> found = search("u1", "favourite city");
    assertTrue(!found.isEmpty());
    MemoryEntry best = found.get(0);
    assertEquals("user", best.author());
    assertEquals("My favourite city is Lisbon.", best.content().parts().get().get(0).text().get());
    assertEquals("2025-01-01T00:00:00Z", best.timestamp());
    assertEquals(2, search("u1", "Lisbon").size());
    assertTrue(search("u1", "Tokyo").isEmpty());
  }

  @Test
  void addingASessionAgainReplacesItsEntries() {
    memory.addSessionToMemory(session("u1", "s1", "apples and pears")).blockingAwait();
    memory.addSessionToMemory(session("u1", "s1", "plums only")).blockingAwait();
    assertTrue(search("u1", "apples").isEmpty());
    assertEquals(1, search("u1", "plums").size());
  }

  @Test
  void usersAreIsolated() {
    memory.addSessionToMemory(session("u1", "s1", "the secret word is marmalade")).blockingAwait();
    assertEquals(1, search("u1", "marmalade").size());
    assertTrue(search("u2", "marmalade").isEmpty());
  }

  @Test
  void limitBoundsTheResults() {
    String[] texts = new String[30];
    for (int i = 0; i < texts.length; i++) {
      texts[i] = "note " + i + " about gardening";
    }
    memory.addSessionToMemory(session("u1", "s1", texts)).blockingAwait();
    // ADK's searchMemory takes the server's default limit (10).
    assertEquals(10, search("u1", "gardening").size());
    List<GrpcMemoryService.FoundMemory> five =
        memory.search(app, "u1", "gardening", SearchOptions.defaults().withLimit(5)).blockingGet();
    assertEquals(5, five.size());
    for (int i = 1; i < five.size(); i++) {
      assertTrue(five.get(i - 1).score() >= five.get(i).score());
    }
    assertEquals("s1", five.get(0).sessionId());
    assertThrows(
        IllegalArgumentException.class,
        () -> memory.search(app, "u1", "x", SearchOptions.defaults().withLimit(-1)).blockingGet());
  }

  @Test
  void deleteAndList() {
    memory.addSessionToMemory(session("u1", "s1", "one fact", "another fact")).blockingAwait();
    assertEquals(2, memory.listMemories(app, "u1", 10, "").blockingGet().getMemoriesCount());
    assertEquals(1, memory.deleteMemory(app, "u1", "s1-0").blockingGet());
    assertEquals(1, memory.deleteSessionMemories(app, "u1", "s1").blockingGet());
    assertEquals(0, memory.listMemories(app, "u1", 10, "").blockingGet().getMemoriesCount());
  }

  @Test
  void badInputIsAnIllegalArgument() {
    Session bad = session("u\u0001", "s1", "text");
    assertThrows(
        IllegalArgumentException.class, () -> memory.addSessionToMemory(bad).blockingAwait());
    assertTrue(memory.listMemories(app, "u1", 10, "").blockingGet().getMemoriesList().isEmpty());
  }
}
