package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import adk.memory.v1.MemoryServiceGrpc;
import adk.session.v1.SessionOuterClass;
import adk.session.v1.SessionServiceGrpc;
import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.memory.BaseMemoryService;
import com.google.adk.memory.InMemoryMemoryService;
import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.InMemorySessionService;
import com.google.adk.sessions.Session;
import com.google.genai.types.Content;
import com.google.genai.types.Part;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;

/**
 * Timings of the Java client against running servers, beside ADK Java's in-memory services and the
 * raw gRPC stub (loopback, bounded counts, a warmup before each measurement):
 *
 * <pre>
 * java -cp ... dev.adkservices.grpc.ClientBench SESSION_HOST:PORT MEMORY_HOST:PORT
 * </pre>
 *
 * Prints one line per measurement: p50 and p99 per call, and calls per second.
 */
public final class ClientBench {
  private static final String APP = "bench-java";
  private static final String[] WORDS = {
    "garden",
    "lisbon",
    "river",
    "coffee",
    "piano",
    "mountain",
    "harbour",
    "winter",
    "library",
    "bicycle",
    "orchard",
    "lantern",
    "meadow",
    "violin",
    "canyon",
    "festival"
  };

  private ClientBench() {}

  public static void main(String[] args) throws Exception {
    String sessionTarget = args[0];
    String memoryTarget = args[1];
    try (GrpcSessionService sessions = GrpcSessionService.fromUri("grpc://" + sessionTarget);
        GrpcMemoryService memory = GrpcMemoryService.fromUri("grpc://" + memoryTarget)) {
      ManagedChannel sessionChannel =
          NettyChannelBuilder.forTarget(sessionTarget)
              .usePlaintext()
              .maxInboundMessageSize(64 << 20)
              .build();
      ManagedChannel memoryChannel =
          NettyChannelBuilder.forTarget(memoryTarget).usePlaintext().build();
      InMemorySessionService inMemory = new InMemorySessionService();

      appends("append c=1", sessions, 1, 300);
      appends("append c=1 (ADK InMemorySessionService)", inMemory, 1, 300);
      appends("append c=8", sessions, 8, 150);

      Session big = sessionWith(sessions, 1000);
      Session bigInMemory = sessionWith(inMemory, 1000);
      SessionOuterClass.GetSessionRequest raw =
          SessionOuterClass.GetSessionRequest.newBuilder()
              .setAppName(APP)
              .setUserId(big.userId())
              .setSessionId(big.id())
              .build();
      SessionServiceGrpc.SessionServiceBlockingStub sessionStub =
          SessionServiceGrpc.newBlockingStub(sessionChannel);
      double[] get =
          interleaved(
              "getSession 1000 events",
              40,
              () -> sessionStub.getSession(raw),
              () ->
                  sessions.getSession(APP, big.userId(), big.id(), Optional.empty()).blockingGet());
      System.out.printf(
          "getSession 1000 events: client overhead over the raw stub, p50 %.2f ms%n",
          get[1] - get[0]);
      SessionOuterClass.Session reply = sessionStub.getSession(raw);
      time(
          "getSession 1000 events: the client's mapping alone (in process)",
          100,
          () -> EventMapping.sessionFromProto(reply, reply.getEventsList()));
      time(
          "getSession 1000 events: ADK InMemorySessionService",
          40,
          () ->
              inMemory
                  .getSession(APP, bigInMemory.userId(), bigInMemory.id(), Optional.empty())
                  .blockingGet());

      String user = "search-" + System.nanoTime();
      fillMemory(MemoryServiceGrpc.newBlockingStub(memoryChannel), user, 10_000);
      InMemoryMemoryService inMemoryMemory = new InMemoryMemoryService();
      fillInMemory(inMemoryMemory, user, 10_000);
      MemoryServiceGrpc.MemoryServiceBlockingStub memoryStub =
          MemoryServiceGrpc.newBlockingStub(memoryChannel);
      String[] queries = {"lisbon coffee", "piano winter", "river harbour", "meadow violin"};
      int[] next = {0};
      Supplier<String> query = () -> queries[next[0]++ % queries.length];
      double[] search =
          interleaved(
              "searchMemory over 10,000 entries",
              200,
              () ->
                  memoryStub.searchMemory(
                      Memory.SearchMemoryRequest.newBuilder()
                          .setAppName(APP)
                          .setUserId(user)
                          .setQuery(query.get())
                          .build()),
              () -> memory.searchMemory(APP, user, query.get()).blockingGet());
      System.out.printf(
          "searchMemory: client overhead over the raw stub, p50 %.2f ms%n", search[1] - search[0]);
      time(
          "searchMemory over 10,000 entries: ADK InMemoryMemoryService",
          20,
          () -> inMemoryMemory.searchMemory(APP, user, query.get()).blockingGet());
      sessionChannel.shutdownNow();
      memoryChannel.shutdownNow();
    }
  }

