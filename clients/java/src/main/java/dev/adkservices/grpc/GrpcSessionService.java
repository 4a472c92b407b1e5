package dev.adkservices.grpc;

import adk.session.v1.SessionOuterClass;
import adk.session.v1.SessionServiceGrpc;
import com.google.adk.events.Event;
import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.GetSessionConfig;
import com.google.adk.sessions.ListEventsResponse;
import com.google.adk.sessions.ListSessionsResponse;
import com.google.adk.sessions.Session;
import com.google.adk.sessions.SessionException;
import com.google.adk.sessions.SessionNotFoundException;
import com.google.common.collect.MapMaker;
import com.google.errorprone.annotations.CanIgnoreReturnValue;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.reactivex.rxjava3.core.Completable;
import io.reactivex.rxjava3.core.Flowable;
import io.reactivex.rxjava3.core.Maybe;
import io.reactivex.rxjava3.core.Single;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * ADK Java's {@link BaseSessionService} served by session-svc over gRPC: durable sessions that ADK
 * Python, Go and TypeScript agents share.
 *
 * <p>The server applies ADK's rules (state scopes, {@code temp:} keys never stored, ordering,
 * {@code State.REMOVED}); this class does to the caller's own {@link Session} on append what ADK's
 * base class does, once the server has stored the event, and maps statuses to ADK's exceptions.
 *
 * <p><b>Two writers.</b> ADK Java's {@code Session} is final and has no place for a revision, so
 * this client remembers, for each {@code Session} object it returned or appended to, the sequence
 * of the last event that object holds (a map with weak keys, compared by identity). An append sends
 * it as {@code expected_last_sequence}; if another writer appended meanwhile the server refuses and
 * the append fails with {@link StaleSessionException}: nothing is written and the caller's session
 * is unchanged. A session this client never saw (built by hand, or returned by another client
 * object) is checked against the stored one first, as ADK Python's database service does: it may
 * append only if the store holds nothing newer than its last event.
 *
 * <p>One instance is safe for concurrent use; {@link #close()} releases its channel.
 */
public final class GrpcSessionService implements BaseSessionService, AutoCloseable {
  private static final String SERVICE = SessionServiceGrpc.SERVICE_NAME;
  // Appends are retried too: the client gives every event an id, and the server answers a
  // re-sent event (same id and payload) with the stored one, applying nothing again.
  private static final List<String> RETRIED =
      List.of(
          "GetSession",
          "ListSessions",
          "ListEvents",
          "GetUserState",
          "GetAppState",
          "AppendEvent",
          "DeleteSession");
  // GetSession replies carry events up to this many bytes; ListEvents pages the rest.
  private static final long READ_BUDGET_BYTES = 4L << 20;
  private static final int SESSIONS_PAGE_SIZE = 1000;
  private static final int EVENTS_PAGE_SIZE = 100;

  private final ManagedChannel channel;
  private final Channel authorized;
  private final Optional<Duration> timeout;
  private final ConcurrentMap<Session, Long> sequences = new MapMaker().weakKeys().makeMap();

  /** A service for the endpoint a URI names (see {@link ServiceEndpoint}). */
  public static GrpcSessionService fromUri(String uri) {
    return new GrpcSessionService(
        ServiceEndpoint.parse(uri, ServiceEndpoint.SESSION_PORT, "session"));
  }

  public GrpcSessionService(ServiceEndpoint endpoint) {
    this.channel = endpoint.open(SERVICE, RETRIED);
    this.authorized = endpoint.authorized(channel);
    this.timeout = endpoint.timeout();
  }

  private SessionServiceGrpc.SessionServiceFutureStub call() {
    SessionServiceGrpc.SessionServiceFutureStub stub = SessionServiceGrpc.newFutureStub(authorized);
    return timeout.map(t -> stub.withDeadlineAfter(t.toNanos(), TimeUnit.NANOSECONDS)).orElse(stub);
  }

  // ------------------------------------------------------------------------------------------
  // BaseSessionService

  @Override
  public Single<Session> createSession(
      String appName,
      String userId,
      @Nullable ConcurrentMap<String, Object> state,
      @Nullable String sessionId) {
    return createSession(appName, userId, (Map<String, Object>) state, sessionId);
  }

  @Override
  public Single<Session> createSession(
      String appName,
      String userId,
      @Nullable Map<String, Object> state,
      @Nullable String sessionId) {
    Objects.requireNonNull(appName, "appName cannot be null");
    Objects.requireNonNull(userId, "userId cannot be null");
    return Single.defer(
        () -> {
          SessionOuterClass.CreateSessionRequest.Builder request =
              SessionOuterClass.CreateSessionRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setSessionId(sessionId == null ? "" : sessionId);
          if (state != null && !state.isEmpty()) {
            request.setState(JsonText.write(state));
          }
          return RxCalls.unary(() -> call().createSession(request.build()))
              .onErrorResumeNext(
                  e -> {
                    if (Errors.code(e) == Status.Code.ALREADY_EXISTS) {
                      return Single.error(
                          new SessionException(
                              "Session with id "
                                  + request.getSessionId().strip()
                                  + " already exists.",
                              e));
                    }
                    return Single.error(Errors.translate(e));
                  })
              .map(reply -> remember(EventMapping.sessionFromProto(reply, List.of()), reply));
        });
  }

  @Override
  public Maybe<Session> getSession(
      String appName, String userId, String sessionId, Optional<GetSessionConfig> config) {
    Objects.requireNonNull(config, "config cannot be null");
    return Maybe.defer(
        () -> {
          SessionOuterClass.GetSessionRequest.Builder request =
              SessionOuterClass.GetSessionRequest.newBuilder()
                  .setAppName(appName)
                  .setUserId(userId)
                  .setSessionId(sessionId)
                  .setMaxReplyEventBytes(READ_BUDGET_BYTES);
          config.flatMap(GetSessionConfig::numRecentEvents).ifPresent(request::setNumRecentEvents);
          config
              .flatMap(GetSessionConfig::afterTimestamp)
              .ifPresent(after -> request.setAfterTimestamp(Timestamps.ofInstant(after)));
          return RxCalls.unary(() -> call().getSession(request.build()))
              .flatMapMaybe(reply -> complete(reply, new ArrayList<>(reply.getEventsList()), ""))
              .onErrorResumeNext(this::emptyIfNotFound);
        });
  }

  /**
   * The session of a byte-bounded GetSession reply with its remaining events, read with ListEvents
   * up to the reply's last_sequence (the session as it was read); empty when the session was
   * deleted meanwhile.
   */
  private Maybe<Session> complete(
      SessionOuterClass.Session reply, List<SessionOuterClass.Event> events, String token) {
    long last = reply.getLastSequence();
    if (events.isEmpty() || events.get(events.size() - 1).getSequence() >= last) {
      return Maybe.just(remember(EventMapping.sessionFromProto(reply, events), reply));
    }
    // Pages continue with the same request and the next token.
    long after = reply.getEvents(reply.getEventsCount() - 1).getSequence();
    SessionOuterClass.ListEventsRequest request =
        SessionOuterClass.ListEventsRequest.newBuilder()
            .setAppName(reply.getAppName())
            .setUserId(reply.getUserId())
            .setSessionId(reply.getId())
            .setAfterSequence(after)
            .setPageSize(EVENTS_PAGE_SIZE)
            .setPageToken(token)
            .setMaxReplyEventBytes(READ_BUDGET_BYTES)
            .build();
    return RxCalls.unary(() -> call().listEvents(request))
        .flatMapMaybe(
            page -> {
              for (SessionOuterClass.Event event : page.getEventsList()) {
                if (event.getSequence() > last) {
                  break;
                }
                events.add(event);
              }
              boolean done =
                  page.getNextPageToken().isEmpty()
                      || events.get(events.size() - 1).getSequence() >= last;
              return done
                  ? Maybe.just(remember(EventMapping.sessionFromProto(reply, events), reply))
                  : complete(reply, events, page.getNextPageToken());
            });
  }

  @Override
  public Single<ListSessionsResponse> listSessions(String appName, String userId) {
    Objects.requireNonNull(appName, "appName cannot be null");
    Objects.requireNonNull(userId, "userId cannot be null");
    return listSessionsFrom(appName, userId, "", new LinkedHashMap<>())
        .map(
            found ->
                ListSessionsResponse.builder().sessions(new ArrayList<>(found.values())).build());
  }

  private Single<Map<List<String>, Session>> listSessionsFrom(
      String appName, String userId, String token, Map<List<String>, Session> found) {
    SessionOuterClass.ListSessionsRequest request =
        SessionOuterClass.ListSessionsRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setPageSize(SESSIONS_PAGE_SIZE)
            .setPageToken(token)
            .build();
    return RxCalls.unary(() -> call().listSessions(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .flatMap(
            page -> {
              for (SessionOuterClass.Session listed : page.getSessionsList()) {
                // A session updated while paging shows up again further on: its later place is
                // its current one.
                List<String> key = List.of(listed.getUserId(), listed.getId());
                found.remove(key);
                found.put(key, remember(EventMapping.sessionFromProto(listed, List.of()), listed));
              }
              return page.getNextPageToken().isEmpty()
                  ? Single.just(found)
                  : listSessionsFrom(appName, userId, page.getNextPageToken(), found);
            });
  }

  @Override
  public Completable deleteSession(String appName, String userId, String sessionId) {
    SessionOuterClass.DeleteSessionRequest request =
        SessionOuterClass.DeleteSessionRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setSessionId(sessionId)
            .build();
    return RxCalls.unary(() -> call().deleteSession(request))
        .ignoreElement()
        .onErrorResumeNext(e -> Completable.error(Errors.translate(e)));
  }

  /**
   * The first page (up to 100) of a session's stored events, with the token of the next page
   * ({@link #listEvents(String, String, String, String)} reads it). A missing session has no
   * events, as with ADK's in-memory service.
   */
  @Override
  public Single<ListEventsResponse> listEvents(String appName, String userId, String sessionId) {
    return listEvents(appName, userId, sessionId, "");
  }

  /** The page of a session's stored events that {@code pageToken} names ("" for the first). */
  public Single<ListEventsResponse> listEvents(
      String appName, String userId, String sessionId, String pageToken) {
    SessionOuterClass.ListEventsRequest request =
        SessionOuterClass.ListEventsRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setSessionId(sessionId)
            .setPageSize(EVENTS_PAGE_SIZE)
            .setPageToken(pageToken)
            .setMaxReplyEventBytes(READ_BUDGET_BYTES)
            .build();
    return RxCalls.unary(() -> call().listEvents(request))
        .map(
            page -> {
              List<Event> events = new ArrayList<>(page.getEventsCount());
              page.getEventsList().forEach(e -> events.add(EventMapping.fromProto(e)));
              ListEventsResponse.Builder response = ListEventsResponse.builder().events(events);
              if (!page.getNextPageToken().isEmpty()) {
                response.nextPageToken(page.getNextPageToken());
              }
              return response.build();
            })
        .onErrorResumeNext(
            e ->
                Errors.code(e) == Status.Code.NOT_FOUND
                    ? Single.just(ListEventsResponse.builder().events(List.of()).build())
                    : Single.error(Errors.translate(e)));
  }

  /**
   * Stores {@code event} and then, as ADK's base class does, applies its state delta to {@code
   * session} (skipping {@code temp:} keys, removing keys set to {@code State.REMOVED}) and adds it
   * to the session's events; the session's last update time becomes the event's. A partial event is
   * returned as it is, neither stored nor applied. An event without an id is given one first. Fails
   * with {@link StaleSessionException} when another writer appended to the session since {@code
   * session} was loaded, and {@link SessionNotFoundException} when it does not exist; either way
   * nothing was written and {@code session} is unchanged.
   */
  @CanIgnoreReturnValue
  @Override
  public Single<Event> appendEvent(Session session, Event event) {
    Objects.requireNonNull(session, "session cannot be null");
    Objects.requireNonNull(event, "event cannot be null");
    if (event.partial().orElse(false)) {
      return Single.just(event);
    }
    return Single.defer(
        () -> {
          if (event.id() == null || event.id().isEmpty()) {
            event.setId(Event.generateEventId());
          }
          SessionOuterClass.Event message = EventMapping.toProto(event);
          Long known = sequences.get(session);
          Single<Long> expected = known != null ? Single.just(known) : currentSequence(session);
          return expected.flatMap(sequence -> append(session, event, message, sequence));
        });
  }

  private Single<Event> append(
      Session session, Event event, SessionOuterClass.Event message, long expected) {
    SessionOuterClass.AppendEventRequest request =
        SessionOuterClass.AppendEventRequest.newBuilder()
            .setAppName(session.appName())
            .setUserId(session.userId())
            .setSessionId(session.id())
            .setEvent(message)
            .setExpectedLastSequence(expected)
            .build();
    return RxCalls.unary(() -> call().appendEvent(request))
        .onErrorResumeNext(e -> Single.error(appendError(session, e)))
        .map(
            reply -> {
              long stored = reply.getEvent().getSequence();
              if (stored <= expected) {
                // The store already held this event when the caller loaded the session: a
                // re-delivery, which, as with ADK's in-memory service, changes nothing.
                return event;
              }
              sequences.put(session, stored);
              BaseSessionService.super.appendEvent(session, event);
              session.lastUpdateTime(Timestamps.toInstant(reply.getLastUpdateTime()));
              return event;
            });
  }

  /**
   * The sequence to append at for a session this client never returned. As ADK Python's database
   * service rules for such a session: if the store was updated after the session's last update
   * time, the append is allowed only when the session's last event is the store's last event (or
   * neither has one). The sequence read here makes the append conditional, so a writer slipping in
   * between is still detected.
   */
  private Single<Long> currentSequence(Session session) {
    SessionOuterClass.GetSessionRequest request =
        SessionOuterClass.GetSessionRequest.newBuilder()
            .setAppName(session.appName())
            .setUserId(session.userId())
            .setSessionId(session.id())
            .setNumRecentEvents(1)
            .build();
    return RxCalls.unary(() -> call().getSession(request))
        .onErrorResumeNext(e -> Single.error(appendError(session, e)))
        .map(
            reply -> {
              if (Timestamps.toInstant(reply.getLastUpdateTime())
                  .isAfter(session.lastUpdateTime())) {
                String storedLast = reply.getEventsCount() == 0 ? null : reply.getEvents(0).getId();
                List<Event> own = session.events();
                String ownLast = own.isEmpty() ? null : own.get(own.size() - 1).id();
                if (!Objects.equals(storedLast, ownLast)) {
                  throw new StaleSessionException(null);
                }
              }
              return reply.getLastSequence();
            });
  }

  private static Throwable appendError(Session session, Throwable error) {
    Status.Code code = Errors.code(error);
    if (code == Status.Code.ABORTED) {
      return new StaleSessionException(error);
    }
    if (code == Status.Code.NOT_FOUND) {
      return new SessionNotFoundException("Session " + session.id() + " not found.", error);
    }
    if (code == Status.Code.ALREADY_EXISTS) {
      // Another event with this id and a different payload is stored.
      return new SessionException(
          ((io.grpc.StatusRuntimeException) error).getStatus().getDescription(), error);
    }
    return Errors.translate(error);
  }

  // ------------------------------------------------------------------------------------------
  // Beyond ADK's interface

  /** One scope's state, keys without their prefix. */
  public Single<Map<String, Object>> getUserState(String appName, String userId) {
    SessionOuterClass.GetUserStateRequest request =
        SessionOuterClass.GetUserStateRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .build();
    return RxCalls.unary(() -> call().getUserState(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(reply -> JsonText.readMap(reply.getState(), "StateResponse.state"));
  }

  /** The app's state, keys without the {@code app:} prefix. */
  public Single<Map<String, Object>> getAppState(String appName) {
    SessionOuterClass.GetAppStateRequest request =
        SessionOuterClass.GetAppStateRequest.newBuilder().setAppName(appName).build();
    return RxCalls.unary(() -> call().getAppState(request))
        .onErrorResumeNext(e -> Single.error(Errors.translate(e)))
        .map(reply -> JsonText.readMap(reply.getState(), "StateResponse.state"));
  }

  /**
   * A session's stored events after {@code afterSequence}, then its live appends, with no gap and
   * no duplicate. Completes when the session is deleted or the server stops (resume with the last
   * sequence received). Not subject to the endpoint's deadline.
   */
  public Flowable<StoredEvent> watchSession(
      String appName, String userId, String sessionId, long afterSequence) {
    SessionOuterClass.WatchSessionRequest request =
        SessionOuterClass.WatchSessionRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setSessionId(sessionId)
            .setAfterSequence(afterSequence)
            .build();
    return RxCalls
        .<SessionOuterClass.WatchSessionRequest, SessionOuterClass.WatchSessionResponse>
            serverStream(request, SessionServiceGrpc.newStub(authorized)::watchSession)
        .takeWhile(change -> change.hasEvent())
        .map(
            change ->
                new StoredEvent(
                    change.getEvent().getSequence(), EventMapping.fromProto(change.getEvent())))
        .onErrorResumeNext(e -> Flowable.error(Errors.translate(e)));
  }

  /**
   * Every committed event of an app (of one user when {@code userId} is not empty), from after
   * {@code cursor} ("" for from now). Each item carries the cursor to resume after it.
   */
  public Flowable<AppEvent> watchEvents(String appName, String userId, String cursor) {
    SessionOuterClass.WatchEventsRequest request =
        SessionOuterClass.WatchEventsRequest.newBuilder()
            .setAppName(appName)
            .setUserId(userId)
            .setCursor(cursor)
            .build();
    return RxCalls
        .<SessionOuterClass.WatchEventsRequest, SessionOuterClass.WatchEventsResponse>serverStream(
            request, SessionServiceGrpc.newStub(authorized)::watchEvents)
        .map(
            item ->
                new AppEvent(
                    item.getUserId(),
                    item.getSessionId(),
                    item.getEvent().getSequence(),
                    EventMapping.fromProto(item.getEvent()),
                    item.getCursor()))
        .onErrorResumeNext(e -> Flowable.error(Errors.translate(e)));
  }

  /** A stored event and its sequence in its session. */
  public record StoredEvent(long sequence, Event event) {}

  /** A committed event of an app's feed, and the cursor that resumes after it. */
  public record AppEvent(
      String userId, String sessionId, long sequence, Event event, String cursor) {}

  private Session remember(Session session, SessionOuterClass.Session message) {
    sequences.put(session, message.getLastSequence());
    return session;
  }

  private <T> Maybe<T> emptyIfNotFound(Throwable error) {
    return Errors.code(error) == Status.Code.NOT_FOUND
        ? Maybe.empty()
        : Maybe.error(Errors.translate(error));
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
