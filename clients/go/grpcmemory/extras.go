package grpcmemory

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"
	"google.golang.org/protobuf/types/known/durationpb"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/memorypb"
)

// Entry is a memory with what memory-svc adds to ADK's entry.
type Entry struct {
	memory.Entry
	// SessionID is the session the entry came from, if any.
	SessionID string
	// Score is the relevance in a search result (higher is better, as the search's mode
	// defines it); 0 elsewhere.
	Score float64
}

// Mode is how a search ranks entries.
type Mode = memorypb.SearchMode

// Search modes (see the contract for what each score means).
const (
	ModeAuto     = memorypb.SearchMode_SEARCH_MODE_UNSPECIFIED
	ModeKeyword  = memorypb.SearchMode_SEARCH_MODE_KEYWORD
	ModeSemantic = memorypb.SearchMode_SEARCH_MODE_SEMANTIC
	ModeHybrid   = memorypb.SearchMode_SEARCH_MODE_HYBRID
)

// Kind is where memories come from.
type Kind = memorypb.MemoryKind

// Memory kinds.
const (
	KindAll       = memorypb.MemoryKind_MEMORY_KIND_UNSPECIFIED
	KindRaw       = memorypb.MemoryKind_MEMORY_KIND_RAW
	KindGenerated = memorypb.MemoryKind_MEMORY_KIND_GENERATED
)

// SearchRequest is a search with its options; the zero value of each option is the default.
type SearchRequest struct {
	AppName, UserID, Query string
	// Limit: default 10, maximum 100.
	Limit int
	// After and Before bound the entries' timestamps: After <= t < Before.
	After, Before time.Time
	// Author: only entries by this author.
	Author string
	// Language: the query's ISO 639-1 code instead of the detected one.
	Language string
	Mode     Mode
	Kind     Kind
}

