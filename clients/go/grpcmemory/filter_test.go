package grpcmemory_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/genai"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

// Twenty notes m00..m19: n = i, color cycling red/green/blue, seen = t0 + i hours (an RFC 3339
// string), and on every fifth the topic "pets" and vip = true; odd ones by alice, even ones by
// bob, note i written at t0 + i seconds.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func note(i int) grpcmemory.Entry {
	metadata := map[string]any{
		"n": i, "color": []string{"red", "green", "blue"}[i%3],
		"seen": t0.Add(time.Duration(i) * time.Hour).Format(time.RFC3339),
	}
	if i%5 == 0 {
		metadata["topic"], metadata["vip"] = "pets", true
	}
	author := "bob"
	if i%2 == 1 {
		author = "alice"
	}
	return grpcmemory.Entry{Entry: memory.Entry{
		ID: fmt.Sprintf("m%02d", i), Author: author, Timestamp: t0.Add(time.Duration(i) * time.Second),
		Content: genai.NewContentFromText(fmt.Sprintf("garden note %d", i), genai.RoleUser), CustomMetadata: metadata,
	}}
}

func addNotes(t *testing.T, s *grpcmemory.Service, app string) {
	t.Helper()
	notes := make([]grpcmemory.Entry, 20)
	for i := range notes {
		notes[i] = note(i)
	}
	if _, err := s.AddMemory(t.Context(), app, "u", notes, nil); err != nil {
		t.Fatal(err)
	}
}

// ids is the notes' ids for which keep holds, in ingestion order.
func ids(keep func(i int) bool) []string {
	var out []string
	for i := range 20 {
		if keep(i) {
			out = append(out, fmt.Sprintf("m%02d", i))
		}
	}
	return out
}

// listed pages through a listing three at a time and returns the ids.
func listed(t *testing.T, s *grpcmemory.Service, req grpcmemory.ListRequest) []string {
	t.Helper()
	req.PageSize = 3
	var out []string
	for {
		page, err := s.List(t.Context(), &req)
		if err != nil {
			t.Fatalf("List(%+v): %v", req, err)
		}
		for _, m := range page.Memories {
			out = append(out, m.ID)
		}
		if page.NextPageToken == "" {
			return out
		}
		req.PageToken = page.NextPageToken
	}
}

func TestFilters(t *testing.T) {
	s := newService(t, testserver.StartMemory(t))
	addNotes(t, s, "app")
	hour := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }
	type c = grpcmemory.Condition
	for _, tt := range []struct {
		name  string
		where [][]c
		want  []string
	}{
		{"number <", [][]c{{grpcmemory.Lt("n", 3)}}, ids(func(i int) bool { return i < 3 })},
		{"number <=", [][]c{{grpcmemory.Le("n", 3.5)}}, ids(func(i int) bool { return i <= 3 })},
		{"number >", [][]c{{grpcmemory.Gt("n", int64(17))}}, ids(func(i int) bool { return i > 17 })},
		{"number >=", [][]c{{grpcmemory.Ge("n", 17)}}, ids(func(i int) bool { return i >= 17 })},
		{"number ==", [][]c{{grpcmemory.Eq("n", 7)}}, ids(func(i int) bool { return i == 7 })},
		{"number !=", [][]c{{grpcmemory.Ne("n", 7)}}, ids(func(i int) bool { return i != 7 })},
		{"time <", [][]c{{grpcmemory.Lt("seen", hour(2))}}, ids(func(i int) bool { return i < 2 })},
		{"time <=", [][]c{{grpcmemory.Le("seen", hour(2))}}, ids(func(i int) bool { return i <= 2 })},
		{"time >", [][]c{{grpcmemory.Gt("seen", hour(17))}}, ids(func(i int) bool { return i > 17 })},
		{"time >= in another zone", [][]c{{grpcmemory.Ge("seen", hour(17).In(time.FixedZone("UTC+2", 7200)))}},
			ids(func(i int) bool { return i >= 17 })},
		{"time ==", [][]c{{grpcmemory.Eq("seen", hour(4))}}, ids(func(i int) bool { return i == 4 })},
		{"string ==", [][]c{{grpcmemory.Eq("color", "blue")}}, ids(func(i int) bool { return i%3 == 2 })},
		{"string !=", [][]c{{grpcmemory.Ne("color", "blue")}}, ids(func(i int) bool { return i%3 != 2 })},
		{"bool ==", [][]c{{grpcmemory.Eq("vip", true)}}, ids(func(i int) bool { return i%5 == 0 })},
		{"bool != holds where the key is absent", [][]c{{grpcmemory.Ne("vip", true)}}, ids(func(i int) bool { return i%5 != 0 })},
		{"exists", [][]c{{grpcmemory.Exists("vip")}}, ids(func(i int) bool { return i%5 == 0 })},
		{"another type fails", [][]c{{grpcmemory.Eq("n", "7")}}, nil},
		{"an OR of ANDs", [][]c{{grpcmemory.Eq("color", "red"), grpcmemory.Ge("n", 10)}, {grpcmemory.Exists("vip")}},
			ids(func(i int) bool { return (i%3 == 0 && i >= 10) || i%5 == 0 })},
		{"an AND of a string, a number and a time", [][]c{{grpcmemory.Ne("color", "red"), grpcmemory.Le("n", 10), grpcmemory.Gt("seen", hour(3))}},
			ids(func(i int) bool { return i%3 != 0 && i <= 10 && i > 3 })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u", Filter: grpcmemory.Filter{AnyOf: tt.where}})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("topics, author and time range", func(t *testing.T) {
		got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u", Filter: grpcmemory.Filter{Topics: []string{"pets"}}, Author: "bob"})
		if want := ids(func(i int) bool { return i%10 == 0 }); !slices.Equal(got, want) {
			t.Errorf("pets by bob = %v, want %v", got, want)
		}
		got = listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u", After: t0.Add(5 * time.Second), Before: t0.Add(8 * time.Second)})
		if want := ids(func(i int) bool { return 5 <= i && i < 8 }); !slices.Equal(got, want) {
			t.Errorf("written in [5 s, 8 s) = %v, want %v", got, want)
		}
	})

	t.Run("a search ranks among the memories that pass", func(t *testing.T) {
		found, err := s.Search(t.Context(), &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "garden note",
			Limit: 3, Filter: grpcmemory.Filter{AnyOf: [][]c{{grpcmemory.Ge("n", 15)}, {grpcmemory.Eq("n", 1)}}}})
		if err != nil {
			t.Fatal(err)
		}
		want := ids(func(i int) bool { return i >= 15 || i == 1 })
		if len(found) != 3 {
			t.Fatalf("found %d memories, want the limit, 3", len(found))
		}
		for _, m := range found {
			if !slices.Contains(want, m.ID) {
				t.Errorf("found %s, which fails the filter", m.ID)
			}
		}
	})
}

