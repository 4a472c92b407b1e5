/**
 * `GrpcMemoryService`: ADK TypeScript's `BaseMemoryService` served by memory-svc over gRPC, a
 * drop-in for `InMemoryMemoryService`: the same scope (app, user), the same ingestion rule
 * (events with content; a session added again replaces its entries), but ranked search and
 * durable storage on the server. Search results are `MemoryEntry` objects as ADK's in-memory
 * service shapes them (the whole content, the author, the time as ISO 8601 UTC text), plus the
 * entry's id, session, custom metadata and score.
 *
 * Beyond the interface: writing events and entries directly, deleting, listing and purging
 * memories, searches with filters, validity in time (what was true when), and generated
 * memories (memory-svc `--generator`): from conversations, from facts the caller extracted, or
 * from event streams; their revisions, and rollback to one.
 */
import type { BaseMemoryService, Event, MemoryEntry, SearchMemoryRequest, Session } from "@google/adk";
import {
  CallSettings,
  channelOptions,
  invoke,
  resolveEndpoint,
  translate,
  type ConnectionOptions,
} from "./connection.js";
import {
  GenerationState,
  MemoryKind,
  MemoryServiceClient,
  RevisionAction,
  SearchMode,
  type GenerateMemoriesRequest,
  type GenerateOptions,
  type GenerationJob,
  type ExtractedFact as ExtractedFactMessage,
  type MemoryEntry as MemoryEntryMessage,
  type MemoryRevision,
} from "./gen/adk/memory/v1/memory.js";
import type { Timestamp } from "./gen/google/protobuf/timestamp.js";
import { dumpsObject, loadsObject } from "./json.js";
import { contentFromProto, contentToProto, memoryEventsToProto, memoryEventToProto } from "./mapping.js";
import {
  filterFields,
  instantToTimestamp,
  optionalTimestamp,
  type Instant,
  type MemoryFilterOptions,
} from "./memory_filter.js";
import { toDuration, toMillis, toTimestamp } from "./timestamps.js";

export { GenerationState, MemoryKind, RevisionAction, SearchMode, type GenerationJob, type MemoryRevision };

const SERVICE = "adk.memory.v1.MemoryService";
// Reads, deletes, and ingestions of events, which the server de-duplicates by id (M1.3).
// Never a purge (a forced one is a durable operation of its own), a rollback (it records a
// revision) or a flush (it starts a job).
const RETRIED = [
  "SearchMemory",
  "ListMemories",
  "GetGenerationJob",
  "ListMemoryRevisions",
  "ListMemoryStreams",
  "DeleteMemory",
  "AddSessionToMemory",
  "AddEventsToMemory",
  "AppendMemoryStream",
];

/** A memory as this service returns it: ADK's `MemoryEntry` and what the server knows of it. */
export interface GrpcMemoryEntry extends MemoryEntry {
  /** The event id for ingested events; generated for direct writes without one. */
  id: string;
  /** The session the entry came from, if any. */
  sessionId?: string;
  customMetadata: Record<string, unknown>;
  /** Relevance in a search result, higher is better; 0 in listings. */
  score: number;
  /** When what it says became true (ISO 8601 UTC, as `timestamp`); absent: since ever. */
  validFrom?: string;
  /** When it stopped being true (a later fact superseded it); absent: it still is. */
  invalidAt?: string;
}

/** A memory to write directly. */
export interface NewMemory {
  content: MemoryEntry["content"];
  author?: string;
  /** ISO 8601 text, as in ADK's `MemoryEntry`; absent: now. */
  timestamp?: string;
  id?: string;
  customMetadata?: Record<string, unknown>;
  /** When what it says became true (ISO 8601); absent: its timestamp, else the time of the write. */
  validFrom?: string;
  /** When it stopped being true (ISO 8601, after `validFrom`); absent: it still is. */
  invalidAt?: string;
}

/** Which memories count by their validity: those valid now, or at a time, or superseded ones too. */
export interface ValidityOptions {
  /** Only memories valid at this time (`validFrom <= asOf < invalidAt`); absent: now. */
  asOf?: Instant;
  /** Superseded memories too: those valid from `asOf` (or now) or before, whether or not they still were then. */
  includeSuperseded?: boolean;
}

/** Options of a search beyond ADK's (app, user, query). */
export interface SearchOptions extends MemoryFilterOptions, ValidityOptions {
  /** Most memories returned; default 10, at most 100. The limit applies after filtering. */
  limit?: number;
  /** The query's language (ISO 639-1); default: detected. */
  language?: string;
  mode?: SearchMode;
}

