package xjob.executor;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.logging.Level;
import java.util.logging.Logger;
import xjob.v1.RegistryGrpc;
import xjob.v1.RegistryOuterClass.CallbackRequest;
import xjob.v1.RegistryOuterClass.CallbackResponse;
import xjob.v1.RegistryOuterClass.RunResult;

/**
 * Callbacks: run results go through a queue to one thread that batches them (up to 100, or
 * whatever arrives within 5 ms), calls Registry.Callback on the admins in order, drops the log ids
 * the admin accepted and retries the rest with backoff, for as long as it takes: a result is never
 * dropped because an admin is down.
 *
 * <p>When no admin has taken a batch for 10 s, the unsent results are also written to
 * {logDir}/callbacklogs/ as a protobuf-encoded CallbackRequest (one .pb file per spill), so a
 * crash does not lose them; a file is deleted once every result in it is accepted, and files found
 * at start are sent again. A graceful shutdown flushes within a bound and spools the rest.
 *
 * <p>An admin refuses a request larger than its max_request_bytes with OUT_OF_RANGE: the batch is
 * then sent again as halves, down to one result, and a single result still refused has its message
 * halved, so no result is retried unchanged for ever.
 *
 * <p>Until an admin accepts its result, a finished run stays listed in heartbeats ({@link
 * #unreportedLogIds}): otherwise the admin would take it for a lost run.
 */
final class CallbackSender {
  private static final Logger LOG = Logger.getLogger(CallbackSender.class.getName());
  private static final int MAX_BATCH = 100;
  private static final long BATCH_WINDOW_MS = 5;
  private static final long CALL_TIMEOUT_MS = 10_000;
  private static final long SPOOL_AFTER_MS = 10_000;
  // Below this many characters a cut message would be mostly the cut mark: it is emptied instead.
  private static final int MIN_CUT_CHARS = 32;

  private record SpoolFile(Path path, Set<Long> remaining) {}

  /** An admin's answer to a batch: the accepted log ids (null when none took it). */
  private record Answer(List<Long> accepted, boolean tooLarge) {}

  private final Admins admins;
  private final Path spoolDir;
  private final long flushTimeoutMs;
  private final LinkedBlockingQueue<RunResult> incoming = new LinkedBlockingQueue<>();
  private final Set<Long> unreported = ConcurrentHashMap.newKeySet();
  private final Thread thread;
  private volatile boolean flushing;

  // Owned by the sender thread.
  private final List<RunResult> pending = new ArrayList<>();
  private final Set<Long> spooled = new HashSet<>();
  private final List<SpoolFile> spoolFiles = new ArrayList<>();
  private int spoolSequence;
  // Results a batch; lowered for good when an admin refuses one as too large.
  private int batchLimit = MAX_BATCH;

  /** Told the log ids an admin accepted (their callback spans end). */
  private volatile Consumer<Collection<Long>> onAccepted = accepted -> {};

  void onAccepted(Consumer<Collection<Long>> listener) {
    this.onAccepted = listener;
  }

  CallbackSender(Admins admins, Path spoolDir, long flushTimeoutMs) {
    this.admins = admins;
    this.spoolDir = spoolDir;
    this.flushTimeoutMs = flushTimeoutMs;
    this.thread = new Thread(this::loop, "xjob-callbacks");
    this.thread.setDaemon(true);
  }

  void start() {
    loadSpool();
    thread.start();
  }

  /** Queues a result; its run counts as unreported from now on. */
  void send(RunResult result) {
    unreported.add(result.getLogId());
    incoming.add(result);
  }

  Set<Long> unreportedLogIds() {
    return Set.copyOf(unreported);
  }

  /** Graceful stop: flushes for at most the flush timeout, then spools the rest. */
  void shutdown() throws InterruptedException {
    flushing = true;
    thread.interrupt();
    thread.join(flushTimeoutMs + 2_000);
  }