  private static Event turn(int i) {
    return Event.builder()
        .id(null)
        .invocationId("inv-" + i / 4)
        .author(i % 2 == 0 ? "user" : "model")
        .content(
            Content.fromParts(
                Part.fromText(
                    "turn "
                        + i
                        + ": "
                        + WORDS[i % WORDS.length]
                        + " and more text of a usual length for a chat turn")))
        .actions(EventActions.builder().stateDelta(Map.of("turns", i)).build())
        .build();
  }

  /** c writers, each appending n events to its own session. */
  private static void appends(String name, BaseSessionService service, int c, int n)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(c);
    List<Session> own = new ArrayList<>();
    for (int w = 0; w < c; w++) {
      own.add(service.createSession(APP, "append-" + System.nanoTime()).blockingGet());
    }
    for (int w = 0; w < c; w++) {
      for (int i = 0; i < 20; i++) {
        service.appendEvent(own.get(w), turn(i)).blockingGet();
      }
    }
    long[][] latencies = new long[c][n];
    long start = System.nanoTime();
    List<Future<?>> running = new ArrayList<>();
    for (int w = 0; w < c; w++) {
      int writer = w;
      running.add(
          pool.submit(
              () -> {
                for (int i = 0; i < n; i++) {
                  long t = System.nanoTime();
                  service.appendEvent(own.get(writer), turn(i)).blockingGet();
                  latencies[writer][i] = System.nanoTime() - t;
                }
              }));
    }
    for (Future<?> f : running) {
      f.get();
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
    report(name, all, c * n / seconds);
    pool.shutdown();
  }

  private static Session sessionWith(BaseSessionService service, int events) {
    Session session = service.createSession(APP, "big-" + System.nanoTime()).blockingGet();
    for (int i = 0; i < events; i++) {
      service.appendEvent(session, turn(i)).blockingGet();
    }
    return session;
  }

  private static void fillMemory(
      MemoryServiceGrpc.MemoryServiceBlockingStub stub, String user, int n) {
    for (int batch = 0; batch < n; batch += 1000) {
      Memory.AddMemoryRequest.Builder request =
          Memory.AddMemoryRequest.newBuilder().setAppName(APP).setUserId(user);
      for (int i = batch; i < batch + 1000; i++) {
        request.addMemories(
            Memory.MemoryEntry.newBuilder()
                .setId("m" + i)
                .setAuthor("user")
                .setContent(
                    SessionOuterClass.Content.newBuilder()
                        .setRole("user")
                        .addParts(SessionOuterClass.Part.newBuilder().setText(sentence(i)))));
      }
      stub.addMemory(request.build());
    }
  }

  private static void fillInMemory(BaseMemoryService memory, String user, int n) {
    Session session = Session.builder("memory-source").appName(APP).userId(user).build();
    for (int i = 0; i < n; i++) {
      session
          .events()
          .add(
              Event.builder()
                  .id("m" + i)
                  .author("user")
                  .content(Content.fromParts(Part.fromText(sentence(i))))
                  .build());
    }
    memory.addSessionToMemory(session).blockingAwait();
  }

  private static String sentence(int i) {
    return "entry "
        + i
        + " mentions "
        + WORDS[i % WORDS.length]
        + " "
        + WORDS[(i / 16) % WORDS.length]
        + " and "
        + WORDS[(i / 256) % WORDS.length];
  }

  /**
   * Times the raw stub call and the client's call alternately, {@code n} of each after a warmup, so
   * that both see the same load; returns both p50s in ms.
   */
  private static double[] interleaved(String name, int n, Runnable raw, Runnable client) {
    for (int i = 0; i < Math.max(5, n / 5); i++) {
      raw.run();
      client.run();
    }
    long[] rawTimes = new long[n];
    long[] clientTimes = new long[n];
    for (int i = 0; i < n; i++) {
      long t = System.nanoTime();
      raw.run();
      rawTimes[i] = System.nanoTime() - t;
      t = System.nanoTime();
      client.run();
      clientTimes[i] = System.nanoTime() - t;
    }
    Arrays.sort(rawTimes);
    Arrays.sort(clientTimes);
    double rawSeconds = Arrays.stream(rawTimes).sum() / 1e9;
    double clientSeconds = Arrays.stream(clientTimes).sum() / 1e9;
    return new double[] {
      report(name + ": raw stub", rawTimes, n / rawSeconds),
      report(name + ": client", clientTimes, n / clientSeconds)
    };
  }

  /** Warms up, then times {@code n} calls; returns the p50 in ms. */
  private static double time(String name, int n, Runnable call) {
    for (int i = 0; i < Math.max(5, n / 5); i++) {
      call.run();
    }
    long[] latencies = new long[n];
    long start = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long t = System.nanoTime();
      call.run();
      latencies[i] = System.nanoTime() - t;
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    Arrays.sort(latencies);
    return report(name, latencies, n / seconds);
  }

  private static double report(String name, long[] sorted, double perSecond) {
    double p50 = sorted[sorted.length / 2] / 1e6;
    double p99 = sorted[Math.min(sorted.length - 1, (int) (sorted.length * 0.99))] / 1e6;
    System.out.printf("%-60s p50 %8.3f ms  p99 %8.3f ms  %8.0f/s%n", name, p50, p99, perSecond);
    return p50;
  }
}
