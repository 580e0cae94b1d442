package xjob.executor;

import io.opentelemetry.api.trace.Span;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.logging.Logger;
import xjob.v1.Common.BlockStrategy;
import xjob.v1.Common.GlueType;
import xjob.v1.Common.RunStatus;
import xjob.v1.Executor.RunRequest;
import xjob.v1.RegistryOuterClass.RunResult;

/**
 * The runner: one queue per job id, drained by one thread per job, one run at a time.
 *
 * <pre>
 * Run ──submit──▶ JobSlot{queue, running} ──job thread──▶ handler thread ──▶ RunResult ─▶ callbacks
 * refusals: shutting down, duplicate log id, glue disabled, unknown handler, DISCARD_LATER
 * Kill / COVER_EARLY ──▶ queued runs reported KILLED at once + the running one stopped
 * </pre>
 *
 * <p>A running run is stopped by interrupting its handler thread, waiting the kill grace for it to
 * return, then reporting it and moving on. A job's thread ends when its queue is empty.
 */
final class Runner {
  static final int CODE_SUCCESS = 200;
  static final int CODE_FAILED = 500;
  static final int CODE_TIMEOUT = 502;
  /** Longest handle message reported, as the Rust SDK. */
  static final int MAX_MESSAGE_CHARS = 50_000;
  /** How long a finished log id is still refused as a duplicate. */
  private static final long RECENT_RUN_TTL_MS = 10 * 60 * 1000;

  private static final Logger LOG = Logger.getLogger(Runner.class.getName());

  private record QueuedRun(RunRequest request, JobHandler handler) {}

  private record RunningRun(long logId, StopSignal stop) {}

  private static final class JobSlot {
    final ArrayDeque<QueuedRun> queue = new ArrayDeque<>();
    RunningRun running;

    boolean busy() {
      return running != null || !queue.isEmpty();
    }
  }

  private final Map<String, JobHandler> handlers;
  private final LogStore logs;
  private final Consumer<RunResult> results;
  private final Duration killGrace;
  /** The enabled script glue types' handlers. */
  private final Map<GlueType, JobHandler> glue;
  /** The runs' spans; off unless the executor traces. */
  private final RunTraces traces;
  private final ExecutorService threads = Executors.newCachedThreadPool(daemonThreads());

  private final Map<Long, JobSlot> jobs = new HashMap<>();
  /** Log ids queued or running here. */
  private final Set<Long> active = new HashSet<>();
  /** Log ids finished recently (insertion order = finish order), refused as duplicates. */
  private final LinkedHashMap<Long, Long> recent = new LinkedHashMap<>();
  private final AtomicInteger jobThreads = new AtomicInteger();
  private boolean closed;

  Runner(
      Map<String, JobHandler> handlers,
      LogStore logs,
      Consumer<RunResult> results,
      Duration killGrace) {
    this(handlers, logs, results, killGrace, Map.of());
  }

  Runner(
      Map<String, JobHandler> handlers,
      LogStore logs,
      Consumer<RunResult> results,
      Duration killGrace,
      Map<GlueType, JobHandler> glue) {
    this(handlers, logs, results, killGrace, glue, RunTraces.OFF);
  }

  Runner(
      Map<String, JobHandler> handlers,
      LogStore logs,
      Consumer<RunResult> results,
      Duration killGrace,
      Map<GlueType, JobHandler> glue,
      RunTraces traces) {
    this.traces = traces;
    this.handlers = Map.copyOf(handlers);
    this.logs = logs;
    this.results = results;
    this.killGrace = killGrace;
    this.glue = Map.copyOf(glue);
  }

  /**
   * Enqueues a run, applying its job's block strategy; returns null, or why it is refused. The
   * run's run span opens here, and ends at once for a refusal.
   */
  String submit(RunRequest request) {
    Span span = traces.runSpan(request);
    String refusal = enqueue(request, span);
    if (refusal != null) {
      traces.refused(span, refusal);
    }
    return refusal;
  }

