/**
 * `GrpcSessionService`: ADK TypeScript's `BaseSessionService` served by session-svc over gRPC,
 * a drop-in for `InMemorySessionService` and `DatabaseSessionService`.
 *
 * The server applies ADK's rules (state scopes, `temp:` keys never stored, ordering); this class
 * does to the caller's own `Session` object what ADK's base class does on append, and follows
 * `DatabaseSessionService` where ADK's services differ (see the README's conformance section).
 *
 * Two writers of one session never lose an event: every session this service reads with its
 * events (created, got, reloaded) is remembered with the sequence of the last event it was read
 * at, and appends send it as `expected_last_sequence`. When another writer appended meanwhile
 * the server answers ABORTED; then, as `DatabaseSessionService` does for a session older than
 * storage, the caller's session is reloaded (state and events) and the event appended after the
 * other writer's. A listed session (no events) is not remembered: remembering each one of a
 * large listing costs a tenth of the listing's time, and appends to listed sessions are rare.
 * Like a session built by hand, it is checked against storage before its first append.
 *
 * Appends travel over a stream per session being appended to (see `append_streams.ts`), ended
 * when idle and by `close()`.
 */
import {
  BaseSessionService,
  trimTempDeltaState,
  type AppendEventRequest,
  type CreateSessionRequest,
  type DeleteSessionRequest,
  type Event,
  type GetSessionConfig,
  type GetSessionRequest,
  type ListSessionsRequest,
  type ListSessionsResponse,
  type Session,
} from "@google/adk";
import { status } from "@grpc/grpc-js";
import { AppendStreams } from "./append_streams.js";
import {
  CallSettings,
  channelOptions,
  codeOf,
  GrpcServiceError,
  invoke,
  READ_BUDGET_BYTES,
  resolveEndpoint,
  translate,
  type ConnectionOptions,
} from "./connection.js";
import {
  SessionServiceClient,
  type AppendEventRequest as AppendEventMessage,
  type GetSessionRequest as GetSessionMessage,
  type ListSessionsRequest as ListSessionsMessage,
  SessionOrder,
  type Session as SessionMessage,
  type WatchEventsResponse,
  type WatchSessionResponse,
} from "./gen/adk/session/v1/session.js";
import { dumps, loadsObject } from "./json.js";
import { eventFromProto, eventToProto } from "./mapping.js";
import { toMillis, toTimestamp } from "./timestamps.js";
import { watch } from "./watch.js";

const SERVICE = "adk.session.v1.SessionService";
const RETRIED = [
  "GetSession",
  "ListSessions",
  "ListEvents",
  "DeleteSession",
  "AppendEvent",
  "GetUserState",
  "GetAppState",
];
// ListSessions serves at most 1,000 sessions a page, ListEvents 100 events.
const SESSIONS_PAGE_SIZE = 1000;
const EVENTS_PAGE_SIZE = 100;
const INT32_MAX = 2 ** 31 - 1;
// Reloads of a stale session before an append gives up (each one follows another writer's
// append, so more means the session is contended beyond reason).
const STALE_RELOADS = 8;
// An open stream keeps Node's event loop alive, so a script that never calls close() lingers
// this long before it exits; the events of one agent turn come closer together than that.
const APPEND_IDLE_SECONDS = 2;

/** How a session service connects, and how long it keeps a session's append stream. */
export interface SessionServiceOptions extends ConnectionOptions {
  /**
   * Seconds a session's append stream stays open after its last append (default 2): appends
   * within them share it, the next one opens another.
   */
  appendIdleSeconds?: number;
}

/** One change of a watched session. */
export type SessionChange =
  | { kind: "event"; event: Event; sequence: number }
  /** The session was deleted; the watch ends after this. */
  | { kind: "deleted" };

/** One committed event of an app, from {@link GrpcSessionService.watchEvents}. */
export interface AppEvent {
  userId: string;
  sessionId: string;
  event: Event;
  sequence: number;
  /** Pass back as `cursor` to resume after this event. */
  cursor: string;
}

