/**
 * ADK TypeScript session and memory services backed by session-svc and memory-svc over gRPC.
 */
export { GrpcSessionService, type AppEvent, type SessionChange } from "./session_service.js";
export {
  GenerationState,
  GrpcMemoryService,
  MemoryKind,
  SearchMode,
  type GenerationJob,
  type GenerationOptions,
  type GrpcMemoryEntry,
  type GrpcMemoryServiceOptions,
  type NewMemory,
  type SearchOptions,
} from "./memory_service.js";
export { GrpcServiceError, type ConnectionOptions } from "./connection.js";
export { contentFromProto, contentToProto, eventFromProto, eventToProto } from "./mapping.js";
export { toMillis, toTimestamp } from "./timestamps.js";
