package grpcmemory_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

func text(id, author, s string, at time.Time) *session.Event {
	return &session.Event{ID: id, Author: author, Timestamp: at,
		LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(s, genai.RoleUser)}}
}

func TestBeyondTheInterface(t *testing.T) {
	server := testserver.StartMemory(t)
	s := newService(t, server)
	ctx := t.Context()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := s.AddEvents(ctx, "app", "u", "s1", []*session.Event{
		text("a", "user", "I moved to Lisbon last year", base),
		text("b", "bot", "Lisbon has great coffee", base.Add(time.Hour)),
		{ID: "no-content", Author: "user"},
	}, map[string]any{"source": "chat"})
	if err != nil || n != 2 {
		t.Fatalf("AddEvents = %d, %v; want 2 entries", n, err)
	}
	ids, err := s.AddMemory(ctx, "app", "u", []grpcmemory.Entry{{Entry: memory.Entry{Content: genai.NewContentFromText("Lisbon trams are yellow", genai.RoleUser),
		Author: "note", Timestamp: base.Add(2 * time.Hour)}}}, nil)
	if err != nil || len(ids) != 1 || ids[0] == "" {
		t.Fatalf("AddMemory = %v, %v", ids, err)
	}

	found, err := s.Search(ctx, &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "lisbon", Limit: 2})
	if err != nil || len(found) != 2 || found[0].Score <= 0 {
		t.Fatalf("Search limit 2 = %+v, %v", found, err)
	}
	found, err = s.Search(ctx, &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "lisbon", Author: "bot"})
	if err != nil || len(found) != 1 || found[0].ID != "b" || found[0].SessionID != "s1" || found[0].CustomMetadata["source"] != "chat" {
		t.Fatalf("Search by author = %+v, %v", found, err)
	}
	found, err = s.Search(ctx, &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "lisbon",
		After: base.Add(30 * time.Minute), Before: base.Add(90 * time.Minute), Mode: grpcmemory.ModeKeyword})
	if err != nil || len(found) != 1 || found[0].ID != "b" {
		t.Fatalf("Search in a time window = %+v, %v", found, err)
	}

	page, err := s.List(ctx, &grpcmemory.ListRequest{AppName: "app", UserID: "u", PageSize: 2})
	if err != nil || len(page.Memories) != 2 || page.NextPageToken == "" {
		t.Fatalf("List page 1 = %+v, %v", page, err)
	}
	page, err = s.List(ctx, &grpcmemory.ListRequest{AppName: "app", UserID: "u", PageSize: 2, PageToken: page.NextPageToken})
	if err != nil || len(page.Memories) != 1 || page.NextPageToken != "" {
		t.Fatalf("List page 2 = %+v, %v", page, err)
	}

	if deleted, err := s.Delete(ctx, &grpcmemory.DeleteRequest{AppName: "app", UserID: "u", SessionID: "s1"}); err != nil || deleted != 2 {
		t.Fatalf("Delete by session = %d, %v", deleted, err)
	}
	if _, err := s.Delete(ctx, &grpcmemory.DeleteRequest{AppName: "app", UserID: "u", SessionID: "s1", All: true}); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Errorf("Delete with two targets: %v, want ErrInvalidArgument", err)
	}
	if deleted, err := s.Delete(ctx, &grpcmemory.DeleteRequest{AppName: "app", UserID: "u", All: true}); err != nil || deleted != 1 {
		t.Fatalf("Delete all = %d, %v", deleted, err)
	}

	// Without --generator, generation is refused, with the server's reason.
	var rpcErr *adkgrpc.Error
	if _, err := s.Generate(ctx, &grpcmemory.GenerateRequest{AppName: "app", UserID: "u",
		Events: []*session.Event{text("g", "user", "x", base)}}); !errors.As(err, &rpcErr) || rpcErr.Message == "" {
		t.Errorf("Generate without a generator: %v", err)
	}
}

func TestHostileMemoryInput(t *testing.T) {
	server := testserver.StartMemory(t)
	s := newService(t, server)
	ctx := t.Context()
	for _, tt := range []struct{ name, app, user string }{
		{"empty app", "", "u"},
		{"control character in the user", "app", "u\x01"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.AddEvents(ctx, tt.app, tt.user, "", []*session.Event{text("a", "user", "hello", time.Now())}, nil)
			if !errors.Is(err, adkgrpc.ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
	if _, err := s.AddEvents(ctx, "app", "u", "", []*session.Event{
		text("ok", "user", "fine", time.Now()),
		{ID: "bad", Author: "user", LLMResponse: model.LLMResponse{Content: genai.NewContentFromText("x", genai.RoleUser),
			CustomMetadata: map[string]any{"f": func() {}}}},
	}, nil); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Fatalf("an event whose metadata is not JSON: %v", err)
	}
	if page, err := s.List(ctx, &grpcmemory.ListRequest{AppName: "app", UserID: "u"}); err != nil || len(page.Memories) != 0 {
		t.Errorf("after refused input, memory holds %d entries (%v)", len(page.Memories), err)
	}
	server.Stop()
	if _, err := s.SearchMemory(ctx, &memory.SearchRequest{AppName: "app", UserID: "u", Query: "x"}); !errors.Is(err, adkgrpc.ErrUnavailable) {
		t.Errorf("search with the server down: %v, want ErrUnavailable", err)
	}
}
