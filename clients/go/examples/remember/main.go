// Command remember is an ADK Go agent on session-svc and memory-svc: in a first session the
// user names their favourite city; the session goes to memory; in a second session the agent
// recalls it through ADK's preload_memory tool. The model is a stand-in that answers
// deterministically from what it is given, so the example needs no model endpoint.
//
//	go run ./examples/remember --sessions grpc://localhost:50051 --memory grpc://localhost:50052
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"regexp"
	"strings"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/preloadmemorytool"
	"google.golang.org/genai"

	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/grpcsession"
)

func main() {
	sessions := flag.String("sessions", "grpc://localhost:50051", "session-svc URI")
	memories := flag.String("memory", "grpc://localhost:50052", "memory-svc URI")
	user := flag.String("user", "alice", "user id")
	flag.Parse()
	if err := run(context.Background(), *sessions, *memories, *user, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "remember:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, sessionURI, memoryURI, user string, out io.Writer) error {
	sessions, err := grpcsession.NewService(ctx, sessionURI)
	if err != nil {
		return err
	}
	defer sessions.Close()
	memories, err := grpcmemory.NewService(ctx, memoryURI)
	if err != nil {
		return err
	}
	defer memories.Close()

	assistant, err := llmagent.New(llmagent.Config{
		Name:        "assistant",
		Model:       standIn{},
		Instruction: "Answer from what you remember about the user.",
		Tools:       []tool.Tool{preloadmemorytool.New()},
	})
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Config{
		AppName: "remember", Agent: assistant, SessionService: sessions, MemoryService: memories,
	})
	if err != nil {
		return err
	}

	// First session: the user says something worth remembering; then it goes to memory.
	first, err := sessions.Create(ctx, &session.CreateRequest{AppName: "remember", UserID: user})
	if err != nil {
		return err
	}
	if err := say(ctx, r, user, first.Session.ID(), "My favourite city is Lisbon.", out); err != nil {
		return err
	}
	done, err := sessions.Get(ctx, &session.GetRequest{AppName: "remember", UserID: user, SessionID: first.Session.ID()})
	if err != nil {
		return err
	}
	if err := memories.AddSessionToMemory(ctx, done.Session); err != nil {
		return err
	}

	// Second session: a fresh conversation, answered from memory.
	second, err := sessions.Create(ctx, &session.CreateRequest{AppName: "remember", UserID: user})
	if err != nil {
		return err
	}
	return say(ctx, r, user, second.Session.ID(), "What is my favourite city?", out)
}

func say(ctx context.Context, r *runner.Runner, user, sessionID, text string, out io.Writer) error {
	fmt.Fprintf(out, "[%s] %s: %s\n", sessionID[:8], user, text)
	for event, err := range r.Run(ctx, user, sessionID, genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return err
		}
		if event.Content != nil && event.Author != "user" {
			for _, part := range event.Content.Parts {
				if part.Text != "" {
					fmt.Fprintf(out, "[%s] %s: %s\n", sessionID[:8], event.Author, part.Text)
				}
			}
		}
	}
	return nil
}

// standIn is a model.LLM that answers deterministically: it acknowledges a stated favourite
// city, and answers a question about it from the memories ADK put in its instructions.
type standIn struct{}

var cityPattern = regexp.MustCompile(`favourite city is (\w+)`)

func (standIn) Name() string { return "stand-in" }

func (standIn) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	var instructions, last string
	if req.Config != nil && req.Config.SystemInstruction != nil {
		for _, p := range req.Config.SystemInstruction.Parts {
			instructions += p.Text
		}
	}
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			last += p.Text
		}
	}
	answer := "I don't know yet."
	switch {
	case strings.HasSuffix(last, "?"):
		if m := cityPattern.FindStringSubmatch(instructions); m != nil {
			answer = "You told me before: your favourite city is " + m[1] + "."
		}
	case cityPattern.MatchString(last):
		answer = "Noted: " + cityPattern.FindStringSubmatch(last)[1] + "."
	}
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: genai.NewContentFromText(answer, genai.RoleModel), TurnComplete: true}, nil)
	}
}