/** A fact already extracted, for `generateMemories` to consolidate without asking the model. */
export interface ExtractedFact {
  /** 1 to 1000 characters. */
  text: string;
  /** The label of one of the app's topics (memory-svc `--generator-topics`). */
  topic?: string;
  customMetadata?: Record<string, unknown>;
  /** When the fact became true; absent: the time of the generation. */
  validFrom?: Instant;
}

/** What `purgeMemories` found (a dry run) or deleted (forced). */
export interface PurgeResult {
  /** The memories that match, or that were deleted. */
  count: number;
  /** Up to 10 of them, in (user, ingestion) order. */
  sample: GrpcMemoryEntry[];
  /** A forced purge's operation id, as the server's log names it. */
  operationId?: string;
}

/** What `appendMemoryStream` did. */
export interface StreamAppend {
  /** The events the call buffered (those the stream already held, and events without content, left out). */
  appended: number;
  /** The events the stream holds after the call, waiting for generation. */
  buffered: number;
  /** The generation job the call started, when it brought the stream to its trigger count. */
  job?: GenerationJob;
}

/** An event stream holding events that wait for generation. */
export interface MemoryStream {
  streamId: string;
  /** The events it holds. */
  buffered: number;
  /** When its last event was buffered, in epoch milliseconds (server time): its quiet time runs from there. */
  lastAppendTime: number;
}

/** How memories are generated from a conversation (memory-svc `--generator`). */
export interface GenerationOptions {
  /** Answer once the job has finished, not once it is queued. */
  wait?: boolean;
  disableConsolidation?: boolean;
  /** Lifetime of the generated memories, in seconds. */
  ttlSeconds?: number;
  allowedTopics?: string[];
}

export interface GrpcMemoryServiceOptions extends ConnectionOptions {
  /** Most memories `searchMemory` returns (ADK's in-memory service has no limit; default 10). */
  searchLimit?: number;
  /** The language of every search that names none (ISO 639-1); default: detected. */
  searchLanguage?: string;
}

export class GrpcMemoryService implements BaseMemoryService {
  private readonly client: MemoryServiceClient;
  private readonly settings: CallSettings;
  private readonly searchLimit: number;
  private readonly searchLanguage: string;

  constructor(options: GrpcMemoryServiceOptions) {
    const endpoint = resolveEndpoint("memory", options);
    this.client = new MemoryServiceClient(
      endpoint.target,
      endpoint.credentials,
      channelOptions(SERVICE, RETRIED, options.channelOptions),
    );
    this.settings = new CallSettings(endpoint.token, endpoint.timeoutMs);
    this.searchLimit = options.searchLimit ?? 10;
    this.searchLanguage = options.searchLanguage ?? "";
  }

  /** A service for `grpc://host[:port]` or `grpcs://host[:port]`. */
  static fromUri(uri: string): GrpcMemoryService {
    return new GrpcMemoryService({ uri });
  }

  close(): void {
    this.client.close();
  }

  /**
   * Makes the session's events with content its whole memory (the session is sent by value,
   * so what is remembered is exactly the caller's copy). With `generate`, memories are also
   * generated from it.
   */
  async addSessionToMemory(session: Session, generate?: GenerationOptions): Promise<void> {
    const request = {
      source: {
        $case: "session" as const,
        value: {
          id: session.id,
          appName: session.appName,
          userId: session.userId,
          state: "",
          events: memoryEventsToProto(session.events),
          createTime: undefined,
          lastUpdateTime: undefined,
          lastSequence: 0,
          expireTime: undefined,
        },
      },
      generate: generate === undefined ? undefined : generateOptions(generate),
    };
    try {
      await invoke(this.client.addSessionToMemory.bind(this.client), request, this.settings);
    } catch (e) {
      throw translate(e, "AddSessionToMemory");
    }
  }

  /** Adds events with content; an event id already remembered is skipped. Returns how many were added. */
  async addEventsToMemory(request: {
    appName: string;
    userId: string;
    events: readonly Event[];
    sessionId?: string;
    customMetadata?: Record<string, unknown>;
  }): Promise<number> {
    const message = {
      appName: request.appName,
      userId: request.userId,
      sessionId: request.sessionId ?? "",
      events: memoryEventsToProto(request.events),
      customMetadata: dumpsObject(request.customMetadata, "customMetadata"),
    };
    try {
      const reply = await invoke(this.client.addEventsToMemory.bind(this.client), message, this.settings);
      return reply.entries;
    } catch (e) {
      throw translate(e, "AddEventsToMemory");
    }
  }

