package xjob.executor;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import java.nio.file.Path;
import java.time.Duration;
import xjob.v1.Common.TriggerType;
import xjob.v1.Executor.RunRequest;

/** What a handler knows about its run, its log writer and its cancellation. */
public final class JobContext {
  private final RunRequest request;
  private final RunLog log;
  private final StopSignal stop;
  private final Duration stopGrace;
  /** The run's handler span when the executor traces, else null. */
  private final Span traceSpan;

  JobContext(RunRequest request, RunLog log, StopSignal stop, Duration stopGrace) {
    this(request, log, stop, stopGrace, null);
  }

  JobContext(RunRequest request, RunLog log, StopSignal stop, Duration stopGrace, Span traceSpan) {
    this.request = request;
    this.log = log;
    this.stop = stop;
    this.stopGrace = stopGrace;
    this.traceSpan = traceSpan;
  }

  /**
   * The OpenTelemetry context of the run's handler span when the executor traces, else null:
   * start your own spans with it as parent ({@code spanBuilder(name).setParent(ctx)}) to nest
   * them under the run.
   */
  public Context traceContext() {
    return traceSpan == null ? null : Context.root().with(traceSpan);
  }

  /**
   * The W3C traceparent to pass to services the handler calls so their spans join the run's
   * trace: the run's handler span when the executor traces, else the admin's dispatch span the
   * run came with; empty when the run has no trace.
   */
  public String traceparent() {
    String own = RunTraces.traceparent(traceSpan);
    return own.isEmpty() ? request.getTraceparent() : own;
  }

  /**
   * How long a stopped handler has to return before its run is reported without it (the
   * executor's kill grace): time to clean up, e.g. stop child processes.
   */
  public Duration stopGrace() {
    return stopGrace;
  }

  RunRequest request() {
    return request;
  }

  public long jobId() {
    return request.getJobId();
  }

  /** The run's identity, usable as an idempotency key. */
  public long logId() {
    return request.getLogId();
  }

  public String handlerName() {
    return request.getHandler();
  }

  /** The job's parameters (empty when none). */
  public String params() {
    return request.getParams();
  }

  /** This run's shard (0 unless SHARDING_BROADCAST). */
  public int shardIndex() {
    return request.getShardIndex();
  }

  /** The number of shards (1 unless SHARDING_BROADCAST). */
  public int shardTotal() {
    return request.getShardTotal();
  }

  /** 0 for the first attempt, +1 for each retry. */
  public int attempt() {
    return request.getAttempt();
  }

  /** The instant the schedule planned this fire for (epoch ms). */
  public long scheduledAtMs() {
    return request.getScheduledAtMs();
  }

  public TriggerType triggerType() {
    return request.getTriggerType();
  }

  /**
   * Appends one timestamped line to the run's log file; it is readable through ReadLog as soon
   * as this returns. Write failures go to the executor's own log, never to the handler.
   */
  public void log(String line) {
    log.append(line);
  }

  public Path logPath() {
    return log.path();
  }

  /** Whether the run was killed, timed out, replaced, or the executor is shutting down. */
  public boolean isCancelled() {
    return stop.isStopped();
  }

  /**
   * Sleeps, but returns early with an {@link InterruptedException} when the run is cancelled:
   * the easy way for a handler to wait and still stop at once.
   */
  public void sleep(Duration duration) throws InterruptedException {
    if (!stop.await(duration)) {
      return;
    }
    throw new InterruptedException("run cancelled");
  }
}
