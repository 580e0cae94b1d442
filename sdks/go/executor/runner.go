package executor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	pb "xjob.dev/sdk/go/xjobpb"
)

// The runner: one queue per job id, drained by one goroutine per job, one run at a time.
//
//	Run ──submit──▶ jobSlot{queue, running} ──job goroutine──▶ handler ──▶ RunResult ─▶ callbacks
//	refusals: shutting down, duplicate log id, glue disabled, unknown handler, DISCARD_LATER
//	Kill / COVER_EARLY ──▶ queued runs reported KILLED at once + the running one stopped
//
// A running run is stopped by cancelling its context, waiting killGrace for the handler to
// return, then reporting it and moving on. A job's goroutine ends when its queue is empty.

const (
	codeSuccess = 200
	codeFailed  = 500
	codeTimeout = 502
	// maxMessageChars is the longest handle message reported (as the Rust SDK).
	maxMessageChars = 50_000
	// recentRunTTL is how long a finished log id is still refused as a duplicate.
	recentRunTTL = 10 * time.Minute
)

// stopReason is the outcome forced on a run that is stopped rather than finished.
type stopReason struct {
	status  pb.RunStatus
	code    int32
	message string
}

func killed(message string) stopReason {
	return stopReason{status: pb.RunStatus_RUN_STATUS_KILLED, code: codeFailed, message: message}
}

// stopSignal stops one running run: the first reason wins, then its context is cancelled.
type stopSignal struct {
	mu     sync.Mutex
	reason *stopReason
	cancel context.CancelFunc
}

func (s *stopSignal) stop(reason stopReason) {
	s.mu.Lock()
	if s.reason == nil {
		s.reason = &reason
	}
	s.mu.Unlock()
	s.cancel()
}

func (s *stopSignal) get() *stopReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

type queuedRun struct {
	request *pb.RunRequest
	handler Handler
}

type runningRun struct {
	logID int64
	stop  *stopSignal
}

type jobSlot struct {
	queue   []queuedRun
	running *runningRun
}

func (s *jobSlot) busy() bool { return s.running != nil || len(s.queue) > 0 }

type runner struct {
	handlers  map[string]Handler
	logs      logStore
	results   *resultSender
	killGrace time.Duration
	glue      map[pb.GlueType]Handler // enabled script types
	logf      func(string, ...any)
	traces    *runTraces // off unless the executor traces

	mu     sync.Mutex
	jobs   map[int64]*jobSlot
	active map[int64]bool      // log ids queued or running here
	recent map[int64]time.Time // log ids finished recently, refused as duplicates
	closed bool
	wg     sync.WaitGroup // job goroutines
}

func newRunner(handlers map[string]Handler, logs logStore, results *resultSender, killGrace time.Duration, logf func(string, ...any)) *runner {
	return &runner{
		handlers: handlers, logs: logs, results: results, killGrace: killGrace, logf: logf,
		traces: results.traces, jobs: map[int64]*jobSlot{}, active: map[int64]bool{}, recent: map[int64]time.Time{},
	}
}

// handlerOf is the run's handler: its BEAN handler by name, or the runner of its script type;
// else why it is refused.
func (r *runner) handlerOf(request *pb.RunRequest) (Handler, string) {
	switch glue := request.GetGlueType(); glue {
	case pb.GlueType_GLUE_TYPE_BEAN, pb.GlueType_GLUE_TYPE_UNSPECIFIED:
		if handler, ok := r.handlers[request.GetHandler()]; ok {
			return handler, ""
		}
		return nil, fmt.Sprintf("job handler [%s] not found", request.GetHandler())
	case pb.GlueType_GLUE_TYPE_GROOVY:
		return nil, groovyUnsupported
	default:
		if _, ok := glueLanguages[glue]; !ok {
			return nil, fmt.Sprintf("glue type %s is not supported", glue)
		}
		if handler, ok := r.glue[glue]; ok {
			return handler, ""
		}
		return nil, fmt.Sprintf("glue type %s is not enabled on this executor", glue)
	}
}