  private String enqueue(RunRequest request, Span span) {
    long jobId = request.getJobId();
    long logId = request.getLogId();
    List<RunRequest> dropped;
    StopSignal.Reason cover =
        StopSignal.Reason.killed("block strategy COVER_EARLY: replaced by log " + logId);
    synchronized (this) {
      if (closed) {
        return "executor is shutting down";
      }
      if (active.contains(logId) || isRecent(logId)) {
        return "duplicate run: log_id " + logId + " already queued or running";
      }
      JobHandler handler;
      switch (request.getGlueType()) {
        case GLUE_TYPE_BEAN, GLUE_TYPE_UNSPECIFIED -> {
          handler = handlers.get(request.getHandler());
          if (handler == null) {
            return "job handler [" + request.getHandler() + "] not found";
          }
        }
        case GLUE_TYPE_GROOVY -> {
          return Glue.GROOVY_UNSUPPORTED;
        }
        default -> {
          if (!Glue.LANGUAGES.containsKey(request.getGlueType())) {
            return "glue type " + request.getGlueType() + " is not supported";
          }
          handler = glue.get(request.getGlueType());
          if (handler == null) {
            return "glue type " + request.getGlueType() + " is not enabled on this executor";
          }
        }
      }
      JobSlot slot = jobs.get(jobId);
      boolean busy = slot != null && slot.busy();
      dropped = List.of();
      if (busy && request.getBlockStrategy() == BlockStrategy.BLOCK_STRATEGY_DISCARD_LATER) {
        return "block strategy DISCARD_LATER: job " + jobId + " is running or queued";
      }
      if (busy && request.getBlockStrategy() == BlockStrategy.BLOCK_STRATEGY_COVER_EARLY) {
        dropped = stopJobLocked(jobId, cover);
      }
      active.add(logId);
      traces.accepted(logId, span); // before the job's thread may look for it
      if (slot == null) {
        slot = new JobSlot();
        jobs.put(jobId, slot);
      }
      slot.queue.add(new QueuedRun(request, handler));
      if (slot.running == null && slot.queue.size() == 1) {
        // The run counts as running at once, so a heartbeat or IdleBeat sees it.
        Started first = popLocked(slot);
        jobThreads.incrementAndGet();
        threads.execute(() -> jobLoop(jobId, first));
      }
    }
    reportDropped(dropped, cover);
    return null;
  }

  private record Started(QueuedRun run, StopSignal stop) {}

  private Started popLocked(JobSlot slot) {
    QueuedRun run = slot.queue.poll();
    StopSignal stop = new StopSignal();
    slot.running = new RunningRun(run.request().getLogId(), stop);
    return new Started(run, stop);
  }

  private void jobLoop(long jobId, Started first) {
    Started next = first;
    try {
      while (next != null) {
        RunResult result = execute(next);
        synchronized (this) {
          // Handed over before the run leaves the active set, so every heartbeat lists it
          // (as running, then as unreported) until an admin accepts its result.
          results.accept(result);
          retireLocked(next.run().request().getLogId());
          JobSlot slot = jobs.get(jobId);
          next = null;
          if (slot != null) {
            slot.running = null;
            if (!slot.queue.isEmpty()) {
              next = popLocked(slot);
            } else {
              jobs.remove(jobId);
            }
          }
        }
      }
    } finally {
      synchronized (this) {
        jobThreads.decrementAndGet();
        notifyAll();
      }
    }
  }

