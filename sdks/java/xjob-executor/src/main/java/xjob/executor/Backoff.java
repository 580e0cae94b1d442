package xjob.executor;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Exponential backoff with jitter, shared by reconnects and callback retries: 100 ms doubling up
 * to 5 s, each delay spread ±20 % so many executors do not retry in step.
 */
final class Backoff {
  private static final long INITIAL_MS = 100;
  private static final long MAX_MS = 5_000;
  private long currentMs = INITIAL_MS;

  long nextDelayMs() {
    long base = currentMs;
    currentMs = Math.min(currentMs * 2, MAX_MS);
    double jitter = 0.8 + ThreadLocalRandom.current().nextDouble() * 0.4;
    return Math.min((long) (base * jitter), MAX_MS);
  }

  void reset() {
    currentMs = INITIAL_MS;
  }
}
