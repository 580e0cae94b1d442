package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "xjob.dev/sdk/go/xjobpb"
)

// newTestRunner returns a runner over a temporary log dir with handlers that sleep (until
// cancelled) and succeed, and the channel its results arrive on.
func newTestRunner(t *testing.T) (*runner, chan *pb.RunResult) {
	t.Helper()
	results := make(chan *pb.RunResult, 16)
	handlers := map[string]Handler{
		"wait": func(ctx context.Context, run *Run) (string, error) {
			select {
			case <-ctx.Done():
				return "", errors.New("cancelled")
			case <-time.After(10 * time.Second):
				return "slept", nil
			}
		},
		"ok": func(_ context.Context, run *Run) (string, error) {
			run.Logf("params %s", run.Params())
			return "done " + run.Params(), nil
		},
	}
	sender := &resultSender{ch: results, unreported: &unreported{ids: map[int64]bool{}}}
	return newRunner(handlers, logStore{root: t.TempDir()}, sender, 500*time.Millisecond, t.Logf), results
}

func request(jobID, logID int64, handler string, strategy pb.BlockStrategy) *pb.RunRequest {
	return &pb.RunRequest{
		JobId: jobID, LogId: logID, Handler: handler, BlockStrategy: strategy,
		GlueType: pb.GlueType_GLUE_TYPE_BEAN, LogDateMs: time.Now().UnixMilli(), ShardTotal: 1,
	}
}

func next(t *testing.T, results chan *pb.RunResult) *pb.RunResult {
	t.Helper()
	select {
	case result := <-results:
		return result
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10 s")
		return nil
	}
}

func TestRefusals(t *testing.T) {
	r, results := newTestRunner(t)
	serial := pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION
	if got := r.submit(request(1, 1, "nope", serial)); got != "job handler [nope] not found" {
		t.Errorf("unknown handler: %q", got)
	}
	shell := request(1, 2, "ok", serial)
	shell.GlueType = pb.GlueType_GLUE_TYPE_SHELL
	if got := r.submit(shell); got != "glue type GLUE_TYPE_SHELL is not enabled on this executor" {
		t.Errorf("glue: %q", got)
	}
	if got := r.submit(request(1, 3, "wait", serial)); got != "" {
		t.Fatalf("refused: %q", got)
	}
	if got := r.submit(request(2, 3, "ok", serial)); got != "duplicate run: log_id 3 already queued or running" {
		t.Errorf("duplicate: %q", got)
	}
	discard := pb.BlockStrategy_BLOCK_STRATEGY_DISCARD_LATER
	if got := r.submit(request(1, 4, "ok", discard)); got != "block strategy DISCARD_LATER: job 1 is running or queued" {
		t.Errorf("discard later: %q", got)
	}
	if !r.kill(1) {
		t.Error("kill found nothing to stop")
	}
	result := next(t, results)
	if result.GetStatus() != pb.RunStatus_RUN_STATUS_KILLED || result.GetMessage() != "killed by admin" {
		t.Errorf("killed run: %v", result)
	}
}

func TestCoverEarlyKillsRunningAndQueuedThenRuns(t *testing.T) {
	r, results := newTestRunner(t)
	serial := pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION
	r.submit(request(1, 1, "wait", serial))
	r.submit(request(1, 2, "ok", serial))
	if ids, queued := r.runningLogIDs(); len(ids) != 2 || queued != 1 {
		t.Fatalf("running %v queued %d", ids, queued)
	}
	if got := r.submit(request(1, 3, "ok", pb.BlockStrategy_BLOCK_STRATEGY_COVER_EARLY)); got != "" {
		t.Fatalf("refused: %q", got)
	}
	byID := map[int64]*pb.RunResult{}
	for range 3 {
		result := next(t, results)
		byID[result.GetLogId()] = result
	}
	for _, id := range []int64{1, 2} {
		if byID[id].GetStatus() != pb.RunStatus_RUN_STATUS_KILLED ||
			byID[id].GetMessage() != "block strategy COVER_EARLY: replaced by log 3" {
			t.Errorf("log %d: %v", id, byID[id])
		}
	}
	if byID[3].GetStatus() != pb.RunStatus_RUN_STATUS_SUCCESS || byID[3].GetCode() != 200 {
		t.Errorf("log 3: %v", byID[3])
	}
}

func TestTimeoutStopsTheHandler(t *testing.T) {
	r, results := newTestRunner(t)
	slow := request(1, 1, "wait", pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION)
	slow.TimeoutMs = 200
	started := time.Now()
	r.submit(slow)
	result := next(t, results)
	if result.GetStatus() != pb.RunStatus_RUN_STATUS_TIMEOUT || result.GetCode() != 502 ||
		result.GetMessage() != "job execute timeout after 200 ms" {
		t.Errorf("timeout: %v", result)
	}
	if elapsed := time.Since(started); elapsed > 2*time.Second {
		t.Errorf("a cooperative handler took %v to stop", elapsed)
	}
}

func TestReadLogReturnsLinesAndEnds(t *testing.T) {
	r, results := newTestRunner(t)
	run := request(1, 7, "ok", pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION)
	run.Params = "x"
	r.submit(run)
	next(t, results)
	response := r.logs.read(7, run.GetLogDateMs(), 1, r.logActive(7))
	if response.GetToLine() != 3 || !response.GetIsEnd() || !strings.Contains(response.GetContent(), "params x") {
		t.Errorf("read: %v", response)
	}
	past := r.logs.read(7, run.GetLogDateMs(), 4, false)
	if past.GetToLine() != 3 || past.GetContent() != "" || !past.GetIsEnd() {
		t.Errorf("read past the end: %v", past)
	}
	missing := r.logs.read(99, run.GetLogDateMs(), 1, false)
	if !strings.HasPrefix(missing.GetContent(), "log file not found: ") || missing.GetToLine() != 0 {
		t.Errorf("missing file: %v", missing)
	}
}

func TestTruncate(t *testing.T) {
	long := strings.Repeat("é", maxMessageChars+5)
	if got := truncate(long); len([]rune(got)) != maxMessageChars+3 || !strings.HasSuffix(got, "é...") {
		t.Errorf("truncated to %d runes", len([]rune(got)))
	}
}

func TestRemoveExpiredKeepsRecentAndOtherFolders(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"2024-02-22", "2023-12-31", "2024-02-23", "2024-03-01", "callbacklogs", "not-a-date"} {
		if err := os.MkdirAll(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.Local)
	if removed := removeExpired(root, now, 7); removed != 2 {
		t.Errorf("removed %d folders, want 2", removed)
	}
	for _, kept := range []string{"2024-02-23", "2024-03-01", "callbacklogs", "not-a-date"} {
		if _, err := os.Stat(filepath.Join(root, kept)); err != nil {
			t.Errorf("%s was removed", kept)
		}
	}
}
