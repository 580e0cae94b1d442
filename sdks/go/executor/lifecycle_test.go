package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// Run serves until its context ends, then stops gracefully and returns: the port is closed.
func TestRunStopsWhenItsContextEnds(t *testing.T) {
	port := freePort(t)
	config := Config{AppName: "lifecycle-test", AdminAddrs: []string{"http://127.0.0.1:1"}, Bind: fmt.Sprintf("127.0.0.1:%d", port),
		LogDir: t.TempDir(), ShutdownGrace: 100 * time.Millisecond, CallbackFlushTimeout: 100 * time.Millisecond,
		Logf: func(string, ...any) {}}
	exec, err := New(config)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- exec.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for call(t, port, "", beat) != codes.OK {
		if time.Now().After(deadline) {
			t.Fatal("the executor did not start serving within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a graceful stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its context ending")
	}
	if code := call(t, port, "", beat); code != codes.Unavailable {
		t.Errorf("Beat after Run returned = %v, want Unavailable", code)
	}
}

// A Shutdown whose context has already ended stops the server at once and says why.
func TestShutdownHonoursItsContext(t *testing.T) {
	exec, _, err := startExecutor(t, Config{Bind: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	port := boundPort(exec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := exec.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown(cancelled) = %v, want context.Canceled", err)
	}
	if code := call(t, port, "", beat); code != codes.Unavailable {
		t.Errorf("Beat after Shutdown = %v, want Unavailable", code)
	}
	// A second call waits for the same stop, which finishes within the Config's graces.
	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := exec.Shutdown(wait); err != nil {
		t.Errorf("second Shutdown = %v, want nil once the stop has finished", err)
	}
}

// freePort is a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}
