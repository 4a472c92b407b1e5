package wire

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
)

// The client's own cost per event, without the network: mapping a typical event (text, a
// state delta, usage metadata) to its message and back.
func typical(i int) *session.Event {
	return &session.Event{
		ID: "e-" + strconv.Itoa(i), InvocationID: "inv", Author: "assistant", Timestamp: time.Now(),
		Actions: session.EventActions{StateDelta: map[string]any{"turn": i}},
		LLMResponse: model.LLMResponse{
			Content:       genai.NewContentFromText("Message "+strconv.Itoa(i)+": the quick brown fox jumps over the lazy dog.", genai.RoleModel),
			UsageMetadata: &genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 12, CandidatesTokenCount: 5, TotalTokenCount: 17},
		},
	}
}

func BenchmarkEventToProto(b *testing.B) {
	e := typical(1)
	for b.Loop() {
		if _, err := EventToProto(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventFromProto(b *testing.B) {
	m, err := EventToProto(typical(1))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := EventFromProto(m); err != nil {
			b.Fatal(err)
		}
	}
}
