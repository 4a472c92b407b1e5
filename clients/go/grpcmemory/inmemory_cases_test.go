package grpcmemory_test

import (
	"iter"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

// The cases of ADK Go's memory/inmemory_test.go (v2.2.0), restated against a real memory-svc.
// "find events" answers differently by design, in three ways marked below: memory-svc adds the
// event after a direct match as conversational context; an entry keeps the event's id,
// author, timestamp and content but not its custom metadata (memory entries take metadata from
// AddEvents and AddMemory); and an event without an id gets one of the server's.
func TestSearchMemoryCases(t *testing.T) {
	server := testserver.StartMemory(t)
	tests := []struct {
		name         string
		initSessions []session.Session
		req          *memory.SearchRequest
		wantResp     *memory.SearchResponse
	}{
		{
			name: "find events",
			initSessions: []session.Session{
				makeSession("app1", "user1", "sess1", []*session.Event{
					{
						ID:     "event1",
						Author: "user1",
						LLMResponse: model.LLMResponse{
							Content:        genai.NewContentFromText("The Quick brown fox", genai.RoleUser),
							CustomMetadata: map[string]any{"key": "value"},
						},
						Timestamp: must(time.Parse(time.RFC3339, "2023-10-01T10:00:00Z")),
					},
					{LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("jumps over the lazy dog", genai.RoleModel)}},
				}),
				makeSession("app1", "user1", "sess2", []*session.Event{
					{
						Author:      "test-bot",
						LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("hello world", genai.RoleModel)},
						Timestamp:   must(time.Parse(time.RFC3339, "2023-10-02T10:00:00Z")),
					},
				}),
				makeSession("app1", "user1", "sess3", []*session.Event{
					{LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("test text", genai.RoleUser)}},
				}),
			},
			req: &memory.SearchRequest{AppName: "app1", UserID: "user1", Query: "quick hello"},
			wantResp: &memory.SearchResponse{Memories: []memory.Entry{
				{
					ID:      "event1",
					Content: genai.NewContentFromText("The Quick brown fox", genai.RoleUser),
					Author:  "user1",
					// Differs: ADK Go's in-memory service copies the event's custom metadata.
					Timestamp: must(time.Parse(time.RFC3339, "2023-10-01T10:00:00Z")),
				},
				// Differs: the event after the direct match, as its conversational context.
				{Content: genai.NewContentFromText("jumps over the lazy dog", genai.RoleModel)},
				{
					Content:   genai.NewContentFromText("hello world", genai.RoleModel),
					Author:    "test-bot",
					Timestamp: must(time.Parse(time.RFC3339, "2023-10-02T10:00:00Z")),
				},
			}},
		},
		{
			name: "no leakage for different appName",
			initSessions: []session.Session{makeSession("app1", "user1", "sess3", []*session.Event{
				{LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("test text", genai.RoleUser)}},
			})},
			req:      &memory.SearchRequest{AppName: "other_app", UserID: "user1", Query: "test text"},
			wantResp: &memory.SearchResponse{},
		},
		{
			name: "no leakage for different user",
			initSessions: []session.Session{makeSession("app1", "user1", "sess3", []*session.Event{
				{LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("test text", genai.RoleUser)}},
			})},
			req:      &memory.SearchRequest{AppName: "app1", UserID: "test_user", Query: "test text"},
			wantResp: &memory.SearchResponse{},
		},
		{
			name: "no matches",
			initSessions: []session.Session{makeSession("app1", "user1", "sess3", []*session.Event{
				{LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("test text", genai.RoleUser)}},
			})},
			req:      &memory.SearchRequest{AppName: "app1", UserID: "test_user", Query: "something different"},
			wantResp: &memory.SearchResponse{},
		},
		{
			name:     "lookup on empty store",
			req:      &memory.SearchRequest{AppName: "app1", UserID: "test_user", Query: "something different"},
			wantResp: &memory.SearchResponse{},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, server)
			// One server for all cases: each case gets apps of its own.
			suffix := "-" + strconv.Itoa(i)
			for _, sess := range tt.initSessions {
				ts := sess.(*testSession)
				ts.appName += suffix
				if err := s.AddSessionToMemory(t.Context(), sess); err != nil {
					t.Fatalf("AddSessionToMemory() error = %v", err)
				}
			}
			req := *tt.req
			req.AppName += suffix
			got, err := s.SearchMemory(t.Context(), &req)
			if err != nil {
				t.Fatalf("SearchMemory() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantResp, got, sortMemories, ignoreGeneratedIDs); diff != "" {
				t.Errorf("SearchMemory() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The concurrent case: searches and ingestion of one user from many goroutines at once.
func TestSearchMemoryConcurrent(t *testing.T) {
	s := newService(t, testserver.StartMemory(t))
	ctx := t.Context()
	if err := s.AddSessionToMemory(ctx, makeSession("app1", "user1", "seed", nil)); err != nil {
		t.Fatalf("AddSessionToMemory() error = %v", err)
	}
	const workers = 8
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for j := range 50 {
				id := "s" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
				if err := s.AddSessionToMemory(ctx, makeSession("app1", "user1", id, nil)); err != nil {
					t.Errorf("AddSessionToMemory() error = %v", err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 50 {
				if _, err := s.SearchMemory(ctx, &memory.SearchRequest{AppName: "app1", UserID: "user1", Query: "x"}); err != nil {
					t.Errorf("SearchMemory() error = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func newService(t testing.TB, server *testserver.Server) *grpcmemory.Service {
	t.Helper()
	s, err := grpcmemory.NewService(t.Context(), server.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var sortMemories = cmp.Transformer("Sort", func(in *memory.SearchResponse) *memory.SearchResponse {
	slices.SortFunc(in.Memories, func(m1, m2 memory.Entry) int { return m1.Timestamp.Compare(m2.Timestamp) })
	return in
})

// ignoreGeneratedIDs: where the case expects an empty id, memory-svc's generated one is fine.
var ignoreGeneratedIDs = cmp.FilterPath(func(p cmp.Path) bool {
	return p.Last().String() == ".ID"
}, cmp.Comparer(func(want, got string) bool { return want == got || want == "" || got == "" }))

func makeSession(appName, userID, sessionID string, events []*session.Event) *testSession {
	return &testSession{appName: appName, userID: userID, sessionID: sessionID, events: events}
}

type testSession struct {
	appName, userID, sessionID string
	events                     []*session.Event
}

func (s *testSession) ID() string                    { return s.sessionID }
func (s *testSession) AppName() string               { return s.appName }
func (s *testSession) UserID() string                { return s.userID }
func (s *testSession) Events() session.Events        { return s }
func (s *testSession) All() iter.Seq[*session.Event] { return slices.Values(s.events) }
func (s *testSession) Len() int                      { return len(s.events) }
func (s *testSession) At(i int) *session.Event       { return s.events[i] }
func (s *testSession) State() session.State          { panic("not used by memory services") }
func (s *testSession) LastUpdateTime() time.Time     { panic("not used by memory services") }
func must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}