  /** Writes memories directly; returns their ids in order. */
  async addMemory(request: {
    appName: string;
    userId: string;
    memories: readonly NewMemory[];
    customMetadata?: Record<string, unknown>;
  }): Promise<string[]> {
    const message = {
      appName: request.appName,
      userId: request.userId,
      memories: request.memories.map(entryMessage),
      customMetadata: dumpsObject(request.customMetadata, "customMetadata"),
    };
    try {
      const reply = await invoke(this.client.addMemory.bind(this.client), message, this.settings);
      return reply.ids;
    } catch (e) {
      throw translate(e, "AddMemory");
    }
  }

  /**
   * ADK's search: the best memories of (app, user) for `query`, with `options` if given: the
   * ranking is among the memories that pass the filters and are valid now (or `asOf`).
   */
  async searchMemory(request: SearchMemoryRequest & SearchOptions): Promise<{ memories: GrpcMemoryEntry[] }> {
    const message = {
      appName: request.appName,
      userId: request.userId,
      query: request.query,
      limit: request.limit ?? this.searchLimit,
      language: request.language ?? this.searchLanguage,
      mode: request.mode ?? SearchMode.SEARCH_MODE_UNSPECIFIED,
      ...filterFields(request),
      ...validityFields(request),
    };
    try {
      const reply = await invoke(this.client.searchMemory.bind(this.client), message, this.settings);
      return { memories: reply.memories.map(entryFromProto) };
    } catch (e) {
      throw translate(e, "SearchMemory");
    }
  }

  /** Deletes one memory by id, a session's memories, or all of the user's; returns how many. */
  async deleteMemory(
    request: { appName: string; userId: string } & ({ memoryId: string } | { sessionId: string } | { all: true }),
  ): Promise<number> {
    const target =
      "memoryId" in request
        ? { $case: "memoryId" as const, value: request.memoryId }
        : "sessionId" in request
          ? { $case: "sessionId" as const, value: request.sessionId }
          : { $case: "all" as const, value: true };
    try {
      const reply = await invoke(
        this.client.deleteMemory.bind(this.client),
        { appName: request.appName, userId: request.userId, target },
        this.settings,
      );
      return reply.deleted;
    } catch (e) {
      throw translate(e, "DeleteMemory");
    }
  }

