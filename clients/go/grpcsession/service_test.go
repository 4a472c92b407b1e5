package grpcsession_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/grpcsession"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

const app = "app"

func create(t *testing.T, s *grpcsession.Service, user, id string) *grpcsession.Session {
	t.Helper()
	created, err := s.Create(t.Context(), &session.CreateRequest{AppName: app, UserID: user, SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	return created.Session.(*grpcsession.Session)
}

func get(t *testing.T, s *grpcsession.Service, user, id string) *grpcsession.Session {
	t.Helper()
	got, err := s.Get(t.Context(), &session.GetRequest{AppName: app, UserID: user, SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	return got.Session.(*grpcsession.Session)
}

func textEvent(id, text string) *session.Event {
	return &session.Event{ID: id, Author: "user", InvocationID: "inv",
		LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(text, genai.RoleUser)}}
}

func TestStaleWriterGetsTypedConflictAndWritesNothing(t *testing.T) {
	s := newService(t, testserver.StartSession(t))
	create(t, s, "u", "s")
	first, second := get(t, s, "u", "s"), get(t, s, "u", "s")
	if err := s.AppendEvent(t.Context(), first, textEvent("e1", "one")); err != nil {
		t.Fatal(err)
	}
	err := s.AppendEvent(t.Context(), second, textEvent("e2", "two"))
	if !errors.Is(err, adkgrpc.ErrStaleSession) {
		t.Fatalf("append through a stale session: got %v, want ErrStaleSession", err)
	}
	if second.Events().Len() != 0 || second.LastSequence() != 0 {
		t.Errorf("the stale session changed locally: %d events, sequence %d", second.Events().Len(), second.LastSequence())
	}
	stored := get(t, s, "u", "s")
	if stored.Events().Len() != 1 || stored.Events().At(0).ID != "e1" || stored.LastSequence() != 1 {
		t.Errorf("stored: %d events, last sequence %d; want only e1", stored.Events().Len(), stored.LastSequence())
	}
	// Read again, the second writer goes on.
	if err := s.AppendEvent(t.Context(), stored, textEvent("e2", "two")); err != nil {
		t.Fatal(err)
	}
}

func TestAppendUpdatesTheCallersSessionAsADKDoes(t *testing.T) {
	s := newService(t, testserver.StartSession(t))
	sess := create(t, s, "u", "s")
	before := get(t, s, "u", "s")
	event := &session.Event{Author: "user", Actions: session.EventActions{
		StateDelta: map[string]any{"temp:scratch": 1.0, "k": "v", "user:name": "Ada"}}}
	if err := s.AppendEvent(t.Context(), sess, event); err != nil {
		t.Fatal(err)
	}
	if event.ID == "" || event.Timestamp.IsZero() {
		t.Errorf("id %q and timestamp %v should have been filled in", event.ID, event.Timestamp)
	}
	if v, _ := sess.State().Get("temp:scratch"); v != 1.0 {
		t.Errorf("local temp: state = %v, want 1 for the rest of the invocation", v)
	}
	if got := sess.Events().At(0).Actions.StateDelta; len(got) != 2 {
		t.Errorf("local event delta %v should lack temp: keys", got)
	}
	if _, ok := event.Actions.StateDelta["temp:scratch"]; !ok {
		t.Error("the caller's event lost its temp: key")
	}
	if !sess.LastUpdateTime().Equal(event.Timestamp) || sess.LastSequence() != 1 {
		t.Errorf("last update %v, sequence %d", sess.LastUpdateTime(), sess.LastSequence())
	}
	stored := get(t, s, "u", "s")
	if _, err := stored.State().Get("temp:scratch"); !errors.Is(err, session.ErrStateKeyNotExist) {
		t.Errorf("temp: key stored: %v", err)
	}
	user, err := s.GetUserState(t.Context(), app, "u")
	if err != nil || user["name"] != "Ada" {
		t.Errorf("GetUserState = %v, %v", user, err)
	}
	// The same event sent again through a session read before it was stored (a retry whose
	// first reply was lost) is answered with the stored event: not stored twice, not a
	// conflict, and that session catches up with it.
	if err := s.AppendEvent(t.Context(), before, event); err != nil {
		t.Fatal(err)
	}
	if n := get(t, s, "u", "s").Events().Len(); n != 1 || before.Events().Len() != 1 || before.LastSequence() != 1 {
		t.Errorf("a re-sent event: %d stored, %d local", n, before.Events().Len())
	}
	// Sent again through a session that already has it, it changes nothing.
	if err := s.AppendEvent(t.Context(), stored, event); err != nil || stored.Events().Len() != 1 {
		t.Errorf("re-sent through an up-to-date session: %v, %d local events", err, stored.Events().Len())
	}
}

func TestHostileInputIsRefusedWithNothingWritten(t *testing.T) {
	s := newService(t, testserver.StartSession(t))
	sess := create(t, s, "u", "s")
	if err := s.AppendEvent(t.Context(), sess, textEvent("ok", "fine")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		event *session.Event
		want  error
	}{
		{"event over the server's 16 MiB", textEvent("big", strings.Repeat("x", 16<<20+1)), adkgrpc.ErrResourceExhausted},
		{"event over the 17 MiB message limit", textEvent("huge", strings.Repeat("x", 18<<20)), adkgrpc.ErrResourceExhausted},
		{"state value that is not JSON", &session.Event{ID: "nan", Actions: session.EventActions{
			StateDelta: map[string]any{"k": func() {}}}}, adkgrpc.ErrInvalidArgument},
		{"event id with a control character", textEvent("bad\x00id", "x"), adkgrpc.ErrInvalidArgument},
		{"event id over 256 bytes", textEvent(strings.Repeat("i", 300), "x"), adkgrpc.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.AppendEvent(t.Context(), sess, tt.event)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error message is %d bytes long", len(err.Error()))
			}
			stored := get(t, s, "u", "s")
			if stored.Events().Len() != 1 || sess.Events().Len() != 1 || sess.LastSequence() != 1 {
				t.Errorf("after a refused append: stored %d events, local %d", stored.Events().Len(), sess.Events().Len())
			}
		})
	}
	for _, tt := range []struct{ name, user, id string }{
		{"empty user", "", "x"},
		{"control character in the session id", "u", "a\nb"},
		{"session id over 256 bytes", "u", strings.Repeat("s", 300)},
	} {
		t.Run("create: "+tt.name, func(t *testing.T) {
			_, err := s.Create(t.Context(), &session.CreateRequest{AppName: app, UserID: tt.user, SessionID: tt.id})
			if !errors.Is(err, adkgrpc.ErrInvalidArgument) {
				t.Fatalf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
	listed, err := s.List(t.Context(), &session.ListRequest{AppName: app})
	if err != nil || len(listed.Sessions) != 1 {
		t.Errorf("List after refused creates: %d sessions, %v", len(listed.Sessions), err)
	}
	if _, err := s.Get(t.Context(), &session.GetRequest{AppName: app, UserID: "u", SessionID: "missing"}); !errors.Is(err, adkgrpc.ErrNotFound) {
		t.Errorf("Get of a missing session: %v, want ErrNotFound", err)
	}
	if err := s.AppendEvent(t.Context(), foreign{}, textEvent("f", "x")); !errors.Is(err, adkgrpc.ErrForeignSession) {
		t.Errorf("append to a foreign session: %v, want ErrForeignSession", err)
	}
}

type foreign struct{ session.Session }

func (foreign) ID() string { return "s" }

func TestServerDownIsUnavailable(t *testing.T) {
	server := testserver.StartSession(t)
	s := newService(t, server)
	server.Stop()
	start := time.Now()
	_, err := s.Get(t.Context(), &session.GetRequest{AppName: app, UserID: "u", SessionID: "s"})
	if !errors.Is(err, adkgrpc.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("failing took %v: retries should be bounded", elapsed)
	}
}

func TestWatchFollowsEndsOnCancelAndReportsARestart(t *testing.T) {
	server := testserver.Start(t, "session-svc")
	s := newService(t, server)
	sess := create(t, s, "u", "s")
	if err := s.AppendEvent(t.Context(), sess, textEvent("e1", "one")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	changes := make(chan grpcsession.Change)
	ended := make(chan error, 1)
	go func() {
		for change, err := range s.Watch(ctx, &grpcsession.WatchRequest{AppName: app, UserID: "u", SessionID: "s"}) {
			if err != nil {
				ended <- err
				return
			}
			changes <- change
		}
		ended <- nil
	}()
	if c := <-changes; c.Sequence != 1 || c.Event.ID != "e1" {
		t.Fatalf("replayed %+v, want e1 at 1", c)
	}
	if err := s.AppendEvent(t.Context(), sess, textEvent("e2", "two")); err != nil {
		t.Fatal(err)
	}
	if c := <-changes; c.Sequence != 2 || c.Event.ID != "e2" {
		t.Fatalf("live %+v, want e2 at 2", c)
	}
	cancel()
	if err := <-ended; err != nil {
		t.Fatalf("a cancelled watch ended with %v, want no error", err)
	}

	// A server restarted mid-stream ends the watch with ErrUnavailable; watching again after
	// the last sequence seen resumes with nothing lost.
	ended = make(chan error, 1)
	live := make(chan struct{})
	go func() {
		for _, err := range s.Watch(t.Context(), &grpcsession.WatchRequest{AppName: app, UserID: "u", SessionID: "s", AfterSequence: 1}) {
			if err != nil {
				ended <- err
				return
			}
			// e2, replayed: the stream is open.
			close(live)
		}
		ended <- nil
	}()
	<-live
	server.Restart(t)
	select {
	case err := <-ended:
		if !errors.Is(err, adkgrpc.ErrUnavailable) {
			t.Fatalf("watch across a restart ended with %v, want ErrUnavailable", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not notice the restart")
	}
	if err := s.AppendEvent(t.Context(), sess, textEvent("e3", "three")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for c, err := range s.Watch(ctx, &grpcsession.WatchRequest{AppName: app, UserID: "u", SessionID: "s", AfterSequence: 2}) {
		if err != nil || c.Event.ID != "e3" {
			t.Fatalf("resumed watch: %+v, %v; want e3", c, err)
		}
		break
	}
}

func TestWatchAppAndPages(t *testing.T) {
	s := newService(t, testserver.StartSession(t))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	feed := make(chan grpcsession.AppEvent, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		for e, err := range s.WatchApp(ctx, &grpcsession.WatchAppRequest{AppName: app}) {
			if err != nil {
				t.Errorf("WatchApp: %v", err)
				return
			}
			feed <- e
		}
	})
	// The feed starts "from now": append to a probe session until the feed shows it open.
	probe := create(t, s, "probe", "s")
	for open := false; !open; {
		if err := s.AppendEvent(t.Context(), probe, textEvent("", "probe")); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-feed:
			open = e.UserID == "probe"
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("the feed never opened")
		}
	}
	for len(feed) > 0 {
		<-feed
	}
	for _, user := range []string{"u1", "u2", "u3"} {
		sess := create(t, s, user, "s")
		for j := range 2 {
			if err := s.AppendEvent(t.Context(), sess, textEvent(user+"-"+string(rune('a'+j)), "x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for seen := 0; seen < 6; {
		select {
		case e := <-feed:
			if e.UserID == "probe" {
				continue
			}
			if e.Cursor == "" || e.Event == nil || e.Sequence != uint64(seen%2+1) {
				t.Fatalf("feed event %d: %+v", seen, e)
			}
			seen++
		case <-ctx.Done():
			t.Fatalf("the feed stopped after %d events", seen)
		}
	}
	cancel()
	wg.Wait()

	page, err := s.ListPage(t.Context(), &grpcsession.ListPageRequest{AppName: app, AllUsers: true, PageSize: 2})
	if err != nil || len(page.Sessions) != 2 || page.NextPageToken == "" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	rest, err := s.ListPage(t.Context(), &grpcsession.ListPageRequest{AppName: app, AllUsers: true, PageSize: 2, PageToken: page.NextPageToken})
	// u1, u2, u3 and the probe's session.
	if err != nil || len(rest.Sessions) != 2 || rest.NextPageToken != "" {
		t.Fatalf("last page: %+v, %v", rest, err)
	}
	events, err := s.ListEvents(t.Context(), &grpcsession.ListEventsRequest{AppName: app, UserID: "u2", SessionID: "s", AfterSequence: 1})
	if err != nil || len(events.Events) != 1 || events.Events[0].Sequence != 2 || events.Events[0].Event.ID != "u2-b" {
		t.Fatalf("ListEvents after 1: %+v, %v", events, err)
	}
}

func TestGetOfASessionLargerThanOneReply(t *testing.T) {
	s := newService(t, testserver.StartSession(t))
	sess := create(t, s, "u", "big")
	// 12 events of 1 MiB: three replies' worth at the client's 4 MiB read budget.
	for i := range 12 {
		if err := s.AppendEvent(t.Context(), sess, textEvent("e"+string(rune('a'+i)), strings.Repeat("y", 1<<20))); err != nil {
			t.Fatal(err)
		}
	}
	got := get(t, s, "u", "big")
	if got.Events().Len() != 12 || got.Events().At(11).ID != "el" || got.LastSequence() != 12 {
		t.Fatalf("got %d events, last sequence %d", got.Events().Len(), got.LastSequence())
	}
}

func TestConnectionSettings(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokens, []byte(`{"tokens": [{"name": "t", "token": "s3cret-token", "apps": ["app"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	server := testserver.Start(t, "session-svc", "--tokens-file", tokens)
	t.Setenv("GO_TEST_TOKEN", "s3cret-token")
	t.Setenv("ADK_GRPC_SESSION_TOKEN", "")
	t.Setenv("ADK_GRPC_TOKEN", "")
	for _, tt := range []struct {
		name, uri string
		want      error
	}{
		{"token from token_env", server.URI() + "?token_env=GO_TEST_TOKEN&timeout=5", nil},
		{"no token", server.URI(), adkgrpc.ErrUnauthenticated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := grpcsession.NewService(t.Context(), tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.Create(t.Context(), &session.CreateRequest{AppName: app, UserID: "u"})
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("token from the environment", func(t *testing.T) {
		t.Setenv("ADK_GRPC_TOKEN", "s3cret-token")
		s, err := grpcsession.NewService(t.Context(), server.URI())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Create(t.Context(), &session.CreateRequest{AppName: app, UserID: "u"}); err != nil {
			t.Fatal(err)
		}
	})
	for _, bad := range []string{
		"http://localhost:1",
		"grpc://localhost:1?colour=blue",
		"grpc://localhost:1?token_env=GO_TEST_UNSET_VARIABLE",
		"grpc://localhost:1?timeout=-1",
		"grpc://localhost:1?timeout=soon",
		"grpcs://localhost:1?ca_file=" + filepath.Join(dir, "missing.pem"),
		"grpc://localhost:1?ca_file=" + tokens,
		"grpc://:1",
		"grpc://localhost:1/path",
	} {
		if _, err := grpcsession.NewService(t.Context(), bad); err == nil {
			t.Errorf("NewService(%q) should fail", bad)
		}
	}
}
