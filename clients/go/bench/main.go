// Command bench measures the Go client against ADK Go's own services, side by side in one run
// on loopback:
//
//   - appends at concurrency 1 and 8 (each writer its own session), and Get of a 1,000-event
//     session: grpcsession over session-svc (sled, fsync per append) against ADK Go's
//     session/database on SQLite (a file in WAL mode with a busy timeout, through the pure-Go
//     driver its tests use);
//   - SearchMemory over 10,000 entries: grpcmemory over memory-svc against ADK Go's
//     memory.InMemoryService();
//   - the client's own cost: the same Get and append through the generated stub alone, on a
//     connection made as the client makes its own (adkgrpc.Dial), and the Get on a plain gRPC
//     connection too.
//
// It starts session-svc and memory-svc from $ADK_SERVICES_BIN_DIR (default: the repository's
// target/debug; build them with --release for figures worth comparing):
//
//	go run ./bench                         # full sizes
//	go run ./bench -appends 200 -searches 50   # quicker
//	go run ./bench -session-addr HOST:PORT -memory-addr HOST:PORT   # against running servers
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/database"
	"google.golang.org/genai"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	adkgrpc "github.com/adk-services/adk-services/clients/go"
	"github.com/adk-services/adk-services/clients/go/grpcmemory"
	"github.com/adk-services/adk-services/clients/go/grpcsession"
	"github.com/adk-services/adk-services/clients/go/internal/testserver"
	"github.com/adk-services/adk-services/clients/go/internal/wire"
	"github.com/adk-services/adk-services/clients/go/pb/sessionpb"
)

var (
	appends  = flag.Int("appends", 1000, "appends per concurrency level and service")
	events   = flag.Int("events", 1000, "events of the session Get reads")
	gets     = flag.Int("gets", 50, "Gets of that session")
	entries  = flag.Int("entries", 10000, "memory entries searched")
	searches = flag.Int("searches", 200, "searches")

	sessionAddr = flag.String("session-addr", "", "a running session-svc (host:port) instead of starting one")
	memoryAddr  = flag.String("memory-addr", "", "a running memory-svc (host:port) instead of starting one")
)

