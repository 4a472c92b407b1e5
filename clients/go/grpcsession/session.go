package grpcsession

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/adk/v2/session"
)

// Session is a session read from (or created in) session-svc, and updated locally by
// [Service.AppendEvent] as ADK's own services update theirs. It remembers the sequence of the
// last stored event it has seen, so that appends through it are conditional on the session
// not having moved on meanwhile. Safe for concurrent use.
type Session struct {
	id, appName, userID string

	mu           sync.RWMutex
	state        map[string]any
	events       []*session.Event
	updatedAt    time.Time
	lastSequence uint64
}

var _ session.Session = (*Session)(nil)

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// AppName returns the session's app.
func (s *Session) AppName() string { return s.appName }

// UserID returns the session's user.
func (s *Session) UserID() string { return s.userID }

// State returns the session's merged state (session keys, app: and user: keys).
func (s *Session) State() session.State { return sessionState{s} }

// Events returns the session's events, oldest first.
func (s *Session) Events() session.Events {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return events(slices.Clip(s.events))
}

// LastUpdateTime returns the timestamp of the last event, or the creation time.
func (s *Session) LastUpdateTime() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.updatedAt
}

// LastSequence returns the sequence of the last stored event this session has seen (0 for
// none): appends through it succeed only while it is the session's last sequence.
func (s *Session) LastSequence() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastSequence
}

// applied records an event the server stored at sequence: its whole delta (temp: keys
// included, for the rest of the invocation) goes to the local state, as ADK does.
func (s *Session) applied(event, stored *session.Event, sequence uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(event.Actions.StateDelta) > 0 && s.state == nil {
		s.state = make(map[string]any)
	}
	maps.Copy(s.state, event.Actions.StateDelta)
	s.events = append(s.events, stored)
	s.updatedAt = event.Timestamp
	s.lastSequence = sequence
}

// withoutTemp is event as stored: without temp: keys in its delta (a copy when it had any).
func withoutTemp(event *session.Event) *session.Event {
	delta := event.Actions.StateDelta
	temp := false
	for k := range delta {
		temp = temp || isTemp(k)
	}
	if !temp {
		return event
	}
	kept := make(map[string]any, len(delta))
	for k, v := range delta {
		if !isTemp(k) {
			kept[k] = v
		}
	}
	stored := *event
	stored.Actions.StateDelta = kept
	return &stored
}

func isTemp(key string) bool { return strings.HasPrefix(key, session.KeyPrefixTemp) }

type sessionState struct{ s *Session }

func (st sessionState) Get(key string) (any, error) {
	st.s.mu.RLock()
	defer st.s.mu.RUnlock()
	v, ok := st.s.state[key]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return v, nil
}

func (st sessionState) Set(key string, value any) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if st.s.state == nil {
		st.s.state = make(map[string]any)
	}
	st.s.state[key] = value
	return nil
}

func (st sessionState) All() iter.Seq2[string, any] {
	st.s.mu.RLock()
	snapshot := maps.Clone(st.s.state)
	st.s.mu.RUnlock()
	return maps.All(snapshot)
}

type events []*session.Event

func (e events) All() iter.Seq[*session.Event] { return slices.Values(e) }
func (e events) Len() int                      { return len(e) }
func (e events) At(i int) *session.Event       { return e[i] }