  private void push(RunResult result) {
    unreported.add(result.getLogId());
    pending.add(result);
  }

  private void loop() {
    Backoff backoff = new Backoff();
    long failingSince = 0;
    try {
      while (!flushing) {
        if (pending.isEmpty()) {
          push(incoming.take());
          long windowEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(BATCH_WINDOW_MS);
          while (pending.size() < MAX_BATCH) {
            RunResult more = incoming.poll(windowEnd - System.nanoTime(), TimeUnit.NANOSECONDS);
            if (more == null) {
              break;
            }
            push(more);
          }
        }
        int batchLen = Math.min(pending.size(), batchLimit);
        Answer answer = sendBatch(pending.subList(0, batchLen), CALL_TIMEOUT_MS);
        if (answer.accepted() != null && settle(batchLen, answer.accepted())) {
          backoff.reset();
          failingSince = 0;
          continue;
        }
        if (answer.tooLarge() && shrink(batchLen)) {
          continue;
        }
        if (failingSince == 0) {
          failingSince = System.currentTimeMillis();
        }
        if (System.currentTimeMillis() - failingSince >= SPOOL_AFTER_MS) {
          spool();
        }
        long retryAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(backoff.nextDelayMs());
        long left;
        while ((left = retryAt - System.nanoTime()) > 0) {
          RunResult more = incoming.poll(left, TimeUnit.NANOSECONDS);
          if (more != null) {
            push(more);
          }
        }
      }
    } catch (InterruptedException e) {
      // Shutdown: flush below.
    }
    flush();
  }

  private void flush() {
    Thread.interrupted();
    List<RunResult> rest = new ArrayList<>();
    incoming.drainTo(rest);
    rest.forEach(this::push);
    long deadline = System.currentTimeMillis() + flushTimeoutMs;
    Backoff backoff = new Backoff();
    while (!pending.isEmpty() && System.currentTimeMillis() < deadline) {
      int batchLen = Math.min(pending.size(), batchLimit);
      long left = deadline - System.currentTimeMillis();
      Answer answer = sendBatch(pending.subList(0, batchLen), Math.max(left, 1));
      if (answer.accepted() != null && settle(batchLen, answer.accepted())) {
        continue;
      }
      if (answer.tooLarge() && shrink(batchLen)) {
        continue;
      }
      long sleep = Math.min(backoff.nextDelayMs(), deadline - System.currentTimeMillis());
      if (sleep > 0) {
        try {
          Thread.sleep(sleep);
        } catch (InterruptedException e) {
          break;
        }
      }
    }
    if (!pending.isEmpty()) {
      spool();
    }
  }

