package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Hostile input and a server that stops mid-stream: each fails with a clear error, and nothing is
 * half-written (the store and the caller's session are as before).
 */
class HostileInputTest {
  private ServerProcess server;
  private GrpcSessionService sessions;
  private final String app = "hostile-" + UUID.randomUUID();

  @BeforeEach
  void start() throws Exception {
    server = ServerProcess.session();
    sessions = new GrpcSessionService(server.endpoint());
  }

  @AfterEach
  void stop() throws Exception {
    sessions.close();
    server.close();
  }

  @Test
  void controlCharactersInANameAreRefusedNamingTheField() {
    IllegalArgumentException error =
        assertThrows(
            IllegalArgumentException.class,
            () -> sessions.createSession(app, "bad\u0000user", null, null).blockingGet());
    assertTrue(error.getMessage().contains("user_id"), error.getMessage());
    assertTrue(sessions.listSessions(app, "user").blockingGet().sessions().isEmpty());
  }

  @Test
  void anOversizeEventIsRefusedAndNothingIsApplied() {
    Session session = sessions.createSession(app, "u", null, null).blockingGet();
    Event huge =
        Event.builder()
            .id("huge")
            .author("user")
            .content(Content.fromParts(Part.fromText("x".repeat((16 << 20) + 1024))))
            .actions(EventActions.builder().stateDelta(Map.of("k", "v")).build())
            .build();
    StatusRuntimeException error =
        assertThrows(
            StatusRuntimeException.class, () -> sessions.appendEvent(session, huge).blockingGet());
    assertTrue(error.getStatus().getCode() == Status.Code.RESOURCE_EXHAUSTED, error.toString());
    assertTrue(session.events().isEmpty());
    assertNull(session.state().get("k"));
    Session stored = sessions.getSession(app, "u", session.id(), Optional.empty()).blockingGet();
    assertTrue(stored.events().isEmpty());
    assertNull(stored.state().get("k"));
  }

  @Test
  void aStateValueThatIsNotJsonFailsBeforeAnythingIsSent() {
    Session session = sessions.createSession(app, "u", null, null).blockingGet();
    Event event =
        Event.builder()
            .id("e")
            .actions(EventActions.builder().stateDelta(Map.of("k", new Object())).build())
            .build();
    assertThrows(
        IllegalArgumentException.class, () -> sessions.appendEvent(session, event).blockingGet());
    assertTrue(session.events().isEmpty());
    assertTrue(
        sessions
            .getSession(app, "u", session.id(), Optional.empty())
            .blockingGet()
            .events()
            .isEmpty());
  }

  @Test
  void aBadUriIsRefusedWhenTheClientIsBuilt() {
    assertThrows(IllegalArgumentException.class, () -> GrpcSessionService.fromUri("http://x:1"));
    assertThrows(
        IllegalArgumentException.class, () -> GrpcSessionService.fromUri("grpc://x:1?colour=red"));
    assertThrows(
        IllegalArgumentException.class, () -> GrpcSessionService.fromUri("grpc://x:1?timeout=-3"));
    assertThrows(
        IllegalArgumentException.class,
        () -> GrpcSessionService.fromUri("grpc://x:1?token_env=ADK_TEST_NO_SUCH_VARIABLE"));
    assertThrows(
        IllegalArgumentException.class,
        () -> GrpcSessionService.fromUri("grpcs://x:1?ca_file=/nonexistent/ca.pem"));
  }

  @Test
  void aServerRestartEndsTheWatchAndAppendsResumeWhole() throws Exception {
    Session session = sessions.createSession(app, "u", null, "watched").blockingGet();
    for (int i = 0; i < 3; i++) {
      sessions
          .appendEvent(session, Event.builder().id("before-" + i).author("user").build())
          .blockingGet();
    }
    var watch = sessions.watchSession(app, "u", "watched", 0).test();
    watch.awaitCount(3);
    server.stop();
    // A stopped server ends its streams: the watcher sees the end (completion or UNAVAILABLE),
    // never a half-delivered event.
    assertTrue(watch.await(20, TimeUnit.SECONDS));
    assertEquals(3, watch.values().size());
    Event during = Event.builder().id("during").author("user").build();
    assertThrows(RuntimeException.class, () -> sessions.appendEvent(session, during).blockingGet());
    assertEquals(3, session.events().size());

    server.restart();
    try (GrpcSessionService again = new GrpcSessionService(server.endpoint())) {
      Session reloaded = again.getSession(app, "u", "watched", Optional.empty()).blockingGet();
      assertEquals(
          List.of("before-0", "before-1", "before-2"),
          reloaded.events().stream().map(Event::id).toList());
      again.appendEvent(reloaded, Event.builder().id("after").author("user").build()).blockingGet();
      var resumed = again.watchSession(app, "u", "watched", 3).test();
      resumed.awaitCount(1);
      assertEquals("after", resumed.values().get(0).event().id());
      assertEquals(4, resumed.values().get(0).sequence());
      resumed.cancel();
    }
  }
}
