package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "xjob.dev/sdk/go/xjobpb"
)

// Callbacks: run results travel from the runner through a channel to one goroutine that batches
// them (up to 100, or whatever arrives within 5 ms), calls Registry.Callback on the admins in
// order, drops the log ids the admin accepted and retries the rest with backoff, for as long as
// it takes: a result is never dropped because an admin is down.
//
// When no admin has taken a batch for spoolAfter, the unsent results are also written to
// {logDir}/callbacklogs/ as a protobuf-encoded CallbackRequest (one .pb file per spill), so a
// crash does not lose them; a file is deleted once every result in it is accepted, and files
// found at start are loaded and sent again. A graceful shutdown flushes within a bound and
// spools whatever is still unsent.
//
// An admin refuses a request larger than its max_request_bytes with OUT_OF_RANGE: the batch is
// then sent again as halves, down to one result, and a single result still refused has its
// message halved, so no result is retried unchanged for ever.
//
// Until an admin accepts its result, a finished run stays listed in heartbeats (unreported):
// otherwise the admin would take a run whose result it could not store yet for a lost one.

const (
	maxBatch      = 100
	batchWindow   = 5 * time.Millisecond
	callTimeout   = 10 * time.Second
	spoolAfter    = 10 * time.Second
	spoolDirName  = "callbacklogs"
	spoolFileExt  = ".pb"
	spoolFileBase = "xjob-callback-"
	// Below this many characters a cut message would be mostly the cut mark: it is emptied.
	minCutChars = 32
)

// unreported holds the log ids of finished runs whose result no admin has accepted yet.
type unreported struct {
	mu  sync.Mutex
	ids map[int64]bool
}

func (u *unreported) add(logID int64) {
	u.mu.Lock()
	u.ids[logID] = true
	u.mu.Unlock()
}

func (u *unreported) remove(logIDs map[int64]bool) {
	u.mu.Lock()
	for id := range logIDs {
		delete(u.ids, id)
	}
	u.mu.Unlock()
}

func (u *unreported) list() []int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	ids := make([]int64, 0, len(u.ids))
	for id := range u.ids {
		ids = append(ids, id)
	}
	return ids
}

// resultSender is the runner's end: a result counts as unreported from the moment it is sent.
type resultSender struct {
	ch         chan *pb.RunResult
	unreported *unreported
	traces     *runTraces
}

func (s *resultSender) send(result *pb.RunResult) {
	s.traces.finished(result) // ends the run's spans, opens its callback span
	s.unreported.add(result.GetLogId())
	s.ch <- result
}

type spoolFile struct {
	path      string
	remaining map[int64]bool
}

// backlog is the results no admin accepted yet, and the spool files holding some of them.
type backlog struct {
	pending    []*pb.RunResult
	spooled    map[int64]bool
	files      []*spoolFile
	sequence   int
	limit      int // results a batch; lowered for good when an admin refuses one as too large
	unreported *unreported
	traces     *runTraces // nil: off
	spoolDir   string
	logf       func(string, ...any)
}

func (b *backlog) push(result *pb.RunResult) {
	b.unreported.add(result.GetLogId())
	b.pending = append(b.pending, result)
}

// batchLen is how many pending results the next batch carries.
func (b *backlog) batchLen() int {
	limit := maxBatch
	if b.limit > 0 {
		limit = b.limit
	}
	return min(len(b.pending), limit)
}

// shrink follows a refusal of the first batchLen results as too large; false when nothing is
// left to make smaller (an empty message refused: only a retry can help then).
func (b *backlog) shrink(batchLen int) bool {
	if batchLen > 1 {
		b.limit = max(1, batchLen/2)
		b.logf("an admin refused a callback batch as too large; sending at most %d results a batch", b.limit)
		return true
	}
	if len(b.pending) == 0 || b.pending[0].GetMessage() == "" {
		return false
	}
	// A copy: the refused result may still be referenced by a spool file's request.
	result := proto.Clone(b.pending[0]).(*pb.RunResult)
	chars := []rune(result.GetMessage())
	keep := len(chars) / 2
	result.Message = ""
	if keep >= minCutChars {
		result.Message = string(chars[:keep]) + "..."
	}
	b.pending[0] = result
	b.logf("an admin refused the result of log %d as too large; its message is cut to %d characters", result.GetLogId(), keep)
	return true
}

// load reads the spool files an earlier process left.
func (b *backlog) load() {
	entries, err := os.ReadDir(b.spoolDir)
	if err != nil {
		return
	}
	for _, entry := range entries {
		if !strings.HasSuffix(entry.Name(), spoolFileExt) {
			continue
		}
		path := filepath.Join(b.spoolDir, entry.Name())
		bytes, err := os.ReadFile(path)
		request := &pb.CallbackRequest{}
		if err == nil {
			err = proto.Unmarshal(bytes, request)
		}
		if err != nil {
			b.logf("unreadable callback spool file %s, left in place: %v", path, err)
			continue
		}
		file := &spoolFile{path: path, remaining: map[int64]bool{}}
		for _, result := range request.GetResults() {
			file.remaining[result.GetLogId()] = true
			b.spooled[result.GetLogId()] = true
			b.push(result)
		}
		b.files = append(b.files, file)
		b.logf("re-sending %d spooled results from %s", len(request.GetResults()), path)
	}
}

