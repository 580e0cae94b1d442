package executor

import (
	"context"
	"fmt"
	"log"
	"time"

	"go.opentelemetry.io/otel/trace"

	pb "xjob.dev/sdk/go/xjobpb"
)

// Handler runs one run of a BEAN job. It returns the success message, or an error whose text
// becomes the failure message. ctx is cancelled when the run is killed, times out, is replaced
// (COVER_EARLY) or the executor shuts down; the handler must then return promptly.
type Handler func(ctx context.Context, run *Run) (string, error)

// Run describes one run to its handler and writes its log.
type Run struct {
	request   *pb.RunRequest
	log       *runLog
	stopGrace time.Duration
	traceSpan trace.Span // the run's `handler` span when the executor traces
}

// Traceparent is the W3C traceparent to pass to services the handler calls so their spans join
// the run's trace: the run's `handler` span when the executor traces (the handler's ctx carries
// that span too), else the admin's `dispatch` span the run came with; empty for no trace.
func (r *Run) Traceparent() string {
	if traceparent := spanTraceparent(r.traceSpan); traceparent != "" {
		return traceparent
	}
	return r.request.GetTraceparent()
}

// StopGrace is how long a stopped handler has to return before it is abandoned (the executor's
// KillGrace): time to clean up, e.g. stop child processes.
func (r *Run) StopGrace() time.Duration { return r.stopGrace }

// JobID is the job's id.
func (r *Run) JobID() int64 { return r.request.GetJobId() }

// LogID is the run's log id: its identity, usable as an idempotency key.
func (r *Run) LogID() int64 { return r.request.GetLogId() }

// HandlerName is the BEAN handler name the run was dispatched to.
func (r *Run) HandlerName() string { return r.request.GetHandler() }

// Params are the job's parameters (empty when none).
func (r *Run) Params() string { return r.request.GetParams() }

// ShardIndex is this run's shard (0 unless SHARDING_BROADCAST).
func (r *Run) ShardIndex() int32 { return r.request.GetShardIndex() }

// ShardTotal is the number of shards (1 unless SHARDING_BROADCAST).
func (r *Run) ShardTotal() int32 { return r.request.GetShardTotal() }

// Attempt is 0 for the first attempt and +1 for each retry.
func (r *Run) Attempt() int32 { return r.request.GetAttempt() }

// ScheduledAtMs is the instant the schedule planned this fire for (epoch ms).
func (r *Run) ScheduledAtMs() int64 { return r.request.GetScheduledAtMs() }

// TriggerType says why the run exists (cron, manual, retry, ...).
func (r *Run) TriggerType() pb.TriggerType { return r.request.GetTriggerType() }

// Logf appends one timestamped line to the run's log file; it is readable through ReadLog as
// soon as Logf returns. Write failures go to the executor's own log, never to the handler.
func (r *Run) Logf(format string, args ...any) {
	r.log.append(fmt.Sprintf(format, args...))
}

// LogPath is the run's log file.
func (r *Run) LogPath() string { return r.log.path }

func defaultLogf(format string, args ...any) { log.Printf("xjob executor: "+format, args...) }
