// Command adk-fidelity writes and reads the cross-language fixture session
// (clients/fidelity/session.json) through grpcsession, ADK Go's session service over
// session-svc, as clients/fidelity/README.md specifies:
//
//	adk-fidelity write --uri grpc://HOST:PORT --app APP --user USER --session ID --fixture session.json
//	adk-fidelity read  --uri grpc://HOST:PORT --app APP --user USER --session ID
//
// read prints {"state": {...}, "events": [...]}, each event as ADK Go serializes it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/adk/v2/session"

	"github.com/adk-services/adk-services/clients/go/grpcsession"
)

type fixture struct {
	State  map[string]any    `json:"state"`
	Events []json.RawMessage `json:"events"`
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "adk-fidelity:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "write" && args[0] != "read") {
		return fmt.Errorf("usage: adk-fidelity write|read --uri URI --app APP --user USER --session ID [--fixture FILE]")
	}
	flags := flag.NewFlagSet(args[0], flag.ContinueOnError)
	uri := flags.String("uri", "", "session-svc URI (grpc://host:port)")
	app := flags.String("app", "", "app name")
	user := flags.String("user", "", "user id")
	id := flags.String("session", "", "session id")
	fixturePath := flags.String("fixture", "", "the fixture (write)")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	service, err := grpcsession.NewService(ctx, *uri)
	if err != nil {
		return err
	}
	defer service.Close()
	if args[0] == "write" {
		return write(ctx, service, *app, *user, *id, *fixturePath)
	}
	return read(ctx, service, *app, *user, *id, stdout)
}

func write(ctx context.Context, service *grpcsession.Service, app, user, id, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f fixture
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	created, err := service.Create(ctx, &session.CreateRequest{AppName: app, UserID: user, SessionID: id, State: f.State})
	if err != nil {
		return err
	}
	for i, raw := range f.Events {
		var event session.Event
		if err := json.Unmarshal(raw, &event); err != nil {
			return fmt.Errorf("%s: event %d: %w", path, i, err)
		}
		if err := service.AppendEvent(ctx, created.Session, &event); err != nil {
			return err
		}
	}
	return nil
}

func read(ctx context.Context, service *grpcsession.Service, app, user, id string, stdout io.Writer) error {
	got, err := service.Get(ctx, &session.GetRequest{AppName: app, UserID: user, SessionID: id})
	if err != nil {
		return err
	}
	out := struct {
		State  map[string]any   `json:"state"`
		Events []*session.Event `json:"events"`
	}{State: map[string]any{}, Events: []*session.Event{}}
	for k, v := range got.Session.State().All() {
		out.State[k] = v
	}
	for e := range got.Session.Events().All() {
		out.Events = append(out.Events, e)
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
