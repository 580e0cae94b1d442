package xjob.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import xjob.v1.Executor.BeatRequest;
import xjob.v1.Executor.KillRequest;
import xjob.v1.Executor.ReadLogRequest;
import xjob.v1.Executor.RunRequest;
import xjob.v1.ExecutorServiceGrpc;
import xjob.v1.ExecutorServiceGrpc.ExecutorServiceBlockingStub;

/**
 * The open-network refusal and the access token check. The executors started here point at an
 * admin port nothing listens on: their session only retries in the background, which is all these
 * tests need.
 */
class OpenNetworkTest {
  @TempDir Path logDir;

  private final List<XjobExecutor> started = new ArrayList<>();
  private final List<String> warnings = new ArrayList<>();
  private final Logger executorLog = Logger.getLogger(XjobExecutor.class.getName());
  // The sessions' retries against the absent admin would fill the build output.
  private final Logger libraryLog = Logger.getLogger("xjob.executor");
  private final Handler capture =
      new Handler() {
        @Override
        public synchronized void publish(LogRecord record) {
          warnings.add(record.getMessage());
        }

        @Override
        public void flush() {}

        @Override
        public void close() {}
      };

  @BeforeEach
  void captureLog() {
    executorLog.addHandler(capture);
    libraryLog.setUseParentHandlers(false);
  }

  @AfterEach
  void stopAll() {
    started.forEach(XjobExecutor::shutdown);
    executorLog.removeHandler(capture);
    libraryLog.setUseParentHandlers(true);
  }

  private XjobExecutor.Builder builder(String host) {
    return XjobExecutor.builder()
        .appName("guard-test")
        .adminAddr("http://127.0.0.1:1")
        .bind(host, 0)
        .logDir(logDir)
        .shutdownGrace(Duration.ofMillis(100))
        .callbackFlushTimeout(Duration.ofMillis(100));
  }

  private int start(XjobExecutor.Builder builder) throws Exception {
    XjobExecutor executor = builder.start();
    started.add(executor);
    String address = executor.address();
    return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
  }

  /** The status of one call on 127.0.0.1:port with that authorization header (null: none). */
  private static Status.Code call(int port, String header, Consumer<ExecutorServiceBlockingStub> method)
      throws InterruptedException {
    ManagedChannel channel = ManagedChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build();
    try {
      ExecutorServiceBlockingStub stub =
          ExecutorServiceGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
      if (header != null) {
        Metadata metadata = new Metadata();
        metadata.put(Admins.AUTHORIZATION, header);
        stub = stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(metadata));
      }
      method.accept(stub);
      return Status.Code.OK;
    } catch (StatusRuntimeException e) {
      return e.getStatus().getCode();
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static void beat(ExecutorServiceBlockingStub stub) {
    stub.beat(BeatRequest.getDefaultInstance());
  }

  private boolean warned() {
    synchronized (capture) {
      return warnings.stream().anyMatch(line -> line.contains("INSECURE"));
    }
  }

  @Test
  void offLoopbackWithoutTokenIsRefused() {
    RuntimeException refused =
        assertThrows(
            XjobExecutor.OpenNetworkRefusedException.class, () -> builder("0.0.0.0").start());
    assertTrue(refused.getMessage().contains("accessToken"), refused.getMessage());
    assertTrue(refused.getMessage().contains("insecureOpenNetwork"), refused.getMessage());
  }

  @Test
  void optOutStartsOffLoopbackWithAWarning() throws Exception {
    int port = start(builder("0.0.0.0").insecureOpenNetwork(true));
    assertTrue(warned(), String.valueOf(warnings));
    assertEquals(Status.Code.OK, call(port, null, OpenNetworkTest::beat));
  }

  @Test
  void offLoopbackWithTokenStarts() throws Exception {
    int port = start(builder("0.0.0.0").accessToken("s3cret"));
    assertEquals(Status.Code.OK, call(port, "Bearer s3cret", OpenNetworkTest::beat));
  }

  @Test
  void loopbackStartsWithoutToken() throws Exception {
    int port = start(builder("127.0.0.1"));
    assertFalse(warned(), String.valueOf(warnings));
    assertEquals(Status.Code.OK, call(port, null, OpenNetworkTest::beat));
  }

  @Test
  void loopbackAddressesAreToldFromTheOthers() {
    for (String host : new String[] {"127.0.0.1", "127.8.0.1", "::1", "localhost"}) {
      XjobExecutor.refuseOpenNetwork(new InetSocketAddress(host, 1), false, false);
    }
    for (String host : new String[] {"0.0.0.0", "::", "10.1.2.3", "2001:db8::1"}) {
      assertThrows(
          XjobExecutor.OpenNetworkRefusedException.class,
          () -> XjobExecutor.refuseOpenNetwork(new InetSocketAddress(host, 1), false, false),
          host);
    }
  }

  @Test
  void aTokenIsRequiredOnEveryCall() throws Exception {
    int port = start(builder("127.0.0.1").accessToken("s3cret"));
    for (String header : new String[] {null, "Bearer wrong", "Bearer s3cret ", "s3cret", "bearer s3cret"}) {
      assertEquals(Status.Code.UNAUTHENTICATED, call(port, header, OpenNetworkTest::beat), header);
    }
    assertEquals(
        Status.Code.UNAUTHENTICATED,
        call(port, null, s -> s.run(RunRequest.newBuilder().setJobId(1).setLogId(1).setHandler("x").build())));
    assertEquals(
        Status.Code.UNAUTHENTICATED, call(port, null, s -> s.kill(KillRequest.newBuilder().setJobId(1).build())));
    assertEquals(
        Status.Code.UNAUTHENTICATED,
        call(port, null, s -> s.readLog(ReadLogRequest.newBuilder().setLogId(1).setFromLine(1).build())));
    assertEquals(Status.Code.OK, call(port, "Bearer s3cret", OpenNetworkTest::beat));
  }
}
