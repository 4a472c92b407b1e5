package grpcmemory_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/v2/session"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
	"github.com/adk-services/adk-services/clients/go/pb/memorypb"
)

// standIn is a local HTTP server standing in for an OpenAI-compatible chat model: it answers
// the scripted answers in order (418 when none is left, which fails the job) and keeps every
// request body.
type standIn struct {
	mu       sync.Mutex
	answers  []string
	requests []map[string]any
}

func (m *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, body)
	var answer string
	ok := len(m.answers) > 0
	if ok {
		answer, m.answers = m.answers[0], m.answers[1:]
	}
	m.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusTeapot)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{
		map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}}}})
}

// answer scripts the next answer, a JSON document.
func (m *standIn) answer(t *testing.T, v any) {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers = append(m.answers, string(text))
}

// facts scripts an extraction answer: one fact of a topic, from events.
func (m *standIn) facts(t *testing.T, topic, fact string, events ...string) {
	m.answer(t, map[string]any{"facts": []any{map[string]any{
		"topic": topic, "fact": fact, "source_event_ids": events, "valid_from": nil}}})
}

// decision scripts a consolidation answer: one decision on the call's first fact.
func (m *standIn) decision(t *testing.T, action, memoryID, text string) {
	m.answer(t, map[string]any{"decisions": []any{map[string]any{
		"fact": 0, "action": action, "memory_id": memoryID, "text": text}}})
}

func (m *standIn) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// lastPrompt is the user message of the last request.
func (m *standIn) lastPrompt(t *testing.T) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.requests) == 0 {
		t.Fatal("the model was never asked")
	}
	messages, _ := m.requests[len(m.requests)-1]["messages"].([]any)
	if len(messages) < 2 {
		t.Fatalf("a request without a user message: %v", m.requests[len(m.requests)-1])
	}
	user, _ := messages[1].(map[string]any)
	text, _ := user["content"].(string)
	return text
}

// generating starts a memory-svc whose generator is a fresh stand-in model; app "trigger"
// hands a stream to generation after 2 events.
func generating(t *testing.T) (*grpcmemory.Service, *standIn) {
	t.Helper()
	model := &standIn{}
	http := httptest.NewServer(model)
	t.Cleanup(http.Close)
	server := testserver.StartMemory(t, "--generator", "openai:"+http.URL+"/v1", "--generator-model", "stand-in",
		"--stream-trigger-events", "20,trigger=2")
	return newService(t, server), model
}

func said(id, s string) *session.Event { return text(id, "user", s, time.Unix(1000, 0)) }

func succeeded(t *testing.T, s *grpcmemory.Service, job *grpcmemory.Job) *grpcmemory.Job {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for job.State != memorypb.GenerationState_GENERATION_STATE_SUCCEEDED {
		if job.State == memorypb.GenerationState_GENERATION_STATE_FAILED || time.Now().After(deadline) {
			t.Fatalf("job %s: %v (%s)", job.Id, job.State, job.Error)
		}
		time.Sleep(20 * time.Millisecond)
		var err error
		if job, err = s.GenerationJob(t.Context(), job.AppName, job.UserId, job.Id); err != nil {
			t.Fatal(err)
		}
	}
	return job
}

func generated(t *testing.T, s *grpcmemory.Service, user string, req grpcmemory.SearchRequest) map[string]grpcmemory.Entry {
	t.Helper()
	req.AppName, req.UserID, req.Query, req.Kind = "app", user, "user lives", grpcmemory.KindGenerated
	found, err := s.Search(t.Context(), &req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]grpcmemory.Entry{}
	for _, m := range found {
		out[m.Content.Parts[0].Text] = m
	}
	return out
}

func texts(entries map[string]grpcmemory.Entry) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for text := range entries {
			if !yield(text) {
				return
			}
		}
	})
}