  /** Runs one run to its result: start line, handler thread, timeout or stop, end line. */
  private RunResult execute(Started started) {
    RunRequest request = started.run().request();
    StopSignal stop = started.stop();
    long startedAt = System.currentTimeMillis();
    try (RunLog log = logs.open(request.getLogId(), request.getLogDateMs())) {
      log.append(
          String.format(
              "run start: job_id=%d log_id=%d handler=%s params=%s shard=%d/%d attempt=%d"
                  + " trigger=%s timeout_ms=%d",
              request.getJobId(),
              request.getLogId(),
              request.getHandler(),
              request.getParams(),
              request.getShardIndex(),
              request.getShardTotal(),
              request.getAttempt(),
              request.getTriggerType(),
              request.getTimeoutMs()));
      JobContext context =
          new JobContext(request, log, stop, killGrace, traces.handlerSpan(request.getLogId()));
      CompletableFuture<String> handlerResult = new CompletableFuture<>();
      threads.execute(
          () -> {
            stop.bind(Thread.currentThread());
            try {
              handlerResult.complete(started.run().handler().handle(context));
            } catch (Throwable thrown) {
              handlerResult.completeExceptionally(thrown);
            } finally {
              stop.bind(null);
              Thread.interrupted(); // a late interrupt must not leak into the pooled thread
            }
          });
      CompletableFuture<Object> first = CompletableFuture.anyOf(handlerResult, stop.stoppedFuture);
      StopSignal.Reason forced = null;
      try {
        if (request.getTimeoutMs() > 0) {
          first.get(request.getTimeoutMs(), TimeUnit.MILLISECONDS);
        } else {
          first.join();
        }
      } catch (TimeoutException e) {
        stop.stop(
            new StopSignal.Reason(
                RunStatus.RUN_STATUS_TIMEOUT,
                CODE_TIMEOUT,
                "job execute timeout after " + request.getTimeoutMs() + " ms"));
      } catch (InterruptedException | ExecutionException | RuntimeException e) {
        // anyOf fails when the handler threw: handled below as its outcome.
      }
      if (stop.isStopped()) {
        endHandler(handlerResult, log, request.getLogId());
        forced = stop.reason();
      }
      RunStatus status;
      int code;
      String message;
      if (forced != null) {
        status = forced.status();
        code = forced.code();
        message = forced.message();
      } else {
        try {
          message = handlerResult.get();
          status = RunStatus.RUN_STATUS_SUCCESS;
          code = CODE_SUCCESS;
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          status = RunStatus.RUN_STATUS_FAILED;
          code = CODE_FAILED;
          message = cause.getMessage() != null ? cause.getMessage() : cause.toString();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          status = RunStatus.RUN_STATUS_KILLED;
          code = CODE_FAILED;
          message = "interrupted";
        }
      }
      RunResult result = runResult(request, status, code, message == null ? "" : message, startedAt);
      log.append(
          "run end: status=" + status + " code=" + code + " message=" + result.getMessage());
      return result;
    }
  }