export class GrpcSessionService extends BaseSessionService {
  private readonly client: SessionServiceClient;
  private readonly settings: CallSettings;
  private readonly appends: AppendStreams;
  /** The sequence each session object was read or last appended at. */
  private readonly sequences = new WeakMap<Session, number>();

  constructor(options: SessionServiceOptions) {
    super();
    const idleSeconds = options.appendIdleSeconds ?? APPEND_IDLE_SECONDS;
    if (!(idleSeconds > 0 && Number.isFinite(idleSeconds))) {
      throw new TypeError(`appendIdleSeconds must be a positive number of seconds, got ${String(idleSeconds)}`);
    }
    const endpoint = resolveEndpoint("session", options);
    this.client = new SessionServiceClient(
      endpoint.target,
      endpoint.credentials,
      channelOptions(SERVICE, RETRIED, options.channelOptions),
    );
    this.settings = new CallSettings(endpoint.token, endpoint.timeoutMs);
    this.appends = new AppendStreams(this.client, this.settings, idleSeconds * 1000);
  }

  /** A service for `grpc://host[:port]` or `grpcs://host[:port]` (see {@link ConnectionOptions}). */
  static fromUri(uri: string): GrpcSessionService {
    return new GrpcSessionService({ uri });
  }

  /** Closes the channel and the append streams: calls after this fail, appends in flight are answered. */
  close(): void {
    this.appends.close();
    this.client.close();
  }

  override async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<Session> {
    const request = {
      appName,
      userId,
      sessionId: sessionId ?? "",
      state: state === undefined ? "" : dumps(state, "state"),
      ttl: undefined,
      expireTime: undefined,
    };
    try {
      const reply = await invoke(this.client.createSession.bind(this.client), request, this.settings);
      return this.session(reply);
    } catch (e) {
      if (codeOf(e) === status.ALREADY_EXISTS) {
        // DatabaseSessionService's words.
        throw new GrpcServiceError(
          status.ALREADY_EXISTS,
          `Session with id ${request.sessionId.trim()} already exists.`,
          "CreateSession",
          { cause: e },
        );
      }
      throw translate(e, "CreateSession");
    }
  }

  override async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<Session | undefined> {
    if (!namesASession(appName, userId, sessionId)) {
      return undefined;
    }
    const reply = await this.read(appName, userId, sessionId, config);
    return reply === undefined ? undefined : this.session(reply);
  }

  /** The stored session as a message, every selected event in it; undefined when missing. */
  private async read(
    appName: string,
    userId: string,
    sessionId: string,
    config: GetSessionConfig | undefined,
  ): Promise<SessionMessage | undefined> {
    const request: GetSessionMessage = {
      appName,
      userId,
      sessionId,
      // ADK's services treat 0 (and no value) as "every event"; the wire's 0 means none.
      numRecentEvents: config?.numRecentEvents ? Math.min(config.numRecentEvents, INT32_MAX) : undefined,
      afterTimestamp: config?.afterTimestamp ? toTimestamp(config.afterTimestamp) : undefined,
      maxReplyEventBytes: READ_BUDGET_BYTES,
    };
    let reply: SessionMessage;
    try {
      reply = await invoke(this.client.getSession.bind(this.client), request, this.settings);
    } catch (e) {
      if (codeOf(e) === status.NOT_FOUND) {
        return undefined;
      }
      throw translate(e, "GetSession");
    }
    return (await this.readRest(reply)) ? reply : undefined;
  }

  /**
   * Adds to `reply` the events a byte-bounded GetSession left for ListEvents: those after its
   * last event, up to its `lastSequence` (the session as it was read). False when the session
   * was deleted meanwhile.
   */
  private async readRest(reply: SessionMessage): Promise<boolean> {
    let pageToken = "";
    for (;;) {
      const last = reply.events.at(-1);
      if (last === undefined || last.sequence >= reply.lastSequence) {
        return true;
      }
      const request = {
        appName: reply.appName,
        userId: reply.userId,
        sessionId: reply.id,
        afterSequence: last.sequence,
        pageSize: EVENTS_PAGE_SIZE,
        pageToken,
        maxReplyEventBytes: READ_BUDGET_BYTES,
      };
      let page;
      try {
        page = await invoke(this.client.listEvents.bind(this.client), request, this.settings);
      } catch (e) {
        if (codeOf(e) === status.NOT_FOUND) {
          return false;
        }
        throw translate(e, "ListEvents");
      }
      for (const event of page.events) {
        if (event.sequence > reply.lastSequence) {
          return true;
        }
        reply.events.push(event);
      }
      pageToken = page.nextPageToken;
      if (pageToken === "") {
        return true;
      }
    }
  }