// A move, as facts given by the caller: Berlin, then Lisbon superseding it, each period
// answered with AsOf; then a rollback makes Berlin valid again.
func TestAMoveFromGivenFacts(t *testing.T) {
	s, model := generating(t)
	ctx := t.Context()
	berlinFrom := time.Date(2024, 1, 10, 0, 0, 0, 0, time.UTC)
	moved := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)

	job, err := s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "alice", Wait: true, Facts: []grpcmemory.Fact{
		{Text: "The user lives in Berlin.", Topic: "personal_facts", ValidFrom: berlinFrom, CustomMetadata: map[string]any{"source": "import"}}}})
	if err != nil || job.Added != 1 {
		t.Fatalf("Generate from a fact = %v, %v; want one added", job, err)
	}
	if model.calls() != 0 {
		t.Errorf("the model was asked %d times for given facts and no memories to compare", model.calls())
	}
	berlin := generated(t, s, "alice", grpcmemory.SearchRequest{})["The user lives in Berlin."]
	if berlin.ID == "" || !berlin.ValidFrom.Equal(berlinFrom) || berlin.CustomMetadata["source"] != "import" ||
		berlin.CustomMetadata["topic"] != "personal_facts" {
		t.Fatalf("the generated Berlin memory = %+v", berlin)
	}

	model.decision(t, "supersede", berlin.ID, "The user lives in Lisbon.")
	job, err = s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "alice", Wait: true,
		Facts: []grpcmemory.Fact{{Text: "The user lives in Lisbon.", ValidFrom: moved}}})
	if err != nil || job.Added != 1 || job.Invalidated != 1 {
		t.Fatalf("Generate the move = %v, %v; want one added, one invalidated", job, err)
	}
	if prompt := model.lastPrompt(t); !strings.Contains(prompt, "The user lives in Berlin.") || !strings.Contains(prompt, "The user lives in Lisbon.") {
		t.Errorf("the consolidation prompt lacks the memory or the fact:\n%s", prompt)
	}
	for _, tt := range []struct {
		name string
		req  grpcmemory.SearchRequest
		want []string
	}{
		{"now", grpcmemory.SearchRequest{}, []string{"The user lives in Lisbon."}},
		{"before the move", grpcmemory.SearchRequest{AsOf: moved.Add(-time.Hour)}, []string{"The user lives in Berlin."}},
		{"at the move", grpcmemory.SearchRequest{AsOf: moved}, []string{"The user lives in Lisbon."}},
		{"before Berlin", grpcmemory.SearchRequest{AsOf: berlinFrom.Add(-time.Hour)}, nil},
		{"superseded too", grpcmemory.SearchRequest{IncludeSuperseded: true}, []string{"The user lives in Berlin.", "The user lives in Lisbon."}},
	} {
		if got := texts(generated(t, s, "alice", tt.req)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := generated(t, s, "alice", grpcmemory.SearchRequest{IncludeSuperseded: true})["The user lives in Berlin."]; !got.InvalidAt.Equal(moved) {
		t.Errorf("Berlin's InvalidAt = %v, want %v", got.InvalidAt, moved)
	}

	revisions, next, err := s.ListRevisions(ctx, "app", "alice", berlin.ID, 0, "")
	if err != nil || next != "" || len(revisions) != 2 ||
		revisions[0].Action != memorypb.RevisionAction_REVISION_ACTION_ADDED ||
		revisions[1].Action != memorypb.RevisionAction_REVISION_ACTION_INVALIDATED {
		t.Fatalf("Berlin's revisions = %v (next %q), %v; want added, invalidated", revisions, next, err)
	}
	rolled, err := s.Rollback(ctx, "app", "alice", berlin.ID, revisions[0].RevisionId)
	if err != nil || rolled.Action != memorypb.RevisionAction_REVISION_ACTION_ROLLED_BACK || rolled.RestoredRevisionId != revisions[0].RevisionId {
		t.Fatalf("Rollback = %v, %v", rolled, err)
	}
	now := generated(t, s, "alice", grpcmemory.SearchRequest{})
	if got := texts(now); !slices.Equal(got, []string{"The user lives in Berlin.", "The user lives in Lisbon."}) {
		t.Errorf("after the rollback, valid now: %v, want Berlin valid again beside Lisbon", got)
	}
	if b := now["The user lives in Berlin."]; !b.InvalidAt.IsZero() || !b.ValidFrom.Equal(berlinFrom) {
		t.Errorf("after the rollback Berlin is valid %v to %v, want from %v on", b.ValidFrom, b.InvalidAt, berlinFrom)
	}

	_, err = s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "alice", Facts: []grpcmemory.Fact{{Text: "x"}}, Events: []*session.Event{said("e", "x")}})
	if !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Errorf("Generate from facts and events: %v, want ErrInvalidArgument", err)
	}
}