func TestFiltersTheServerCouldNotRead(t *testing.T) {
	server := testserver.StartMemory(t)
	s := newService(t, server)
	server.Stop() // the client refuses these itself: no call is made
	for _, tt := range []struct {
		name, field string
		where       [][]grpcmemory.Condition
	}{
		{"NaN", "filter.any_of[0].all_of[1]", [][]grpcmemory.Condition{{grpcmemory.Exists("a"), grpcmemory.Gt("n", math.NaN())}}},
		{"infinity", "filter.any_of[1].all_of[0]", [][]grpcmemory.Condition{{grpcmemory.Exists("a")}, {grpcmemory.Eq("n", math.Inf(-1))}}},
		{"the zero Condition", "filter.any_of[0].all_of[0]", [][]grpcmemory.Condition{{{}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			filter := grpcmemory.Filter{AnyOf: tt.where}
			_, err := s.Search(t.Context(), &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "x", Filter: filter})
			if !errors.Is(err, adkgrpc.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Search: %v, want ErrInvalidArgument naming %s", err, tt.field)
			}
			if _, err := s.List(t.Context(), &grpcmemory.ListRequest{AppName: "app", UserID: "u", Filter: filter}); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
				t.Errorf("List: %v, want ErrInvalidArgument", err)
			}
			if _, err := s.Purge(t.Context(), &grpcmemory.PurgeRequest{AppName: "app", Filter: filter}); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
				t.Errorf("Purge: %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestTheServerJudgesFilters(t *testing.T) {
	s := newService(t, testserver.StartMemory(t))
	var rpcErr *adkgrpc.Error
	_, err := s.Search(t.Context(), &grpcmemory.SearchRequest{AppName: "app", UserID: "u", Query: "x",
		Filter: grpcmemory.Filter{AnyOf: [][]grpcmemory.Condition{{grpcmemory.Eq("", "red")}}}})
	if !errors.As(err, &rpcErr) || !errors.Is(err, adkgrpc.ErrInvalidArgument) || !strings.Contains(rpcErr.Message, "key") {
		t.Errorf("a condition on an empty key: %v, want the server's INVALID_ARGUMENT naming the key", err)
	}
}

func TestValidityInTime(t *testing.T) {
	s := newService(t, testserver.StartMemory(t))
	ctx := t.Context()
	berlinFrom := time.Date(2024, 1, 10, 9, 0, 0, 0, time.UTC)
	moved := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	fact := func(id, text string, from, until time.Time) grpcmemory.Entry {
		return grpcmemory.Entry{Entry: memory.Entry{ID: id, Content: genai.NewContentFromText(text, genai.RoleUser)},
			ValidFrom: from, InvalidAt: until}
	}
	if _, err := s.AddMemory(ctx, "app", "alice", []grpcmemory.Entry{fact("berlin", "Alice lives in Berlin.", berlinFrom, moved)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddMemory(ctx, "app", "alice", []grpcmemory.Entry{fact("lisbon", "Alice lives in Lisbon.", moved, time.Time{})}, nil); err != nil {
		t.Fatal(err)
	}

	search := func(req grpcmemory.SearchRequest) []string {
		t.Helper()
		req.AppName, req.UserID, req.Query = "app", "alice", "Alice lives"
		found, err := s.Search(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range found {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		name string
		req  grpcmemory.SearchRequest
		want []string
	}{
		{"now", grpcmemory.SearchRequest{}, []string{"lisbon"}},
		{"the day before the move", grpcmemory.SearchRequest{AsOf: moved.AddDate(0, 0, -1)}, []string{"berlin"}},
		{"the moment of the move", grpcmemory.SearchRequest{AsOf: moved}, []string{"lisbon"}},
		{"before Berlin", grpcmemory.SearchRequest{AsOf: berlinFrom.Add(-time.Second)}, nil},
		{"superseded too", grpcmemory.SearchRequest{IncludeSuperseded: true}, []string{"berlin", "lisbon"}},
	} {
		if got := search(tt.req); !slices.Equal(got, tt.want) {
			t.Errorf("search %s = %v, want %v", tt.name, got, tt.want)
		}
	}

	page, err := s.List(ctx, &grpcmemory.ListRequest{AppName: "app", UserID: "alice", IncludeSuperseded: true})
	if err != nil || len(page.Memories) != 2 {
		t.Fatalf("List with superseded = %+v, %v", page, err)
	}
	type validity struct {
		ID              string
		From, InvalidAt time.Time
	}
	var got []validity
	for _, m := range page.Memories {
		got = append(got, validity{m.ID, m.ValidFrom, m.InvalidAt})
	}
	if diff := cmp.Diff([]validity{{"berlin", berlinFrom, moved}, {"lisbon", moved, time.Time{}}}, got); diff != "" {
		t.Errorf("validity read back (-want +got):\n%s", diff)
	}
	if got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "alice", AsOf: berlinFrom}); !slices.Equal(got, []string{"berlin"}) {
		t.Errorf("listed as of %v = %v, want [berlin]", berlinFrom, got)
	}

	_, err = s.AddMemory(ctx, "app", "bob", []grpcmemory.Entry{fact("", "A fact.", moved, berlinFrom)}, nil)
	if !errors.Is(err, adkgrpc.ErrInvalidArgument) || !strings.Contains(err.Error(), "invalid_at") {
		t.Errorf("a validity that ends before it begins: %v, want ErrInvalidArgument naming invalid_at", err)
	}
	if got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "bob", IncludeSuperseded: true}); len(got) != 0 {
		t.Errorf("after a refused write, bob has %v", got)
	}
}

func TestPurge(t *testing.T) {
	s := newService(t, testserver.StartMemory(t))
	ctx := t.Context()
	addNotes(t, s, "app")
	addNotes(t, s, "other") // another app: never purged
	filter := grpcmemory.Filter{AnyOf: [][]grpcmemory.Condition{{grpcmemory.Ge("n", 15)}, {grpcmemory.Eq("color", "green"), grpcmemory.Lt("n", 5)}}}
	matching := func(i int) bool { return i >= 15 || (i%3 == 1 && i < 5) }
	all := func(int) bool { return true }

	dry, err := s.Purge(ctx, &grpcmemory.PurgeRequest{AppName: "app", Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	var sample []string
	for _, m := range dry.Sample {
		sample = append(sample, m.ID)
	}
	if dry.Count != 7 || !slices.Equal(sample, ids(matching)) || dry.OperationID != "" {
		t.Errorf("dry run = count %d, sample %v, operation %q; want 7, %v, none", dry.Count, sample, dry.OperationID, ids(matching))
	}
	if got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u"}); !slices.Equal(got, ids(all)) {
		t.Fatalf("a dry run deleted something: %v left", got)
	}

	forced, err := s.Purge(ctx, &grpcmemory.PurgeRequest{AppName: "app", UserID: "u", Filter: filter, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if forced.Count != 7 || forced.OperationID == "" {
		t.Errorf("forced purge = count %d, operation %q; want 7 and an id", forced.Count, forced.OperationID)
	}
	if got, want := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u"}), ids(func(i int) bool { return !matching(i) }); !slices.Equal(got, want) {
		t.Errorf("after the purge: %v, want %v", got, want)
	}
	if got := listed(t, s, grpcmemory.ListRequest{AppName: "other", UserID: "u"}); !slices.Equal(got, ids(all)) {
		t.Errorf("the purge reached another app: %v left there", got)
	}

	if _, err := s.Purge(ctx, &grpcmemory.PurgeRequest{AppName: "app", Force: true}); !errors.Is(err, adkgrpc.ErrInvalidArgument) {
		t.Errorf("a purge without a filter: %v, want ErrInvalidArgument", err)
	}
	if got := listed(t, s, grpcmemory.ListRequest{AppName: "app", UserID: "u"}); len(got) != 13 {
		t.Errorf("after a refused purge, %d memories left, want 13", len(got))
	}
}
