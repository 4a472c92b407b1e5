// Package testserver starts the real session-svc and memory-svc for tests, on 127.0.0.1 port 0
// with a temporary data directory each, from $ADK_SERVICES_BIN_DIR (default: the repository's
// target/debug). Their logs go to stderr when $ADK_TEST_SERVER_LOGS is set.
package testserver

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// T is what starting a server needs of a test: testing.TB has it, and so does the benchmark
// program's stand-in.
type T interface {
	Helper()
	TempDir() string
	Cleanup(func())
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Server is one running server process.
type Server struct {
	// Addr is host:port.
	Addr string
	name string
	args []string
	cmd  *exec.Cmd
}

// URI is the server's grpc:// URI.
func (s *Server) URI() string { return "grpc://" + s.Addr }

// BinDir is where the server binaries are.
func BinDir() string {
	if dir := os.Getenv("ADK_SERVICES_BIN_DIR"); dir != "" {
		return dir
	}
	wd, _ := os.Getwd()
	for dir := wd; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "session-svc")); err == nil {
				return filepath.Join(dir, "target", "debug")
			}
		}
	}
	return filepath.Join(wd, "target", "debug")
}

// Start starts a server (name is "session-svc" or "memory-svc") with args and a fresh data
// directory, stops it when the test ends, and returns once it listens.
func Start(tb T, name string, args ...string) *Server {
	tb.Helper()
	s := &Server{name: name, args: append([]string{"--data-dir", tb.TempDir()}, args...)}
	if err := s.start("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartSession starts a session-svc: on sled, or on PostgreSQL in a fresh schema when
// $ADK_TEST_POSTGRES holds a connection string.
func StartSession(tb T) *Server {
	tb.Helper()
	if url := os.Getenv("ADK_TEST_POSTGRES"); url != "" {
		return Start(tb, "session-svc", "--store", FreshSchema(tb, url))
	}
	return Start(tb, "session-svc")
}

// StartMemory starts a memory-svc with args: on sled, or on PostgreSQL in a fresh schema when
// $ADK_TEST_POSTGRES holds a connection string.
func StartMemory(tb T, args ...string) *Server {
	tb.Helper()
	if url := os.Getenv("ADK_TEST_POSTGRES"); url != "" {
		args = append([]string{"--store", FreshSchema(tb, url)}, args...)
	}
	return Start(tb, "memory-svc", args...)
}

// FreshSchema makes an empty schema in the PostgreSQL database at dbURL (with psql) and
// returns a connection string that uses it.
func FreshSchema(tb T, dbURL string) string {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "go_" + hex.EncodeToString(b[:])
	if out, err := exec.Command("psql", dbURL, "-v", "ON_ERROR_STOP=1", "-qc", "CREATE SCHEMA "+schema).CombinedOutput(); err != nil {
		tb.Fatalf("psql: CREATE SCHEMA: %v: %s", err, out)
	}
	tb.Cleanup(func() {
		_ = exec.Command("psql", dbURL, "-qc", "DROP SCHEMA "+schema+" CASCADE").Run()
	})
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	return dbURL + sep + "options=" + url.QueryEscape("-csearch_path="+schema)
}

func (s *Server) start(listen string) error {
	binary := filepath.Join(BinDir(), s.name)
	cmd := exec.Command(binary, append([]string{"--listen", listen}, s.args...)...)
	if os.Getenv("ADK_TEST_SERVER_LOGS") != "" {
		cmd.Stderr = os.Stderr
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s (set ADK_SERVICES_BIN_DIR): %w", binary, err)
	}
	ready := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		prefix := s.name + " listening on "
		for lines.Scan() {
			if addr, ok := strings.CutPrefix(lines.Text(), prefix); ok {
				ready <- addr
			}
		}
		close(ready)
	}()
	select {
	case addr, ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			return fmt.Errorf("%s exited before listening", s.name)
		}
		s.Addr, s.cmd = addr, cmd
		return nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("%s did not listen within 60 s", s.name)
	}
}

// Stop stops the server (a no-op when it is not running).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart stops the server and starts it again on the same address and data.
func (s *Server) Restart(tb T) {
	tb.Helper()
	s.Stop()
	var err error
	for range 50 {
		if err = s.start(s.Addr); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatal(err)
}