  /** Sends one batch to the first admin that answers. */
  private Answer sendBatch(List<RunResult> batch, long timeoutMs) {
    CallbackRequest request = CallbackRequest.newBuilder().addAllResults(batch).build();
    boolean tooLarge = false;
    for (String address : admins.addresses()) {
      try {
        CallbackResponse response =
            RegistryGrpc.newBlockingStub(admins.channel(address))
                .withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS)
                .callback(request);
        return new Answer(response.getAcceptedLogIdsList(), false);
      } catch (StatusRuntimeException e) {
        // gRPC servers answer OUT_OF_RANGE to a request over their decoding limit.
        tooLarge |= e.getStatus().getCode() == Status.Code.OUT_OF_RANGE;
        LOG.fine("callback to " + address + " failed: " + e.getStatus());
      }
    }
    return new Answer(null, tooLarge);
  }

  /**
   * After a refusal of the first batchLen results as too large; false when nothing is left to make
   * smaller (an empty message refused: only a retry can help then).
   */
  private boolean shrink(int batchLen) {
    if (batchLen > 1) {
      batchLimit = Math.max(1, batchLen / 2);
      LOG.warning(
          "an admin refused a callback batch as too large; sending at most "
              + batchLimit
              + " results a batch");
      return true;
    }
    RunResult result = pending.get(0);
    String message = result.getMessage();
    if (message.isEmpty()) {
      return false;
    }
    int keep = message.codePointCount(0, message.length()) / 2;
    String cut = "";
    if (keep >= MIN_CUT_CHARS) {
      cut = message.substring(0, message.offsetByCodePoints(0, keep)) + "...";
    }
    pending.set(0, result.toBuilder().setMessage(cut).build());
    LOG.warning(
        "an admin refused the result of log "
            + result.getLogId()
            + " as too large; its message is cut to "
            + keep
            + " characters");
    return true;
  }

  /**
   * Removes the accepted results of the first batchLen; the rest of the batch moves to the back,
   * so a result an admin keeps refusing cannot block those behind it. True when all were accepted.
   */
  private boolean settle(int batchLen, List<Long> acceptedIds) {
    Set<Long> accepted = new HashSet<>(acceptedIds);
    List<RunResult> batch = new ArrayList<>(pending.subList(0, batchLen));
    pending.subList(0, batchLen).clear();
    boolean all = true;
    for (RunResult result : batch) {
      if (!accepted.contains(result.getLogId())) {
        all = false;
        pending.add(result);
      }
    }
    spooled.removeAll(accepted);
    unreported.removeAll(accepted);
    onAccepted.accept(accepted);
    Iterator<SpoolFile> files = spoolFiles.iterator();
    while (files.hasNext()) {
      SpoolFile file = files.next();
      file.remaining().removeAll(accepted);
      if (file.remaining().isEmpty()) {
        files.remove();
        try {
          Files.deleteIfExists(file.path());
        } catch (IOException e) {
          LOG.log(Level.WARNING, "failed to delete callback spool file " + file.path(), e);
        }
      }
    }
    return all;
  }

  /** Writes every pending result not yet on disk to a new spool file (write, then rename). */
  private void spool() {
    CallbackRequest.Builder request = CallbackRequest.newBuilder();
    Set<Long> ids = new HashSet<>();
    for (RunResult result : pending) {
      if (!spooled.contains(result.getLogId())) {
        request.addResults(result);
        ids.add(result.getLogId());
      }
    }
    if (ids.isEmpty()) {
      return;
    }
    spoolSequence++;
    Path path =
        spoolDir.resolve(
            "xjob-callback-" + System.currentTimeMillis() + "-" + spoolSequence + ".pb");
    Path temporary = spoolDir.resolve(path.getFileName() + ".tmp");
    try {
      Files.createDirectories(spoolDir);
      Files.write(temporary, request.build().toByteArray());
      Files.move(temporary, path, StandardCopyOption.ATOMIC_MOVE);
      spooled.addAll(ids);
      spoolFiles.add(new SpoolFile(path, ids));
      LOG.warning("spooled " + ids.size() + " results no admin accepted to " + path);
    } catch (IOException e) {
      LOG.log(Level.SEVERE, "failed to spool callbacks to " + path, e);
    }
  }

  /** Loads the spool files an earlier process left, to send them again. */
  private void loadSpool() {
    if (!Files.isDirectory(spoolDir)) {
      return;
    }
    try (DirectoryStream<Path> files = Files.newDirectoryStream(spoolDir, "*.pb")) {
      for (Path path : files) {
        try {
          CallbackRequest request = CallbackRequest.parseFrom(Files.readAllBytes(path));
          Set<Long> ids = new HashSet<>();
          for (RunResult result : request.getResultsList()) {
            ids.add(result.getLogId());
            spooled.add(result.getLogId());
            push(result);
          }
          spoolFiles.add(new SpoolFile(path, ids));
          LOG.info("re-sending " + ids.size() + " spooled results from " + path);
        } catch (IOException e) {
          LOG.log(Level.WARNING, "unreadable callback spool file " + path + ", left in place", e);
        }
      }
    } catch (IOException e) {
      LOG.log(Level.WARNING, "cannot list " + spoolDir, e);
    }
  }
}
