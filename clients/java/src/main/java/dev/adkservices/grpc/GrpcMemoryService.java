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
import io.reactivex.rxjava3.core.Flowable;
import io.reactivex.rxjava3.core.Maybe;
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
 * <p>Beyond ADK's interface: searches with {@link SearchOptions} (filters on metadata, topics,
 * validity in time) and scored results with their validity, direct writes, deletion, filtered
 * listing, purges by filter, memory generation (from events or from facts the caller extracted)
 * with its jobs, revisions and rollbacks, and event streams that generate by themselves (jobs and
 * revisions are the {@code adk.memory.v1} messages). One instance is safe for concurrent use;
 * {@link #close()} releases its channel.
 */
public final class GrpcMemoryService implements BaseMemoryService, AutoCloseable {
  private static final List<String> RETRIED =
      List.of(
          "SearchMemory",
          "ListMemories",
          "GetGenerationJob",
          "ListMemoryRevisions",
          "ListMemoryStreams",
          // Replaces the session's entries: the same request twice leaves the same memory.
          "AddSessionToMemory");

  private static final int PAGE_SIZE = 100;

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

  /**
   * Every memory of a user that passes {@code options} (valid now, by default), in ingestion order,
   * read a page of 100 at a time as the subscriber consumes them.
   */
  public Flowable<FoundMemory> listMemories(String appName, String userId, ListOptions options) {
    return Flowable.defer(
        () -> {
          Memory.ListMemoriesRequest.Builder request =
              Memory.ListMemoriesRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setPageSize(PAGE_SIZE);
          options.fill(request);
          return memoriesFrom(request.build());
        });
  }

  private Flowable<FoundMemory> memoriesFrom(Memory.ListMemoriesRequest request) {
    return RxCalls.unary(() -> call().listMemories(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .flatMapPublisher(
            page -> {
              Flowable<FoundMemory> here =
                  Flowable.fromIterable(page.getMemoriesList()).map(FoundMemory::of);
              String next = page.getNextPageToken();
              return next.isEmpty()
                  ? here
                  : here.concatWith(
                      Flowable.defer(
                          () -> memoriesFrom(request.toBuilder().setPageToken(next).build())));
            });
  }

  /**
   * Deletes the memories {@code options} select (superseded ones too) of an app, or of one user;
   * without {@link PurgeOptions#force()} a dry run that only counts them and returns a sample. A
   * forced purge is one durable operation on the server: cut short by a restart, it finishes after
   * it.
   */
  public Single<PurgeResult> purgeMemories(String appName, PurgeOptions options) {
    return Single.defer(
            () -> {
              Memory.PurgeMemoriesRequest request = options.toRequest(appName);
              return RxCalls.unary(() -> call().purgeMemories(request));
            })
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(
            reply -> {
              List<FoundMemory> sample = new ArrayList<>(reply.getSampleCount());
              reply.getSampleList().forEach(m -> sample.add(FoundMemory.of(m)));
              String operation = reply.getOperationId();
              return new PurgeResult(
                  reply.getCount(),
                  List.copyOf(sample),
                  operation.isEmpty() ? Optional.empty() : Optional.of(operation));
            });
  }

  /** Generates memories from a source with memory-svc's generation model (--generator). */
  public Single<Memory.GenerationJob> generateMemories(Memory.GenerateMemoriesRequest request) {
    return RxCalls.unary(() -> call().generateMemories(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(Memory.GenerateMemoriesResponse::getJob);
  }

  /**
   * Consolidates facts the caller already extracted (1 to 50) with the user's generated memories,
   * without asking the model to extract anything; returns the job ({@code options.wait} to answer
   * once it has finished).
   */
  public Single<Memory.GenerationJob> generateMemoriesFromFacts(
      String appName, String userId, List<ExtractedFact> facts, Memory.GenerateOptions options) {
    return Single.defer(
        () -> {
          Memory.FactList.Builder list = Memory.FactList.newBuilder();
          facts.forEach(f -> list.addFacts(f.toProto()));
          return generateMemories(
              Memory.GenerateMemoriesRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setFacts(list)
                  .setOptions(options)
                  .build());
        });
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

  /**
   * Every change generation and rollbacks made to a user's memories (to {@code memoryId} only, when
   * given), oldest first, read a page of 100 at a time.
   */
  public Flowable<Memory.MemoryRevision> listMemoryRevisions(
      String appName, String userId, Optional<String> memoryId) {
    return revisionsFrom(
        Memory.ListMemoryRevisionsRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setMemoryId(memoryId.orElse(""))
            .setPageSize(PAGE_SIZE)
            .build());
  }

  private Flowable<Memory.MemoryRevision> revisionsFrom(Memory.ListMemoryRevisionsRequest request) {
    return listMemoryRevisions(request)
        .flatMapPublisher(
            page -> {
              Flowable<Memory.MemoryRevision> here = Flowable.fromIterable(page.getRevisionsList());
              String next = page.getNextPageToken();
              return next.isEmpty()
                  ? here
                  : here.concatWith(
                      Flowable.defer(
                          () -> revisionsFrom(request.toBuilder().setPageToken(next).build())));
            });
  }

  /**
   * Restores a generated memory (a deleted or superseded one too) to the fact its revision {@code
   * revisionId} left it with, valid again; returns the revision the rollback recorded ({@code
   * REVISION_ACTION_ROLLED_BACK}).
   */
  public Single<Memory.MemoryRevision> rollbackMemory(
      String appName, String userId, String memoryId, String revisionId) {
    Memory.RollbackMemoryRequest request =
        Memory.RollbackMemoryRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setMemoryId(memoryId)
            .setRevisionId(revisionId)
            .build();
    return RxCalls.unary(() -> call().rollbackMemory(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(Memory.RollbackMemoryResponse::getRevision);
  }

  /**
   * Buffers events (1 to 100, each with an id) in the stream {@code streamId} of a user as they
   * happen; a session id is the natural stream id. memory-svc keeps the buffer durably, each event
   * id once, and starts generation from it by itself once the stream holds its app's trigger count
   * of events or has been quiet for its app's quiet time. Events without content are counted out by
   * the server. Needs memory-svc {@code --generator}.
   */
  public Single<StreamAppend> appendMemoryStream(
      String appName, String userId, String streamId, List<Event> events) {
    return Single.defer(
            () -> {
              Memory.AppendMemoryStreamRequest.Builder request =
                  Memory.AppendMemoryStreamRequest.newBuilder()
                      .setAppName(appName)
                      .setUserId(userId)
                      .setStreamId(streamId);
              events.forEach(e -> request.addEvents(streamEvent(e)));
              return RxCalls.unary(() -> call().appendMemoryStream(request.build()));
            })
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(
            reply ->
                new StreamAppend(
                    reply.getAppended(),
                    reply.getBuffered(),
                    reply.hasJob() ? Optional.of(reply.getJob()) : Optional.empty()));
  }

  /** Starts generation from the stream's buffered events now; empty when it held none. */
  public Maybe<Memory.GenerationJob> flushMemoryStream(
      String appName, String userId, String streamId) {
    Memory.FlushMemoryStreamRequest request =
        Memory.FlushMemoryStreamRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setStreamId(streamId)
            .build();
    return RxCalls.unary(() -> call().flushMemoryStream(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .flatMapMaybe(reply -> reply.hasJob() ? Maybe.just(reply.getJob()) : Maybe.empty());
  }

  /**
   * A user's streams holding events that wait for generation, by stream id (a stream whose events
   * were all handed to generation is not listed).
   */
  public Single<List<MemoryStream>> listMemoryStreams(String appName, String userId) {
    Memory.ListMemoryStreamsRequest request =
        Memory.ListMemoryStreamsRequest.newBuilder().setAppName(appName).setUserId(userId).build();
    return RxCalls.unary(() -> call().listMemoryStreams(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(
            reply -> {
              List<MemoryStream> streams = new ArrayList<>(reply.getStreamsCount());
              reply
                  .getStreamsList()
                  .forEach(
                      m ->
                          streams.add(
                              new MemoryStream(
                                  m.getStreamId(),
                                  m.getBuffered(),
                                  Timestamps.toInstant(m.getLastAppendTime()))));
              return List.copyOf(streams);
            });
  }

  /**
   * A memory as a search, a listing or a purge returns it: ADK's entry and what memory-svc adds to
   * it (score 0 outside a search), with when what it says became true (empty: since ever) and, once
   * a later fact superseded it, when it stopped being true.
   */
  public record FoundMemory(
      String id,
      MemoryEntry entry,
      double score,
      String sessionId,
      Map<String, Object> metadata,
      Optional<Instant> validFrom,
      Optional<Instant> invalidAt) {
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
          JsonText.readMap(message.getCustomMetadata(), "MemoryEntry.custom_metadata"),
          message.hasValidFrom()
              ? Optional.of(Timestamps.toInstant(message.getValidFrom()))
              : Optional.empty(),
          message.hasInvalidAt()
              ? Optional.of(Timestamps.toInstant(message.getInvalidAt()))
              : Optional.empty());
    }
  }

  /**
   * What {@link #purgeMemories} found (a dry run) or deleted (forced): the count, up to 10 of them
   * in (user, ingestion) order, and a forced purge's operation id as the server's log names it.
   */
  public record PurgeResult(long count, List<FoundMemory> sample, Optional<String> operationId) {}

  /**
   * What {@link #appendMemoryStream} did: the events it buffered (duplicates and events without
   * content left out), the events the stream holds after it, and the generation job it started when
   * it brought the stream to its trigger count.
   */
  public record StreamAppend(int appended, int buffered, Optional<Memory.GenerationJob> job) {}

  /**
   * A stream holding events that wait for generation: how many, and when the last was buffered
   * (server time; the quiet time runs from there).
   */
  public record MemoryStream(String streamId, int buffered, Instant lastAppendTime) {}

  /**
   * A fact the caller already extracted, for {@link #generateMemoriesFromFacts}: its text (1 to
   * 1000 characters), optionally one of the app's topic labels, metadata stored beside the keys
   * generation sets, and when it became true (else the time of the generation).
   */
  public record ExtractedFact(
      String text,
      Optional<String> topic,
      Map<String, Object> customMetadata,
      Optional<Instant> validFrom) {

    public static ExtractedFact of(String text) {
      return new ExtractedFact(text, Optional.empty(), Map.of(), Optional.empty());
    }

    public ExtractedFact withTopic(String topic) {
      return new ExtractedFact(text, Optional.of(topic), customMetadata, validFrom);
    }

    public ExtractedFact withCustomMetadata(Map<String, Object> customMetadata) {
      return new ExtractedFact(text, topic, customMetadata, validFrom);
    }

    public ExtractedFact withValidFrom(Instant validFrom) {
      return new ExtractedFact(text, topic, customMetadata, Optional.of(validFrom));
    }

    Memory.ExtractedFact toProto() {
      Memory.ExtractedFact.Builder message =
          Memory.ExtractedFact.newBuilder().setText(text).setTopic(topic.orElse(""));
      if (!customMetadata.isEmpty()) {
        message.setCustomMetadata(JsonText.write(customMetadata));
      }
      validFrom.ifPresent(t -> message.setValidFrom(Timestamps.ofInstant(t)));
      return message.build();
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

  /**
   * An event as a stream takes it: what memory-svc reads of one with content; of one without, its
   * id and author only (the server counts it out rather than refusing an append of no events).
   */
  private static SessionOuterClass.Event streamEvent(Event event) {
    return memoryEvent(event)
        .orElseGet(
            () ->
                SessionOuterClass.Event.newBuilder()
                    .setId(event.id() == null ? "" : event.id())
                    .setAuthor(event.author() == null ? "" : event.author())
                    .build());
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