func main() {
	flag.Parse()
	env := &runEnv{}
	defer env.close()
	ctx := context.Background()
	fmt.Printf("load before: %s", loadavg())

	sessionServer := running(env, *sessionAddr, "session-svc")
	memoryServer := running(env, *memoryAddr, "memory-svc")
	client, err := grpcsession.NewService(ctx, sessionServer.URI())
	check(err)
	defer client.Close()
	db, err := database.NewSessionService(sqlite.Open(filepath.Join(env.TempDir(), "adk.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"),
		&gorm.Config{PrepareStmt: true, Logger: logger.Discard})
	check(err)
	check(database.AutoMigrate(db))
	services := []struct {
		name string
		s    session.Service
	}{{"grpcsession (session-svc)", client}, {"ADK database (SQLite)", db}}

	fmt.Println("\n| measurement | service | result |\n|---|---|---|")
	for _, c := range []int{1, 8} {
		for _, svc := range services {
			rate, p50, p99, failed := appendRate(ctx, svc.s, c, *appends)
			fmt.Printf("| appends, c=%d | %s | %.0f/s (p50 %s, p99 %s)%s |\n", c, svc.name, rate, p50, p99, failed)
		}
	}
	// Both sessions are written before either is read, so that neither read runs while its
	// own service is still settling the writes.
	ids := make([]string, len(services))
	for i, svc := range services {
		ids[i] = fill(ctx, svc.s, *events)
	}
	for i, svc := range services {
		p50, p99 := timeIt(*gets, func() {
			got, err := svc.s.Get(ctx, &session.GetRequest{AppName: "bench", UserID: "reader", SessionID: ids[i]})
			check(err)
			if got.Session.Events().Len() != *events {
				panic("short read")
			}
		})
		fmt.Printf("| Get, %d events | %s | p50 %s, p99 %s |\n", *events, svc.name, p50, p99)
	}
	overhead(ctx, sessionServer, client)

	mem, err := grpcmemory.NewService(ctx, memoryServer.URI())
	check(err)
	defer mem.Close()
	inMemory := memory.InMemoryService()
	for _, m := range []memory.Service{mem, inMemory} {
		for s := range *entries / 100 {
			check(m.AddSessionToMemory(ctx, memorySession(s)))
		}
	}
	queries := make([]string, *searches)
	r := rand.New(rand.NewPCG(2, 3))
	for i := range queries {
		queries[i] = vocabulary[r.IntN(len(vocabulary))] + " " + vocabulary[r.IntN(len(vocabulary))]
	}
	for _, m := range []struct {
		name string
		s    memory.Service
	}{{"grpcmemory (memory-svc)", mem}, {"ADK in-memory", inMemory}} {
		i := 0
		p50, p99 := timeIt(*searches, func() {
			_, err := m.s.SearchMemory(ctx, &memory.SearchRequest{AppName: "bench", UserID: "u", Query: queries[i%len(queries)]})
			check(err)
			i++
		})
		fmt.Printf("| SearchMemory, %d entries | %s | p50 %s, p99 %s |\n", *entries, m.name, p50, p99)
	}
	fmt.Printf("\nload after: %s", loadavg())
}

// running is the server at addr, or a server started for this run when addr is empty.
func running(env *runEnv, addr, name string) *testserver.Server {
	if addr != "" {
		return &testserver.Server{Addr: addr}
	}
	return testserver.Start(env, name)
}

// appendRate appends n events, c writers at once, each to a session of its own.
func appendRate(ctx context.Context, s session.Service, c, n int) (float64, time.Duration, time.Duration, string) {
	var mu sync.Mutex
	var latencies []time.Duration
	failed, firstError := 0, ""
	sessions := make([]session.Session, c)
	for w := range sessions {
		created, err := s.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: "writer" + strconv.Itoa(w)})
		check(err)
		sessions[w] = created.Session
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for i := range n / c {
				t0 := time.Now()
				err := s.AppendEvent(ctx, sessions[w], event(i))
				d := time.Since(t0)
				mu.Lock()
				latencies = append(latencies, d)
				if err != nil {
					if failed == 0 {
						firstError = err.Error()
					}
					failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	p50, p99 := percentiles(latencies)
	if failed > 0 {
		firstError = fmt.Sprintf(", %d failed (%s)", failed, firstError)
	}
	return float64(len(latencies)-failed) / elapsed.Seconds(), p50, p99, firstError
}

// overhead compares the client's Get and append with the same calls through the stub alone
// (no mapping of ADK objects, no local session bookkeeping), alternating them so that the
// machine's load weighs on all alike. The stub runs on a plain gRPC connection (gRPC's own
// protobuf codec) and on the client's connection (adkgrpc.Dial, which decodes with the
// vtprotobuf code generated into pb/): the client's own cost is over the latter.
func overhead(ctx context.Context, server *testserver.Server, client *grpcsession.Service) {
	plainConn, err := grpc.NewClient(server.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	check(err)
	defer plainConn.Close()
	conn, err := adkgrpc.Dial(server.URI(), adkgrpc.Session)
	check(err)
	defer conn.Close()
	plain, raw := sessionpb.NewSessionServiceClient(plainConn), sessionpb.NewSessionServiceClient(conn)
	id := fill(ctx, client, *events)
	request := &sessionpb.GetSessionRequest{AppName: "bench", UserId: "reader", SessionId: id, MaxReplyEventBytes: 4 << 20}
	var viaPlain, viaStub, viaClient []time.Duration
	for range *gets {
		t0 := time.Now()
		_, err := plain.GetSession(ctx, request)
		check(err)
		viaPlain = append(viaPlain, time.Since(t0))
		t0 = time.Now()
		_, err = raw.GetSession(ctx, request)
		check(err)
		viaStub = append(viaStub, time.Since(t0))
		t0 = time.Now()
		_, err = client.Get(ctx, &session.GetRequest{AppName: "bench", UserID: "reader", SessionID: id})
		check(err)
		viaClient = append(viaClient, time.Since(t0))
	}
	what := fmt.Sprintf("overhead: Get, %d events", *events)
	p50, p99 := percentiles(viaPlain)
	fmt.Printf("| %s | generated stub alone, plain connection (gRPC's codec) | p50 %s, p99 %s |\n", what, p50, p99)
	report(what, viaStub, viaClient)

	rawSession, err := client.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: "raw"})
	check(err)
	clientSession, err := client.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: "raw"})
	check(err)
	viaStub, viaClient = nil, nil
	var seq uint64
	for i := range *appends / 4 {
		m, err := wire.EventToProto(event(i))
		check(err)
		t0 := time.Now()
		reply, err := raw.AppendEvent(ctx, &sessionpb.AppendEventRequest{AppName: "bench", UserId: "raw",
			SessionId: rawSession.Session.ID(), Event: m, ExpectedLastSequence: &seq})
		check(err)
		viaStub = append(viaStub, time.Since(t0))
		seq = reply.LastSequence
		e := event(i)
		t0 = time.Now()
		check(client.AppendEvent(ctx, clientSession.Session, e))
		viaClient = append(viaClient, time.Since(t0))
	}
	report("overhead: append, c=1", viaStub, viaClient)
}

