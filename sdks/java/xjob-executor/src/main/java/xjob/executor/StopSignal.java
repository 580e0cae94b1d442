package xjob.executor;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import xjob.v1.Common.RunStatus;

/** Stops one run: the first reason wins, then the handler's thread is interrupted. */
final class StopSignal {
  /** The outcome forced on a run that is stopped rather than finished. */
  record Reason(RunStatus status, int code, String message) {
    static Reason killed(String message) {
      return new Reason(RunStatus.RUN_STATUS_KILLED, Runner.CODE_FAILED, message);
    }
  }

  private final CountDownLatch stopped = new CountDownLatch(1);
  /** Completes on the first stop; the runner waits on it together with the handler. */
  final CompletableFuture<Void> stoppedFuture = new CompletableFuture<>();
  private Reason reason;
  private Thread handlerThread;

  synchronized void stop(Reason why) {
    if (reason == null) {
      reason = why;
    }
    stopped.countDown();
    stoppedFuture.complete(null);
    if (handlerThread != null) {
      handlerThread.interrupt();
    }
  }

  synchronized Reason reason() {
    return reason;
  }

  /** Binds the handler's thread (null when it returned), so a stop interrupts it. */
  synchronized void bind(Thread thread) {
    handlerThread = thread;
    if (thread != null && reason != null) {
      thread.interrupt();
    }
  }

  boolean isStopped() {
    return stopped.getCount() == 0;
  }

  /** Waits up to the duration; true when stopped meanwhile. */
  boolean await(Duration duration) throws InterruptedException {
    return stopped.await(duration.toNanos(), TimeUnit.NANOSECONDS);
  }
}
