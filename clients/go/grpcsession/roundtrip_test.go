package grpcsession_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/adk-services/adk-services/clients/go/internal/testserver"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// Every field of ADK Go's Event survives a round trip through session-svc, those without a
// message field of their own included; and those travel in extra under ADK's snake_case names,
// as the other languages' clients write and read them.
func TestEveryEventFieldRoundTrips(t *testing.T) {
	server := testserver.StartSession(t)
	s := newService(t, server)
	sess := create(t, s, "u", "s")
	yes := true
	event := &session.Event{
		ID: "everything", InvocationID: "inv", Author: "agent", Branch: "root.agent",
		Timestamp:          time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		IsolationScope:     "task-1",
		LongRunningToolIDs: []string{"call-1"},
		Routes:             []string{"next"},
		Output:             map[string]any{"answer": 42.0},
		NodeInfo:           &session.NodeInfo{Path: "flow/step@1", MessageAsOutput: true, OutputFor: []string{"flow"}},
		RequestedInput:     &session.RequestInput{InterruptID: "ask-1", Message: "approve?", Payload: map[string]any{"doc": "x"}},
		Actions: session.EventActions{
			StateDelta:    map[string]any{"k": "v", "n": 1.5, "user:u": []any{"a"}, "app:a": map[string]any{"x": true}},
			ArtifactDelta: map[string]int64{"report.pdf": 3},
			RequestedToolConfirmations: map[string]toolconfirmation.ToolConfirmation{
				"call-1": {Hint: "sure?", Confirmed: true, Payload: map[string]any{"p": 1.0}}},
			SkipSummarization: true, TransferToAgent: "other", Escalate: true,
		},
		LLMResponse: model.LLMResponse{
			Content: &genai.Content{Role: "model", Parts: []*genai.Part{
				{Text: "thinking", Thought: true, ThoughtSignature: []byte{1, 2, 3}},
				{InlineData: &genai.Blob{Data: []byte("png"), MIMEType: "image/png", DisplayName: "pic"}},
				{FileData: &genai.FileData{FileURI: "gs://b/f", MIMEType: "text/plain"}},
				{FunctionCall: &genai.FunctionCall{ID: "call-1", Name: "f", Args: map[string]any{"q": "x"}, WillContinue: &yes}},
				{FunctionResponse: &genai.FunctionResponse{ID: "call-1", Name: "f", Response: map[string]any{"ok": true},
					Scheduling: genai.FunctionResponseSchedulingWhenIdle}},
				{ExecutableCode: &genai.ExecutableCode{Code: "print(1)", Language: genai.LanguagePython}},
				{CodeExecutionResult: &genai.CodeExecutionResult{Outcome: genai.OutcomeOK, Output: "1"}},
				{Text: "two data fields", FunctionCall: &genai.FunctionCall{Name: "g"},
					VideoMetadata: &genai.VideoMetadata{FPS: genai.Ptr(2.0)}, PartMetadata: map[string]any{"camelKey": 1.0}},
			}},
			CitationMetadata:        &genai.CitationMetadata{Citations: []*genai.Citation{{Title: "t", URI: "u", StartIndex: 1}}},
			GroundingMetadata:       &genai.GroundingMetadata{WebSearchQueries: []string{"q"}},
			UsageMetadata:           &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 3, TotalTokenCount: 5},
			CustomMetadata:          map[string]any{"camelCaseKey": "kept as written"},
			LogprobsResult:          &genai.LogprobsResult{ChosenCandidates: []*genai.LogprobsResultCandidate{{Token: "a", LogProbability: -0.5}}},
			InputTranscription:      &genai.Transcription{Text: "in", Finished: true},
			OutputTranscription:     &genai.Transcription{Text: "out"},
			ModelVersion:            "m-1",
			TurnComplete:            true,
			Interrupted:             true,
			SessionResumptionHandle: "handle",
			ErrorCode:               "E", ErrorMessage: "boom",
			FinishReason: genai.FinishReasonStop,
			AvgLogprobs:  -0.25,
		},
	}
	if err := s.AppendEvent(t.Context(), sess, event); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "u", "s").Events().At(0)
	if diff := cmp.Diff(event, got); diff != "" {
		t.Errorf("round trip (-sent +read):\n%s", diff)
	}

	// The wire form, read through the generated stub.
	conn, err := grpc.NewClient(server.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stored, err := sessionpb.NewSessionServiceClient(conn).GetSession(t.Context(),
		&sessionpb.GetSessionRequest{AppName: app, UserId: "u", SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	m := stored.Events[0]
	var extra map[string]any
	if err := json.Unmarshal([]byte(m.Extra), &extra); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"input_transcription", "output_transcription", "logprobs_result", "avg_logprobs",
		"isolation_scope", "routes", "output", "node_info", "requested_input", "session_resumption_handle"} {
		if _, ok := extra[key]; !ok {
			t.Errorf("Event.extra lacks %q: %s", key, m.Extra)
		}
	}
	if m.UsageMetadata != `{"prompt_token_count":3,"total_token_count":5}` {
		t.Errorf("usage_metadata on the wire: %s", m.UsageMetadata)
	}
	if m.CustomMetadata != `{"camelCaseKey":"kept as written"}` {
		t.Errorf("custom_metadata on the wire: %s", m.CustomMetadata)
	}
	if last := m.Content.Parts[7]; last.GetText() != "two data fields" ||
		last.Extra != `{"function_call":{"name":"g"},"part_metadata":{"camelKey":1},"video_metadata":{"fps":2}}` {
		t.Errorf("a Part's second data field and other fields on the wire: %s", last.Extra)
	}
}

// An event another language wrote with removed_state_keys (ADK Java's State.REMOVED) reads in
// Go: ADK Go has no removed marker, so the event reads without it, and the session's state
// lacks the keys (the server applied the removal).
func TestEventWithRemovedStateKeysReads(t *testing.T) {
	server := testserver.StartSession(t)
	s := newService(t, server)
	if _, err := s.Create(t.Context(), &session.CreateRequest{AppName: app, UserID: "u", SessionID: "s",
		State: map[string]any{"user:gone": 1.0, "gone": 2.0, "kept": 3.0}}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(server.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := sessionpb.NewSessionServiceClient(conn).AppendEvent(t.Context(), &sessionpb.AppendEventRequest{
		AppName: app, UserId: "u", SessionId: "s",
		Event: &sessionpb.Event{Id: "java-1", Author: "agent", Actions: &sessionpb.EventActions{
			StateDelta: `{"kept":4}`, RemovedStateKeys: []string{"user:gone", "gone"}}},
	}); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "u", "s")
	state := map[string]any{}
	for k, v := range got.State().All() {
		state[k] = v
	}
	if diff := cmp.Diff(map[string]any{"kept": 4.0}, state); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if e := got.Events().At(0); e.ID != "java-1" || e.Actions.StateDelta["kept"] != 4.0 {
		t.Errorf("event read as %+v", e)
	}
}
