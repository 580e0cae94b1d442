package executor

// Session dispatch against a small admin served over real gRPC on loopback: the executor opens
// no port, registers as session://NAME in DISPATCH_MODE_SESSION, and answers the calls sent down
// its session with the replies a dialed call would give.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "xjob.dev/sdk/go/xjobpb"
)

// stepTimeout bounds each wait; generous for a loaded machine.
const stepTimeout = 10 * time.Second

// sessionAdmin holds the executor's session: it records the Register, sends calls, and collects
// replies, heartbeats and callbacks.
type sessionAdmin struct {
	pb.UnimplementedRegistryServer

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	register   *pb.Register
	token      string // the authorization the session came with
	stream     pb.Registry_SessionServer
	sendMu     sync.Mutex // one Send at a time on the stream
	nextCallID uint64
	replies    map[uint64]*pb.SessionReply
	heartbeats []*pb.Heartbeat
	results    map[int64]*pb.RunResult
}

func (a *sessionAdmin) update(change func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	change()
	close(a.changed)
	a.changed = make(chan struct{})
}

// until waits for holds (checked under the lock) to be true, up to stepTimeout.
func (a *sessionAdmin) until(t *testing.T, what string, holds func() bool) {
	t.Helper()
	deadline := time.NewTimer(stepTimeout)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		ok, changed := holds(), a.changed
		a.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (a *sessionAdmin) send(message *pb.AdminMessage) error {
	a.mu.Lock()
	stream := a.stream
	a.mu.Unlock()
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return stream.Send(message)
}

func (a *sessionAdmin) Session(stream pb.Registry_SessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	token := strings.Join(metadata.ValueFromIncomingContext(stream.Context(), "authorization"), ",")
	a.update(func() { a.register, a.token, a.stream = first.GetRegister(), token, stream })
	err = a.send(&pb.AdminMessage{Kind: &pb.AdminMessage_Registered{Registered: &pb.Registered{
		ExecutorId: "e-1", HeartbeatIntervalMs: 100, LeaseMs: 5000, DispatchMode: pb.DispatchMode_DISPATCH_MODE_SESSION,
	}}})
	if err != nil {
		return err
	}
	for {
		message, err := stream.Recv()
		if err != nil {
			return nil
		}
		switch {
		case message.GetReply() != nil:
			a.update(func() { a.replies[message.GetReply().GetCallId()] = message.GetReply() })
		case message.GetHeartbeat() != nil:
			a.update(func() { a.heartbeats = append(a.heartbeats, message.GetHeartbeat()) })
		case message.GetDeregister() != nil:
			return a.send(&pb.AdminMessage{Kind: &pb.AdminMessage_Deregistered{Deregistered: &pb.Deregistered{}}})
		}
	}
}

func (a *sessionAdmin) Callback(_ context.Context, request *pb.CallbackRequest) (*pb.CallbackResponse, error) {
	response := &pb.CallbackResponse{}
	a.update(func() {
		for _, result := range request.GetResults() {
			a.results[result.GetLogId()] = result
			response.AcceptedLogIds = append(response.AcceptedLogIds, result.GetLogId())
		}
	})
	return response, nil
}

// call sends one SessionCall down the session and waits for its reply.
func (a *sessionAdmin) call(t *testing.T, call *pb.SessionCall) *pb.SessionReply {
	t.Helper()
	var id uint64
	a.update(func() { a.nextCallID++; id = a.nextCallID })
	call.CallId, call.DeadlineMs = id, 5000
	if err := a.send(&pb.AdminMessage{Kind: &pb.AdminMessage_Call{Call: call}}); err != nil {
		t.Fatalf("sending call %d: %v", id, err)
	}
	var reply *pb.SessionReply
	a.until(t, fmt.Sprintf("the reply to call %d", id), func() bool { reply = a.replies[id]; return reply != nil })
	return reply
}

func (a *sessionAdmin) result(t *testing.T, logID int64) *pb.RunResult {
	t.Helper()
	var result *pb.RunResult
	a.until(t, fmt.Sprintf("the result of log %d", logID), func() bool { result = a.results[logID]; return result != nil })
	return result
}

func runCall(run *pb.RunRequest) *pb.SessionCall {
	return &pb.SessionCall{Request: &pb.SessionCall_Run{Run: run}}
}

func idleBeatCall(jobID int64) *pb.SessionCall {
	return &pb.SessionCall{Request: &pb.SessionCall_IdleBeat{IdleBeat: &pb.IdleBeatRequest{JobId: jobID}}}
}

func killCall(jobID, logID int64) *pb.SessionCall {
	return &pb.SessionCall{Request: &pb.SessionCall_Kill{Kill: &pb.KillRequest{JobId: jobID, LogId: logID}}}
}

// startSessionExecutor serves a sessionAdmin on loopback and starts an executor in session
// dispatch against it, registered, with the handlers "succeed" and "wait" (returns when the
// returned release is called or the run is cancelled). unusedPort is its Bind, which must stay
// closed. Everything stops at the test's end.
func startSessionExecutor(t *testing.T) (exec *Executor, admin *sessionAdmin, release func(), unusedPort int) {
	t.Helper()
	admin = &sessionAdmin{changed: make(chan struct{}), replies: map[uint64]*pb.SessionReply{}, results: map[int64]*pb.RunResult{}}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("admin listen: %v", err)
	}
	grpcServer := grpc.NewServer()
	pb.RegisterRegistryServer(grpcServer, admin)
	go func() { _ = grpcServer.Serve(listener) }()

	unusedPort = freePort(t)
	exec, err = New(Config{
		AppName: "session-test", AdminAddrs: []string{"http://" + listener.Addr().String()},
		Bind: fmt.Sprintf("127.0.0.1:%d", unusedPort), AdvertiseAddress: "session://session-test-1", SessionDispatch: true,
		AccessToken: "s3cret", LogDir: t.TempDir(), ShutdownGrace: 200 * time.Millisecond,
		CallbackFlushTimeout: 2 * time.Second, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	released := make(chan struct{})
	var releaseOnce sync.Once
	release = func() { releaseOnce.Do(func() { close(released) }) }
	_ = exec.Handle("succeed", func(_ context.Context, run *Run) (string, error) {
		run.Logf("params %s", run.Params())
		return "ok " + run.Params(), nil
	})
	_ = exec.Handle("wait", func(ctx context.Context, _ *Run) (string, error) {
		select {
		case <-released:
			return "released", nil
		case <-ctx.Done():
			return "", errors.New("cancelled")
		}
	})
	if err := exec.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		grpcServer.Stop()
	})
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if err := exec.WaitRegistered(ctx); err != nil {
		t.Fatalf("not registered: %v", err)
	}
	return exec, admin, release, unusedPort
}