// submit enqueues a run, applying its job's block strategy, or returns why it is refused (the
// RunResponse message). The run's `run` span opens here, and ends at once for a refusal.
func (r *runner) submit(request *pb.RunRequest) (refusal string) {
	span := r.traces.runSpan(request)
	if refusal = r.enqueue(request, span); refusal != "" {
		r.traces.refused(span, refusal)
	}
	return refusal
}

func (r *runner) enqueue(request *pb.RunRequest, span trace.Span) (refusal string) {
	jobID, logID := request.GetJobId(), request.GetLogId()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return "executor is shutting down"
	}
	if r.active[logID] || r.isRecent(logID) {
		r.mu.Unlock()
		return fmt.Sprintf("duplicate run: log_id %d already queued or running", logID)
	}
	handler, refusal := r.handlerOf(request)
	if refusal != "" {
		r.mu.Unlock()
		return refusal
	}
	slot := r.jobs[jobID]
	busy := slot != nil && slot.busy()
	var dropped []*pb.RunRequest
	cover := killed(fmt.Sprintf("block strategy COVER_EARLY: replaced by log %d", logID))
	switch request.GetBlockStrategy() {
	case pb.BlockStrategy_BLOCK_STRATEGY_DISCARD_LATER:
		if busy {
			r.mu.Unlock()
			return fmt.Sprintf("block strategy DISCARD_LATER: job %d is running or queued", jobID)
		}
	case pb.BlockStrategy_BLOCK_STRATEGY_COVER_EARLY:
		if busy {
			dropped, _ = r.stopJobLocked(jobID, cover)
		}
	}
	r.active[logID] = true
	r.traces.accepted(logID, span) // before the job's goroutine may look for it
	if slot == nil {
		slot = &jobSlot{}
		r.jobs[jobID] = slot
	}
	slot.queue = append(slot.queue, queuedRun{request: request, handler: handler})
	if slot.running == nil && len(slot.queue) == 1 {
		r.startJobLoopLocked(jobID, slot)
	}
	r.mu.Unlock()
	r.reportDropped(dropped, cover)
	return ""
}

// startJobLoopLocked marks the slot's first queued run as running (so a heartbeat or IdleBeat
// sees it at once) and starts the job's goroutine.
func (r *runner) startJobLoopLocked(jobID int64, slot *jobSlot) {
	next := r.popLocked(slot)
	r.wg.Add(1)
	go r.jobLoop(jobID, next)
}

// popLocked moves the next queued run to running and returns it with its stop signal.
func (r *runner) popLocked(slot *jobSlot) *startedRun {
	run := slot.queue[0]
	slot.queue = slot.queue[1:]
	ctx, cancel := context.WithCancel(context.Background())
	stop := &stopSignal{cancel: cancel}
	slot.running = &runningRun{logID: run.request.GetLogId(), stop: stop}
	return &startedRun{queuedRun: run, ctx: ctx, stop: stop}
}

type startedRun struct {
	queuedRun
	ctx  context.Context
	stop *stopSignal
}

// jobLoop runs a job's runs one by one until its queue is empty.
func (r *runner) jobLoop(jobID int64, next *startedRun) {
	defer r.wg.Done()
	for next != nil {
		result := r.execute(next)
		next.stop.cancel()
		// Unreported before the run leaves the active set, so every heartbeat lists it (as
		// running, then as unreported) until an admin accepts its result.
		r.results.unreported.add(result.GetLogId())
		r.mu.Lock()
		r.retireLocked(next.request.GetLogId())
		slot := r.jobs[jobID]
		next = nil
		if slot != nil {
			slot.running = nil
			if len(slot.queue) > 0 {
				next = r.popLocked(slot)
			} else {
				delete(r.jobs, jobID)
			}
		}
		r.mu.Unlock()
		r.results.send(result)
	}
}

