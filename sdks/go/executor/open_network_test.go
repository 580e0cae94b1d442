package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "xjob.dev/sdk/go/xjobpb"
)

// capturedLog collects an executor's diagnostics so a test can look for the INSECURE line.
type capturedLog struct {
	mu    sync.Mutex
	lines []string
}

func (c *capturedLog) logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
}

func (c *capturedLog) has(part string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range c.lines {
		if strings.Contains(line, part) {
			return true
		}
	}
	return false
}

// startExecutor starts an executor pointing at an admin port nothing listens on (its session
// only retries in the background, which is all these tests need) and stops it at the end.
func startExecutor(t *testing.T, config Config) (*Executor, *capturedLog, error) {
	t.Helper()
	logs := &capturedLog{}
	config.AppName, config.AdminAddrs = "guard-test", []string{"http://127.0.0.1:1"}
	config.LogDir, config.Logf = t.TempDir(), logs.logf
	config.ShutdownGrace, config.CallbackFlushTimeout = 100*time.Millisecond, 100*time.Millisecond
	exec, err := New(config)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := exec.Start(); err != nil {
		return nil, logs, err
	}
	t.Cleanup(func() { _ = exec.Shutdown(context.Background()) })
	return exec, logs, nil
}

// call makes one ExecutorService call on 127.0.0.1:port with the given authorization header
// ("" for none) and returns its status code.
func call(t *testing.T, port int, header string, method func(context.Context, pb.ExecutorServiceClient) error) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if header != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", header)
	}
	return status.Code(method(ctx, pb.NewExecutorServiceClient(conn)))
}

func beat(ctx context.Context, client pb.ExecutorServiceClient) error {
	_, err := client.Beat(ctx, &pb.BeatRequest{})
	return err
}

func boundPort(exec *Executor) int { return exec.listener.Addr().(*net.TCPAddr).Port }

func TestDefaultBindIsLoopback(t *testing.T) {
	config, err := (&Config{AppName: "guard-test", AdminAddrs: []string{"http://127.0.0.1:1"}}).withDefaults()
	if err != nil || config.Bind != "127.0.0.1:9999" {
		t.Fatalf("default bind %q (%v), want 127.0.0.1:9999", config.Bind, err)
	}
}

func TestOffLoopbackWithoutTokenIsRefused(t *testing.T) {
	_, _, err := startExecutor(t, Config{Bind: "0.0.0.0:0"})
	if !errors.Is(err, ErrOpenNetwork) {
		t.Fatalf("Start = %v, want ErrOpenNetwork", err)
	}
	for _, part := range []string{"AccessToken", "InsecureOpenNetwork"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the refusal does not name %s: %v", part, err)
		}
	}
}

func TestOptOutStartsOffLoopbackWithAWarning(t *testing.T) {
	exec, logs, err := startExecutor(t, Config{Bind: "0.0.0.0:0", InsecureOpenNetwork: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !logs.has("INSECURE") {
		t.Errorf("no INSECURE line in %v", logs.lines)
	}
	if code := call(t, boundPort(exec), "", beat); code != codes.OK {
		t.Errorf("Beat = %v, want OK", code)
	}
}

func TestOffLoopbackWithTokenStarts(t *testing.T) {
	exec, _, err := startExecutor(t, Config{Bind: "0.0.0.0:0", AccessToken: "s3cret"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if code := call(t, boundPort(exec), "Bearer s3cret", beat); code != codes.OK {
		t.Errorf("Beat = %v, want OK", code)
	}
}

func TestLoopbackStartsWithoutToken(t *testing.T) {
	exec, logs, err := startExecutor(t, Config{Bind: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if logs.has("INSECURE") {
		t.Errorf("INSECURE logged on loopback: %v", logs.lines)
	}
	if code := call(t, boundPort(exec), "", beat); code != codes.OK {
		t.Errorf("Beat = %v, want OK", code)
	}
}

func TestTokenRequiredOnEveryCall(t *testing.T) {
	exec, _, err := startExecutor(t, Config{Bind: "127.0.0.1:0", AccessToken: "s3cret"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	port := boundPort(exec)
	for _, header := range []string{"", "Bearer wrong", "Bearer s3cret ", "s3cret", "bearer s3cret"} {
		if code := call(t, port, header, beat); code != codes.Unauthenticated {
			t.Errorf("Beat with %q = %v, want Unauthenticated", header, code)
		}
	}
	calls := map[string]func(context.Context, pb.ExecutorServiceClient) error{
		"Run": func(ctx context.Context, c pb.ExecutorServiceClient) error {
			_, err := c.Run(ctx, &pb.RunRequest{JobId: 1, LogId: 1, Handler: "x"})
			return err
		},
		"Kill": func(ctx context.Context, c pb.ExecutorServiceClient) error {
			_, err := c.Kill(ctx, &pb.KillRequest{JobId: 1})
			return err
		},
		"ReadLog": func(ctx context.Context, c pb.ExecutorServiceClient) error {
			_, err := c.ReadLog(ctx, &pb.ReadLogRequest{LogId: 1, FromLine: 1})
			return err
		},
	}
	for name, method := range calls {
		if code := call(t, port, "", method); code != codes.Unauthenticated {
			t.Errorf("%s without token = %v, want Unauthenticated", name, code)
		}
	}
	if code := call(t, port, "Bearer s3cret", beat); code != codes.OK {
		t.Errorf("Beat with the token = %v, want OK", code)
	}
}