// settle removes the accepted results of the first batchLen; the rest of the batch moves to the
// back, so a result an admin keeps refusing cannot block those behind it. It says whether all
// were accepted.
func (b *backlog) settle(batchLen int, acceptedIDs []int64) bool {
	accepted := map[int64]bool{}
	for _, id := range acceptedIDs {
		accepted[id] = true
	}
	batch := b.pending[:batchLen:batchLen]
	rest := b.pending[batchLen:]
	all := true
	for _, result := range batch {
		if !accepted[result.GetLogId()] {
			all = false
			rest = append(rest, result)
		}
	}
	b.pending = rest
	for id := range accepted {
		delete(b.spooled, id)
	}
	b.unreported.remove(accepted)
	b.traces.acceptedResults(accepted)
	kept := b.files[:0]
	for _, file := range b.files {
		for id := range accepted {
			delete(file.remaining, id)
		}
		if len(file.remaining) > 0 {
			kept = append(kept, file)
			continue
		}
		if err := os.Remove(file.path); err != nil {
			b.logf("failed to delete callback spool file %s: %v", file.path, err)
		}
	}
	b.files = kept
	return all
}

// spool writes every pending result not yet on disk to a new spool file (write, then rename,
// so a crash never leaves a half-written file to load).
func (b *backlog) spool() {
	request := &pb.CallbackRequest{}
	for _, result := range b.pending {
		if !b.spooled[result.GetLogId()] {
			request.Results = append(request.Results, result)
		}
	}
	if len(request.Results) == 0 {
		return
	}
	b.sequence++
	path := filepath.Join(b.spoolDir, fmt.Sprintf("%s%d-%d%s", spoolFileBase, time.Now().UnixMilli(), b.sequence, spoolFileExt))
	bytes, err := proto.Marshal(request)
	if err == nil {
		err = os.MkdirAll(b.spoolDir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(path+".tmp", bytes, 0o644)
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		b.logf("failed to spool callbacks to %s: %v", path, err)
		return
	}
	file := &spoolFile{path: path, remaining: map[int64]bool{}}
	for _, result := range request.Results {
		file.remaining[result.GetLogId()] = true
		b.spooled[result.GetLogId()] = true
	}
	b.files = append(b.files, file)
	b.logf("spooled %d results no admin accepted to %s", len(request.Results), path)
}

// callbackLoop delivers results until flush is closed, then flushes for at most flushTimeout
// and spools the rest.
func callbackLoop(admins *admins, results <-chan *pb.RunResult, b *backlog, flush <-chan struct{}, flushTimeout time.Duration) {
	retry := newBackoff()
	var failingSince time.Time
	for {
		if len(b.pending) == 0 {
			select {
			case result := <-results:
				b.push(result)
			case <-flush:
				flushBacklog(admins, results, b, flushTimeout)
				return
			}
			window := time.NewTimer(batchWindow)
		collect:
			for len(b.pending) < maxBatch {
				select {
				case result := <-results:
					b.push(result)
				case <-window.C:
					break collect
				}
			}
			window.Stop()
		}
		batchLen := b.batchLen()
		ctx, cancel := context.WithCancel(context.Background())
		type answer struct {
			accepted []int64
			tooLarge bool
		}
		sent := make(chan answer, 1)
		go func(batch []*pb.RunResult) {
			accepted, tooLarge := admins.callback(ctx, batch, b.logf)
			sent <- answer{accepted, tooLarge}
		}(b.pending[:batchLen:batchLen])
		var got answer
		select {
		case got = <-sent:
		case <-flush:
			// A send in flight when shutdown starts is abandoned (the admin is idempotent per
			// log id), so the flush keeps to its bound.
			cancel()
			flushBacklog(admins, results, b, flushTimeout)
			return
		}
		cancel()
		if got.accepted != nil && b.settle(batchLen, got.accepted) {
			retry.reset()
			failingSince = time.Time{}
			continue
		}
		if got.tooLarge && b.shrink(batchLen) {
			continue
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) >= spoolAfter {
			b.spool()
		}
		wait := time.NewTimer(retry.next())
	sleep:
		for {
			select {
			case <-wait.C:
				break sleep
			case result := <-results:
				b.push(result)
			case <-flush:
				wait.Stop()
				flushBacklog(admins, results, b, flushTimeout)
				return
			}
		}
	}
}

// flushBacklog is the final delivery at shutdown: it tries until the timeout, then spools.
func flushBacklog(admins *admins, results <-chan *pb.RunResult, b *backlog, timeout time.Duration) {
drain:
	for {
		select {
		case result := <-results:
			b.push(result)
		default:
			break drain
		}
	}
	deadline := time.Now().Add(timeout)
	retry := newBackoff()
	for len(b.pending) > 0 && time.Now().Before(deadline) {
		batchLen := b.batchLen()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		accepted, tooLarge := admins.callback(ctx, b.pending[:batchLen:batchLen], b.logf)
		cancel()
		if accepted != nil && b.settle(batchLen, accepted) {
			continue
		}
		if tooLarge && b.shrink(batchLen) {
			continue
		}
		sleep := min(retry.next(), time.Until(deadline))
		if sleep > 0 {
			time.Sleep(sleep)
		}
	}
	if len(b.pending) > 0 {
		b.spool()
	}
}