func TestSessionDispatchRegistersAndOpensNoPort(t *testing.T) {
	exec, admin, _, unusedPort := startSessionExecutor(t)
	admin.mu.Lock()
	register, token := admin.register, admin.token
	admin.mu.Unlock()
	if register.GetDispatchMode() != pb.DispatchMode_DISPATCH_MODE_SESSION {
		t.Errorf("dispatch mode %v, want SESSION", register.GetDispatchMode())
	}
	if register.GetAddress() != "session://session-test-1" || exec.Address() != "session://session-test-1" {
		t.Errorf("address %q (Address() %q), want session://session-test-1", register.GetAddress(), exec.Address())
	}
	if handlers := register.GetHandlers(); !slices.Equal(handlers, []string{"succeed", "wait"}) {
		t.Errorf("handlers %v", handlers)
	}
	if token != "Bearer s3cret" {
		t.Errorf("the session came with authorization %q, want the access token", token)
	}
	if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", unusedPort), time.Second); err == nil {
		_ = conn.Close()
		t.Errorf("something listens on the Bind port %d in session dispatch", unusedPort)
	}
}

// The calls carry no token (the executor dialed the admin) and are served all the same.
func TestSessionBeatAndIdleBeat(t *testing.T) {
	_, admin, _, _ := startSessionExecutor(t)
	beat := admin.call(t, &pb.SessionCall{Request: &pb.SessionCall_Beat{Beat: &pb.BeatRequest{}}})
	if beat.GetBeat() == nil {
		t.Errorf("beat reply %v, want a BeatResponse", beat)
	}
	if idle := admin.call(t, idleBeatCall(7)); !idle.GetIdleBeat().GetIdle() {
		t.Errorf("idle beat reply %v, want idle", idle)
	}
}

