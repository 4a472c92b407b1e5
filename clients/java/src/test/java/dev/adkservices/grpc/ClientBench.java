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
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.IntConsumer;

/**
 * Timings of the Java client against running servers, beside the raw gRPC stub and ADK Java's
 * in-memory services (loopback, bounded counts):
 *
 * <pre>
 * java -cp ... dev.adkservices.grpc.ClientBench SESSION_HOST:PORT MEMORY_HOST:PORT [--peers-only]
 * </pre>
 *
 * <p>The workloads are those of the Go client's bench ({@code clients/go/bench}), so that the two
 * (and the Python client's, {@code bench/side_by_side.py}) compare call for call: 1,000 appends at
 * concurrency 1 and 8 (each writer its own session), 50 reads of a 1,000-event session, 200
 * searches among one user's 10,000 memory entries of 8 words each.
 *
 * <p>The JIT compiles the client's paths only after thousands of calls; measured before that, an
 * append costs 3-4 times what it costs later. So everything is first run until compiled ({@link
 * #warmUp}), and only then measured. Each workload is run again just before it is measured: the
 * workloads before it change what the JIT has seen (the appends at c=8 send {@code HashMap.putVal}
 * and Jackson's map reader, which reading a session leans on, back to the interpreter), and a read
 * of 1,000 events measured while they are recompiled cost twice its compiled time. The client's
 * overhead is measured as Go's bench does it: the same call through the client and through the stub
 * alone, alternating, so that the machine's load weighs on both alike.
 *
 * <p>Prints one Markdown row per measurement: workload, what was called, p50 and p99 in ms, calls
 * per second, the load average then. {@code --peers-only} leaves out ADK Java's in-memory services.
 */
public final class ClientBench {
  private static final String APP = "bench-java";
  private static final int APPENDS = 1000;
  private static final int EVENTS = 1000;
  private static final int GETS = 50;
  private static final int ENTRIES = 10_000;
  private static final int SEARCHES = 200;
  // Enough calls for C2 to compile the append, read and search paths (tiered compilation's
  // thresholds are a few thousand invocations; a read maps 1,000 events).
  private static final int WARMUP_APPENDS = 5000;
  private static final int WARMUP_GETS = 200;
  private static final int WARMUP_SEARCHES = 1000;
  private static final List<String> VOCABULARY =
      List.of(
          ("lisbon porto madrid paris berlin rome vienna prague coffee tea bread cheese wine river"
                  + " mountain beach forest city museum garden train flight hotel booking meeting"
                  + " project deadline report budget invoice contract holiday birthday dinner lunch"
                  + " recipe football tennis music concert guitar piano novel poem painting camera"
                  + " phone laptop")
              .split(" "));

  private final GrpcSessionService sessions;
  private final GrpcMemoryService memory;
  private final SessionServiceGrpc.SessionServiceBlockingStub sessionStub;
  private final MemoryServiceGrpc.MemoryServiceBlockingStub memoryStub;

  private ClientBench(
      GrpcSessionService sessions,
      GrpcMemoryService memory,
      ManagedChannel sessionChannel,
      ManagedChannel memoryChannel) {
    this.sessions = sessions;
    this.memory = memory;
    this.sessionStub = SessionServiceGrpc.newBlockingStub(sessionChannel);
    this.memoryStub = MemoryServiceGrpc.newBlockingStub(memoryChannel);
  }

  public static void main(String[] args) throws Exception {
    String sessionTarget = args[0];
    String memoryTarget = args[1];
    boolean peersOnly = Arrays.asList(args).contains("--peers-only");
    ManagedChannel sessionChannel =
        NettyChannelBuilder.forTarget(sessionTarget)
            .usePlaintext()
            .maxInboundMessageSize(64 << 20)
            .build();
    ManagedChannel memoryChannel =
        NettyChannelBuilder.forTarget(memoryTarget).usePlaintext().build();
    try (GrpcSessionService sessions = GrpcSessionService.fromUri("grpc://" + sessionTarget);
        GrpcMemoryService memory = GrpcMemoryService.fromUri("grpc://" + memoryTarget)) {
      new ClientBench(sessions, memory, sessionChannel, memoryChannel).run(peersOnly);
    } finally {
      sessionChannel.shutdownNow();
      memoryChannel.shutdownNow();
    }
  }

