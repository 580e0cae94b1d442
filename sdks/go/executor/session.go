package executor

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	pb "xjob.dev/sdk/go/xjobpb"
)

// The connection to the admins: one Registry.Session stream at a time.
//
//	connect (admin i) ─▶ Register ─▶ Registered (≤ 10 s) ─▶ Heartbeat every interval ─▶ …
//	     ▲ failure: next admin, backoff 100 ms → 5 s            │ shutdown: Deregister,
//	     └──────────────── stream error / end ◀─────────────────┘ wait ≤ 2 s for Deregistered
//
// Heartbeats list the runs running or queued here and the finished ones whose result no admin
// has accepted yet, so the admin can tell a lost run from a live one. In session dispatch
// (calls set) the admin's calls arrive on the same stream while it is registered and are
// answered on it (session_dispatch.go).

const (
	handshakeTimeout         = 10 * time.Second
	deregisterTimeout        = 2 * time.Second
	defaultHeartbeatInterval = 10 * time.Second
	minHeartbeatInterval     = 10 * time.Millisecond
	protocolVersion          = 1
)

// announcement is what the executor says in Register.
type announcement struct {
	appName  string
	address  string
	handlers []string
	labels   map[string]string
	dispatch pb.DispatchMode
}

// session keeps one registration open until its context (deregister) is cancelled.
type session struct {
	admins     *admins
	announce   announcement
	runner     *runner
	unreported *unreported
	calls      *sessionCalls // nil in the dialed mode
	logf       func(string, ...any)

	mu         sync.Mutex
	executorID string // empty while not registered
	registered chan struct{}
	regOnce    sync.Once
}

// errDeregistered ends the loop: shutdown asked for it.
var errDeregistered = errors.New("deregistered")

// loop registers, heartbeats, and reconnects with backoff over the admins in turn until ctx is
// cancelled; then it deregisters.
func (s *session) loop(ctx context.Context) {
	retry := newBackoff()
	for index := 0; ; index = (index + 1) % len(s.admins.addresses) {
		wasRegistered, err := s.run(ctx, s.admins.addresses[index])
		s.setExecutorID("")
		if errors.Is(err, errDeregistered) {
			return
		}
		if wasRegistered {
			retry.reset()
		}
		s.logf("session with %s ended: %v", s.admins.addresses[index], err)
		select {
		case <-time.After(retry.next()):
		case <-ctx.Done():
			return
		}
	}
}

// run holds one session with one admin; it says whether it got registered and why it ended.
func (s *session) run(ctx context.Context, address string) (bool, error) {
	client, err := s.admins.client(address)
	if err != nil {
		return false, err
	}
	streamCtx, cancel := context.WithCancel(s.admins.withToken(context.Background()))
	defer cancel()
	stream, err := client.Session(streamCtx)
	if err != nil {
		return false, err
	}
	handlers := append([]string{}, s.announce.handlers...)
	sort.Strings(handlers)
	sender := &lockedSender{stream: stream}
	err = sender.send(&pb.ExecutorMessage{Kind: &pb.ExecutorMessage_Register{Register: &pb.Register{
		AppName: s.announce.appName, Address: s.announce.address, Handlers: handlers,
		ProtocolVersion: protocolVersion, Labels: s.announce.labels, DispatchMode: s.announce.dispatch,
	}}})
	if err != nil {
		return false, err
	}
	// One goroutine reads the stream; the loop below reacts to what it reads.
	inbound := make(chan *pb.AdminMessage)
	readErr := make(chan error, 1)
	go func() {
		for {
			message, err := stream.Recv()
			if err != nil {
				readErr <- err
				return
			}
			select {
			case inbound <- message:
			case <-streamCtx.Done():
				return
			}
		}
	}()

	handshake := time.NewTimer(handshakeTimeout)
	defer handshake.Stop()
	var registered *pb.Registered
	for registered == nil {
		select {
		case message := <-inbound:
			registered = message.GetRegistered()
		case err := <-readErr:
			return false, err
		case <-handshake.C:
			return false, errors.New("no Registered within 10s")
		case <-ctx.Done():
			return false, errDeregistered
		}
	}
	interval := defaultHeartbeatInterval
	if registered.GetHeartbeatIntervalMs() > 0 {
		interval = max(time.Duration(registered.GetHeartbeatIntervalMs())*time.Millisecond, minHeartbeatInterval)
	}
	s.logf("registered with %s as %s (heartbeat every %v)", address, registered.GetExecutorId(), interval)
	if s.calls != nil && registered.GetDispatchMode() != pb.DispatchMode_DISPATCH_MODE_SESSION {
		// An admin without session dispatch would dial the session:// address and fail.
		s.logf("%s did not confirm session dispatch: it cannot send runs here", address)
	}
	s.setExecutorID(registered.GetExecutorId())

	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			ids, queued := s.aliveLogIDs()
			heartbeat := &pb.Heartbeat{RunningLogIds: ids, Queued: queued}
			if err := sender.send(&pb.ExecutorMessage{Kind: &pb.ExecutorMessage_Heartbeat{Heartbeat: heartbeat}}); err != nil {
				return true, err
			}
		case message := <-inbound:
			s.received(message, sender)
		case err := <-readErr:
			return true, err
		case <-ctx.Done():
			s.deregister(sender, inbound, readErr, address)
			return true, errDeregistered
		}
	}
}

// received handles a message from the admin while registered: a call is answered (session
// dispatch) or, on a dialed executor, ignored; nothing else is expected.
func (s *session) received(message *pb.AdminMessage, sender *lockedSender) {
	call := message.GetCall()
	switch {
	case call != nil && s.calls != nil:
		s.calls.answer(call, sender.send)
	case call != nil:
		s.logf("the admin sent a session call to a dialed executor; ignored")
	}
}

// deregister sends Deregister and waits up to 2 s for Deregistered (or the stream's end); calls
// still arriving meanwhile are answered (the admin may have sent them before it saw the
// Deregister).
func (s *session) deregister(sender *lockedSender, inbound <-chan *pb.AdminMessage, readErr <-chan error, address string) {
	if err := sender.send(&pb.ExecutorMessage{Kind: &pb.ExecutorMessage_Deregister{Deregister: &pb.Deregister{}}}); err != nil {
		return
	}
	timeout := time.NewTimer(deregisterTimeout)
	defer timeout.Stop()
	for {
		select {
		case message := <-inbound:
			if message.GetDeregistered() != nil {
				s.logf("deregistered from %s", address)
				return
			}
			s.received(message, sender)
		case <-readErr:
			return
		case <-timeout.C:
			s.logf("no answer to Deregister from %s", address)
			return
		}
	}
}

// aliveLogIDs are the runs running or queued here plus the finished ones whose result is not
// accepted yet: the admin must not take any of them for lost.
func (s *session) aliveLogIDs() ([]int64, uint32) {
	ids, queued := s.runner.runningLogIDs()
	seen := map[int64]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, id := range s.unreported.list() {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, queued
}

func (s *session) setExecutorID(id string) {
	s.mu.Lock()
	s.executorID = id
	s.mu.Unlock()
	if id != "" {
		s.regOnce.Do(func() { close(s.registered) })
	}
}

// ExecutorID returns the id of the current session, empty while not registered.
func (s *session) currentExecutorID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executorID
}