// A rollback restores the text an update replaced, and records itself.
func TestARollbackRestoresAFact(t *testing.T) {
	s, model := generating(t)
	ctx := t.Context()
	model.facts(t, "personal_facts", "The user lives in Berlin.", "r1")
	if _, err := s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "bob", Wait: true,
		Events: []*session.Event{said("r1", "I live in Berlin.")}}); err != nil {
		t.Fatal(err)
	}
	revisions, _, err := s.ListRevisions(ctx, "app", "bob", "", 0, "")
	if err != nil || len(revisions) != 1 {
		t.Fatalf("revisions after the first generation = %v, %v", revisions, err)
	}
	added := revisions[0]
	model.facts(t, "personal_facts", "The user lives in Lisbon.", "r2")
	model.decision(t, "update", added.MemoryId, "The user lives in Lisbon.")
	if _, err := s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "bob", Wait: true,
		Events: []*session.Event{said("r2", "I moved to Lisbon.")}}); err != nil {
		t.Fatal(err)
	}
	if got := texts(generated(t, s, "bob", grpcmemory.SearchRequest{})); !slices.Equal(got, []string{"The user lives in Lisbon."}) {
		t.Fatalf("after the update: %v", got)
	}

	rolled, err := s.Rollback(ctx, "app", "bob", added.MemoryId, added.RevisionId)
	if err != nil {
		t.Fatal(err)
	}
	if rolled.Action != memorypb.RevisionAction_REVISION_ACTION_ROLLED_BACK || rolled.RestoredRevisionId != added.RevisionId ||
		rolled.PreviousFact != "The user lives in Lisbon." || rolled.NewFact != "The user lives in Berlin." {
		t.Errorf("the rollback's revision = %v", rolled)
	}
	if got := texts(generated(t, s, "bob", grpcmemory.SearchRequest{})); !slices.Equal(got, []string{"The user lives in Berlin."}) {
		t.Errorf("after the rollback: %v, want Berlin", got)
	}
	revisions, _, err = s.ListRevisions(ctx, "app", "bob", added.MemoryId, 0, "")
	if err != nil || len(revisions) != 3 || revisions[2].RevisionId != rolled.RevisionId {
		t.Errorf("revisions after the rollback = %v, %v; want added, updated, the rollback", revisions, err)
	}
	if _, err := s.Rollback(ctx, "app", "bob", added.MemoryId, "none"); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Errorf("a rollback to an unknown revision: %v, want ErrInvalidArgument", err)
	}
}

func TestAStreamBuffersEachEventOnceAndAFlushGenerates(t *testing.T) {
	s, model := generating(t)
	ctx := t.Context()
	silent := &session.Event{ID: "o0", Author: "user"}
	appended, err := s.AppendStream(ctx, "app", "carol", "chat", []*session.Event{said("o1", "Oat milk, please."), said("o1", "Oat milk, please."), silent})
	if err != nil || appended.Appended != 1 || appended.Buffered != 1 || appended.Job != nil {
		t.Fatalf("AppendStream = %+v, %v; want 1 appended, 1 buffered, no job", appended, err)
	}
	again, err := s.AppendStream(ctx, "app", "carol", "chat", []*session.Event{said("o1", "Oat milk, please.")})
	if err != nil || again.Appended != 0 || again.Buffered != 1 {
		t.Fatalf("AppendStream again = %+v, %v; want 0 appended, 1 buffered", again, err)
	}
	streams, err := s.ListStreams(ctx, "app", "carol")
	if err != nil || len(streams) != 1 || streams[0].ID != "chat" || streams[0].Buffered != 1 ||
		time.Since(streams[0].LastAppend).Abs() > time.Minute {
		t.Fatalf("ListStreams = %+v, %v", streams, err)
	}

	model.facts(t, "preferences", "The user drinks oat milk.", "o1")
	job, err := s.FlushStream(ctx, "app", "carol", "chat")
	if err != nil || job == nil {
		t.Fatalf("FlushStream = %v, %v; want a job", job, err)
	}
	if job = succeeded(t, s, job); job.Added != 1 {
		t.Errorf("the flushed job added %d memories, want 1", job.Added)
	}
	if prompt := model.lastPrompt(t); strings.Count(prompt, "Oat milk, please.") != 1 {
		t.Errorf("the extraction prompt holds the event %d times, want once:\n%s", strings.Count(prompt, "Oat milk, please."), prompt)
	}
	if job, err := s.FlushStream(ctx, "app", "carol", "chat"); err != nil || job != nil {
		t.Errorf("flushing an empty stream = %v, %v; want no job", job, err)
	}
	if streams, err := s.ListStreams(ctx, "app", "carol"); err != nil || len(streams) != 0 {
		t.Errorf("streams after the flush = %+v, %v; want none", streams, err)
	}
	if _, err := s.AppendStream(ctx, "app", "carol", "", []*session.Event{said("o2", "x")}); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Errorf("an append without a stream id: %v, want ErrInvalidArgument", err)
	}
}

func TestAStreamGeneratesAtItsTriggerCount(t *testing.T) {
	s, model := generating(t)
	ctx := t.Context()
	model.facts(t, "plans", "The user flies to Porto in June.", "p1", "p2")
	first, err := s.AppendStream(ctx, "trigger", "dave", "trip", []*session.Event{said("p1", "I fly to Porto")})
	if err != nil || first.Job != nil {
		t.Fatalf("the first event = %+v, %v; want no job yet", first, err)
	}
	second, err := s.AppendStream(ctx, "trigger", "dave", "trip", []*session.Event{said("p2", "in June.")})
	if err != nil || second.Job == nil {
		t.Fatalf("the trigger count's event = %+v, %v; want a job", second, err)
	}
	if job := succeeded(t, s, second.Job); job.Added != 1 {
		t.Errorf("the triggered job added %d memories, want 1", job.Added)
	}
	if streams, err := s.ListStreams(ctx, "trigger", "dave"); err != nil || len(streams) != 0 {
		t.Errorf("streams after the trigger = %+v, %v; want none", streams, err)
	}
}
