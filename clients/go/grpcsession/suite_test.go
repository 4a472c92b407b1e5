package grpcsession_test

import (
	"testing"

	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"

	"github.com/adk-services/adk-services/clients/go/grpcsession"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

// ADK Go's own conformance suite, unmodified, against a fresh session-svc per case (on
// PostgreSQL in a fresh schema when ADK_TEST_POSTGRES is set).
func TestServiceConformance(t *testing.T) {
	sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{
		// session-svc keeps a client's session id, and a client's event id (it fills one only
		// when the event has none).
		SupportsUserProvidedSessionID: true,
		ProvidesServerAssignedEventID: false,
	}, func(t *testing.T) session.Service {
		return newService(t, testserver.StartSession(t))
	})
}

func newService(t testing.TB, server *testserver.Server) *grpcsession.Service {
	t.Helper()
	s, err := grpcsession.NewService(t.Context(), server.URI())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
