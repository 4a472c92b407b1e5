/**
 * ADK TypeScript session and memory services backed by session-svc and memory-svc over gRPC.
 */
export { GrpcSessionService } from "./session_service.js";
export { GenerationState, GrpcMemoryService, MemoryKind, SearchMode, } from "./memory_service.js";
export { GrpcServiceError } from "./connection.js";
export { contentFromProto, contentToProto, eventFromProto, eventToProto } from "./mapping.js";
export { toMillis, toTimestamp } from "./timestamps.js";
