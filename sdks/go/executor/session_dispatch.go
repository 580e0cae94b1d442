package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "xjob.dev/sdk/go/xjobpb"
)

// Session dispatch: the admin's ExecutorService calls arrive on the executor's own
// Registry.Session stream instead of a port the executor serves, so an executor behind NAT, in
// a serverless box or on a laptop needs no inbound route. TLS covers them through the admin's
// certificate (the executor dialed the admin).
//
// Each SessionCall is answered by the same server code a dialed call runs, in its own goroutine
// (a slow log read must not hold up heartbeats or runs), bounded by the call's deadline, with a
// SessionReply carrying the call's id. Replies go out in any order; the admin matches them by
// id. A reply that cannot be sent (the session ended) is dropped: the admin has already ended
// that call as it ends a dialed call to a vanished executor.

const (
	sessionScheme = "session://"
	// defaultCallDeadline bounds a call the admin sent without a deadline.
	defaultCallDeadline = 30 * time.Second
	// maxSessionNameChars is the admin's limit on NAME in session://NAME.
	maxSessionNameChars = 200
)

// defaultSessionAddress names an executor that names none: the app, this process and a random
// part, fixed for the life of the process so that a reconnect keeps it (the admin kills and
// reads the logs of runs by the address they were sent to).
func defaultSessionAddress(appName string) string {
	random := make([]byte, 4)
	_, _ = rand.Read(random) // crypto/rand does not fail on supported platforms
	return fmt.Sprintf("%s%s-%d-%s", sessionScheme, appName, os.Getpid(), hex.EncodeToString(random))
}

// checkSessionAddress applies the admin's rule to session://NAME up front, so a bad name fails
// New instead of every registration.
func checkSessionAddress(address string) error {
	name, ok := strings.CutPrefix(address, sessionScheme)
	if !ok {
		return fmt.Errorf("executor: with SessionDispatch the address is %sNAME, not %q", sessionScheme, address)
	}
	allowed := func(r rune) bool {
		return r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_:", r))
	}
	if name == "" || len(name) > maxSessionNameChars || strings.IndexFunc(name, func(r rune) bool { return !allowed(r) }) >= 0 {
		return fmt.Errorf("executor: the name of %q must be 1-%d letters, digits, '.', '-', '_' or ':'",
			address, maxSessionNameChars)
	}
	return nil
}

// sessionCalls answers the calls of an executor's sessions with its ExecutorService. No token
// is checked on them: they come from the admin this executor dialed.
type sessionCalls struct {
	service *server
	logf    func(string, ...any)
}

// answer serves call in its own goroutine and hands the reply to send.
func (c *sessionCalls) answer(call *pb.SessionCall, send func(*pb.ExecutorMessage) error) {
	go func() {
		reply := c.serve(call)
		if err := send(&pb.ExecutorMessage{Kind: &pb.ExecutorMessage_Reply{Reply: reply}}); err != nil {
			c.logf("session ended before the reply to call %d could be sent: %v", call.GetCallId(), err)
		}
	}()
}

// serve runs one call through the service exactly as if it had been dialed and returns its
// reply: the response, or an error where the dialed call would have failed.
func (c *sessionCalls) serve(call *pb.SessionCall) *pb.SessionReply {
	deadline := defaultCallDeadline
	if call.GetDeadlineMs() > 0 {
		deadline = time.Duration(call.GetDeadlineMs()) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	done := make(chan *pb.SessionReply, 1) // buffered: a call past its deadline still ends
	go func() { done <- c.dispatch(ctx, call) }()
	select {
	case reply := <-done:
		return reply
	case <-ctx.Done():
		return errorReply(call.GetCallId(), status.New(codes.DeadlineExceeded, "call deadline passed"))
	}
}

// dispatch calls the service method the call's request names.
func (c *sessionCalls) dispatch(ctx context.Context, call *pb.SessionCall) *pb.SessionReply {
	id := call.GetCallId()
	var reply *pb.SessionReply
	var err error
	switch request := call.GetRequest().(type) {
	case *pb.SessionCall_Beat:
		var response *pb.BeatResponse
		response, err = c.service.Beat(ctx, request.Beat)
		reply = &pb.SessionReply{CallId: id, Response: &pb.SessionReply_Beat{Beat: response}}
	case *pb.SessionCall_IdleBeat:
		var response *pb.IdleBeatResponse
		response, err = c.service.IdleBeat(ctx, request.IdleBeat)
		reply = &pb.SessionReply{CallId: id, Response: &pb.SessionReply_IdleBeat{IdleBeat: response}}
	case *pb.SessionCall_Run:
		var response *pb.RunResponse
		response, err = c.service.Run(ctx, request.Run)
		reply = &pb.SessionReply{CallId: id, Response: &pb.SessionReply_Run{Run: response}}
	case *pb.SessionCall_Kill:
		var response *pb.KillResponse
		response, err = c.service.Kill(ctx, request.Kill)
		reply = &pb.SessionReply{CallId: id, Response: &pb.SessionReply_Kill{Kill: response}}
	case *pb.SessionCall_ReadLog:
		var response *pb.ReadLogResponse
		response, err = c.service.ReadLog(ctx, request.ReadLog)
		reply = &pb.SessionReply{CallId: id, Response: &pb.SessionReply_ReadLog{ReadLog: response}}
	default:
		return errorReply(id, status.Newf(codes.InvalidArgument, "session call %d carries no request this executor knows", id))
	}
	if err != nil {
		return errorReply(id, status.Convert(err))
	}
	return reply
}

func errorReply(callID uint64, failure *status.Status) *pb.SessionReply {
	return &pb.SessionReply{CallId: callID, Response: &pb.SessionReply_Error{
		Error: &pb.SessionError{Code: int32(failure.Code()), Message: failure.Message()},
	}}
}

// lockedSender lets the session loop and the goroutines answering calls share one stream:
// gRPC allows only one Send at a time on it.
type lockedSender struct {
	mu     sync.Mutex
	stream pb.Registry_SessionClient
}

func (l *lockedSender) send(message *pb.ExecutorMessage) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stream.Send(message)
}
