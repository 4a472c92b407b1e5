/**
 * `GrpcMemoryService`: ADK TypeScript's `BaseMemoryService` served by memory-svc over gRPC, a
 * drop-in for `InMemoryMemoryService`: the same scope (app, user), the same ingestion rule
 * (events with content; a session added again replaces its entries), but ranked search and
 * durable storage on the server. Search results are `MemoryEntry` objects as ADK's in-memory
 * service shapes them (the whole content, the author, the time as ISO 8601 UTC text), plus the
 * entry's id, session, custom metadata and score.
 *
 * Beyond the interface: writing events and entries directly, deleting and listing memories,
 * searches with options, and generated memories (memory-svc `--generator`).
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
  SearchMode,
  type GenerateMemoriesRequest,
  type GenerateOptions,
  type GenerationJob,
  type MemoryEntry as MemoryEntryMessage,
} from "./gen/adk/memory/v1/memory.js";
import { dumpsObject, loadsObject } from "./json.js";
import { contentFromProto, contentToProto, memoryEventsToProto } from "./mapping.js";
import { toDuration, toMillis, toTimestamp } from "./timestamps.js";

export { GenerationState, MemoryKind, SearchMode, type GenerationJob };

const SERVICE = "adk.memory.v1.MemoryService";
// Reads, deletes, and ingestions of events, which the server de-duplicates by id (M1.3).
const RETRIED = [
  "SearchMemory",
  "ListMemories",
  "GetGenerationJob",
  "ListMemoryRevisions",
  "DeleteMemory",
  "AddSessionToMemory",
  "AddEventsToMemory",
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
}

/** A memory to write directly. */
export interface NewMemory {
  content: MemoryEntry["content"];
  author?: string;
  /** ISO 8601 text, as in ADK's `MemoryEntry`; absent: now. */
  timestamp?: string;
  id?: string;
  customMetadata?: Record<string, unknown>;
}

/** Options of a search beyond ADK's (app, user, query). */
export interface SearchOptions {
  /** Most memories returned; default 10, at most 100. */
  limit?: number;
  /** Only entries at or after this time (epoch milliseconds). */
  after?: number;
  /** Only entries before this time (epoch milliseconds). */
  before?: number;
  /** Only entries by this author. */
  author?: string;
  /** The query's language (ISO 639-1); default: detected. */
  language?: string;
  mode?: SearchMode;
  kind?: MemoryKind;
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

  /** ADK's search: the best memories of (app, user) for `query`, with `options` if given. */
  async searchMemory(request: SearchMemoryRequest & SearchOptions): Promise<{ memories: GrpcMemoryEntry[] }> {
    const message = {
      appName: request.appName,
      userId: request.userId,
      query: request.query,
      limit: request.limit ?? this.searchLimit,
      afterTimestamp: request.after === undefined ? undefined : toTimestamp(request.after),
      beforeTimestamp: request.before === undefined ? undefined : toTimestamp(request.before),
      author: request.author ?? "",
      language: request.language ?? this.searchLanguage,
      mode: request.mode ?? SearchMode.SEARCH_MODE_UNSPECIFIED,
      kind: request.kind ?? MemoryKind.MEMORY_KIND_UNSPECIFIED,
      filter: undefined,
      // The memories valid now, as by default.
      asOf: undefined,
      includeSuperseded: false,
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

  /** Every memory of (app, user) in ingestion order, read page by page. */
  async *listMemories(request: {
    appName: string;
    userId: string;
    kind?: MemoryKind;
  }): AsyncGenerator<GrpcMemoryEntry, void, undefined> {
    let pageToken = "";
    do {
      const message = {
        appName: request.appName,
        userId: request.userId,
        pageSize: 100,
        pageToken,
        kind: request.kind ?? MemoryKind.MEMORY_KIND_UNSPECIFIED,
        filter: undefined,
        afterTimestamp: undefined,
        beforeTimestamp: undefined,
        author: "",
        asOf: undefined,
        includeSuperseded: false,
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
   * session memory-svc reads from session-svc (`sessionId`); returns the job.
   */
  async generateMemories(request: {
    appName: string;
    userId: string;
    events?: readonly Event[];
    session?: Session;
    sessionId?: string;
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
  let timestamp;
  if (entry.timestamp !== undefined) {
    const ms = Date.parse(entry.timestamp);
    if (Number.isNaN(ms)) {
      throw new TypeError(
        `MemoryEntry.timestamp must be an ISO 8601 date-time, got ${JSON.stringify(entry.timestamp)}`,
      );
    }
    timestamp = toTimestamp(ms);
  }
  return {
    id: entry.id ?? "",
    content: contentToProto(entry.content),
    author: entry.author ?? "",
    timestamp,
    customMetadata: dumpsObject(entry.customMetadata, "MemoryEntry.customMetadata"),
    sessionId: "",
    score: 0,
    // Valid from its timestamp, else from the time of the write (the server's default).
    validFrom: undefined,
    invalidAt: undefined,
  };
}

function entryFromProto(message: MemoryEntryMessage): GrpcMemoryEntry {
  const entry: GrpcMemoryEntry = {
    id: message.id,
    content: message.content === undefined ? { parts: [] } : contentFromProto(message.content),
    customMetadata: loadsObject(message.customMetadata, "MemoryEntry.customMetadata"),
    score: message.score,
  };
  if (message.author !== "") entry.author = message.author;
  // ADK's in-memory service: new Date(event.timestamp).toISOString().
  if (message.timestamp !== undefined) entry.timestamp = new Date(toMillis(message.timestamp)).toISOString();
  if (message.sessionId !== "") entry.sessionId = message.sessionId;
  return entry;
}
