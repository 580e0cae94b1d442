package xjob.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import xjob.v1.Common.GlueType;
import xjob.v1.Common.RunStatus;
import xjob.v1.Executor.BeatRequest;
import xjob.v1.Executor.IdleBeatRequest;
import xjob.v1.Executor.KillRequest;
import xjob.v1.Executor.ReadLogRequest;
import xjob.v1.Executor.RunRequest;
import xjob.v1.RegistryGrpc;
import xjob.v1.RegistryOuterClass.AdminMessage;
import xjob.v1.RegistryOuterClass.CallbackRequest;
import xjob.v1.RegistryOuterClass.CallbackResponse;
import xjob.v1.RegistryOuterClass.Deregistered;
import xjob.v1.RegistryOuterClass.DispatchMode;
import xjob.v1.RegistryOuterClass.ExecutorMessage;
import xjob.v1.RegistryOuterClass.Register;
import xjob.v1.RegistryOuterClass.Registered;
import xjob.v1.RegistryOuterClass.RunResult;
import xjob.v1.RegistryOuterClass.SessionCall;
import xjob.v1.RegistryOuterClass.SessionReply;

/**
 * Session dispatch against an admin on loopback (a Registry that sends SessionCalls down the
 * session, as the admin's session_calls do): the executor opens no port, registers as
 * session://NAME in DISPATCH_MODE_SESSION, and answers each call with a reply of the same id,
 * through the same code a dialed call runs.
 */
class SessionDispatchTest {
  private static final Duration WAIT = Duration.ofSeconds(20);

  @TempDir Path logDir;

  private Server admin;
  private XjobExecutor executor;
  private final LinkedBlockingQueue<Register> registers = new LinkedBlockingQueue<>();
  private final LinkedBlockingQueue<SessionReply> replies = new LinkedBlockingQueue<>();
  private final LinkedBlockingQueue<RunResult> results = new LinkedBlockingQueue<>();
  private final Map<Long, SessionReply> early = new HashMap<>();
  private volatile StreamObserver<AdminMessage> toExecutor;

  @AfterEach
  void stop() {
    if (executor != null) {
      executor.shutdown();
    }
    if (admin != null) {
      admin.shutdownNow();
    }
  }

  /** The admin's side: answers Register, keeps the stream to send calls, collects replies. */
  private String startAdmin() throws IOException {
    RegistryGrpc.RegistryImplBase registry =
        new RegistryGrpc.RegistryImplBase() {
          @Override
          public StreamObserver<ExecutorMessage> session(StreamObserver<AdminMessage> stream) {
            return new StreamObserver<>() {
              @Override
              public void onNext(ExecutorMessage message) {
                if (message.hasRegister()) {
                  send(
                      stream,
                      AdminMessage.newBuilder()
                          .setRegistered(
                              Registered.newBuilder()
                                  .setExecutorId("e-1")
                                  .setHeartbeatIntervalMs(1_000)
                                  .setLeaseMs(10_000)
                                  .setDispatchMode(DispatchMode.DISPATCH_MODE_SESSION))
                          .build());
                  toExecutor = stream;
                  registers.add(message.getRegister());
                } else if (message.hasReply()) {
                  replies.add(message.getReply());
                } else if (message.hasDeregister()) {
                  send(
                      stream,
                      AdminMessage.newBuilder()
                          .setDeregistered(Deregistered.getDefaultInstance())
                          .build());
                  synchronized (stream) {
                    stream.onCompleted();
                  }
                }
              }

              @Override
              public void onError(Throwable error) {}

              @Override
              public void onCompleted() {}
            };
          }

          @Override
          public void callback(CallbackRequest request, StreamObserver<CallbackResponse> answer) {
            CallbackResponse.Builder response = CallbackResponse.newBuilder();
            for (RunResult result : request.getResultsList()) {
              results.add(result);
              response.addAcceptedLogIds(result.getLogId());
            }
            answer.onNext(response.build());
            answer.onCompleted();
          }
        };
    admin =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
            .addService(registry)
            .build()
            .start();
    return "http://127.0.0.1:" + admin.getPort();
  }

  private static void send(StreamObserver<AdminMessage> stream, AdminMessage message) {
    synchronized (stream) {
      stream.onNext(message);
    }
  }

  private void call(SessionCall.Builder call) {
    send(toExecutor, AdminMessage.newBuilder().setCall(call.setDeadlineMs(10_000)).build());
  }

  /** The reply to call {@code id}; replies to other calls that come first are kept. */
  private SessionReply reply(long id) throws InterruptedException {
    long deadline = System.nanoTime() + WAIT.toNanos();
    while (!early.containsKey(id)) {
      SessionReply next = replies.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
      assertNotNull(next, "no reply to session call " + id);
      early.put(next.getCallId(), next);
    }
    return early.remove(id);
  }

  private RunResult result() throws InterruptedException {
    RunResult result = results.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    assertNotNull(result, "no callback");
    return result;
  }

