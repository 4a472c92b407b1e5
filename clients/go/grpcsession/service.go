// Package grpcsession is ADK Go's [session.Service] served by session-svc over gRPC.
//
// [NewService] connects to a grpc:// or grpcs:// URI; the [*Service] it returns plugs into
// ADK's runner and launcher like session.InMemoryService() or session/database. The server
// applies ADK's rules (state scopes, temp: keys never stored, ordering); this package maps ADK's
// events onto the contract the way the other languages' clients do, so sessions written in
// Python, Java or TypeScript read the same here and the other way round.
//
// Appends are conditional: each [*Session] remembers the sequence of the last event it has
// seen, and [Service.AppendEvent] fails with [adkgrpc.ErrStaleSession] when another writer
// appended meanwhile, so no event is ever lost silently.
//
// Beyond ADK's interface: paged listings ([Service.ListPage], [Service.ListEvents]), a session
// watch and the app's event feed as iterators ([Service.Watch], [Service.WatchApp]), and the
// shared scopes' state ([Service.GetUserState], [Service.GetAppState]).
package grpcsession

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/adk/v2/session"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

const (
	// readBudgetBytes bounds the events of one GetSession or ListEvents reply (one event past
	// it at most, so a 16 MiB event still comes back); the rest is paged.
	readBudgetBytes = 4 << 20
	eventsPageSize  = 100
	sessionsPage    = 1000
)

// The calls a retry cannot duplicate: reads, deletes, and appends (every append carries an
// event id, and the server answers a re-sent event with the stored one, rule S6.4).
var idempotent = []string{
	"adk.session.v1.SessionService/GetSession",
	"adk.session.v1.SessionService/ListSessions",
	"adk.session.v1.SessionService/ListEvents",
	"adk.session.v1.SessionService/DeleteSession",
	"adk.session.v1.SessionService/AppendEvent",
	"adk.session.v1.SessionService/GetUserState",
	"adk.session.v1.SessionService/GetAppState",
}

// Service is a session.Service over session-svc. Safe for concurrent use by any number of
// goroutines; [Service.Close] releases its connection.
type Service struct {
	conn   *grpc.ClientConn
	client sessionpb.SessionServiceClient
}

var _ session.Service = (*Service)(nil)

