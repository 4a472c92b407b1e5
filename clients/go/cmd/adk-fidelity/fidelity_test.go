package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/adk/v2/session"

	"github.com/adk-services/adk-services/clients/go/internal/testserver"
)

var fixturePath = filepath.Join("..", "..", "..", "fidelity", "session.json")

// expected is the fixture as ADK Go reads it: its events (without the temp: keys the server
// never stores) and the merged state after the last one.
func expected(t *testing.T) ([]*session.Event, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Events        []*session.Event `json:"events"`
		ExpectedState map[string]any   `json:"expectedState"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Events {
		for k := range e.Actions.StateDelta {
			if strings.HasPrefix(k, session.KeyPrefixTemp) {
				delete(e.Actions.StateDelta, k)
			}
		}
	}
	return f.Events, f.ExpectedState
}

type readBack struct {
	State  map[string]any   `json:"state"`
	Events []*session.Event `json:"events"`
}

func compare(t *testing.T, who string, got readBack) {
	t.Helper()
	events, state := expected(t)
	if diff := cmp.Diff(state, got.State); diff != "" {
		t.Errorf("%s: state (-fixture +read):\n%s", who, diff)
	}
	// A time written as float seconds (Python) arrives as the nearest nanosecond of that float,
	// within a quarter microsecond of its decimal value (.001 reads back as .000999928).
	if diff := cmp.Diff(events, got.Events, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(time.Microsecond)); diff != "" {
		t.Errorf("%s: events (-fixture +read):\n%s", who, diff)
	}
}

func goRead(t *testing.T, uri, id string) readBack {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"read", "--uri", uri, "--app", "fidelity", "--user", "u", "--session", id}, &out); err != nil {
		t.Fatal(err)
	}
	var got readBack
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func goWrite(t *testing.T, uri, id string) {
	t.Helper()
	if err := run(t.Context(), []string{"write", "--uri", uri, "--app", "fidelity", "--user", "u", "--session", id, "--fixture", fixturePath}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGoWritesGoReads(t *testing.T) {
	uri := testserver.StartSession(t).URI()
	goWrite(t, uri, "go-go")
	compare(t, "go -> go", goRead(t, uri, "go-go"))
}

// Both directions with the Python client, given $ADK_TEST_PYTHON: an interpreter with
// adk_grpc_services (clients/python) installed.
func TestPythonAndGoReadEachOther(t *testing.T) {
	python := os.Getenv("ADK_TEST_PYTHON")
	if python == "" {
		t.Skip("ADK_TEST_PYTHON (a Python with clients/python installed) is not set")
	}
	uri := testserver.StartSession(t).URI()
	pythonClient := func(args ...string) []byte {
		cmd := exec.Command(python, append([]string{filepath.Join("testdata", "python_client.py")}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python %v: %v", args, err)
		}
		return out
	}

	pythonClient("write", uri, "fidelity", "u", "py-go", fixturePath)
	compare(t, "python -> go", goRead(t, uri, "py-go"))

	goWrite(t, uri, "go-py")
	var got readBack
	if err := json.Unmarshal(pythonClient("read", uri, "fidelity", "u", "go-py"), &got); err != nil {
		t.Fatal(err)
	}
	compare(t, "go -> python", got)
}