  /** Gives a stopped handler the kill grace to return; one that ignores it is left behind. */
  private void endHandler(CompletableFuture<String> handlerResult, RunLog log, long logId) {
    try {
      handlerResult.get(killGrace.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      LOG.warning("handler of log " + logId + " ignored cancellation; abandoning it");
      log.append("handler did not return within " + killGrace.toMillis() + " ms of being stopped; abandoned");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException e) {
      // It returned by throwing, as a stopped handler does.
    }
  }

  static RunResult runResult(
      RunRequest request, RunStatus status, int code, String message, long startedAt) {
    return RunResult.newBuilder()
        .setLogId(request.getLogId())
        .setLogDateMs(request.getLogDateMs())
        .setStatus(status)
        .setCode(code)
        .setMessage(truncate(message))
        .setStartedAtMs(startedAt)
        .setFinishedAtMs(System.currentTimeMillis())
        // Untraced, the admin's dispatch context goes back: its complete span closes the run's
        // trace all the same. Traced, the callback span's context replaces it
        // (RunTraces.finished).
        .setTraceparent(request.getTraceparent())
        .build();
  }

  static String truncate(String message) {
    if (message.codePointCount(0, message.length()) <= MAX_MESSAGE_CHARS) {
      return message;
    }
    return message.substring(0, message.offsetByCodePoints(0, MAX_MESSAGE_CHARS)) + "...";
  }

  /** Drops the job's queued runs and stops its running one; returns the dropped requests. */
  private List<RunRequest> stopJobLocked(long jobId, StopSignal.Reason reason) {
    JobSlot slot = jobs.get(jobId);
    List<RunRequest> dropped = new ArrayList<>();
    if (slot == null) {
      return dropped;
    }
    for (QueuedRun queued : slot.queue) {
      dropped.add(queued.request());
      retireLocked(queued.request().getLogId());
    }
    slot.queue.clear();
    if (slot.running != null) {
      slot.running.stop().stop(reason);
    }
    return dropped;
  }

  /** Reports runs dropped from a queue: a line in their log, then a result. */
  private void reportDropped(List<RunRequest> dropped, StopSignal.Reason reason) {
    for (RunRequest request : dropped) {
      try (RunLog log = logs.open(request.getLogId(), request.getLogDateMs())) {
        log.append("run not started: " + reason.message());
      }
      results.accept(runResult(request, reason.status(), reason.code(), reason.message(), 0));
    }
  }

  private void retireLocked(long logId) {
    active.remove(logId);
    recent.put(logId, System.currentTimeMillis());
  }

  private boolean isRecent(long logId) {
    long now = System.currentTimeMillis();
    var oldest = recent.entrySet().iterator();
    while (oldest.hasNext()) {
      if (now - oldest.next().getValue() < RECENT_RUN_TTL_MS) {
        break;
      }
      oldest.remove();
    }
    return recent.containsKey(logId);
  }

  /** Stops every running and queued run of a job (each reported KILLED). */
  boolean kill(long jobId) {
    StopSignal.Reason reason = StopSignal.Reason.killed("killed by admin");
    List<RunRequest> dropped;
    boolean stopped;
    synchronized (this) {
      JobSlot slot = jobs.get(jobId);
      stopped = slot != null && slot.busy();
      dropped = stopJobLocked(jobId, reason);
    }
    reportDropped(dropped, reason);
    return stopped;
  }

  synchronized boolean jobBusy(long jobId) {
    JobSlot slot = jobs.get(jobId);
    return slot != null && slot.busy();
  }

  synchronized boolean logActive(long logId) {
    return active.contains(logId);
  }

  /** Log ids running or queued here (a queued run is as alive as a running one). */
  synchronized List<Long> activeLogIds() {
    return new ArrayList<>(active);
  }

  synchronized int queuedCount() {
    return jobs.values().stream().mapToInt(slot -> slot.queue.size()).sum();
  }

  /**
   * Refuses new runs, reports queued runs KILLED, waits up to the grace for the running handlers,
   * then stops the rest (KILLED) and waits for them up to the kill grace.
   */
  void shutdown(Duration grace) throws InterruptedException {
    StopSignal.Reason reason = StopSignal.Reason.killed("executor is shutting down");
    List<RunRequest> dropped = new ArrayList<>();
    synchronized (this) {
      closed = true;
      for (JobSlot slot : jobs.values()) {
        for (QueuedRun queued : slot.queue) {
          dropped.add(queued.request());
          retireLocked(queued.request().getLogId());
        }
        slot.queue.clear();
      }
    }
    reportDropped(dropped, reason);
    if (!awaitJobThreads(grace)) {
      StopSignal.Reason late =
          StopSignal.Reason.killed("executor shut down before the run finished");
      synchronized (this) {
        for (JobSlot slot : jobs.values()) {
          if (slot.running != null) {
            slot.running.stop().stop(late);
          }
        }
      }
      awaitJobThreads(killGrace.plusSeconds(1));
    }
    threads.shutdown();
  }

  private synchronized boolean awaitJobThreads(Duration bound) throws InterruptedException {
    long deadline = System.nanoTime() + bound.toNanos();
    while (jobThreads.get() > 0) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }

  static java.util.concurrent.ThreadFactory daemonThreads() {
    AtomicInteger counter = new AtomicInteger();
    return task -> {
      Thread thread = new Thread(task, "xjob-run-" + counter.incrementAndGet());
      thread.setDaemon(true);
      return thread;
    };
  }
}