  /**
   * Lists sessions as ADK's services do: `order` by last update time (ties by id), a page of
   * `limit` from `offset` or `page`, and the totals. The server orders, skips and counts: a
   * page of `limit` sessions is one call (one per 1,000 sessions of a larger limit), whatever
   * the number of sessions the listing holds.
   */
  override async listSessions({
    appName,
    userId,
    limit,
    offset,
    page,
    order,
  }: ListSessionsRequest): Promise<ListSessionsResponse> {
    const wireOrder =
      order === "desc" ? SessionOrder.SESSION_ORDER_NEWEST_FIRST : SessionOrder.SESSION_ORDER_OLDEST_FIRST;
    if (limit === undefined) {
      // Everything from `offset`: the total is what was read, plus what was skipped.
      const { sessions, total } = await this.listFrom(appName, userId, wireOrder, offset ?? 0, undefined);
      const totalItems = offset ? total : sessions.length;
      return { sessions, page: 1, limit: totalItems, totalItems, totalPages: totalItems === 0 ? 0 : 1 };
    }
    const start = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    const { sessions, total } = await this.listFrom(appName, userId, wireOrder, start, limit);
    return {
      sessions,
      page: page ?? (limit === 0 ? 1 : Math.floor(start / limit) + 1),
      limit,
      totalItems: total,
      totalPages: limit === 0 ? 0 : Math.ceil(total / limit),
    };
  }

  /**
   * Up to `most` sessions (all when undefined) of a listing from `offset` on, and the number
   * of sessions in the whole listing, counted by the server when an offset or a limit makes
   * what is read fall short of it.
   */
  private async listFrom(
    appName: string,
    userId: string | undefined,
    order: SessionOrder,
    offset: number,
    most: number | undefined,
  ): Promise<{ sessions: Session[]; total: number }> {
    if (!appName) {
      return { sessions: [], total: 0 };
    }
    // The first page holds each session once. A session updated while paging shows up again
    // further on, and its later place is its current one: from a second page on, sessions are
    // keyed by name (the first page's too).
    let listed: SessionMessage[] = [];
    let byName: Map<string, SessionMessage> | undefined;
    let total: number | undefined;
    const count = (): number => byName?.size ?? listed.length;
    let pageToken = "";
    do {
      const wanted = most === undefined ? SESSIONS_PAGE_SIZE : Math.min(most - count(), SESSIONS_PAGE_SIZE);
      const request: ListSessionsMessage = {
        appName,
        userId,
        // The wire's 0 means its default size; a limit of 0 still needs a call for the total.
        pageSize: Math.max(wanted, 1),
        pageToken,
        order,
        offset: pageToken === "" ? Math.min(offset, INT32_MAX) : 0,
        includeTotalSize: pageToken === "" && (offset !== 0 || most !== undefined),
      };
      let reply;
      try {
        reply = await invoke(this.client.listSessions.bind(this.client), request, this.settings);
      } catch (e) {
        throw translate(e, "ListSessions");
      }
      total ??= reply.totalSize;
      const page = reply.sessions.slice(0, wanted);
      if (pageToken === "") {
        listed = page;
      } else {
        byName ??= new Map(listed.map((message) => [nameOf(message), message]));
        for (const message of page) {
          const name = nameOf(message);
          byName.delete(name);
          byName.set(name, message);
        }
      }
      pageToken = reply.nextPageToken;
    } while (pageToken !== "" && (most === undefined || count() < most));
    const sessions = (byName === undefined ? listed : [...byName.values()]).map(sessionFromProto);
    return { sessions, total: total ?? sessions.length };
  }

