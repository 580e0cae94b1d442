package executor

import (
	"os"
	"testing"

	pb "xjob.dev/sdk/go/xjobpb"
)

func newBacklog(dir string) *backlog {
	return &backlog{
		spooled: map[int64]bool{}, unreported: &unreported{ids: map[int64]bool{}},
		spoolDir: dir, logf: func(string, ...any) {},
	}
}

func TestSpooledResultsReloadAndFilesGoOnceAccepted(t *testing.T) {
	dir := t.TempDir()
	first := newBacklog(dir)
	first.push(&pb.RunResult{LogId: 1, Status: pb.RunStatus_RUN_STATUS_SUCCESS, Code: 200})
	first.push(&pb.RunResult{LogId: 2, Status: pb.RunStatus_RUN_STATUS_FAILED, Code: 500})
	first.spool()
	first.spool() // nothing new: no second file
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d spool files, want 1", len(entries))
	}

	// A new process loads the file and lists both runs as unreported until they are accepted.
	reloaded := newBacklog(dir)
	reloaded.load()
	if len(reloaded.pending) != 2 || len(reloaded.unreported.list()) != 2 {
		t.Fatalf("reloaded %d results, %d unreported", len(reloaded.pending), len(reloaded.unreported.list()))
	}
	if reloaded.settle(2, []int64{1}) {
		t.Error("settle reported all accepted with log 2 missing")
	}
	if ids := reloaded.unreported.list(); len(ids) != 1 || ids[0] != 2 {
		t.Errorf("unreported %v, want [2]", ids)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Error("the spool file went before all its results were accepted")
	}
	if !reloaded.settle(1, []int64{2}) {
		t.Error("settle of the last result")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d spool files left after every result was accepted", len(entries))
	}
}