// report prints the latencies of the same calls through the stub on the client's connection and
// through the client, and the difference. (clients/java/bench/side_by_side.py reads these rows.)
func report(what string, stub, client []time.Duration) {
	s50, s99 := percentiles(stub)
	c50, c99 := percentiles(client)
	fmt.Printf("| %s | generated stub alone | p50 %s, p99 %s |\n", what, s50, s99)
	fmt.Printf("| %s | grpcsession (same calls, alternating) | p50 %s, p99 %s (+%s at p50) |\n", what, c50, c99, round(c50-s50))
}

// fill makes a session of n events and returns its id.
func fill(ctx context.Context, s session.Service, n int) string {
	created, err := s.Create(ctx, &session.CreateRequest{AppName: "bench", UserID: "reader"})
	check(err)
	for i := range n {
		check(s.AppendEvent(ctx, created.Session, event(i)))
	}
	return created.Session.ID()
}

func event(i int) *session.Event {
	role, author := genai.RoleUser, "user"
	if i%2 == 1 {
		role, author = genai.RoleModel, "assistant"
	}
	return &session.Event{
		ID: fmt.Sprintf("e-%d-%d", i, rand.Int64()), InvocationID: "inv-" + strconv.Itoa(i/2), Author: author,
		Timestamp: time.Now(),
		LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(
			"Message "+strconv.Itoa(i)+": the quick brown fox jumps over the lazy dog near the river bank.", genai.Role(role))},
		Actions: session.EventActions{StateDelta: map[string]any{"turn": i}},
	}
}

var vocabulary = strings.Fields(`lisbon porto madrid paris berlin rome vienna prague coffee tea
	bread cheese wine river mountain beach forest city museum garden train flight hotel booking
	meeting project deadline report budget invoice contract holiday birthday dinner lunch recipe
	football tennis music concert guitar piano novel poem painting camera phone laptop`)

// memorySession is one of the sessions that fill memory: 100 events of a few words each.
func memorySession(s int) session.Session {
	r := rand.New(rand.NewPCG(uint64(s), 1))
	evs := make([]*session.Event, 100)
	for i := range evs {
		words := make([]string, 8)
		for w := range words {
			words[w] = vocabulary[r.IntN(len(vocabulary))]
		}
		evs[i] = &session.Event{ID: fmt.Sprintf("m-%d-%d", s, i), Author: "user", Timestamp: time.Unix(1.7e9+int64(s*100+i), 0),
			LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(strings.Join(words, " "), genai.RoleUser)}}
	}
	return memSession{id: "mem-" + strconv.Itoa(s), events: evs}
}

type memSession struct {
	session.Session
	id     string
	events []*session.Event
}

func (m memSession) ID() string             { return m.id }
func (m memSession) AppName() string        { return "bench" }
func (m memSession) UserID() string         { return "u" }
func (m memSession) Events() session.Events { return memEvents(m.events) }

type memEvents []*session.Event

func (e memEvents) All() iter.Seq[*session.Event] { return slices.Values(e) }
func (e memEvents) Len() int                      { return len(e) }
func (e memEvents) At(i int) *session.Event       { return e[i] }

func timeIt(n int, f func()) (time.Duration, time.Duration) {
	latencies := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		f()
		latencies = append(latencies, time.Since(t0))
	}
	return percentiles(latencies)
}

func percentiles(d []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(d)
	if len(d) == 0 {
		return 0, 0
	}
	return round(d[len(d)/2]), round(d[min(len(d)-1, len(d)*99/100)])
}

func round(d time.Duration) time.Duration {
	if d > time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown\n"
	}
	return string(b)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

// runEnv stands in for a test where the servers need one: a temporary directory and cleanups.
type runEnv struct {
	dir      string
	cleanups []func()
}

func (e *runEnv) Helper() {}
func (e *runEnv) TempDir() string {
	if e.dir == "" {
		dir, err := os.MkdirTemp("", "adk-go-bench-")
		check(err)
		e.dir = dir
	}
	sub, err := os.MkdirTemp(e.dir, "")
	check(err)
	return sub
}
func (e *runEnv) Cleanup(f func())                  { e.cleanups = append(e.cleanups, f) }
func (e *runEnv) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (e *runEnv) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (e *runEnv) close() {
	for _, f := range slices.Backward(e.cleanups) {
		f()
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}