// execute runs one run to its result: start line, handler, timeout or stop, end line.
func (r *runner) execute(run *startedRun) *pb.RunResult {
	request := run.request
	startedAt := time.Now().UnixMilli()
	log := r.logs.open(request.GetLogId(), request.GetLogDateMs(), r.logf)
	defer log.close()
	log.append(fmt.Sprintf("run start: job_id=%d log_id=%d handler=%s params=%s shard=%d/%d attempt=%d trigger=%s timeout_ms=%d",
		request.GetJobId(), request.GetLogId(), request.GetHandler(), request.GetParams(), request.GetShardIndex(),
		request.GetShardTotal(), request.GetAttempt(), request.GetTriggerType(), request.GetTimeoutMs()))

	handlerCtx, handlerSpan := r.traces.handlerContext(run.ctx, request.GetLogId())
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if panicked := recover(); panicked != nil {
				done <- outcome{err: fmt.Errorf("handler panicked: %v", panicked)}
			}
		}()
		message, err := run.handler(handlerCtx, &Run{request: request, log: log, stopGrace: r.killGrace, traceSpan: handlerSpan})
		done <- outcome{message: message, err: err}
	}()
	var timeout <-chan time.Time
	if request.GetTimeoutMs() > 0 {
		timer := time.NewTimer(time.Duration(request.GetTimeoutMs()) * time.Millisecond)
		defer timer.Stop()
		timeout = timer.C
	}

	var status pb.RunStatus
	var code int32
	var message string
	select {
	case finished := <-done:
		if reason := run.stop.get(); reason != nil {
			// The handler returned because it was stopped: the stop is the outcome.
			status, code, message = reason.status, reason.code, reason.message
		} else if finished.err != nil {
			status, code, message = pb.RunStatus_RUN_STATUS_FAILED, codeFailed, finished.err.Error()
		} else {
			status, code, message = pb.RunStatus_RUN_STATUS_SUCCESS, codeSuccess, finished.message
		}
	case <-run.ctx.Done():
		reason := r.endHandler(run, log, done)
		status, code, message = reason.status, reason.code, reason.message
	case <-timeout:
		run.stop.stop(stopReason{
			status: pb.RunStatus_RUN_STATUS_TIMEOUT, code: codeTimeout,
			message: fmt.Sprintf("job execute timeout after %d ms", request.GetTimeoutMs()),
		})
		reason := r.endHandler(run, log, done)
		status, code, message = reason.status, reason.code, reason.message
	}
	result := &pb.RunResult{
		LogId: request.GetLogId(), LogDateMs: request.GetLogDateMs(), Status: status, Code: code,
		Message: truncate(message), StartedAtMs: startedAt, FinishedAtMs: time.Now().UnixMilli(),
		// Untraced, the admin's dispatch context goes back: its `complete` span closes the
		// run's trace all the same. Traced, the `callback` span's context replaces it (send).
		Traceparent: request.GetTraceparent(),
	}
	log.append(fmt.Sprintf("run end: status=%s code=%d message=%s", status, code, result.Message))
	return result
}

// outcome is what a handler returned.
type outcome struct {
	message string
	err     error
}

// endHandler gives a stopped handler killGrace to return. Go cannot abort a goroutine, so one
// that ignores its context is left behind (and said so in the run log).
func (r *runner) endHandler(run *startedRun, log *runLog, done <-chan outcome) stopReason {
	grace := time.NewTimer(r.killGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		r.logf("handler of log %d ignored cancellation for %v; abandoning it", run.request.GetLogId(), r.killGrace)
		log.append(fmt.Sprintf("handler did not return within %v of being stopped; abandoned", r.killGrace))
	}
	if reason := run.stop.get(); reason != nil {
		return *reason
	}
	return killed("killed")
}