// Search returns the best matches of a query, best first.
func (s *Service) Search(ctx context.Context, req *SearchRequest) ([]Entry, error) {
	reply, err := s.client.SearchMemory(ctx, &memorypb.SearchMemoryRequest{
		AppName: req.AppName, UserId: req.UserID, Query: req.Query, Limit: int32(min(req.Limit, 1<<31-1)),
		AfterTimestamp: timestamp(req.After), BeforeTimestamp: timestamp(req.Before),
		Author: req.Author, Language: req.Language, Mode: req.Mode, Kind: req.Kind,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: Search", err)
	}
	return entries(reply.Memories)
}

func entries(messages []*memorypb.MemoryEntry) ([]Entry, error) {
	out := make([]Entry, 0, len(messages))
	for _, m := range messages {
		e, err := entryFromProto(m)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// AddEvents adds events with content to a user's memory (sessionID may be empty); the first
// copy of an event id wins. customMetadata is attached to every new entry. It returns the
// number of entries added.
func (s *Service) AddEvents(ctx context.Context, appName, userID, sessionID string, events []*session.Event, customMetadata map[string]any) (int, error) {
	messages, err := memoryEvents(func(yield func(*session.Event) bool) {
		for _, e := range events {
			if !yield(e) {
				return
			}
		}
	})
	if err != nil {
		return 0, err
	}
	metadata, err := metadataText(customMetadata)
	if err != nil {
		return 0, err
	}
	reply, err := s.client.AddEventsToMemory(ctx, &memorypb.AddEventsToMemoryRequest{
		AppName: appName, UserId: userID, SessionId: sessionID, Events: messages, CustomMetadata: metadata,
	})
	if err != nil {
		return 0, adkgrpc.FromRPC("grpcmemory: AddEvents", err)
	}
	return int(reply.Entries), nil
}

// AddMemory writes entries directly (an empty ID is generated); customMetadata is merged under
// each entry's own. It returns the entries' ids in order.
func (s *Service) AddMemory(ctx context.Context, appName, userID string, memories []memory.Entry, customMetadata map[string]any) ([]string, error) {
	request := &memorypb.AddMemoryRequest{AppName: appName, UserId: userID}
	for i := range memories {
		m, err := entryToProto(&memories[i])
		if err != nil {
			return nil, err
		}
		request.Memories = append(request.Memories, m)
	}
	var err error
	if request.CustomMetadata, err = metadataText(customMetadata); err != nil {
		return nil, err
	}
	reply, err := s.client.AddMemory(ctx, request)
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: AddMemory", err)
	}
	return reply.Ids, nil
}

// DeleteRequest names what to delete: one of MemoryID, SessionID or All.
type DeleteRequest struct {
	AppName, UserID string
	// MemoryID: every entry of the user with this id (the id is not ingested again).
	MemoryID string
	// SessionID: every entry that came from this session.
	SessionID string
	// All: every entry of the user.
	All bool
}

// Delete deletes memories and returns how many.
func (s *Service) Delete(ctx context.Context, req *DeleteRequest) (int, error) {
	request := &memorypb.DeleteMemoryRequest{AppName: req.AppName, UserId: req.UserID}
	switch {
	case req.MemoryID != "" && req.SessionID == "" && !req.All:
		request.Target = &memorypb.DeleteMemoryRequest_MemoryId{MemoryId: req.MemoryID}
	case req.SessionID != "" && req.MemoryID == "" && !req.All:
		request.Target = &memorypb.DeleteMemoryRequest_SessionId{SessionId: req.SessionID}
	case req.All && req.MemoryID == "" && req.SessionID == "":
		request.Target = &memorypb.DeleteMemoryRequest_All{All: true}
	default:
		return 0, fmt.Errorf("grpcmemory: Delete: %w: give exactly one of MemoryID, SessionID, All", adkgrpc.ErrInvalidArgument)
	}
	reply, err := s.client.DeleteMemory(ctx, request)
	if err != nil {
		return 0, adkgrpc.FromRPC("grpcmemory: Delete", err)
	}
	return int(reply.Deleted), nil
}

// ListRequest asks for one page of a user's memories, in ingestion order.
type ListRequest struct {
	AppName, UserID string
	// PageSize: default 20, maximum 100.
	PageSize  int
	PageToken string
	Kind      Kind
}

// ListResponse is one page of memories.
type ListResponse struct {
	Memories []Entry
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// List returns one page of a user's memories.
func (s *Service) List(ctx context.Context, req *ListRequest) (*ListResponse, error) {
	reply, err := s.client.ListMemories(ctx, &memorypb.ListMemoriesRequest{
		AppName: req.AppName, UserId: req.UserID, PageSize: int32(min(req.PageSize, 1000)),
		PageToken: req.PageToken, Kind: req.Kind,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: List", err)
	}
	found, err := entries(reply.Memories)
	if err != nil {
		return nil, err
	}
	return &ListResponse{Memories: found, NextPageToken: reply.NextPageToken}, nil
}

// GenerateRequest asks memory-svc (started with --generator) to extract facts from a stored
// session (SessionID) or from Events, and consolidate them with the user's generated memories.
type GenerateRequest struct {
	AppName, UserID string
	// SessionID: a session memory-svc reads from session-svc.
	SessionID string
	// Events: the source when SessionID is empty.
	Events []*session.Event
	// Wait answers once the job has finished (or failed), not once it is queued.
	Wait bool
	// DisableConsolidation adds every fact as a new memory.
	DisableConsolidation bool
	// TTL: the generated memories expire after it; 0 for never.
	TTL time.Duration
	// AllowedTopics: only these topics are extracted; empty for all.
	AllowedTopics []string
}

// Job is a generation job; see the contract's GenerationJob for its fields.
type Job = memorypb.GenerationJob

// Revision is one change generation made to a generated memory.
type Revision = memorypb.MemoryRevision

// Generate starts a generation job (and waits for it when req.Wait is set).
func (s *Service) Generate(ctx context.Context, req *GenerateRequest) (*Job, error) {
	request := &memorypb.GenerateMemoriesRequest{
		AppName: req.AppName, UserId: req.UserID,
		Options: &memorypb.GenerateOptions{
			Wait: req.Wait, DisableConsolidation: req.DisableConsolidation, AllowedTopics: req.AllowedTopics,
		},
	}
	if req.TTL > 0 {
		request.Options.Ttl = durationpb.New(req.TTL)
	}
	if req.SessionID != "" {
		request.Source = &memorypb.GenerateMemoriesRequest_SessionRef{SessionRef: &memorypb.SessionRef{
			AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID}}
	} else {
		events, err := memoryEvents(func(yield func(*session.Event) bool) {
			for _, e := range req.Events {
				if !yield(e) {
					return
				}
			}
		})
		if err != nil {
			return nil, err
		}
		request.Source = &memorypb.GenerateMemoriesRequest_Events{Events: &memorypb.EventList{Events: events}}
	}
	reply, err := s.client.GenerateMemories(ctx, request)
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: Generate", err)
	}
	return reply.Job, nil
}

// GenerationJob returns the state of a generation job.
func (s *Service) GenerationJob(ctx context.Context, appName, userID, jobID string) (*Job, error) {
	job, err := s.client.GetGenerationJob(ctx, &memorypb.GetGenerationJobRequest{AppName: appName, UserId: userID, JobId: jobID})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: GenerationJob", err)
	}
	return job, nil
}

// ListRevisions returns one page of the changes generation made to a user's memories (of one
// memory when memoryID is set), oldest first, and the next page's token ("" on the last).
func (s *Service) ListRevisions(ctx context.Context, appName, userID, memoryID string, pageSize int, pageToken string) ([]*Revision, string, error) {
	reply, err := s.client.ListMemoryRevisions(ctx, &memorypb.ListMemoryRevisionsRequest{
		AppName: appName, UserId: userID, MemoryId: memoryID, PageSize: int32(min(pageSize, 1000)), PageToken: pageToken,
	})
	if err != nil {
		return nil, "", adkgrpc.FromRPC("grpcmemory: ListRevisions", err)
	}
	return reply.Revisions, reply.NextPageToken, nil
}

func metadataText(m map[string]any) (string, error) {
	text, err := wire.MarshalState(m)
	if err != nil {
		return "", fmt.Errorf("grpcmemory: custom_metadata: %w: %w", adkgrpc.ErrInvalidArgument, err)
	}
	return text, nil
}
