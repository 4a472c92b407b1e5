// Package grpcmemory is ADK Go's [memory.Service] served by memory-svc over gRPC.
//
// [NewService] connects to a grpc:// or grpcs:// URI; the [*Service] it returns plugs into ADK's
// runner and launcher like memory.InMemoryService(). The same scope (app, user) and ingestion
// rules apply (events with content; a session added again replaces its entries), with ranked
// search (BM25, or semantic and hybrid when memory-svc has an embedding model) and durable
// storage on the server.
//
// Beyond ADK's interface: search options ([Service.Search]: filters on metadata, topics,
// author and time, and validity in time: AsOf, IncludeSuperseded), [Service.AddEvents],
// [Service.AddMemory], [Service.Delete], paged and filtered [Service.List], [Service.Purge] by
// filter, generation ([Service.Generate] from events, a session or given facts,
// [Service.GenerationJob]), correction ([Service.ListRevisions], [Service.Rollback]) and event
// streams ([Service.AppendStream], [Service.FlushStream], [Service.ListStreams]).
package grpcmemory

import (
	"context"
	"fmt"
	"iter"
	"time"

	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/memorypb"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// The calls a retry cannot duplicate: a session added again replaces its entries, the first
// copy of an event id wins (in memory and in a stream), deletes are idempotent, and reads.
var idempotent = []string{
	"adk.memory.v1.MemoryService/AddSessionToMemory",
	"adk.memory.v1.MemoryService/AddEventsToMemory",
	"adk.memory.v1.MemoryService/SearchMemory",
	"adk.memory.v1.MemoryService/DeleteMemory",
	"adk.memory.v1.MemoryService/ListMemories",
	"adk.memory.v1.MemoryService/GetGenerationJob",
	"adk.memory.v1.MemoryService/ListMemoryRevisions",
	"adk.memory.v1.MemoryService/AppendMemoryStream",
	"adk.memory.v1.MemoryService/ListMemoryStreams",
}

// Service is a memory.Service over memory-svc. Safe for concurrent use by any number of
// goroutines; [Service.Close] releases its connection.
type Service struct {
	conn   *grpc.ClientConn
	client memorypb.MemoryServiceClient
}

var _ memory.Service = (*Service)(nil)

// NewService connects to the memory-svc a URI names (see [adkgrpc.Dial]: grpc://host[:port],
// grpcs://, token_env, ca_file, timeout, ADK_GRPC_MEMORY_* variables). The connection is made
// on the first call; ctx is not kept.
func NewService(ctx context.Context, uri string, opts ...adkgrpc.Option) (*Service, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := adkgrpc.Dial(uri, adkgrpc.Memory, append([]adkgrpc.Option{adkgrpc.RetryMethods(idempotent...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Service{conn: conn, client: memorypb.NewMemoryServiceClient(conn)}, nil
}

// Close closes the connection; calls in progress fail.
func (s *Service) Close() error { return s.conn.Close() }

// AddSessionToMemory makes the session's events with content its whole memory: adding a
// session again replaces its entries. Any session.Session works, not only grpcsession's.
func (s *Service) AddSessionToMemory(ctx context.Context, sess session.Session) error {
	if sess == nil {
		return fmt.Errorf("grpcmemory: AddSessionToMemory: %w: session is nil", adkgrpc.ErrInvalidArgument)
	}
	events, err := memoryEvents(sess.Events().All())
	if err != nil {
		return err
	}
	_, err = s.client.AddSessionToMemory(ctx, &memorypb.AddSessionToMemoryRequest{
		Source: &memorypb.AddSessionToMemoryRequest_Session{Session: &sessionpb.Session{
			Id: sess.ID(), AppName: sess.AppName(), UserId: sess.UserID(), Events: events,
		}},
	})
	return adkgrpc.FromRPC("grpcmemory: AddSessionToMemory", err)
}

// SearchMemory returns the user's memories that match the query, best first (at most 10; see
// [Service.Search] for more).
func (s *Service) SearchMemory(ctx context.Context, req *memory.SearchRequest) (*memory.SearchResponse, error) {
	found, err := s.Search(ctx, &SearchRequest{AppName: req.AppName, UserID: req.UserID, Query: req.Query})
	if err != nil {
		return nil, err
	}
	resp := &memory.SearchResponse{}
	for _, e := range found {
		resp.Memories = append(resp.Memories, e.Entry)
	}
	return resp, nil
}

// memoryEvents is what memory-svc reads of each event with content (see [memoryEvent]). An
// event without content is never remembered, so not sent.
func memoryEvents(events iter.Seq[*session.Event]) ([]*sessionpb.Event, error) {
	var out []*sessionpb.Event
	for e := range events {
		if e == nil || e.Content == nil {
			continue
		}
		m, err := memoryEvent(e)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// memoryEvent is what memory-svc reads of an event: its id, author, timestamp, content and
// custom metadata.
func memoryEvent(e *session.Event) (*sessionpb.Event, error) {
	content, err := wire.ContentToProto(e.Content)
	if err != nil {
		return nil, fmt.Errorf("grpcmemory: event %q: %w: %w", e.ID, adkgrpc.ErrInvalidArgument, err)
	}
	metadata, err := wire.MarshalState(e.CustomMetadata)
	if err != nil {
		return nil, fmt.Errorf("grpcmemory: event %q: custom_metadata: %w: %w", e.ID, adkgrpc.ErrInvalidArgument, err)
	}
	return &sessionpb.Event{Id: e.ID, Author: e.Author, Content: content, CustomMetadata: metadata,
		Timestamp: timestamp(e.Timestamp)}, nil
}

func entryFromProto(m *memorypb.MemoryEntry) (Entry, error) {
	content, err := wire.ContentFromProto(m.Content)
	if err != nil {
		return Entry{}, fmt.Errorf("grpcmemory: memory %q: %w", m.Id, err)
	}
	metadata, err := wire.UnmarshalState("MemoryEntry.custom_metadata", m.CustomMetadata)
	if err != nil {
		return Entry{}, fmt.Errorf("grpcmemory: memory %q: %w", m.Id, err)
	}
	e := Entry{
		Entry:     memory.Entry{ID: m.Id, Content: content, Author: m.Author, CustomMetadata: metadata},
		SessionID: m.SessionId, Score: m.Score,
	}
	if m.Timestamp != nil {
		e.Timestamp = m.Timestamp.AsTime()
	}
	if m.ValidFrom != nil {
		e.ValidFrom = m.ValidFrom.AsTime()
	}
	if m.InvalidAt != nil {
		e.InvalidAt = m.InvalidAt.AsTime()
	}
	return e, nil
}

func entryToProto(e *Entry) (*memorypb.MemoryEntry, error) {
	content, err := wire.ContentToProto(e.Content)
	if err != nil {
		return nil, fmt.Errorf("grpcmemory: memory %q: %w: %w", e.ID, adkgrpc.ErrInvalidArgument, err)
	}
	metadata, err := wire.MarshalState(e.CustomMetadata)
	if err != nil {
		return nil, fmt.Errorf("grpcmemory: memory %q: custom_metadata: %w: %w", e.ID, adkgrpc.ErrInvalidArgument, err)
	}
	return &memorypb.MemoryEntry{Id: e.ID, Content: content, Author: e.Author, CustomMetadata: metadata,
		Timestamp: timestamp(e.Timestamp), ValidFrom: timestamp(e.ValidFrom), InvalidAt: timestamp(e.InvalidAt)}, nil
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