// stopJobLocked drops the job's queued runs and stops its running one; it returns the dropped
// requests and how many runs were stopped in all.
func (r *runner) stopJobLocked(jobID int64, reason stopReason) ([]*pb.RunRequest, int) {
	slot := r.jobs[jobID]
	if slot == nil {
		return nil, 0
	}
	var dropped []*pb.RunRequest
	for _, queued := range slot.queue {
		dropped = append(dropped, queued.request)
		r.retireLocked(queued.request.GetLogId())
	}
	slot.queue = nil
	stopped := len(dropped)
	if slot.running != nil {
		slot.running.stop.stop(reason)
		stopped++
	}
	return dropped, stopped
}

// reportDropped reports runs dropped from a queue: a line in their log, then a result.
func (r *runner) reportDropped(dropped []*pb.RunRequest, reason stopReason) {
	for _, request := range dropped {
		log := r.logs.open(request.GetLogId(), request.GetLogDateMs(), r.logf)
		log.append("run not started: " + reason.message)
		log.close()
		now := time.Now().UnixMilli()
		r.results.send(&pb.RunResult{
			LogId: request.GetLogId(), LogDateMs: request.GetLogDateMs(), Status: reason.status,
			Code: reason.code, Message: reason.message, FinishedAtMs: now,
		})
	}
}

func (r *runner) retireLocked(logID int64) {
	delete(r.active, logID)
	r.recent[logID] = time.Now()
}

// isRecent says whether the log id finished within recentRunTTL, forgetting older ones.
func (r *runner) isRecent(logID int64) bool {
	now := time.Now()
	if len(r.recent) > 10_000 {
		for id, finished := range r.recent {
			if now.Sub(finished) >= recentRunTTL {
				delete(r.recent, id)
			}
		}
	}
	finished, ok := r.recent[logID]
	return ok && now.Sub(finished) < recentRunTTL
}

// kill stops every running and queued run of a job (each reported KILLED); it says whether
// anything was stopped.
func (r *runner) kill(jobID int64) bool {
	reason := killed("killed by admin")
	r.mu.Lock()
	dropped, stopped := r.stopJobLocked(jobID, reason)
	r.mu.Unlock()
	r.reportDropped(dropped, reason)
	return stopped > 0
}

// jobBusy says whether the job has a running or queued run here.
func (r *runner) jobBusy(jobID int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	slot := r.jobs[jobID]
	return slot != nil && slot.busy()
}

// logActive says whether the run is queued or running here.
func (r *runner) logActive(logID int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[logID]
}

// runningLogIDs returns the log ids running or queued here, sorted, and how many are queued.
func (r *runner) runningLogIDs() ([]int64, uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, 0, len(r.active))
	queued := 0
	for id := range r.active {
		ids = append(ids, id)
	}
	for _, slot := range r.jobs {
		queued += len(slot.queue)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, uint32(queued)
}

// shutdown refuses new runs, reports queued runs KILLED, waits up to grace for the running
// handlers, then stops the rest (KILLED) and waits for them up to the kill grace.
func (r *runner) shutdown(grace time.Duration) {
	reason := killed("executor is shutting down")
	r.mu.Lock()
	r.closed = true
	var dropped []*pb.RunRequest
	for _, slot := range r.jobs {
		for _, queued := range slot.queue {
			dropped = append(dropped, queued.request)
			r.retireLocked(queued.request.GetLogId())
		}
		slot.queue = nil
	}
	r.mu.Unlock()
	r.reportDropped(dropped, reason)
	if waitTimeout(&r.wg, grace) {
		return
	}
	late := killed("executor shut down before the run finished")
	r.mu.Lock()
	for _, slot := range r.jobs {
		if slot.running != nil {
			slot.running.stop.stop(late)
		}
	}
	r.mu.Unlock()
	waitTimeout(&r.wg, r.killGrace+time.Second)
}

// waitTimeout waits for the group up to d; it says whether the group finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// truncate cuts a message to maxMessageChars characters, marking the cut with "...".
func truncate(message string) string {
	count := 0
	for index := range message {
		if count == maxMessageChars {
			return message[:index] + "..."
		}
		count++
	}
	return message
}
