// Package wire maps ADK Go's events and genai contents onto the adk.session.v1 messages and
// back, the way the Python client does, so that every language reads the others' sessions.
//
// Typed message fields carry what they name. What ADK Go has and the messages do not name
// (transcriptions, log probabilities, workflow fields, a second data field of a Part, ...)
// travels in the message's extra JSON object under ADK's snake_case field names, as ADK Python
// writes it; genai values in JSON text fields (usage, grounding and citation metadata) use
// snake_case keys too. Free-form values (state, tool arguments and responses, custom
// metadata) are the application's JSON, kept as they are. Reading, extra keys ADK Go has no
// field for (fields of another language's ADK) are skipped: the stored event keeps them.
package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool/toolconfirmation"
	"google.golang.org/genai"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

// EventToProto is the message for an event (sequence 0, for the server to assign).
func EventToProto(e *session.Event) (*sessionpb.Event, error) {
	m := &sessionpb.Event{
		Id:                 e.ID,
		InvocationId:       e.InvocationID,
		Author:             e.Author,
		LongRunningToolIds: e.LongRunningToolIDs,
		Branch:             optString(e.Branch),
		Partial:            optBool(e.Partial),
		TurnComplete:       optBool(e.TurnComplete),
		Interrupted:        optBool(e.Interrupted),
		ErrorCode:          optString(e.ErrorCode),
		ErrorMessage:       optString(e.ErrorMessage),
		ModelVersion:       optString(e.ModelVersion),
		FinishReason:       optString(string(e.FinishReason)),
	}
	if !e.Timestamp.IsZero() {
		m.Timestamp = timestamppb.New(e.Timestamp)
	}
	var err error
	if m.Content, err = ContentToProto(e.Content); err != nil {
		return nil, err
	}
	if m.Actions, err = actionsToProto(&e.Actions); err != nil {
		return nil, err
	}
	if m.CustomMetadata, err = marshalObject("Event.custom_metadata", e.CustomMetadata); err != nil {
		return nil, err
	}
	if e.UsageMetadata != nil {
		if m.UsageMetadata, err = metadataJSON("Event.usage_metadata", e.UsageMetadata); err != nil {
			return nil, err
		}
	}
	if e.GroundingMetadata != nil {
		if m.GroundingMetadata, err = metadataJSON("Event.grounding_metadata", e.GroundingMetadata); err != nil {
			return nil, err
		}
	}
	if e.CitationMetadata != nil {
		if m.CitationMetadata, err = metadataJSON("Event.citation_metadata", e.CitationMetadata); err != nil {
			return nil, err
		}
	}
	// The rest: what is left once the typed fields are cleared.
	rest := session.Event{
		LLMResponse: model.LLMResponse{
			LogprobsResult:          e.LogprobsResult,
			InputTranscription:      e.InputTranscription,
			OutputTranscription:     e.OutputTranscription,
			SessionResumptionHandle: e.SessionResumptionHandle,
			AvgLogprobs:             e.AvgLogprobs,
		},
		IsolationScope: e.IsolationScope,
		Routes:         e.Routes,
		RequestedInput: e.RequestedInput,
		Output:         e.Output,
		NodeInfo:       e.NodeInfo,
	}
	if !reflect.ValueOf(rest).IsZero() {
		if m.Extra, err = extraJSON("Event.extra", rest, "id", "timestamp", "invocationId", "author", "actions"); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// EventFromProto is the ADK event a message holds.
func EventFromProto(m *sessionpb.Event) (*session.Event, error) {
	e := &session.Event{
		ID:                 m.GetId(),
		InvocationID:       m.GetInvocationId(),
		Author:             m.GetAuthor(),
		Branch:             m.GetBranch(),
		LongRunningToolIDs: m.GetLongRunningToolIds(),
		LLMResponse: model.LLMResponse{
			Partial:      m.GetPartial(),
			TurnComplete: m.GetTurnComplete(),
			Interrupted:  m.GetInterrupted(),
			ErrorCode:    m.GetErrorCode(),
			ErrorMessage: m.GetErrorMessage(),
			ModelVersion: m.GetModelVersion(),
			FinishReason: genai.FinishReason(m.GetFinishReason()),
		},
	}
	if m.Timestamp != nil {
		e.Timestamp = m.Timestamp.AsTime()
	}
	var err error
	if e.Content, err = ContentFromProto(m.Content); err != nil {
		return nil, err
	}
	if err := actionsFromProto(m.Actions, &e.Actions); err != nil {
		return nil, err
	}
	if e.CustomMetadata, err = unmarshalObject("Event.custom_metadata", m.CustomMetadata); err != nil {
		return nil, err
	}
	if m.UsageMetadata != "" {
		e.UsageMetadata = new(genai.GenerateContentResponseUsageMetadata)
		if err := fromMetadataJSON("Event.usage_metadata", m.UsageMetadata, e.UsageMetadata); err != nil {
			return nil, err
		}
	}
	if m.GroundingMetadata != "" {
		e.GroundingMetadata = new(genai.GroundingMetadata)
		if err := fromMetadataJSON("Event.grounding_metadata", m.GroundingMetadata, e.GroundingMetadata); err != nil {
			return nil, err
		}
	}
	if m.CitationMetadata != "" {
		e.CitationMetadata = new(genai.CitationMetadata)
		if err := fromMetadataJSON("Event.citation_metadata", m.CitationMetadata, e.CitationMetadata); err != nil {
			return nil, err
		}
	}
	if m.Extra != "" {
		if err := readExtra("Event.extra", m.Extra, e); err != nil {
			return nil, err
		}
		// ADK Go reads an all-empty node_info (ADK Python writes one on every event) as absent.
		if ni := e.NodeInfo; ni != nil && ni.Path == "" && !ni.MessageAsOutput && len(ni.OutputFor) == 0 {
			e.NodeInfo = nil
		}
	}
	return e, nil
}

func actionsToProto(a *session.EventActions) (*sessionpb.EventActions, error) {
	m := &sessionpb.EventActions{
		SkipSummarization: optBool(a.SkipSummarization),
		TransferToAgent:   optString(a.TransferToAgent),
		Escalate:          optBool(a.Escalate),
	}
	if len(a.ArtifactDelta) > 0 {
		m.ArtifactDelta = a.ArtifactDelta
	}
	var err error
	if len(a.StateDelta) > 0 {
		if m.StateDelta, err = marshalObject("EventActions.state_delta", a.StateDelta); err != nil {
			return nil, err
		}
	}
	if len(a.RequestedToolConfirmations) > 0 {
		if m.RequestedToolConfirmations, err = marshal(a.RequestedToolConfirmations); err != nil {
			return nil, fmt.Errorf("EventActions.requested_tool_confirmations: %w", err)
		}
	}
	if proto.Size(m) == 0 {
		return nil, nil
	}
	return m, nil
}

func actionsFromProto(m *sessionpb.EventActions, a *session.EventActions) error {
	if m == nil {
		return nil
	}
	a.SkipSummarization = m.GetSkipSummarization()
	a.TransferToAgent = m.GetTransferToAgent()
	a.Escalate = m.GetEscalate()
	if len(m.ArtifactDelta) > 0 {
		a.ArtifactDelta = maps.Clone(m.ArtifactDelta)
	}
	var err error
	if a.StateDelta, err = unmarshalObject("EventActions.state_delta", m.StateDelta); err != nil {
		return err
	}
	if m.RequestedToolConfirmations != "" {
		var confirmations map[string]toolconfirmation.ToolConfirmation
		if err := json.Unmarshal([]byte(m.RequestedToolConfirmations), &confirmations); err != nil {
			return fmt.Errorf("EventActions.requested_tool_confirmations: %w", err)
		}
		a.RequestedToolConfirmations = confirmations
	}
	if m.Extra != "" {
		return readExtra("EventActions.extra", m.Extra, a)
	}
	return nil
}

// extraJSON is the snake_case JSON of v without the keys the typed fields carry.
func extraJSON(field string, v any, typed ...string) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	for _, k := range typed {
		delete(tree, k)
	}
	if len(tree) == 0 {
		return "", nil
	}
	return marshal(renameKeys(tree, toSnake))
}

// readExtra merges a message's extra object into v; keys v has no field for are skipped.
func readExtra(field, text string, v any) error {
	var tree map[string]any
	if err := json.Unmarshal([]byte(text), &tree); err != nil {
		return fmt.Errorf("%s holds JSON that is not an object: %w", field, err)
	}
	return fromSnakeTree(field, tree, v)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optBool(b bool) *bool {
	if !b {
		return nil
	}
	return &b
}
