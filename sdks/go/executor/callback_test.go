package executor

import (
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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

// tooLargeAdmin is a Registry on loopback that refuses, as the admin does, a request over its
// limit with OUT_OF_RANGE, and records how many results each request it took carried.
type tooLargeAdmin struct {
	pb.UnimplementedRegistryServer
	limit int
	mu    sync.Mutex
	sizes []int
}

func (a *tooLargeAdmin) Callback(_ context.Context, request *pb.CallbackRequest) (*pb.CallbackResponse, error) {
	if proto.Size(request) > a.limit {
		return nil, status.Error(codes.OutOfRange, "message too large")
	}
	a.mu.Lock()
	a.sizes = append(a.sizes, len(request.GetResults()))
	a.mu.Unlock()
	response := &pb.CallbackResponse{}
	for _, result := range request.GetResults() {
		response.AcceptedLogIds = append(response.AcceptedLogIds, result.GetLogId())
	}
	return response, nil
}

// deliverTo sends the backlog to a tooLargeAdmin of the given limit and returns what it took.
func deliverTo(t *testing.T, limit int, b *backlog) []int {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	admin := &tooLargeAdmin{limit: limit}
	pb.RegisterRegistryServer(server, admin)
	go func() { _ = server.Serve(listener) }()
	defer server.Stop()
	clients := newAdmins([]string{"http://" + listener.Addr().String()}, "", nil)
	defer clients.close()
	flushBacklog(clients, make(chan *pb.RunResult), b, 5*time.Second)
	if len(b.pending) != 0 {
		t.Fatalf("%d results not delivered", len(b.pending))
	}
	return admin.sizes
}

func TestBatchRefusedAsTooLargeIsSentAsHalves(t *testing.T) {
	b := newBacklog(t.TempDir())
	for logID := int64(1); logID <= 4; logID++ {
		b.push(&pb.RunResult{LogId: logID, Message: strings.Repeat("x", 1000)})
	}
	if sizes := deliverTo(t, 2500, b); !slices.Equal(sizes, []int{2, 2}) {
		t.Errorf("the admin took batches of %v, want [2 2]", sizes)
	}
}

func TestSingleResultRefusedAsTooLargeHasItsMessageCut(t *testing.T) {
	b := newBacklog(t.TempDir())
	result := &pb.RunResult{LogId: 9, Message: strings.Repeat("y", 1000)}
	b.push(result)
	if sizes := deliverTo(t, 300, b); !slices.Equal(sizes, []int{1}) {
		t.Errorf("the admin took batches of %v, want [1]", sizes)
	}
}