  /**
   * The memories of (app, user) in ingestion order that pass the filters and are valid now (or
   * `asOf`), read `pageSize` (default 100) at a time.
   */
  async *listMemories(
    request: { appName: string; userId: string; pageSize?: number } & MemoryFilterOptions & ValidityOptions,
  ): AsyncGenerator<GrpcMemoryEntry, void, undefined> {
    const fields = { ...filterFields(request), ...validityFields(request) };
    let pageToken = "";
    do {
      const message = {
        appName: request.appName,
        userId: request.userId,
        pageSize: request.pageSize ?? 100,
        pageToken,
        ...fields,
      };
      let reply;
      try {
        reply = await invoke(this.client.listMemories.bind(this.client), message, this.settings);
      } catch (e) {
        throw translate(e, "ListMemories");
      }
      yield* reply.memories.map(entryFromProto);
      pageToken = reply.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Generates memories of (app, user) from events, a session given by value, or a stored
   * session memory-svc reads from session-svc (`sessionId`); or consolidates `facts` already
   * extracted (text, or facts with a topic, metadata and a start of validity) without an
   * extraction call to the model. Returns the job.
   */
  async generateMemories(request: {
    appName: string;
    userId: string;
    events?: readonly Event[];
    session?: Session;
    sessionId?: string;
    facts?: readonly (string | ExtractedFact)[];
    options?: GenerationOptions;
  }): Promise<GenerationJob> {
    const { appName, userId } = request;
    let source: GenerateMemoriesRequest["source"];
    if (request.session !== undefined) {
      const session = request.session;
      source = {
        $case: "session",
        value: {
          id: session.id,
          appName: session.appName,
          userId: session.userId,
          state: "",
          events: memoryEventsToProto(session.events),
          createTime: undefined,
          lastUpdateTime: undefined,
          lastSequence: 0,
          expireTime: undefined,
        },
      };
    } else if (request.sessionId !== undefined) {
      source = { $case: "sessionRef", value: { appName, userId, sessionId: request.sessionId } };
    } else if (request.facts !== undefined) {
      if (request.events !== undefined) {
        throw new TypeError("generateMemories: give events or facts, not both");
      }
      source = { $case: "facts", value: { facts: request.facts.map(factMessage) } };
    } else {
      source = { $case: "events", value: { events: memoryEventsToProto(request.events ?? []) } };
    }
    try {
      const reply = await invoke(
        this.client.generateMemories.bind(this.client),
        { appName, userId, source, options: generateOptions(request.options ?? {}) },
        this.settings,
      );
      if (reply.job === undefined) {
        throw new Error("GenerateMemories answered without a job");
      }
      return reply.job;
    } catch (e) {
      throw translate(e, "GenerateMemories");
    }
  }

  /** The state of a generation job of (app, user). */
  async getGenerationJob(request: { appName: string; userId: string; jobId: string }): Promise<GenerationJob> {
    try {
      return await invoke(this.client.getGenerationJob.bind(this.client), request, this.settings);
    } catch (e) {
      throw translate(e, "GetGenerationJob");
    }
  }

  /** The changes generation (and rollbacks) made to (app, user)'s memories, or to `memoryId`'s only, oldest first. */
  async *listMemoryRevisions(request: {
    appName: string;
    userId: string;
    memoryId?: string;
  }): AsyncGenerator<MemoryRevision, void, undefined> {
    let pageToken = "";
    do {
      const message = {
        appName: request.appName,
        userId: request.userId,
        memoryId: request.memoryId ?? "",
        pageSize: 100,
        pageToken,
      };
      let reply;
      try {
        reply = await invoke(this.client.listMemoryRevisions.bind(this.client), message, this.settings);
      } catch (e) {
        throw translate(e, "ListMemoryRevisions");
      }
      yield* reply.revisions;
      pageToken = reply.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Restores the generated memory `memoryId` (a deleted or superseded one too) to the fact its
   * revision `revisionId` (from `listMemoryRevisions`) left it with, valid again; returns the
   * revision the rollback recorded (`REVISION_ACTION_ROLLED_BACK`).
   */
  async rollbackMemory(request: {
    appName: string;
    userId: string;
    memoryId: string;
    revisionId: string;
  }): Promise<MemoryRevision> {
    try {
      const reply = await invoke(this.client.rollbackMemory.bind(this.client), request, this.settings);
      if (reply.revision === undefined) {
        throw new Error("RollbackMemory answered without a revision");
      }
      return reply.revision;
    } catch (e) {
      throw translate(e, "RollbackMemory");
    }
  }

  /**
   * Deletes the memories of `userId` (of every user of the app when absent) that pass the
   * filters (at least one is needed), superseded ones too. Without `force` a dry run: nothing
   * is deleted, and the result says how many match, with a sample. A forced purge is one
   * durable operation on the server: cut short by a restart, it finishes after it.
   */
  async purgeMemories(
    request: { appName: string; userId?: string; force?: boolean } & MemoryFilterOptions,
  ): Promise<PurgeResult> {
    const message = {
      appName: request.appName,
      userId: request.userId ?? "",
      force: request.force ?? false,
      ...filterFields(request),
    };
    try {
      const reply = await invoke(this.client.purgeMemories.bind(this.client), message, this.settings);
      const result: PurgeResult = { count: reply.count, sample: reply.sample.map(entryFromProto) };
      if (reply.operationId !== "") result.operationId = reply.operationId;
      return result;
    } catch (e) {
      throw translate(e, "PurgeMemories");
    }
  }

  /**
   * Buffers `events` (1 to 100, each with an id) in the event stream `streamId` of (app,
   * user) as they happen; a session id is the natural stream id. memory-svc keeps the buffer
   * durably, each event id once, and starts generation from it by itself once the stream holds
   * the app's trigger count of events or has been quiet for the app's quiet time. Needs
   * memory-svc `--generator`.
   */
  async appendMemoryStream(request: {
    appName: string;
    userId: string;
    streamId: string;
    events: readonly Event[];
  }): Promise<StreamAppend> {
    const message = {
      appName: request.appName,
      userId: request.userId,
      streamId: request.streamId,
      // Events without content go too (as their id): the server counts them out, rather than
      // refusing an append that has none with content.
      events: request.events.map(memoryEventToProto),
    };
    try {
      const reply = await invoke(this.client.appendMemoryStream.bind(this.client), message, this.settings);
      const result: StreamAppend = { appended: reply.appended, buffered: reply.buffered };
      if (reply.job !== undefined) result.job = reply.job;
      return result;
    } catch (e) {
      throw translate(e, "AppendMemoryStream");
    }
  }

  /** Starts generation from the events buffered in the stream now; the job, or undefined when it held none. */
  async flushMemoryStream(request: {
    appName: string;
    userId: string;
    streamId: string;
  }): Promise<GenerationJob | undefined> {
    try {
      const reply = await invoke(this.client.flushMemoryStream.bind(this.client), request, this.settings);
      return reply.job;
    } catch (e) {
      throw translate(e, "FlushMemoryStream");
    }
  }

  /** The event streams of (app, user) holding buffered events, by stream id. */
  async listMemoryStreams(request: { appName: string; userId: string }): Promise<MemoryStream[]> {
    try {
      const reply = await invoke(this.client.listMemoryStreams.bind(this.client), request, this.settings);
      return reply.streams.map((stream) => ({
        streamId: stream.streamId,
        buffered: stream.buffered,
        lastAppendTime: toMillis(stream.lastAppendTime),
      }));
    } catch (e) {
      throw translate(e, "ListMemoryStreams");
    }
  }
}

function validityFields(options: ValidityOptions): { asOf: Timestamp | undefined; includeSuperseded: boolean } {
  return {
    asOf: optionalTimestamp(options.asOf, "asOf"),
    includeSuperseded: options.includeSuperseded ?? false,
  };
}

function factMessage(fact: string | ExtractedFact, index: number): ExtractedFactMessage {
  const given = typeof fact === "string" ? { text: fact } : fact;
  return {
    text: given.text,
    topic: given.topic ?? "",
    customMetadata: dumpsObject(given.customMetadata, `facts[${index}].customMetadata`),
    validFrom:
      given.validFrom === undefined ? undefined : instantToTimestamp(given.validFrom, `facts[${index}].validFrom`),
  };
}

function generateOptions(options: GenerationOptions): GenerateOptions {
  return {
    wait: options.wait ?? false,
    disableConsolidation: options.disableConsolidation ?? false,
    ttl: options.ttlSeconds === undefined ? undefined : toDuration(options.ttlSeconds),
    allowedTopics: options.allowedTopics ?? [],
  };
}

function entryMessage(entry: NewMemory): MemoryEntryMessage {
  return {
    id: entry.id ?? "",
    content: contentToProto(entry.content),
    author: entry.author ?? "",
    timestamp: isoTimestamp(entry.timestamp, "timestamp"),
    customMetadata: dumpsObject(entry.customMetadata, "MemoryEntry.customMetadata"),
    sessionId: "",
    score: 0,
    // Absent: valid from its timestamp, else from the time of the write (the server's default).
    validFrom: isoTimestamp(entry.validFrom, "validFrom"),
    invalidAt: isoTimestamp(entry.invalidAt, "invalidAt"),
  };
}

/** The Timestamp of ISO 8601 text, as ADK's `MemoryEntry` spells times. */
function isoTimestamp(text: string | undefined, field: string): Timestamp | undefined {
  if (text === undefined) {
    return undefined;
  }
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) {
    throw new TypeError(`MemoryEntry.${field} must be an ISO 8601 date-time, got ${JSON.stringify(text)}`);
  }
  return toTimestamp(ms);
}

/** ISO 8601 UTC text of a Timestamp, as ADK's in-memory service spells times: new Date(ms).toISOString(). */
function isoText(timestamp: Timestamp): string {
  return new Date(toMillis(timestamp)).toISOString();
}

function entryFromProto(message: MemoryEntryMessage): GrpcMemoryEntry {
  const entry: GrpcMemoryEntry = {
    id: message.id,
    content: message.content === undefined ? { parts: [] } : contentFromProto(message.content),
    customMetadata: loadsObject(message.customMetadata, "MemoryEntry.customMetadata"),
    score: message.score,
  };
  if (message.author !== "") entry.author = message.author;
  if (message.timestamp !== undefined) entry.timestamp = isoText(message.timestamp);
  if (message.sessionId !== "") entry.sessionId = message.sessionId;
  if (message.validFrom !== undefined) entry.validFrom = isoText(message.validFrom);
  if (message.invalidAt !== undefined) entry.invalidAt = isoText(message.invalidAt);
  return entry;
}
