package grpcmemory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/adk/v2/session"
	"google.golang.org/protobuf/types/known/durationpb"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/memorypb"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// GenerateRequest asks memory-svc (started with --generator) to extract facts from a stored
// session (SessionID) or from Events, or to take Facts already extracted, and consolidate them
// with the user's generated memories. Give one source.
type GenerateRequest struct {
	AppName, UserID string
	// SessionID: a session memory-svc reads from session-svc.
	SessionID string
	// Events: events to extract facts from.
	Events []*session.Event
	// Facts: facts the caller already extracted (1 to 50), consolidated without asking the
	// model to extract anything; AllowedTopics does not apply to them.
	Facts []Fact
	// Wait answers once the job has finished (or failed), not once it is queued.
	Wait bool
	// DisableConsolidation adds every fact as a new memory.
	DisableConsolidation bool
	// TTL: the generated memories expire after it; 0 for never.
	TTL time.Duration
	// AllowedTopics: only these topics are extracted; empty for all.
	AllowedTopics []string
}

// Fact is a fact the caller already extracted, for [GenerateRequest].Facts.
type Fact struct {
	// Text is the fact, 1 to 1000 characters.
	Text string
	// Topic: optional, the label of one of the app's topics (memory-svc --generator-topics).
	Topic string
	// CustomMetadata of the memory, beside the keys generation sets (which win).
	CustomMetadata map[string]any
	// ValidFrom is when the fact became true; zero: the time of the generation.
	ValidFrom time.Time
}

// Job is a generation job; see the contract's GenerationJob for its fields.
type Job = memorypb.GenerationJob

// Revision is one change generation (or a rollback) made to a generated memory.
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
	sources := 0
	for _, given := range []bool{req.SessionID != "", len(req.Events) > 0, len(req.Facts) > 0} {
		if given {
			sources++
		}
	}
	if sources > 1 {
		return nil, fmt.Errorf("grpcmemory: Generate: %w: give one of SessionID, Events, Facts", adkgrpc.ErrInvalidArgument)
	}
	switch {
	case req.SessionID != "":
		request.Source = &memorypb.GenerateMemoriesRequest_SessionRef{SessionRef: &memorypb.SessionRef{
			AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID}}
	case len(req.Facts) > 0:
		facts := &memorypb.FactList{}
		for i, f := range req.Facts {
			metadata, err := wire.MarshalState(f.CustomMetadata)
			if err != nil {
				return nil, fmt.Errorf("grpcmemory: Generate: facts[%d].custom_metadata: %w: %w", i, adkgrpc.ErrInvalidArgument, err)
			}
			facts.Facts = append(facts.Facts, &memorypb.ExtractedFact{
				Text: f.Text, Topic: f.Topic, CustomMetadata: metadata, ValidFrom: timestamp(f.ValidFrom)})
		}
		request.Source = &memorypb.GenerateMemoriesRequest_Facts{Facts: facts}
	default:
		events, err := memoryEvents(slices.Values(req.Events))
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

// ListRevisions returns one page of the changes generation (and rollbacks) made to a user's
// memories (of one memory when memoryID is set), oldest first, and the next page's token (""
// on the last).
func (s *Service) ListRevisions(ctx context.Context, appName, userID, memoryID string, pageSize int, pageToken string) ([]*Revision, string, error) {
	reply, err := s.client.ListMemoryRevisions(ctx, &memorypb.ListMemoryRevisionsRequest{
		AppName: appName, UserId: userID, MemoryId: memoryID, PageSize: int32(min(pageSize, 1000)), PageToken: pageToken,
	})
	if err != nil {
		return nil, "", adkgrpc.FromRPC("grpcmemory: ListRevisions", err)
	}
	return reply.Revisions, reply.NextPageToken, nil
}

// Rollback restores a generated memory (a deleted or superseded one too) to the fact one of
// its revisions (a Revision's RevisionId that added, updated or restored it) left it with,
// valid again from that revision's ValidFrom. The rollback is itself a revision
// (REVISION_ACTION_ROLLED_BACK), which it returns.
func (s *Service) Rollback(ctx context.Context, appName, userID, memoryID, revisionID string) (*Revision, error) {
	reply, err := s.client.RollbackMemory(ctx, &memorypb.RollbackMemoryRequest{
		AppName: appName, UserId: userID, MemoryId: memoryID, RevisionId: revisionID,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: Rollback", err)
	}
	return reply.Revision, nil
}

// StreamAppend is what [Service.AppendStream] did.
type StreamAppend struct {
	// Appended is the number of events the call buffered (events the stream already held,
	// and events without content, left out).
	Appended int
	// Buffered is the number of events the stream holds after the call, waiting for
	// generation.
	Buffered int
	// Job is the generation job the call started when it brought the stream to its trigger
	// count; nil otherwise.
	Job *Job
}

// Stream is an event stream holding events that wait for generation.
type Stream struct {
	ID string
	// Buffered is the number of events it holds.
	Buffered int
	// LastAppend is when its last event was buffered (server time): the quiet time runs from
	// there.
	LastAppend time.Time
}

// AppendStream buffers events (1 to 100, each with an ID) of the stream streamID (a session id
// is the natural one) as they happen. memory-svc keeps the buffer durably, each event id once,
// and starts generation from it by itself once the stream holds the app's trigger count of
// events (--stream-trigger-events) or has been quiet for the app's quiet time
// (--stream-quiet). Needs memory-svc --generator.
func (s *Service) AppendStream(ctx context.Context, appName, userID, streamID string, events []*session.Event) (*StreamAppend, error) {
	request := &memorypb.AppendMemoryStreamRequest{AppName: appName, UserId: userID, StreamId: streamID}
	for _, e := range events {
		if e == nil {
			continue
		}
		if e.Content == nil {
			// Its id only: the server counts it out rather than refusing an append of no events.
			request.Events = append(request.Events, &sessionpb.Event{Id: e.ID, Author: e.Author})
			continue
		}
		m, err := memoryEvent(e)
		if err != nil {
			return nil, err
		}
		request.Events = append(request.Events, m)
	}
	reply, err := s.client.AppendMemoryStream(ctx, request)
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: AppendStream", err)
	}
	return &StreamAppend{Appended: int(reply.Appended), Buffered: int(reply.Buffered), Job: reply.Job}, nil
}

// FlushStream starts generation from the events buffered in a stream now and returns the job,
// or nil when the stream held no events.
func (s *Service) FlushStream(ctx context.Context, appName, userID, streamID string) (*Job, error) {
	reply, err := s.client.FlushMemoryStream(ctx, &memorypb.FlushMemoryStreamRequest{AppName: appName, UserId: userID, StreamId: streamID})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: FlushStream", err)
	}
	return reply.Job, nil
}

// ListStreams returns a user's streams holding buffered events, by stream id. A stream whose
// events were all handed to generation is not listed.
func (s *Service) ListStreams(ctx context.Context, appName, userID string) ([]Stream, error) {
	reply, err := s.client.ListMemoryStreams(ctx, &memorypb.ListMemoryStreamsRequest{AppName: appName, UserId: userID})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcmemory: ListStreams", err)
	}
	out := make([]Stream, 0, len(reply.Streams))
	for _, m := range reply.Streams {
		out = append(out, Stream{ID: m.StreamId, Buffered: int(m.Buffered), LastAppend: m.LastAppendTime.AsTime()})
	}
	return out, nil
}
