package grpcsession

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"google.golang.org/adk/v2/session"
	"google.golang.org/grpc"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// ListPageRequest asks for one page of an app's sessions.
type ListPageRequest struct {
	AppName string
	// UserID selects one user's sessions, unless AllUsers is set.
	UserID string
	// AllUsers lists every user's sessions (UserID is ignored).
	AllUsers bool
	// PageSize: default 20, maximum 1000.
	PageSize  int
	PageToken string
}

// ListPageResponse is one page of sessions, ordered by (last update time, user, id).
type ListPageResponse struct {
	// Sessions, without their events.
	Sessions []*Session
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// ListPage returns one page of an app's sessions.
func (s *Service) ListPage(ctx context.Context, req *ListPageRequest) (*ListPageResponse, error) {
	request := &sessionpb.ListSessionsRequest{
		AppName: req.AppName, PageSize: int32(min(req.PageSize, sessionsPage)), PageToken: req.PageToken,
	}
	if !req.AllUsers {
		request.UserId = &req.UserID
	}
	reply, err := s.client.ListSessions(ctx, request)
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: List", err)
	}
	page := &ListPageResponse{NextPageToken: reply.NextPageToken, Sessions: make([]*Session, 0, len(reply.Sessions))}
	for _, m := range reply.Sessions {
		sess, err := sessionFromProto(m)
		if err != nil {
			return nil, err
		}
		page.Sessions = append(page.Sessions, sess)
	}
	return page, nil
}

// StoredEvent is an event with the sequence the server gave it (1, 2, 3... per session; 0
// for a live partial event).
type StoredEvent struct {
	Sequence uint64
	Event    *session.Event
}

// ListEventsRequest asks for one page of a session's stored events.
type ListEventsRequest struct {
	AppName, UserID, SessionID string
	// AfterSequence: only events with a greater sequence.
	AfterSequence uint64
	// PageSize: default 20, maximum 100.
	PageSize  int
	PageToken string
}

// ListEventsResponse is one page of events, by sequence.
type ListEventsResponse struct {
	Events []StoredEvent
	// NextPageToken is empty on the last page.
	NextPageToken string
}

// ListEvents returns one page of a session's stored events.
func (s *Service) ListEvents(ctx context.Context, req *ListEventsRequest) (*ListEventsResponse, error) {
	reply, err := s.client.ListEvents(ctx, &sessionpb.ListEventsRequest{
		AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID,
		AfterSequence: req.AfterSequence, PageSize: int32(min(req.PageSize, eventsPageSize)),
		PageToken: req.PageToken, MaxReplyEventBytes: readBudgetBytes,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: ListEvents", err)
	}
	page := &ListEventsResponse{NextPageToken: reply.NextPageToken, Events: make([]StoredEvent, 0, len(reply.Events))}
	for _, m := range reply.Events {
		e, err := wire.EventFromProto(m)
		if err != nil {
			return nil, fmt.Errorf("grpcsession: ListEvents: event %d: %w", m.Sequence, err)
		}
		page.Events = append(page.Events, StoredEvent{Sequence: m.Sequence, Event: e})
	}
	return page, nil
}

// WatchRequest names the session to follow.
type WatchRequest struct {
	AppName, UserID, SessionID string
	// AfterSequence: stored events with a greater sequence are replayed first.
	AfterSequence uint64
	// IncludePartial also delivers live partial events (sequence 0).
	IncludePartial bool
}

// Change is one change of a watched session: a stored (or live partial) event, or the
// session's deletion, after which the watch ends.
type Change struct {
	StoredEvent
	Deleted bool
}

// Watch replays a session's stored events after req.AfterSequence, then follows live
// appends, with no gap and no duplicate. The iteration ends when ctx is cancelled (with no
// error), after a deletion [Change], or at the first error: a server that stops or restarts
// mid-stream is an error matching [adkgrpc.ErrUnavailable]; watch again after the last
// sequence seen to resume.
func (s *Service) Watch(ctx context.Context, req *WatchRequest) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		stream, err := s.client.WatchSession(ctx, &sessionpb.WatchSessionRequest{
			AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID,
			AfterSequence: req.AfterSequence, IncludePartial: req.IncludePartial,
		})
		follow(ctx, "grpcsession: Watch", stream, err, yield, func(m *sessionpb.WatchSessionResponse) (Change, bool, error) {
			if m.GetDeleted() != nil {
				return Change{Deleted: true}, true, nil
			}
			e, err := wire.EventFromProto(m.GetEvent())
			if err != nil {
				return Change{}, true, err
			}
			return Change{StoredEvent: StoredEvent{Sequence: m.GetEvent().GetSequence(), Event: e}}, false, nil
		})
	}
}

