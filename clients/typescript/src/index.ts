/**
 * ADK TypeScript session and memory services backed by session-svc and memory-svc over gRPC.
 */
export {
  GrpcSessionService,
  type AppEvent,
  type SessionChange,
  type SessionServiceOptions,
} from "./session_service.js";
export {
  GenerationState,
  GrpcMemoryService,
  MemoryKind,
  RevisionAction,
  SearchMode,
  type ExtractedFact,
  type GenerationJob,
  type GenerationOptions,
  type GrpcMemoryEntry,
  type GrpcMemoryServiceOptions,
  type MemoryRevision,
  type MemoryStream,
  type NewMemory,
  type PurgeResult,
  type SearchOptions,
  type StreamAppend,
  type ValidityOptions,
} from "./memory_service.js";
export type { Instant, MemoryFilterOptions, MetadataCondition, MetadataValue, Where } from "./memory_filter.js";
export { GrpcServiceError, type ConnectionOptions } from "./connection.js";
export { contentFromProto, contentToProto, eventFromProto, eventToProto } from "./mapping.js";
export { toMillis, toTimestamp } from "./timestamps.js";
