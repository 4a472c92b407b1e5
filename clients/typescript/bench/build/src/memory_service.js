import { CallSettings, channelOptions, invoke, resolveEndpoint, translate, } from "./connection.js";
import { GenerationState, MemoryKind, MemoryServiceClient, SearchMode, } from "./gen/adk/memory/v1/memory.js";
import { dumpsObject, loadsObject } from "./json.js";
import { contentFromProto, contentToProto, memoryEventsToProto } from "./mapping.js";
import { toDuration, toMillis, toTimestamp } from "./timestamps.js";
export { GenerationState, MemoryKind, SearchMode };
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
export class GrpcMemoryService {
    client;
    settings;
    searchLimit;
    searchLanguage;
    constructor(options) {
        const endpoint = resolveEndpoint("memory", options);
        this.client = new MemoryServiceClient(endpoint.target, endpoint.credentials, channelOptions(SERVICE, RETRIED, options.channelOptions));
        this.settings = new CallSettings(endpoint.token, endpoint.timeoutMs);
        this.searchLimit = options.searchLimit ?? 10;
        this.searchLanguage = options.searchLanguage ?? "";
    }
    /** A service for `grpc://host[:port]` or `grpcs://host[:port]`. */
    static fromUri(uri) {
        return new GrpcMemoryService({ uri });
    }
    close() {
        this.client.close();
    }
    /**
     * Makes the session's events with content its whole memory (the session is sent by value,
     * so what is remembered is exactly the caller's copy). With `generate`, memories are also
     * generated from it.
     */
    async addSessionToMemory(session, generate) {
        const request = {
            source: {
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
            },
            generate: generate === undefined ? undefined : generateOptions(generate),
        };
        try {
            await invoke(this.client.addSessionToMemory.bind(this.client), request, this.settings);
        }
        catch (e) {
            throw translate(e, "AddSessionToMemory");
        }
    }
    /** Adds events with content; an event id already remembered is skipped. Returns how many were added. */
    async addEventsToMemory(request) {
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
        }
        catch (e) {
            throw translate(e, "AddEventsToMemory");
        }
    }
    /** Writes memories directly; returns their ids in order. */
    async addMemory(request) {
        const message = {
            appName: request.appName,
            userId: request.userId,
            memories: request.memories.map(entryMessage),
            customMetadata: dumpsObject(request.customMetadata, "customMetadata"),
        };
        try {
            const reply = await invoke(this.client.addMemory.bind(this.client), message, this.settings);
            return reply.ids;
        }
        catch (e) {
            throw translate(e, "AddMemory");
        }
    }
    /** ADK's search: the best memories of (app, user) for `query`, with `options` if given. */
    async searchMemory(request) {
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
        };
        try {
            const reply = await invoke(this.client.searchMemory.bind(this.client), message, this.settings);
            return { memories: reply.memories.map(entryFromProto) };
        }
        catch (e) {
            throw translate(e, "SearchMemory");
        }
    }
    /** Deletes one memory by id, a session's memories, or all of the user's; returns how many. */
    async deleteMemory(request) {
        const target = "memoryId" in request
            ? { $case: "memoryId", value: request.memoryId }
            : "sessionId" in request
                ? { $case: "sessionId", value: request.sessionId }
                : { $case: "all", value: true };
        try {
            const reply = await invoke(this.client.deleteMemory.bind(this.client), { appName: request.appName, userId: request.userId, target }, this.settings);
            return reply.deleted;
        }
        catch (e) {
            throw translate(e, "DeleteMemory");
        }
    }
    /** Every memory of (app, user) in ingestion order, read page by page. */
    async *listMemories(request) {
        let pageToken = "";
        do {
            const message = {
                appName: request.appName,
                userId: request.userId,
                pageSize: 100,
                pageToken,
                kind: request.kind ?? MemoryKind.MEMORY_KIND_UNSPECIFIED,
            };
            let reply;
            try {
                reply = await invoke(this.client.listMemories.bind(this.client), message, this.settings);
            }
            catch (e) {
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
    async generateMemories(request) {
        const { appName, userId } = request;
        let source;
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
        }
        else if (request.sessionId !== undefined) {
            source = { $case: "sessionRef", value: { appName, userId, sessionId: request.sessionId } };
        }
        else {
            source = { $case: "events", value: { events: memoryEventsToProto(request.events ?? []) } };
        }
        try {
            const reply = await invoke(this.client.generateMemories.bind(this.client), { appName, userId, source, options: generateOptions(request.options ?? {}) }, this.settings);
            if (reply.job === undefined) {
                throw new Error("GenerateMemories answered without a job");
            }
            return reply.job;
        }
        catch (e) {
            throw translate(e, "GenerateMemories");
        }
    }
    /** The state of a generation job of (app, user). */
    async getGenerationJob(request) {
        try {
            return await invoke(this.client.getGenerationJob.bind(this.client), request, this.settings);
        }
        catch (e) {
            throw translate(e, "GetGenerationJob");
        }
    }
}
function generateOptions(options) {
    return {
        wait: options.wait ?? false,
        disableConsolidation: options.disableConsolidation ?? false,
        ttl: options.ttlSeconds === undefined ? undefined : toDuration(options.ttlSeconds),
        allowedTopics: options.allowedTopics ?? [],
    };
}
function entryMessage(entry) {
    let timestamp;
    if (entry.timestamp !== undefined) {
        const ms = Date.parse(entry.timestamp);
        if (Number.isNaN(ms)) {
            throw new TypeError(`MemoryEntry.timestamp must be an ISO 8601 date-time, got ${JSON.stringify(entry.timestamp)}`);
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
    };
}
function entryFromProto(message) {
    const entry = {
        id: message.id,
        content: message.content === undefined ? { parts: [] } : contentFromProto(message.content),
        customMetadata: loadsObject(message.customMetadata, "MemoryEntry.customMetadata"),
        score: message.score,
    };
    if (message.author !== "")
        entry.author = message.author;
    // ADK's in-memory service: new Date(event.timestamp).toISOString().
    if (message.timestamp !== undefined)
        entry.timestamp = new Date(toMillis(message.timestamp)).toISOString();
    if (message.sessionId !== "")
        entry.sessionId = message.sessionId;
    return entry;
}