  private static RunRequest run(long jobId, long logId, String handler, long logDateMs) {
    return RunRequest.newBuilder()
        .setJobId(jobId)
        .setLogId(logId)
        .setHandler(handler)
        .setGlueType(GlueType.GLUE_TYPE_BEAN)
        .setShardTotal(1)
        .setLogDateMs(logDateMs)
        .build();
  }

  private static int unusedPort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  @Test
  void answersEveryCallDownTheSessionAndOpensNoPort() throws Exception {
    String adminAddr = startAdmin();
    int port = unusedPort();
    CountDownLatch blocking = new CountDownLatch(1);
    CountDownLatch never = new CountDownLatch(1);
    executor =
        XjobExecutor.builder()
            .appName("session-test")
            .adminAddr(adminAddr)
            .bind("127.0.0.1", port)
            .sessionDispatch(true)
            .advertiseAddress("session://session-test-1")
            .logDir(logDir)
            .callbackFlushTimeout(Duration.ofSeconds(2))
            .handler(
                "block",
                run -> {
                  blocking.countDown();
                  never.await(); // until the kill interrupts it
                  return "not reached";
                })
            .handler(
                "hello",
                run -> {
                  run.log("hello from a session run");
                  return "hi";
                })
            .start();
    assertTrue(executor.awaitRegistered(WAIT));

    Register register = registers.poll(WAIT.toMillis(), TimeUnit.MILLISECONDS);
    assertNotNull(register);
    assertEquals("session://session-test-1", register.getAddress());
    assertEquals("session://session-test-1", executor.address());
    assertEquals(DispatchMode.DISPATCH_MODE_SESSION, register.getDispatchMode());
    // No server: the bind port is not listened on.
    try (Socket socket = new Socket()) {
      assertThrows(
          IOException.class, () -> socket.connect(new InetSocketAddress("127.0.0.1", port), 2_000));
    }

    call(SessionCall.newBuilder().setCallId(1).setBeat(BeatRequest.getDefaultInstance()));
    assertTrue(reply(1).hasBeat());

    // The run is answered while its handler still runs (it returns only when killed, below):
    // replies do not wait for handlers.
    long today = System.currentTimeMillis();
    call(SessionCall.newBuilder().setCallId(2).setRun(run(7, 70, "block", today)));
    SessionReply accepted = reply(2);
    assertTrue(accepted.getRun().getAccepted(), accepted.toString());
    assertTrue(blocking.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));

    call(
        SessionCall.newBuilder()
            .setCallId(3)
            .setIdleBeat(IdleBeatRequest.newBuilder().setJobId(7)));
    assertFalse(reply(3).getIdleBeat().getIdle());
    call(
        SessionCall.newBuilder()
            .setCallId(4)
            .setKill(KillRequest.newBuilder().setJobId(7).setLogId(70)));
    assertTrue(reply(4).getKill().getKilled());
    RunResult killed = result();
    assertEquals(70, killed.getLogId());
    assertEquals(RunStatus.RUN_STATUS_KILLED, killed.getStatus());

    call(SessionCall.newBuilder().setCallId(5).setRun(run(8, 80, "hello", today)));
    assertTrue(reply(5).getRun().getAccepted());
    RunResult hello = result();
    assertEquals(80, hello.getLogId());
    assertEquals(RunStatus.RUN_STATUS_SUCCESS, hello.getStatus());
    call(
        SessionCall.newBuilder()
            .setCallId(6)
            .setReadLog(
                ReadLogRequest.newBuilder().setLogId(80).setLogDateMs(today).setFromLine(1)));
    SessionReply log = reply(6);
    assertTrue(log.getReadLog().getContent().contains("hello from a session run"), log.toString());
    assertTrue(log.getReadLog().getIsEnd());

    // A call carrying no request fails as a gRPC call would, with its code.
    call(SessionCall.newBuilder().setCallId(7));
    SessionReply unknown = reply(7);
    assertEquals(Status.Code.INVALID_ARGUMENT.value(), unknown.getError().getCode());
  }

  @Test
  void addressesAreCheckedAgainstTheMode() {
    XjobExecutor.Builder session =
        XjobExecutor.builder()
            .appName("orders")
            .adminAddr("http://127.0.0.1:1")
            .sessionDispatch(true)
            .advertiseAddress("http://10.0.0.5:9999");
    assertThrows(IllegalArgumentException.class, session::start);
    XjobExecutor.Builder dialed =
        XjobExecutor.builder()
            .appName("orders")
            .adminAddr("http://127.0.0.1:1")
            .advertiseAddress("session://orders-1");
    assertThrows(IllegalArgumentException.class, dialed::start);
    assertThrows(
        IllegalArgumentException.class,
        () -> XjobExecutor.builder().advertiseAddress("session://has space"));
    assertThrows(
        IllegalArgumentException.class,
        () -> XjobExecutor.builder().advertiseAddress("session://"));
    String address = SessionCalls.defaultAddress("orders");
    assertTrue(address.startsWith("session://orders-"), address);
    assertTrue(SessionCalls.validAddress(address), address);
  }
}
