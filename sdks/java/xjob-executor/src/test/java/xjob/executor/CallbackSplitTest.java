package xjob.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import xjob.v1.RegistryGrpc;
import xjob.v1.RegistryOuterClass.CallbackRequest;
import xjob.v1.RegistryOuterClass.CallbackResponse;
import xjob.v1.RegistryOuterClass.RunResult;

/**
 * A callback batch the admin refuses as too large (OUT_OF_RANGE) is sent again as halves, and a
 * single result still refused has its message cut. The admin here is a Registry on loopback that
 * refuses requests over a size limit, as the admin's max_request_bytes does.
 */
class CallbackSplitTest {
  @TempDir Path spoolDir;

  private Server server;
  private final List<Integer> sizes = Collections.synchronizedList(new ArrayList<>());
  private final List<String> messages = Collections.synchronizedList(new ArrayList<>());

  @AfterEach
  void stop() {
    if (server != null) {
      server.shutdownNow();
    }
  }

  private Admins adminRefusingOver(int limit) throws Exception {
    server =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
            .addService(
                new RegistryGrpc.RegistryImplBase() {
                  @Override
                  public void callback(
                      CallbackRequest request, StreamObserver<CallbackResponse> answer) {
                    if (request.getSerializedSize() > limit) {
                      answer.onError(Status.OUT_OF_RANGE.withDescription("too large").asException());
                      return;
                    }
                    sizes.add(request.getResultsCount());
                    CallbackResponse.Builder response = CallbackResponse.newBuilder();
                    for (RunResult result : request.getResultsList()) {
                      messages.add(result.getMessage());
                      response.addAcceptedLogIds(result.getLogId());
                    }
                    answer.onNext(response.build());
                    answer.onCompleted();
                  }
                })
            .build()
            .start();
    return new Admins(List.of("http://127.0.0.1:" + server.getPort()), "");
  }

  /** Sends the results, then stops the sender (which flushes) and checks all were taken. */
  private void deliver(Admins admins, List<RunResult> results) throws Exception {
    CallbackSender sender = new CallbackSender(admins, spoolDir, 5_000);
    results.forEach(sender::send);
    sender.start();
    sender.shutdown();
    admins.close();
    assertTrue(sender.unreportedLogIds().isEmpty(), "undelivered: " + sender.unreportedLogIds());
  }

  private static RunResult result(long logId, String message) {
    return RunResult.newBuilder().setLogId(logId).setMessage(message).build();
  }

  @Test
  void batchRefusedAsTooLargeIsSentAsHalves() throws Exception {
    Admins admins = adminRefusingOver(2500);
    List<RunResult> results = new ArrayList<>();
    for (long logId = 1; logId <= 4; logId++) {
      results.add(result(logId, "x".repeat(1000)));
    }
    deliver(admins, results);
    assertEquals(List.of(2, 2), sizes);
  }

  @Test
  void singleResultRefusedAsTooLargeHasItsMessageCut() throws Exception {
    Admins admins = adminRefusingOver(300);
    deliver(admins, List.of(result(9, "y".repeat(1000))));
    // Halved until it fits: 1000 -> 500 + "..." -> 251 + "...".
    assertEquals(List.of("y".repeat(251) + "..."), messages);
  }
}
