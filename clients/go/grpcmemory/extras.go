package grpcmemory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"

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
	// ValidFrom is when what the entry says became true; zero: since ever (an event without a
	// timestamp). [Service.AddMemory] takes it (zero: the entry's Timestamp, else the time of
	// the write).
	ValidFrom time.Time
	// InvalidAt is when it stopped being true (a later fact superseded it); zero: it still is.
	// An entry is valid at t when ValidFrom <= t < InvalidAt.
	InvalidAt time.Time
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
	// Limit: default 10, maximum 100; it applies after filtering.
	Limit int
	// After and Before bound the entries' timestamps: After <= t < Before.
	After, Before time.Time
	// Author: only entries by this author.
	Author string
	// Language: the query's ISO 639-1 code instead of the detected one.
	Language string
	Mode     Mode
	Kind     Kind
	// Filter: only memories that pass it; the ranking is among them.
	Filter Filter
	// AsOf: only memories valid at this time; zero: now.
	AsOf time.Time
	// IncludeSuperseded: superseded memories too (those valid from AsOf, or now, or before,
	// whether or not they still were then).
	IncludeSuperseded bool
}

// Search returns the best matches of a query, best first.
func (s *Service) Search(ctx context.Context, req *SearchRequest) ([]Entry, error) {
	filter, err := req.Filter.toProto()
	if err != nil {
		return nil, err
	}
	reply, err := s.client.SearchMemory(ctx, &memorypb.SearchMemoryRequest{
		AppName: req.AppName, UserId: req.UserID, Query: req.Query, Limit: int32(min(req.Limit, 1<<31-1)),
		AfterTimestamp: timestamp(req.After), BeforeTimestamp: timestamp(req.Before),
		Author: req.Author, Language: req.Language, Mode: req.Mode, Kind: req.Kind,
		Filter: filter, AsOf: timestamp(req.AsOf), IncludeSuperseded: req.IncludeSuperseded,
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
	messages, err := memoryEvents(slices.Values(events))
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

// AddMemory writes entries directly (an empty ID is generated), each valid from its ValidFrom
// (zero: its Timestamp, else now) and, when InvalidAt is set, until then; SessionID and Score
// are not written. customMetadata is merged under each entry's own. It returns the entries'
// ids in order.
func (s *Service) AddMemory(ctx context.Context, appName, userID string, memories []Entry, customMetadata map[string]any) ([]string, error) {
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

// ListRequest asks for one page of a user's memories, in ingestion order; the options filter
// as [SearchRequest]'s do.
type ListRequest struct {
	AppName, UserID string
	// PageSize: default 20, maximum 100.
	PageSize          int
	PageToken         string
	Kind              Kind
	Filter            Filter
	After, Before     time.Time
	Author            string
	AsOf              time.Time
	IncludeSuperseded bool
}

// ListResponse is one page of memories.
type ListResponse struct {
	Memories []Entry
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// List returns one page of a user's memories.
func (s *Service) List(ctx context.Context, req *ListRequest) (*ListResponse, error) {
	filter, err := req.Filter.toProto()
	if err != nil {
		return nil, err
	}
	reply, err := s.client.ListMemories(ctx, &memorypb.ListMemoriesRequest{
		AppName: req.AppName, UserId: req.UserID, PageSize: int32(min(req.PageSize, 1000)),
		PageToken: req.PageToken, Kind: req.Kind, Filter: filter,
		AfterTimestamp: timestamp(req.After), BeforeTimestamp: timestamp(req.Before), Author: req.Author,
		AsOf: timestamp(req.AsOf), IncludeSuperseded: req.IncludeSuperseded,
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

// PurgeRequest names the memories [Service.Purge] deletes: those of an app (of one user when
// UserID is set) that pass every part given (at least one of Filter, Kind, Author, After and
// Before), superseded ones too.
type PurgeRequest struct {
	AppName string
	// UserID: only this user's memories; empty: every user of the app.
	UserID        string
	Filter        Filter
	Kind          Kind
	Author        string
	After, Before time.Time
	// Force deletes; without it the purge is a dry run that deletes nothing.
	Force bool
}

// PurgeResult is what a purge found (a dry run) or deleted (forced).
type PurgeResult struct {
	// Count is the number of memories that match, or that were deleted.
	Count uint64
	// Sample holds up to 10 of them, in (user, ingestion) order.
	Sample []Entry
	// OperationID names a forced purge, as the server's log does; empty for a dry run.
	OperationID string
}

// Purge deletes the memories a request names, or with Force unset (the default) only counts
// them and returns a sample. A forced purge is one durable operation on the server: cut short
// by a restart, it finishes after it.
func (s *Service) Purge(ctx context.Context, req *PurgeRequest) (*PurgeResult, error) {
	filter, err := req.Filter.toProto()
	if err != nil {
		return nil, err
	}
	reply, err := s.client.PurgeMemories(ctx, &memorypb.PurgeMemoriesRequest{
		AppName: req.AppName, UserId: req.UserID, Filter: filter, Kind: req.Kind, Author: req.Author,
		AfterTimestamp: timestamp(req.After), BeforeTimestamp: timestamp(req.Before), Force: req.Force,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: Purge", err)
	}
	sample, err := entries(reply.Sample)
	if err != nil {
		return nil, err
	}
	return &PurgeResult{Count: reply.Count, Sample: sample, OperationID: reply.OperationId}, nil
}

func metadataText(m map[string]any) (string, error) {
	text, err := wire.MarshalState(m)
	if err != nil {
		return "", fmt.Errorf("grpcmemory: custom_metadata: %w: %w", adkgrpc.ErrInvalidArgument, err)
	}
	return text, nil
}
