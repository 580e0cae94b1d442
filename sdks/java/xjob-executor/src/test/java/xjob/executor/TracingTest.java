package xjob.executor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import xjob.v1.Common.GlueType;
import xjob.v1.Common.RunStatus;
import xjob.v1.Executor.RunRequest;
import xjob.v1.RegistryOuterClass.RunResult;

/** The runner's spans, exported to memory: run, handler and callback under the admin's trace. */
class TracingTest {
  private static final String ADMIN_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
  private static final String ADMIN_SPAN = "00f067aa0ba902b7";

  @TempDir Path logDir;

  private final InMemorySpanExporter exporter = InMemorySpanExporter.create();
  private final SdkTracerProvider provider =
      SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(exporter)).build();
  private final RunTraces traces = new RunTraces(provider.get("test"), provider::close);
  private final LinkedBlockingQueue<RunResult> results = new LinkedBlockingQueue<>();

  private Runner runner() {
    Map<String, JobHandler> handlers =
        Map.of(
            "ok", context -> "ok " + context.traceparent(),
            "fail",
                context -> {
                  throw new IllegalStateException("failed on purpose");
                });
    return new Runner(
        handlers,
        new LogStore(logDir),
        result -> results.add(traces.finished(result)),
        Duration.ofMillis(500),
        Map.of(),
        traces);
  }

  private static RunRequest request(long logId, String handler) {
    return RunRequest.newBuilder()
        .setJobId(1)
        .setLogId(logId)
        .setHandler(handler)
        .setGlueType(GlueType.GLUE_TYPE_BEAN)
        .setShardTotal(1)
        .setLogDateMs(System.currentTimeMillis())
        .setTraceparent("00-" + ADMIN_TRACE + "-" + ADMIN_SPAN + "-01")
        .build();
  }

  private Map<String, SpanData> spans() {
    return exporter.getFinishedSpanItems().stream()
        .collect(Collectors.toMap(SpanData::getName, span -> span, (first, later) -> later));
  }

  @Test
  void runHandlerAndCallbackSpansContinueTheAdminsTrace() throws Exception {
    assertNull(runner().submit(request(1, "ok")));
    RunResult result = results.poll(10, TimeUnit.SECONDS);
    assertNotNull(result);
    SpanData run = spans().get("run");
    SpanData handler = spans().get("handler");
    assertFalse(spans().containsKey("callback"), "open until an admin accepts the result");
    assertEquals(ADMIN_TRACE, run.getTraceId());
    assertEquals(ADMIN_SPAN, run.getParentSpanId());
    assertEquals(run.getSpanId(), handler.getParentSpanId());
    assertEquals("RUN_STATUS_SUCCESS", run.getAttributes().asMap().entrySet().stream()
        .filter(entry -> entry.getKey().getKey().equals("xjob.status"))
        .map(entry -> entry.getValue().toString()).findFirst().orElse(""));
    assertTrue(result.getMessage().contains(handler.getSpanId()), "traceparent() is the handler span");
    traces.acceptedResults(List.of(1L));
    SpanData callback = spans().get("callback");
    assertEquals(handler.getSpanId(), callback.getParentSpanId());
    assertEquals("00-" + ADMIN_TRACE + "-" + callback.getSpanId() + "-01", result.getTraceparent());
  }

  @Test
  void failedAndRefusedRunsAreErrors() throws Exception {
    Runner runner = runner();
    assertNull(runner.submit(request(2, "fail")));
    RunResult result = results.poll(10, TimeUnit.SECONDS);
    assertEquals(RunStatus.RUN_STATUS_FAILED, result.getStatus());
    for (String name : List.of("run", "handler")) {
      assertEquals(StatusCode.ERROR, spans().get(name).getStatus().getStatusCode());
      assertTrue(spans().get(name).getStatus().getDescription().contains("RUN_STATUS_FAILED"));
    }
    exporter.reset();
    assertNotNull(runner.submit(request(3, "missing")));
    assertEquals(StatusCode.ERROR, spans().get("run").getStatus().getStatusCode());
  }
}