// WatchAppRequest names the app (and optionally the user) whose events to follow.
type WatchAppRequest struct {
	AppName string
	// UserID: empty for every user of the app.
	UserID string
	// Cursor resumes after an event seen before ([AppEvent].Cursor); empty: from now.
	Cursor string
}

// AppEvent is one committed event of an app.
type AppEvent struct {
	UserID, SessionID string
	StoredEvent
	// Cursor resumes a later [Service.WatchApp] after this event.
	Cursor string
}

// WatchApp follows every committed event of an app (or of one user), from req.Cursor or from
// now. It ends as [Service.Watch] does; resume with the last event's Cursor.
func (s *Service) WatchApp(ctx context.Context, req *WatchAppRequest) iter.Seq2[AppEvent, error] {
	return func(yield func(AppEvent, error) bool) {
		stream, err := s.client.WatchEvents(ctx, &sessionpb.WatchEventsRequest{
			AppName: req.AppName, UserId: req.UserID, Cursor: req.Cursor,
		})
		follow(ctx, "grpcsession: WatchApp", stream, err, yield, func(m *sessionpb.WatchEventsResponse) (AppEvent, bool, error) {
			e, err := wire.EventFromProto(m.GetEvent())
			if err != nil {
				return AppEvent{}, true, err
			}
			return AppEvent{UserID: m.UserId, SessionID: m.SessionId, Cursor: m.Cursor,
				StoredEvent: StoredEvent{Sequence: m.GetEvent().GetSequence(), Event: e}}, false, nil
		})
	}
}

// follow drives a server stream into an iterator: each message converted, the caller's
// context ending it quietly, anything else ending it with one error.
func follow[M, T any](ctx context.Context, op string, stream grpc.ServerStreamingClient[M], err error,
	yield func(T, error) bool, convert func(*M) (T, bool, error)) {
	var zero T
	if err != nil {
		if ctx.Err() == nil {
			yield(zero, adkgrpc.FromRPC(op, err))
		}
		return
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return
			}
			yield(zero, adkgrpc.FromRPC(op, err))
			return
		}
		item, last, err := convert(m)
		if err != nil {
			yield(zero, fmt.Errorf("%s: %w", op, err))
			return
		}
		if !yield(item, nil) || last {
			return
		}
	}
}

// GetUserState returns a user's state, keys without the user: prefix.
func (s *Service) GetUserState(ctx context.Context, appName, userID string) (map[string]any, error) {
	reply, err := s.client.GetUserState(ctx, &sessionpb.GetUserStateRequest{AppName: appName, UserId: userID})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: GetUserState", err)
	}
	return readState(reply)
}

// GetAppState returns an app's state, keys without the app: prefix.
func (s *Service) GetAppState(ctx context.Context, appName string) (map[string]any, error) {
	reply, err := s.client.GetAppState(ctx, &sessionpb.GetAppStateRequest{AppName: appName})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: GetAppState", err)
	}
	return readState(reply)
}

func readState(reply *sessionpb.StateResponse) (map[string]any, error) {
	state, err := wire.UnmarshalState("StateResponse.state", reply.State)
	if err != nil {
		return nil, fmt.Errorf("grpcsession: %w", err)
	}
	if state == nil {
		state = map[string]any{}
	}
	return state, nil
}
