package xjob.executor;

import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import xjob.v1.Executor.BeatRequest;
import xjob.v1.Executor.BeatResponse;
import xjob.v1.Executor.IdleBeatRequest;
import xjob.v1.Executor.IdleBeatResponse;
import xjob.v1.Executor.KillRequest;
import xjob.v1.Executor.KillResponse;
import xjob.v1.Executor.ReadLogRequest;
import xjob.v1.Executor.ReadLogResponse;
import xjob.v1.Executor.RunBatchRequest;
import xjob.v1.Executor.RunBatchResponse;
import xjob.v1.Executor.RunRequest;
import xjob.v1.Executor.RunResponse;
import xjob.v1.ExecutorServiceGrpc;

/** ExecutorService, thin over the runner and the run logs. */
final class ExecutorServer extends ExecutorServiceGrpc.ExecutorServiceImplBase {
  private final Runner runner;
  private final LogStore logs;

  ExecutorServer(Runner runner, LogStore logs) {
    this.runner = runner;
    this.logs = logs;
  }

  @Override
  public void beat(BeatRequest request, StreamObserver<BeatResponse> response) {
    reply(response, BeatResponse.getDefaultInstance());
  }

  @Override
  public void idleBeat(IdleBeatRequest request, StreamObserver<IdleBeatResponse> response) {
    long jobId = request.getJobId();
    IdleBeatResponse answer =
        runner.jobBusy(jobId)
            ? IdleBeatResponse.newBuilder()
                .setReason("job " + jobId + " is running or has queued runs")
                .build()
            : IdleBeatResponse.newBuilder().setIdle(true).build();
    reply(response, answer);
  }

  @Override
  public void run(RunRequest request, StreamObserver<RunResponse> response) {
    reply(response, submit(request));
  }

  /** Each run is enqueued or refused exactly as Run would, in order. */
  @Override
  public void runBatch(RunBatchRequest request, StreamObserver<RunBatchResponse> response) {
    RunBatchResponse.Builder answer = RunBatchResponse.newBuilder();
    for (RunRequest run : request.getRunsList()) {
      answer.addResults(submit(run));
    }
    reply(response, answer.build());
  }

  private RunResponse submit(RunRequest request) {
    String refusal = runner.submit(request);
    return refusal == null
        ? RunResponse.newBuilder().setAccepted(true).build()
        : RunResponse.newBuilder().setMessage(refusal).build();
  }

  @Override
  public void kill(KillRequest request, StreamObserver<KillResponse> response) {
    long jobId = request.getJobId();
    KillResponse answer =
        runner.kill(jobId)
            ? KillResponse.newBuilder().setKilled(true).build()
            : KillResponse.newBuilder()
                .setMessage("job " + jobId + " has no running or queued run")
                .build();
    reply(response, answer);
  }

  @Override
  public void readLog(ReadLogRequest request, StreamObserver<ReadLogResponse> response) {
    // Asked before reading: a run that is over has written its last line already.
    boolean active = runner.logActive(request.getLogId());
    reply(
        response,
        logs.read(request.getLogId(), request.getLogDateMs(), request.getFromLine(), active));
  }

  private static <T> void reply(StreamObserver<T> response, T answer) {
    response.onNext(answer);
    response.onCompleted();
  }

  /** Refuses calls without "authorization: Bearer <token>" when a token is set. */
  static final class TokenCheck implements ServerInterceptor {
    private final byte[] expected;

    TokenCheck(String token) {
      this.expected = ("Bearer " + token).getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(
        ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
      String presented = headers.get(Admins.AUTHORIZATION);
      boolean ok =
          presented != null
              && MessageDigest.isEqual(presented.getBytes(StandardCharsets.US_ASCII), expected);
      if (!ok) {
        call.close(
            Status.UNAUTHENTICATED.withDescription("missing or invalid access token"),
            new Metadata());
        return new ServerCall.Listener<>() {};
      }
      return next.startCall(call, headers);
    }
  }
}