  private void run(boolean peersOnly) throws Exception {
    System.out.println(
        "| workload | via | p50 ms | p99 ms | calls/s | load (1 min) |\n|---|---|---:|---:|---:|---|");
    Session big = sessionWith(sessions, EVENTS);
    String user = "search-" + System.nanoTime();
    fillMemory(user);
    Random random = new Random(7);
    String[] queries = new String[SEARCHES];
    for (int i = 0; i < queries.length; i++) {
      queries[i] = word(random) + " " + word(random);
    }
    warmUp();

    appends("appends c=1", "Java client", sessions, 1, APPENDS);
    appends("appends c=8", "Java client", sessions, 8, APPENDS / 8);
    appendOverhead();
    SessionOuterClass.GetSessionRequest raw = getRequest(big);
    interleaved(
        "getSession 1,000 events",
        WARMUP_GETS,
        GETS,
        i -> sessionStub.getSession(raw),
        i -> getSession(sessions, big));
    mappingAlone(raw);
    interleaved(
        "searchMemory 10,000 entries",
        WARMUP_SEARCHES,
        SEARCHES,
        i -> memoryStub.searchMemory(searchRequest(user, queries[i % queries.length])),
        i -> memory.searchMemory(APP, user, queries[i % queries.length]).blockingGet());
    if (peersOnly) {
      return;
    }
    InMemorySessionService inMemory = new InMemorySessionService();
    appends("appends c=1", "ADK Java InMemorySessionService", inMemory, 1, APPENDS);
    Session bigInMemory = sessionWith(inMemory, EVENTS);
    time(
        "getSession 1,000 events",
        "ADK Java InMemorySessionService",
        GETS,
        i -> getSession(inMemory, bigInMemory));
    InMemoryMemoryService inMemoryMemory = new InMemoryMemoryService();
    fillInMemory(inMemoryMemory, user);
    time(
        "searchMemory 10,000 entries",
        "ADK Java InMemoryMemoryService",
        20,
        i -> inMemoryMemory.searchMemory(APP, user, queries[i % queries.length]).blockingGet());
  }

  /** Runs the append paths, client and stub, until the JIT has compiled them. */
  private void warmUp() {
    Session scratch = sessions.createSession(APP, "warmup").blockingGet();
    for (int i = 0; i < WARMUP_APPENDS; i++) {
      sessions.appendEvent(scratch, event(i)).blockingGet();
    }
    appendOverhead(WARMUP_APPENDS / 4, null);
  }

  /**
   * The client's mapping of a GetSession reply into ADK's session, timed alone: each time on a
   * reply just read through the stub, as the client maps it, not on one reply whose messages stay
   * in the CPU's caches.
   */
  private void mappingAlone(SessionOuterClass.GetSessionRequest raw) {
    long[] latencies = new long[GETS];
    long total = 0;
    for (int i = 0; i < GETS; i++) {
      SessionOuterClass.Session reply = sessionStub.getSession(raw);
      long t = System.nanoTime();
      EventMapping.sessionFromProto(reply, reply.getEventsList());
      latencies[i] = System.nanoTime() - t;
      total += latencies[i];
    }
    Arrays.sort(latencies);
    report(
        "getSession 1,000 events",
        "Java client's mapping alone (in process)",
        latencies,
        GETS / (total / 1e9));
  }

  private static Session getSession(BaseSessionService service, Session session) {
    Session read =
        service
            .getSession(session.appName(), session.userId(), session.id(), Optional.empty())
            .blockingGet();
    if (read == null || read.events().size() != EVENTS) {
      throw new IllegalStateException("short read of session " + session.id());
    }
    return read;
  }

  private static SessionOuterClass.GetSessionRequest getRequest(Session session) {
    return SessionOuterClass.GetSessionRequest.newBuilder()
        .setAppName(APP)
        .setUserId(session.userId())
        .setSessionId(session.id())
        .setMaxReplyEventBytes(4 << 20)
        .build();
  }

  private static Memory.SearchMemoryRequest searchRequest(String user, String query) {
    return Memory.SearchMemoryRequest.newBuilder()
        .setAppName(APP)
        .setUserId(user)
        .setQuery(query)
        .build();
  }

  /** An event as the Go client's bench writes it. */
  private static Event event(int i) {
    boolean user = i % 2 == 0;
    return Event.builder()
        .id(Event.generateEventId())
        .invocationId("inv-" + i / 2)
        .author(user ? "user" : "assistant")
        .content(
            Content.builder()
                .role(user ? "user" : "model")
                .parts(
                    Part.fromText(
                        "Message "
                            + i
                            + ": the quick brown fox jumps over the lazy dog near the river bank."))
                .build())
        .actions(EventActions.builder().stateDelta(Map.of("turn", i)).build())
        .build();
  }

