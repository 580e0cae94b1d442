package xjob.executor;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import xjob.v1.RegistryGrpc;
import xjob.v1.RegistryOuterClass.AdminMessage;
import xjob.v1.RegistryOuterClass.Deregister;
import xjob.v1.RegistryOuterClass.DispatchMode;
import xjob.v1.RegistryOuterClass.ExecutorMessage;
import xjob.v1.RegistryOuterClass.Heartbeat;
import xjob.v1.RegistryOuterClass.Register;
import xjob.v1.RegistryOuterClass.Registered;
import xjob.v1.RegistryOuterClass.SessionCall;
import xjob.v1.RegistryOuterClass.SessionReply;

/**
 * The connection to the admins: one Registry.Session stream at a time.
 *
 * <pre>
 * connect (admin i) ─▶ Register ─▶ Registered (≤ 10 s) ─▶ Heartbeat every interval ─▶ …
 *      ▲ failure: next admin, backoff 100 ms → 5 s            │ shutdown: Deregister,
 *      └──────────────── stream error / end ◀─────────────────┘ wait ≤ 2 s for Deregistered
 * </pre>
 *
 * <p>Heartbeats list the runs running or queued here and the finished ones whose result no admin
 * has accepted yet, so the admin can tell a lost run from a live one. In session dispatch the
 * admin's calls arrive on this stream too: each is handed to {@link SessionCalls}, which answers
 * it on a thread of its own, so this loop keeps receiving and heartbeating meanwhile.
 */
final class Session {
  static final int PROTOCOL_VERSION = 1;
  private static final Logger LOG = Logger.getLogger(Session.class.getName());
  private static final long HANDSHAKE_TIMEOUT_MS = 10_000;
  private static final long DEREGISTER_TIMEOUT_MS = 2_000;
  private static final long DEFAULT_HEARTBEAT_MS = 10_000;
  private static final long MIN_HEARTBEAT_MS = 10;

  /** What arrives from the stream: a message, or its end (error null on a clean end). */
  private record Inbound(AdminMessage message, Throwable error, boolean ended) {}

  private final Admins admins;
  private final Register register;
  private final Supplier<Heartbeat> heartbeat;
  /** Answers the admin's calls in session dispatch; null in the dialed mode. */
  private final SessionCalls calls;
  private final Thread thread;
  private final CountDownLatch registeredOnce = new CountDownLatch(1);
  private volatile boolean deregistering;
  private volatile String executorId = "";

  Session(
      Admins admins,
      String appName,
      String address,
      List<String> handlers,
      Map<String, String> labels,
      Supplier<Heartbeat> heartbeat,
      SessionCalls calls) {
    this.admins = admins;
    this.register =
        Register.newBuilder()
            .setAppName(appName)
            .setAddress(address)
            .addAllHandlers(new TreeSet<>(handlers))
            .setProtocolVersion(PROTOCOL_VERSION)
            .putAllLabels(labels)
            .setDispatchMode(
                calls != null
                    ? DispatchMode.DISPATCH_MODE_SESSION
                    : DispatchMode.DISPATCH_MODE_DIAL)
            .build();
    this.heartbeat = heartbeat;
    this.calls = calls;
    this.thread = new Thread(this::loop, "xjob-session");
    this.thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  String executorId() {
    return executorId;
  }

  boolean awaitRegistered(long timeoutMs) throws InterruptedException {
    return registeredOnce.await(timeoutMs, TimeUnit.MILLISECONDS);
  }

  /** Deregisters (waiting at most about 3 s) and ends the loop. */
  void deregister() throws InterruptedException {
    deregistering = true;
    thread.interrupt();
    thread.join(DEREGISTER_TIMEOUT_MS + 1_000);
  }

  private void loop() {
    Backoff backoff = new Backoff();
    List<String> addresses = admins.addresses();
    for (int index = 0; !deregistering; index = (index + 1) % addresses.size()) {
      String address = addresses.get(index);
      boolean wasRegistered = false;
      try {
        wasRegistered = run(address);
      } catch (InterruptedException e) {
        if (deregistering) {
          return;
        }
      } catch (RuntimeException e) {
        LOG.warning("session with " + address + " failed: " + e);
      }
      executorId = "";
      if (deregistering) {
        return;
      }
      if (wasRegistered) {
        backoff.reset();
      }
      try {
        Thread.sleep(backoff.nextDelayMs());
      } catch (InterruptedException e) {
        if (deregistering) {
          return;
        }
      }
    }
  }

  /** Holds one session with one admin; says whether it got registered. */
  private boolean run(String address) throws InterruptedException {
    LinkedBlockingQueue<Inbound> inbound = new LinkedBlockingQueue<>();
    ClientCallStreamObserver<ExecutorMessage>[] requests = new ClientCallStreamObserver[1];
    ClientResponseObserver<ExecutorMessage, AdminMessage> responses =
        new ClientResponseObserver<>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<ExecutorMessage> stream) {
            requests[0] = stream;
          }

          @Override
          public void onNext(AdminMessage message) {
            inbound.add(new Inbound(message, null, false));
          }

          @Override
          public void onError(Throwable error) {
            inbound.add(new Inbound(null, error, true));
          }

          @Override
          public void onCompleted() {
            inbound.add(new Inbound(null, null, true));
          }
        };
    RegistryGrpc.newStub(admins.channel(address)).session(responses);
    ClientCallStreamObserver<ExecutorMessage> stream = requests[0];
    try {
      send(stream, ExecutorMessage.newBuilder().setRegister(register).build());
      Registered registered = awaitRegistered(address, inbound);
      if (registered == null) {
        return false;
      }
      long intervalMs =
          registered.getHeartbeatIntervalMs() > 0
              ? Math.max(registered.getHeartbeatIntervalMs(), MIN_HEARTBEAT_MS)
              : DEFAULT_HEARTBEAT_MS;
      executorId = registered.getExecutorId();
      registeredOnce.countDown();
      LOG.info(
          "registered with " + address + " as " + executorId + " (heartbeat every "
              + intervalMs + " ms)");
      if (calls != null
          && registered.getDispatchMode() != DispatchMode.DISPATCH_MODE_SESSION) {
        // An admin without session dispatch would dial the session:// address and fail.
        LOG.warning(address + " did not confirm session dispatch: it cannot send runs here");
      }
      long nextBeat = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(intervalMs);
      while (true) {
        Inbound event;
        try {
          event = inbound.poll(Math.max(nextBeat - System.nanoTime(), 0), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          if (deregistering) {
            sendDeregister(address, stream, inbound);
          }
          throw e;
        }
        if (event != null && event.ended()) {
          LOG.warning("session with " + address + " ended: " + describe(event.error()));
          return true;
        }
        if (event != null) {
          received(event.message(), stream);
        }
        if (System.nanoTime() >= nextBeat) {
          send(stream, ExecutorMessage.newBuilder().setHeartbeat(heartbeat.get()).build());
          nextBeat += TimeUnit.MILLISECONDS.toNanos(intervalMs);
        }
      }
    } finally {
      synchronized (stream) {
        stream.cancel("session closed", null);
      }
    }
  }

