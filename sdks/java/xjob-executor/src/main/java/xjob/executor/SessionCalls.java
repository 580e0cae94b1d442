package xjob.executor;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.logging.Logger;
import java.util.regex.Pattern;
import xjob.v1.RegistryOuterClass.SessionCall;
import xjob.v1.RegistryOuterClass.SessionError;
import xjob.v1.RegistryOuterClass.SessionReply;

/**
 * Session dispatch: the admin's ExecutorService calls arrive on the executor's own
 * Registry.Session stream instead of a port it serves, so an executor behind NAT, in a serverless
 * box or on a laptop needs no inbound route. TLS covers them through the admin's certificate (the
 * executor dialed the admin).
 *
 * <p>Each SessionCall is answered by the same {@link ExecutorServer} code a dialed call runs, on a
 * thread of its own (a slow log read must not hold up heartbeats or runs, and the session's
 * receive loop never waits for a reply), bounded by the call's deadline, with a SessionReply
 * carrying the call's id. Replies go out in any order; the admin matches them by id.
 */
final class SessionCalls {
  static final String SCHEME = "session://";
  private static final Logger LOG = Logger.getLogger(SessionCalls.class.getName());
  /** The longest a call is worked on when the admin sent no deadline. */
  private static final long DEFAULT_DEADLINE_MS = 30_000;
  /** What the admin accepts after session:// (docs/executors.md, session dispatch). */
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9._:-]{1,200}");

  private final ExecutorServer service;
  private final ExecutorService threads = Executors.newCachedThreadPool(Runner.daemonThreads());

  SessionCalls(ExecutorServer service) {
    this.service = service;
  }

  /**
   * The address of an executor that names none: the app, this process and a random part, fixed
   * for the life of the executor so that a reconnect keeps it (the admin kills runs and reads
   * their logs at the address they were sent to).
   */
  static String defaultAddress(String appName) {
    byte[] random = new byte[4];
    new SecureRandom().nextBytes(random);
    return SCHEME + appName + "-" + ProcessHandle.current().pid() + "-"
        + HexFormat.of().formatHex(random);
  }

  /** Whether {@code address} is session://NAME with a name the admin accepts. */
  static boolean validAddress(String address) {
    return address.startsWith(SCHEME) && NAME.matcher(address.substring(SCHEME.length())).matches();
  }

  /**
   * Answers {@code call} on a thread of its own and hands the reply to {@code send}; returns at
   * once. A reply that cannot be sent (the session ended) is the sender's to drop: the admin has
   * already ended that call as it ends a dialed call to a vanished executor.
   */
  void answer(SessionCall call, Consumer<SessionReply> send) {
    long deadlineMs = call.getDeadlineMs() > 0 ? call.getDeadlineMs() : DEFAULT_DEADLINE_MS;
    CompletableFuture<SessionReply> reply;
    try {
      reply = CompletableFuture.supplyAsync(() -> serve(service, call), threads);
    } catch (RejectedExecutionException e) {
      return; // shut down: the session is ending and the admin ends the call with it
    }
    reply
        .orTimeout(deadlineMs, TimeUnit.MILLISECONDS)
        .exceptionally(error -> unfinished(call.getCallId(), unwrap(error)))
        .thenAccept(send);
  }

  void shutdown() {
    threads.shutdownNow();
  }

  /**
   * Runs one call through {@code service}, exactly as if it had been dialed, and returns its
   * reply: the response, or an error where the dialed call would have failed.
   */
  static SessionReply serve(ExecutorServer service, SessionCall call) {
    SessionReply.Builder reply = SessionReply.newBuilder().setCallId(call.getCallId());
    try {
      switch (call.getRequestCase()) {
        case BEAT -> reply.setBeat(invoke(service::beat, call.getBeat()));
        case IDLE_BEAT -> reply.setIdleBeat(invoke(service::idleBeat, call.getIdleBeat()));
        case RUN -> reply.setRun(invoke(service::run, call.getRun()));
        case KILL -> reply.setKill(invoke(service::kill, call.getKill()));
        case READ_LOG -> reply.setReadLog(invoke(service::readLog, call.getReadLog()));
        default -> {
          return failed(
              call.getCallId(),
              Status.Code.INVALID_ARGUMENT,
              "session call " + call.getCallId() + " carries no request this executor knows");
        }
      }
    } catch (CallFailed e) {
      return failed(call.getCallId(), e.status.getCode(), describe(e.status));
    } catch (RuntimeException e) {
      // A dialed call whose handler throws ends UNKNOWN too.
      LOG.warning("session call " + call.getCallId() + " failed: " + e);
      return failed(call.getCallId(), Status.Code.UNKNOWN, e.toString());
    }
    return reply.build();
  }

  /** Calls one ExecutorServer method with an observer that keeps its answer or its error. */
  private static <Q, R> R invoke(BiConsumer<Q, StreamObserver<R>> method, Q request) {
    Answer<R> answer = new Answer<>();
    method.accept(request, answer);
    if (answer.error != null) {
      throw new CallFailed(Status.fromThrowable(answer.error));
    }
    if (answer.value == null) {
      throw new CallFailed(Status.INTERNAL.withDescription("the call ended without an answer"));
    }
    return answer.value;
  }

  /** The reply to a call whose answer did not come: past its deadline, or an Error thrown. */
  private static SessionReply unfinished(long callId, Throwable error) {
    if (error instanceof TimeoutException) {
      return failed(callId, Status.Code.DEADLINE_EXCEEDED, "call deadline passed");
    }
    return failed(callId, Status.Code.UNKNOWN, String.valueOf(error));
  }

  static SessionReply failed(long callId, Status.Code code, String message) {
    return SessionReply.newBuilder()
        .setCallId(callId)
        .setError(SessionError.newBuilder().setCode(code.value()).setMessage(message))
        .build();
  }

  private static String describe(Status status) {
    return status.getDescription() != null ? status.getDescription() : status.getCode().name();
  }

  private static Throwable unwrap(Throwable error) {
    return error instanceof CompletionException && error.getCause() != null
        ? error.getCause()
        : error;
  }

  /** The single answer (or error) of a unary call made in-process. */
  private static final class Answer<R> implements StreamObserver<R> {
    R value;
    Throwable error;

    @Override
    public void onNext(R value) {
      this.value = value;
    }

    @Override
    public void onError(Throwable error) {
      this.error = error;
    }

    @Override
    public void onCompleted() {}
  }

  /** A call ending as a failed gRPC call would: a status and its description. */
  private static final class CallFailed extends RuntimeException {
    final Status status;

    CallFailed(Status status) {
      super(status.toString(), null, false, false);
      this.status = status;
    }
  }
}