  /** c writers, each appending n events to its own session. */
  private static void appends(String workload, String via, BaseSessionService service, int c, int n)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(c);
    List<Session> own = new ArrayList<>();
    for (int w = 0; w < c; w++) {
      own.add(service.createSession(APP, "writer-" + w).blockingGet());
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
                  service.appendEvent(own.get(writer), event(i)).blockingGet();
                  latencies[writer][i] = System.nanoTime() - t;
                }
              }));
    }
    for (Future<?> f : running) {
      f.get();
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
    report(workload, via, all, c * n / seconds);
    pool.shutdown();
  }

  /** Appends at c=1 through the stub alone and through the client, alternating. */
  private void appendOverhead() {
    appendOverhead(APPENDS / 4, "append c=1, alternating");
  }

  private void appendOverhead(int n, String workload) {
    Session viaStub = sessions.createSession(APP, "raw").blockingGet();
    Session viaClient = sessions.createSession(APP, "raw").blockingGet();
    long[] stubTimes = new long[n];
    long[] clientTimes = new long[n];
    long sequence = 0;
    for (int i = 0; i < n; i++) {
      SessionOuterClass.AppendEventRequest request =
          SessionOuterClass.AppendEventRequest.newBuilder()
              .setAppName(APP)
              .setUserId(viaStub.userId())
              .setSessionId(viaStub.id())
              .setEvent(EventMapping.toProto(event(i)))
              .setExpectedLastSequence(sequence)
              .build();
      long t = System.nanoTime();
      sequence = sessionStub.appendEvent(request).getLastSequence();
      stubTimes[i] = System.nanoTime() - t;
      Event event = event(i);
      t = System.nanoTime();
      sessions.appendEvent(viaClient, event).blockingGet();
      clientTimes[i] = System.nanoTime() - t;
    }
    if (workload != null) {
      reportPair(workload, stubTimes, clientTimes);
    }
  }

  private static Session sessionWith(BaseSessionService service, int events) {
    Session session = service.createSession(APP, "reader").blockingGet();
    for (int i = 0; i < events; i++) {
      service.appendEvent(session, event(i)).blockingGet();
    }
    return session;
  }

  /** The Go bench's memory: 100 sessions of 100 entries, 8 words each from its vocabulary. */
  private void fillMemory(String user) {
    Random random = new Random(1);
    for (int s = 0; s < ENTRIES / 100; s++) {
      Memory.AddMemoryRequest.Builder request =
          Memory.AddMemoryRequest.newBuilder().setAppName(APP).setUserId(user);
      for (int i = 0; i < 100; i++) {
        request.addMemories(
            Memory.MemoryEntry.newBuilder()
                .setId("m-" + s + "-" + i)
                .setAuthor("user")
                .setContent(
                    SessionOuterClass.Content.newBuilder()
                        .setRole("user")
                        .addParts(
                            SessionOuterClass.Part.newBuilder()
                                .setText(entryText(new Random(s * 100L + i))))));
      }
      memoryStub.addMemory(request.build());
    }
  }

  private static void fillInMemory(BaseMemoryService memory, String user) {
    Session session = Session.builder("memory-source").appName(APP).userId(user).build();
    for (int s = 0; s < ENTRIES / 100; s++) {
      for (int i = 0; i < 100; i++) {
        session
            .events()
            .add(
                Event.builder()
                    .id("m-" + s + "-" + i)
                    .author("user")
                    .content(Content.fromParts(Part.fromText(entryText(new Random(s * 100L + i)))))
                    .build());
      }
    }
    memory.addSessionToMemory(session).blockingAwait();
  }

  private static String entryText(Random random) {
    List<String> words = new ArrayList<>(8);
    for (int w = 0; w < 8; w++) {
      words.add(word(random));
    }
    return String.join(" ", words);
  }

  private static String word(Random random) {
    return VOCABULARY.get(random.nextInt(VOCABULARY.size()));
  }

  /**
   * The stub's call and the client's, alternating, {@code n} of each, after {@code warmup} of each
   * untimed.
   */
  private static void interleaved(
      String workload, int warmup, int n, IntConsumer stub, IntConsumer client) {
    for (int i = 0; i < warmup; i++) {
      stub.accept(i);
      client.accept(i);
    }
    long[] stubTimes = new long[n];
    long[] clientTimes = new long[n];
    for (int i = 0; i < n; i++) {
      long t = System.nanoTime();
      stub.accept(i);
      stubTimes[i] = System.nanoTime() - t;
      t = System.nanoTime();
      client.accept(i);
      clientTimes[i] = System.nanoTime() - t;
    }
    reportPair(workload, stubTimes, clientTimes);
  }

  private static void reportPair(String workload, long[] stubTimes, long[] clientTimes) {
    double stubSeconds = Arrays.stream(stubTimes).sum() / 1e9;
    double clientSeconds = Arrays.stream(clientTimes).sum() / 1e9;
    Arrays.sort(stubTimes);
    Arrays.sort(clientTimes);
    report(workload, "Java stub (alternating)", stubTimes, stubTimes.length / stubSeconds);
    report(workload, "Java client (alternating)", clientTimes, clientTimes.length / clientSeconds);
  }

  private static void time(String workload, String via, int n, IntConsumer call) {
    for (int i = 0; i < Math.max(5, n / 5); i++) {
      call.accept(i);
    }
    long[] latencies = new long[n];
    long start = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long t = System.nanoTime();
      call.accept(i);
      latencies[i] = System.nanoTime() - t;
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    Arrays.sort(latencies);
    report(workload, via, latencies, n / seconds);
  }

  private static void report(String workload, String via, long[] sorted, double perSecond) {
    double p50 = sorted[sorted.length / 2] / 1e6;
    double p99 = sorted[Math.min(sorted.length - 1, (int) (sorted.length * 0.99))] / 1e6;
    System.out.printf(
        "| %s | %s | %.3f | %.3f | %.0f | %s |%n", workload, via, p50, p99, perSecond, load());
  }

  /** The 1-minute load average, where the system tells it. */
  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (IOException e) {
      return "?";
    }
  }
}