  /** A message from the admin while registered: a call to answer (session dispatch). */
  private void received(AdminMessage message, ClientCallStreamObserver<ExecutorMessage> stream) {
    if (!message.hasCall()) {
      return;
    }
    SessionCall call = message.getCall();
    if (calls == null) {
      LOG.warning("the admin sent a session call to a dialed executor; ignored");
      return;
    }
    calls.answer(call, reply -> sendReply(stream, reply));
  }

  /**
   * Sends a call's reply from the thread that answered it. A session that ended meanwhile drops
   * it: the admin ended that call with the session.
   */
  private static void sendReply(
      ClientCallStreamObserver<ExecutorMessage> stream, SessionReply reply) {
    try {
      send(stream, ExecutorMessage.newBuilder().setReply(reply).build());
    } catch (RuntimeException e) {
      LOG.log(
          Level.FINE,
          "session ended before the reply to call " + reply.getCallId() + " could be sent: " + e);
    }
  }

  /** Heartbeats and replies come from different threads; a gRPC stream takes one at a time. */
  private static void send(
      ClientCallStreamObserver<ExecutorMessage> stream, ExecutorMessage message) {
    synchronized (stream) {
      stream.onNext(message);
    }
  }

  private Registered awaitRegistered(String address, LinkedBlockingQueue<Inbound> inbound)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(HANDSHAKE_TIMEOUT_MS);
    while (true) {
      Inbound event = inbound.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
      if (event == null) {
        LOG.warning("no Registered from " + address + " within 10 s");
        return null;
      }
      if (event.ended()) {
        LOG.warning("registration with " + address + " refused: " + describe(event.error()));
        return null;
      }
      if (event.message().hasRegistered()) {
        return event.message().getRegistered();
      }
    }
  }

  /** Sends Deregister and waits up to 2 s for Deregistered or the stream's end. */
  private void sendDeregister(
      String address,
      ClientCallStreamObserver<ExecutorMessage> stream,
      LinkedBlockingQueue<Inbound> inbound) {
    Thread.interrupted();
    send(
        stream,
        ExecutorMessage.newBuilder().setDeregister(Deregister.getDefaultInstance()).build());
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DEREGISTER_TIMEOUT_MS);
    try {
      while (true) {
        Inbound event = inbound.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
        if (event == null) {
          LOG.warning("no answer to Deregister from " + address);
          return;
        }
        if (event.ended() || event.message().hasDeregistered()) {
          LOG.info("deregistered from " + address);
          return;
        }
        // Calls the admin sent before it saw the Deregister are still answered.
        received(event.message(), stream);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static String describe(Throwable error) {
    return error == null ? "closed by the admin" : Status.fromThrowable(error).toString();
  }
}