  override async deleteSession({ appName, userId, sessionId }: DeleteSessionRequest): Promise<void> {
    if (!namesASession(appName, userId, sessionId)) {
      return;
    }
    try {
      await invoke(this.client.deleteSession.bind(this.client), { appName, userId, sessionId }, this.settings);
    } catch (e) {
      throw translate(e, "DeleteSession");
    }
  }

  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    // Partial events are streaming fragments: never stored, nothing applied (S6.1).
    if (event.partial) {
      return event;
    }
    event = trimTempDeltaState(event);
    // Encoded before anything is sent: an event that cannot be written fails here, whole.
    const message = eventToProto(event);
    let expected = this.sequences.get(session) ?? (await this.storedSequence(session));
    for (let reloads = 0; ; reloads++) {
      const request: AppendEventMessage = {
        appName: session.appName,
        userId: session.userId,
        sessionId: session.id,
        event: message,
        expectedLastSequence: expected,
      };
      try {
        const reply = await this.appends.append(request);
        const stored = reply.event?.sequence ?? 0;
        if (stored <= expected) {
          // The server already held this event (same id and payload) when the session was read:
          // a re-delivery, which changes nothing.
          return event;
        }
        this.sequences.set(session, stored);
        break;
      } catch (e) {
        const code = codeOf(e);
        if (code === status.ABORTED && reloads < STALE_RELOADS) {
          expected = await this.reload(session);
          continue;
        }
        if (code === status.NOT_FOUND) {
          throw new GrpcServiceError(
            status.NOT_FOUND,
            `Session ${session.id} not found for appendEvent`,
            "AppendEvent",
            { cause: e },
          );
        }
        throw translate(e, "AppendEvent");
      }
    }
    await super.appendEvent({ session, event });
    session.lastUpdateTime = event.timestamp;
    return event;
  }

  /**
   * The sequence to append at for a session this service did not return (built by hand, or
   * from another service). As `DatabaseSessionService` does, a session older than storage is
   * reloaded first.
   */
  private async storedSequence(session: Session): Promise<number> {
    const request: GetSessionMessage = {
      appName: session.appName,
      userId: session.userId,
      sessionId: session.id,
      numRecentEvents: 0,
      afterTimestamp: undefined,
      maxReplyEventBytes: 0,
    };
    let reply: SessionMessage;
    try {
      reply = await invoke(this.client.getSession.bind(this.client), request, this.settings);
    } catch (e) {
      if (codeOf(e) === status.NOT_FOUND) {
        throw new GrpcServiceError(status.NOT_FOUND, `Session ${session.id} not found for appendEvent`, "AppendEvent", {
          cause: e,
        });
      }
      throw translate(e, "GetSession");
    }
    if (toMillis(reply.lastUpdateTime) > session.lastUpdateTime) {
      return this.reload(session);
    }
    return reply.lastSequence;
  }

  /** Replaces the caller's session's state and events with storage's; the sequence read. */
  private async reload(session: Session): Promise<number> {
    const reply = await this.read(session.appName, session.userId, session.id, undefined);
    if (reply === undefined) {
      throw new GrpcServiceError(status.NOT_FOUND, `Session ${session.id} not found for appendEvent`, "AppendEvent");
    }
    const fresh = this.session(reply);
    session.state = fresh.state;
    session.events = fresh.events;
    session.lastUpdateTime = fresh.lastUpdateTime;
    this.sequences.set(session, reply.lastSequence);
    return reply.lastSequence;
  }

  /** The user-scoped state (keys without the `user:` prefix). */
  async getUserState({ appName, userId }: { appName: string; userId: string }): Promise<Record<string, unknown>> {
    try {
      const reply = await invoke(this.client.getUserState.bind(this.client), { appName, userId }, this.settings);
      return loadsObject(reply.state, "StateResponse.state");
    } catch (e) {
      throw translate(e, "GetUserState");
    }
  }

  /** The app-scoped state (keys without the `app:` prefix). */
  async getAppState({ appName }: { appName: string }): Promise<Record<string, unknown>> {
    try {
      const reply = await invoke(this.client.getAppState.bind(this.client), { appName }, this.settings);
      return loadsObject(reply.state, "StateResponse.state");
    } catch (e) {
      throw translate(e, "GetAppState");
    }
  }

  /**
   * The sequence of the last stored event of a session this service created, got or appended
   * to; undefined for a listed session before its first append.
   */
  sequenceOf(session: Session): number | undefined {
    return this.sequences.get(session);
  }

  /**
   * Follows a session: its stored events after `afterSequence` (default: from the first), then
   * live appends, until `signal` aborts (the iteration then simply ends) or the session is
   * deleted. A failure (the server restarting, say) ends it with a `GrpcServiceError`; resume
   * with the last `sequence` seen as `afterSequence`.
   */
  watchSession(request: {
    appName: string;
    userId: string;
    sessionId: string;
    afterSequence?: number;
    includePartial?: boolean;
    signal?: AbortSignal;
  }): AsyncGenerator<SessionChange, void, undefined> {
    const { signal, ...fields } = request;
    const call = () =>
      this.client.watchSession(
        { ...fields, afterSequence: fields.afterSequence ?? 0, includePartial: fields.includePartial ?? false },
        this.settings.stream(),
      );
    return watch(call, signal, "WatchSession", (message: WatchSessionResponse): SessionChange => {
      if (message.change?.$case === "event") {
        return { kind: "event", event: eventFromProto(message.change.value), sequence: message.change.value.sequence };
      }
      return { kind: "deleted" };
    });
  }

  /**
   * Follows every committed event of an app (or of one user) from now, or after `cursor`, until
   * `signal` aborts. A failure ends it with a `GrpcServiceError`; resume with the last `cursor`.
   */
  watchEvents(request: {
    appName: string;
    userId?: string;
    cursor?: string;
    signal?: AbortSignal;
  }): AsyncGenerator<AppEvent, void, undefined> {
    const { appName, userId, cursor, signal } = request;
    const call = () =>
      this.client.watchEvents({ appName, userId: userId ?? "", cursor: cursor ?? "" }, this.settings.stream());
    return watch(call, signal, "WatchEvents", (message: WatchEventsResponse): AppEvent => {
      const event = message.event;
      if (event === undefined) {
        throw new GrpcServiceError(status.INTERNAL, "a WatchEvents message without an event", "WatchEvents");
      }
      return {
        userId: message.userId,
        sessionId: message.sessionId,
        event: eventFromProto(event),
        sequence: event.sequence,
        cursor: message.cursor,
      };
    });
  }

  /** An ADK session from a message, remembered with the sequence it was read at. */
  private session(message: SessionMessage): Session {
    const session = sessionFromProto(message);
    this.sequences.set(session, message.lastSequence);
    return session;
  }
}

/** The ADK session a message holds. */
function sessionFromProto(message: SessionMessage): Session {
  const events = message.events.map(eventFromProto);
  const last = message.events.at(-1);
  return {
    id: message.id,
    appName: message.appName,
    userId: message.userId,
    state: loadsObject(message.state, "Session.state"),
    events,
    // The last event's own timestamp when it is here (S6.8), exactly as ADK holds it.
    lastUpdateTime:
      last !== undefined && last.sequence === message.lastSequence && message.lastSequence > 0
        ? (events.at(-1)?.timestamp ?? 0)
        : toMillis(message.lastUpdateTime),
  };
}

/**
 * A listed session's user and id, which name it in an app's listing. Identifiers hold no
 * control characters, so a NUL joins the two unambiguously.
 */
function nameOf(message: SessionMessage): string {
  return `${message.userId}\u0000${message.id}`;
}

/**
 * False for names no stored session can have (the server refuses to create them), which ADK
 * answers as "not found" rather than as an error. Session ids are compared stripped (S1.1).
 */
function namesASession(appName: string, userId: string, sessionId: string): boolean {
  return Boolean(appName && userId && sessionId && sessionId.trim());
}