func TestSessionRunResultLogAndDuplicate(t *testing.T) {
	_, admin, _, _ := startSessionExecutor(t)
	serial := pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION
	run := request(1, 11, "succeed", serial)
	run.Params = "p1"
	if reply := admin.call(t, runCall(run)); !reply.GetRun().GetAccepted() {
		t.Fatalf("run reply %v, want accepted", reply)
	}
	result := admin.result(t, 11)
	if result.GetStatus() != pb.RunStatus_RUN_STATUS_SUCCESS || result.GetMessage() != "ok p1" {
		t.Errorf("result %v, want SUCCESS \"ok p1\"", result)
	}
	read := admin.call(t, &pb.SessionCall{Request: &pb.SessionCall_ReadLog{ReadLog: &pb.ReadLogRequest{
		LogId: 11, LogDateMs: run.GetLogDateMs(), FromLine: 1,
	}}}).GetReadLog()
	if !strings.Contains(read.GetContent(), "params p1") || !read.GetIsEnd() {
		t.Errorf("log read %q (end %v), want the handler's line and the end", read.GetContent(), read.GetIsEnd())
	}
	again := admin.call(t, runCall(run)).GetRun()
	if again.GetAccepted() || !strings.Contains(again.GetMessage(), "duplicate run") {
		t.Errorf("the same log id again: %v, want refused as a duplicate", again)
	}
}

// A run call is answered while an earlier run's handler still runs, heartbeats go on and list
// it, and a kill stops it.
func TestSessionKillAndHeartbeatsWhileAHandlerRuns(t *testing.T) {
	_, admin, _, _ := startSessionExecutor(t)
	serial := pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION
	if reply := admin.call(t, runCall(request(3, 21, "wait", serial))); !reply.GetRun().GetAccepted() {
		t.Fatalf("run reply %v, want accepted", reply)
	}
	if reply := admin.call(t, runCall(request(4, 22, "succeed", serial))); !reply.GetRun().GetAccepted() {
		t.Fatalf("second run reply %v, want accepted", reply)
	}
	if result := admin.result(t, 22); result.GetStatus() != pb.RunStatus_RUN_STATUS_SUCCESS {
		t.Errorf("second run %v, want SUCCESS while the first one waits", result)
	}
	admin.until(t, "a heartbeat listing log 21", func() bool {
		return slices.ContainsFunc(admin.heartbeats, func(beat *pb.Heartbeat) bool {
			return slices.Contains(beat.GetRunningLogIds(), 21)
		})
	})
	if idle := admin.call(t, idleBeatCall(3)).GetIdleBeat(); idle.GetIdle() {
		t.Error("idle beat says idle while job 3 runs")
	}
	if kill := admin.call(t, killCall(3, 21)).GetKill(); !kill.GetKilled() {
		t.Fatalf("kill %v, want killed", kill)
	}
	if result := admin.result(t, 21); result.GetStatus() != pb.RunStatus_RUN_STATUS_KILLED {
		t.Errorf("killed run %v, want KILLED", result)
	}
	if kill := admin.call(t, killCall(3, 21)).GetKill(); kill.GetKilled() {
		t.Error("a second kill found something to stop")
	}
}

func TestSessionCallWithoutRequestIsInvalidArgument(t *testing.T) {
	_, admin, _, _ := startSessionExecutor(t)
	reply := admin.call(t, &pb.SessionCall{})
	if reply.GetError().GetCode() != int32(codes.InvalidArgument) {
		t.Errorf("reply %v, want INVALID_ARGUMENT", reply)
	}
}

func TestSessionAddressIsChecked(t *testing.T) {
	base := Config{AppName: "orders", AdminAddrs: []string{"http://127.0.0.1:1"}}
	cases := []struct {
		session bool
		address string
		want    string // part of the error; empty: valid
	}{
		{true, "session://orders-laptop-1", ""},
		{true, "http://127.0.0.1:9999", "with SessionDispatch the address is session://NAME"},
		{true, "session://", "must be 1-200 letters"},
		{true, "session://a b", "must be 1-200 letters"},
		{true, "session://" + strings.Repeat("a", 201), "must be 1-200 letters"},
		{false, "session://orders-1", "is a session address: set SessionDispatch"},
	}
	for _, c := range cases {
		config := base
		config.SessionDispatch, config.AdvertiseAddress = c.session, c.address
		_, err := New(config)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q (session %v): %v, want valid", c.address, c.session, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q (session %v): %v, want an error with %q", c.address, c.session, err, c.want)
		}
	}
	// No address: the app, the process and a random part, a valid session name.
	config := base
	config.SessionDispatch = true
	valid, err := config.withDefaults()
	if err != nil || !strings.HasPrefix(valid.AdvertiseAddress, "session://orders-") {
		t.Fatalf("default session address %q (%v)", valid.AdvertiseAddress, err)
	}
	if err := checkSessionAddress(valid.AdvertiseAddress); err != nil {
		t.Errorf("default session address: %v", err)
	}
}
