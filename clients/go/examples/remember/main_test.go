package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

func TestRemembersAcrossSessions(t *testing.T) {
	sessions, memories := testserver.StartSession(t), testserver.StartMemory(t)
	var out bytes.Buffer
	if err := run(t.Context(), sessions.URI(), memories.URI(), "alice", &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if !strings.Contains(out.String(), "assistant: You told me before: your favourite city is Lisbon.") {
		t.Errorf("the second session did not recall the city:\n%s", out.String())
	}
}
