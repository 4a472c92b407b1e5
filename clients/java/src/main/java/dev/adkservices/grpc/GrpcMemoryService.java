package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import adk.memory.v1.MemoryServiceGrpc;
import adk.session.v1.SessionOuterClass;
import com.google.adk.events.Event;
import com.google.adk.memory.BaseMemoryService;
import com.google.adk.memory.MemoryEntry;
import com.google.adk.memory.SearchMemoryResponse;
import com.google.adk.sessions.Session;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.reactivex.rxjava3.core.Completable;
import io.reactivex.rxjava3.core.Single;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * ADK Java's {@link BaseMemoryService} served by memory-svc over gRPC: a searchable long-term
 * memory of past sessions per (app, user), shared with ADK Python, Go and TypeScript agents.
 *
 * <p>Beyond ADK's interface: searches with {@link SearchOptions} and scored results, direct writes,
 * deletion, listing, and memory generation with its jobs and revisions (these take and return the
 * {@code adk.memory.v1} messages). One instance is safe for concurrent use; {@link #close()}
 * releases its channel.
 */
public final class GrpcMemoryService implements BaseMemoryService, AutoCloseable {
  private static final List<String> RETRIED =
      List.of(
          "SearchMemory",
          "ListMemories",
          "GetGenerationJob",
          "ListMemoryRevisions",
          // Replaces the session's entries: the same request twice leaves the same memory.
          "AddSessionToMemory");

  private final ManagedChannel channel;
  private final Channel authorized;
  private final Optional<Duration> timeout;

  /** A service for the endpoint a URI names (see {@link ServiceEndpoint}). */
  public static GrpcMemoryService fromUri(String uri) {
    return new GrpcMemoryService(ServiceEndpoint.parse(uri, ServiceEndpoint.MEMORY_PORT, "memory"));
  }

  public GrpcMemoryService(ServiceEndpoint endpoint) {
    this.channel = endpoint.open(MemoryServiceGrpc.SERVICE_NAME, RETRIED);
    this.authorized = endpoint.authorized(channel);
    this.timeout = endpoint.timeout();
  }

  private MemoryServiceGrpc.MemoryServiceFutureStub call() {
    MemoryServiceGrpc.MemoryServiceFutureStub stub = MemoryServiceGrpc.newFutureStub(authorized);
    return timeout.map(t -> stub.withDeadlineAfter(t.toNanos(), TimeUnit.NANOSECONDS)).orElse(stub);
  }

  /**
   * Makes the session's events with content its whole memory (a second call replaces what the first
   * stored).
   */
  @Override
  public Completable addSessionToMemory(Session session) {
    return Single.defer(
            () -> {
              Memory.AddSessionToMemoryRequest request =
                  Memory.AddSessionToMemoryRequest.newBuilder()
                      .setSession(memorySession(session))
                      .build();
              return RxCalls.unary(() -> call().addSessionToMemory(request));
            })
        .ignoreElement()
        .onErrorResumeNext(e -> Completable.error(Errors.translate(e)));
  }

  @Override
  public Single<SearchMemoryResponse> searchMemory(String appName, String userId, String query) {
    return search(appName, userId, query, SearchOptions.defaults())
        .map(
            found -> {
              List<MemoryEntry> entries = new ArrayList<>(found.size());
              found.forEach(m -> entries.add(m.entry()));
              return SearchMemoryResponse.builder().setMemories(entries).build();
            });
  }

  /** A ranked search, best first, with each result's id, score, session and metadata. */
  public Single<List<FoundMemory>> search(
      String appName, String userId, String query, SearchOptions options) {
    return Single.defer(
            () -> {
              Memory.SearchMemoryRequest.Builder request =
                  Memory.SearchMemoryRequest.newBuilder()
                      .setAppName(appName)
                      .setUserId(userId)
                      .setQuery(query);
              options.fill(request);
              return RxCalls.unary(() -> call().searchMemory(request.build()));
            })
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(
            reply -> {
              List<FoundMemory> found = new ArrayList<>(reply.getMemoriesCount());
              reply.getMemoriesList().forEach(m -> found.add(FoundMemory.of(m)));
              return found;
            });
  }

  /** Appends events with content to a user's memory; the first copy of an event id wins. */
  public Single<Integer> addEventsToMemory(
      String appName, String userId, String sessionId, List<Event> events) {
    return Single.defer(
            () -> {
              Memory.AddEventsToMemoryRequest.Builder request =
                  Memory.AddEventsToMemoryRequest.newBuilder()
                      .setAppName(appName)
                      .setUserId(userId)
                      .setSessionId(sessionId);
              events.stream().flatMap(e -> memoryEvent(e).stream()).forEach(request::addEvents);
              return RxCalls.unary(() -> call().addEventsToMemory(request.build()));
            })
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(reply -> reply.getEntries());
  }

  /** Writes entries directly; returns their ids in order (generated where an id is empty). */
  public Single<List<String>> addMemory(
      String appName, String userId, List<Memory.MemoryEntry> memories) {
    Memory.AddMemoryRequest request =
        Memory.AddMemoryRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .addAllMemories(memories)
            .build();
    return RxCalls.unary(() -> call().addMemory(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(reply -> List.copyOf(reply.getIdsList()));
  }

  /** Deletes every entry of the user with this id (never ingested again); returns how many. */
  public Single<Integer> deleteMemory(String appName, String userId, String memoryId) {
    return delete(
        Memory.DeleteMemoryRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setMemoryId(memoryId)
            .build());
  }

  /** Deletes every entry that came from one session; returns how many. */
  public Single<Integer> deleteSessionMemories(String appName, String userId, String sessionId) {
    return delete(
        Memory.DeleteMemoryRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setSessionId(sessionId)
            .build());
  }

  /** Deletes every entry of a user; returns how many. */
  public Single<Integer> deleteAllMemories(String appName, String userId) {
    return delete(
        Memory.DeleteMemoryRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setAll(true)
            .build());
  }

  private Single<Integer> delete(Memory.DeleteMemoryRequest request) {
    return RxCalls.unary(() -> call().deleteMemory(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(reply -> reply.getDeleted());
  }

  /** One page of a user's memories in ingestion order ("" for the first page). */
  public Single<Memory.ListMemoriesResponse> listMemories(
      String appName, String userId, int pageSize, String pageToken) {
    Memory.ListMemoriesRequest request =
        Memory.ListMemoriesRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setPageSize(pageSize)
            .setPageToken(pageToken)
            .build();
    return RxCalls.unary(() -> call().listMemories(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)));
  }

  /** Generates memories from a source with memory-svc's generation model (--generator). */
  public Single<Memory.GenerationJob> generateMemories(Memory.GenerateMemoriesRequest request) {
    return RxCalls.unary(() -> call().generateMemories(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(Memory.GenerateMemoriesResponse::getJob);
  }

  /** A generation job's state. */
  public Single<Memory.GenerationJob> getGenerationJob(
      String appName, String userId, String jobId) {
    Memory.GetGenerationJobRequest request =
        Memory.GetGenerationJobRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setJobId(jobId)
            .build();
    return RxCalls.unary(() -> call().getGenerationJob(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)));
  }

  /** One page of the changes generation made to a user's memories, oldest first. */
  public Single<Memory.ListMemoryRevisionsResponse> listMemoryRevisions(
      Memory.ListMemoryRevisionsRequest request) {
    return RxCalls.unary(() -> call().listMemoryRevisions(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)));
  }

  /** A search result: ADK's entry and what memory-svc adds to it. */
  public record FoundMemory(
      String id, MemoryEntry entry, double score, String sessionId, Map<String, Object> metadata) {
    static FoundMemory of(Memory.MemoryEntry message) {
      MemoryEntry.Builder entry =
          MemoryEntry.builder()
              .content(EventMapping.contentFromProto(message.getContent()))
              .author(message.getAuthor());
      if (message.hasTimestamp()) {
        entry.timestamp(Timestamps.toInstant(message.getTimestamp()));
      } else {
        entry.timestamp(Instant.EPOCH);
      }
      return new FoundMemory(
          message.getId(),
          entry.build(),
          message.getScore(),
          message.getSessionId(),
          JsonText.readMap(message.getCustomMetadata(), "MemoryEntry.custom_metadata"));
    }
  }

  /**
   * What memory-svc reads of a session: its name and, of each event with content, the id, author,
   * timestamp and content (nothing else is remembered).
   */
  private static SessionOuterClass.Session memorySession(Session session) {
    SessionOuterClass.Session.Builder message =
        SessionOuterClass.Session.newBuilder()
            .setId(session.id())
            .setAppName(session.appName())
            .setUserId(session.userId());
    for (Event event : List.copyOf(session.events())) {
      memoryEvent(event).ifPresent(message::addEvents);
    }
    return message.build();
  }

  private static Optional<SessionOuterClass.Event> memoryEvent(Event event) {
    return event
        .content()
        .map(
            content ->
                SessionOuterClass.Event.newBuilder()
                    .setId(event.id() == null ? "" : event.id())
                    .setAuthor(event.author() == null ? "" : event.author())
                    .setTimestamp(Timestamps.ofMillis(event.timestamp()))
                    .setContent(EventMapping.contentToProto(content))
                    .build());
  }

  /** Shuts the channel down, waiting up to 5 s for calls in flight. */
  @Override
  public void close() throws InterruptedException {
    channel.shutdown();
    if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
      channel.shutdownNow();
    }
  }
}
