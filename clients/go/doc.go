// Package adkgrpc holds what the Go clients of adk-services share: how a service URI becomes a
// connection ([Dial], [Option]) and the errors both services return ([Error] and the sentinels
// [ErrNotFound], [ErrStaleSession], ...).
//
// The services themselves are in [github.com/adk-services/adk-services/clients/go/grpcsession]
// (ADK Go's session.Service over session-svc) and
// [github.com/adk-services/adk-services/clients/go/grpcmemory] (ADK Go's memory.Service over
// memory-svc).
package adkgrpc