// NewService connects to the session-svc a URI names (see [adkgrpc.Dial]: grpc://host[:port],
// grpcs://, token_env, ca_file, timeout, ADK_GRPC_SESSION_* variables). The connection is
// made on the first call; ctx is not kept.
func NewService(ctx context.Context, uri string, opts ...adkgrpc.Option) (*Service, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := adkgrpc.Dial(uri, adkgrpc.Session, append([]adkgrpc.Option{adkgrpc.RetryMethods(idempotent...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Service{conn: conn, client: sessionpb.NewSessionServiceClient(conn)}, nil
}

// Close closes the connection; calls in progress fail.
func (s *Service) Close() error { return s.conn.Close() }

// Create creates a session; its state is split by scope (app:, user:, session; temp: dropped)
// and the session returned holds the merged state.
func (s *Service) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	state, err := marshalState(req.State)
	if err != nil {
		return nil, err
	}
	reply, err := s.client.CreateSession(ctx, &sessionpb.CreateSessionRequest{
		AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID, State: state,
	})
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: Create", err)
	}
	sess, err := sessionFromProto(reply)
	if err != nil {
		return nil, err
	}
	return &session.CreateResponse{Session: sess}, nil
}

// Get returns a session with its merged state and events (the NumRecentEvents last, those at
// or after After). A missing session is an error matching [adkgrpc.ErrNotFound].
func (s *Service) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	request := &sessionpb.GetSessionRequest{
		AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID,
		MaxReplyEventBytes: readBudgetBytes,
	}
	if req.NumRecentEvents > 0 {
		n := int32(min(req.NumRecentEvents, 1<<31-1))
		request.NumRecentEvents = &n
	}
	if !req.After.IsZero() {
		request.AfterTimestamp = timestamppb.New(req.After)
	}
	reply, err := s.client.GetSession(ctx, request)
	if err != nil {
		return nil, adkgrpc.FromRPC("grpcsession: Get", err)
	}
	if err := s.readRest(ctx, reply); err != nil {
		return nil, err
	}
	sess, err := sessionFromProto(reply)
	if err != nil {
		return nil, err
	}
	return &session.GetResponse{Session: sess}, nil
}

// readRest adds to a byte-bounded GetSession reply the events it left for ListEvents: those
// after its last event, up to its last_sequence (the session as it was read).
func (s *Service) readRest(ctx context.Context, reply *sessionpb.Session) error {
	token := ""
	for len(reply.Events) > 0 && reply.Events[len(reply.Events)-1].Sequence < reply.LastSequence {
		page, err := s.client.ListEvents(ctx, &sessionpb.ListEventsRequest{
			AppName: reply.AppName, UserId: reply.UserId, SessionId: reply.Id,
			AfterSequence: reply.Events[len(reply.Events)-1].Sequence,
			PageSize:      eventsPageSize, PageToken: token, MaxReplyEventBytes: readBudgetBytes,
		})
		if err != nil {
			return adkgrpc.FromRPC("grpcsession: Get", err)
		}
		for _, e := range page.Events {
			if e.Sequence > reply.LastSequence {
				return nil
			}
			reply.Events = append(reply.Events, e)
		}
		token = page.NextPageToken
		if token == "" {
			return nil
		}
	}
	return nil
}

// List returns the sessions of an app (of one user when UserID is set), without events.
func (s *Service) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	var found []session.Session
	seen := make(map[[2]string]int)
	token := ""
	for {
		page, err := s.ListPage(ctx, &ListPageRequest{AppName: req.AppName, UserID: req.UserID,
			AllUsers: req.UserID == "", PageSize: sessionsPage, PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, sess := range page.Sessions {
			// A session updated while paging shows up again further on: its later copy wins.
			key := [2]string{sess.UserID(), sess.ID()}
			if i, ok := seen[key]; ok {
				found[i] = sess
				continue
			}
			seen[key] = len(found)
			found = append(found, sess)
		}
		token = page.NextPageToken
		if token == "" {
			return &session.ListResponse{Sessions: found}, nil
		}
	}
}

// Delete deletes a session and its events; deleting a missing session is not an error.
func (s *Service) Delete(ctx context.Context, req *session.DeleteRequest) error {
	_, err := s.client.DeleteSession(ctx, &sessionpb.DeleteSessionRequest{
		AppName: req.AppName, UserId: req.UserID, SessionId: req.SessionID,
	})
	return adkgrpc.FromRPC("grpcsession: Delete", err)
}

// AppendEvent stores an event in the session and applies its state delta, then updates the
// caller's session as ADK's services do. A partial event is neither stored nor applied. An
// empty event ID and a zero Timestamp are filled in (on the caller's event), so that a retry
// after a lost reply is recognised by the server as the same event.
//
// The append is conditional on the session's last sequence: if another writer appended since
// sess was read, nothing is written and the error matches [adkgrpc.ErrStaleSession]. A session
// not made by this client is an error matching [adkgrpc.ErrForeignSession].
func (s *Service) AppendEvent(ctx context.Context, sess session.Session, event *session.Event) error {
	if sess == nil || event == nil {
		return errors.New("grpcsession: AppendEvent: session and event are required")
	}
	if event.Partial {
		return nil
	}
	own, ok := sess.(*Session)
	if !ok {
		return fmt.Errorf("grpcsession: AppendEvent to session %q of type %T: %w", sess.ID(), sess, adkgrpc.ErrForeignSession)
	}
	if event.ID == "" {
		event.ID = uuid.NewString()
	}
	if event.Timestamp.IsZero() {
		event.Timestamp = time.Now()
	}
	stored := withoutTemp(event)
	message, err := wire.EventToProto(stored)
	if err != nil {
		return fmt.Errorf("grpcsession: AppendEvent: %w: %w", adkgrpc.ErrInvalidArgument, err)
	}
	expected := own.LastSequence()
	reply, err := s.client.AppendEvent(ctx, &sessionpb.AppendEventRequest{
		AppName: own.appName, UserId: own.userID, SessionId: own.id,
		Event: message, ExpectedLastSequence: &expected,
	})
	if err != nil {
		return adkgrpc.FromRPC("grpcsession: AppendEvent", err)
	}
	if sequence := reply.GetEvent().GetSequence(); sequence > expected {
		// A fresh append, or a retry whose first reply was lost. Otherwise the server already
		// held this event when the session was read: a re-delivery that changes nothing.
		own.applied(event, stored, sequence)
	}
	return nil
}

func marshalState(state map[string]any) (string, error) {
	if len(state) == 0 {
		return "", nil
	}
	text, err := wire.MarshalState(state)
	if err != nil {
		return "", fmt.Errorf("grpcsession: state: %w: %w", adkgrpc.ErrInvalidArgument, err)
	}
	return text, nil
}

// sessionFromProto is the Session a message holds.
func sessionFromProto(m *sessionpb.Session) (*Session, error) {
	state, err := wire.UnmarshalState("Session.state", m.State)
	if err != nil {
		return nil, fmt.Errorf("grpcsession: %w", err)
	}
	if state == nil {
		state = make(map[string]any)
	}
	s := &Session{
		id: m.Id, appName: m.AppName, userID: m.UserId,
		state: state, lastSequence: m.LastSequence,
		updatedAt: m.GetLastUpdateTime().AsTime(),
	}
	if len(m.Events) > 0 {
		s.events = make([]*session.Event, 0, len(m.Events))
	}
	for _, em := range m.Events {
		e, err := wire.EventFromProto(em)
		if err != nil {
			return nil, fmt.Errorf("grpcsession: session %q, event %d: %w", m.Id, em.Sequence, err)
		}
		s.events = append(s.events, e)
	}
	return s, nil
}
