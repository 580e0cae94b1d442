package xjob.executor;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import java.util.logging.Logger;
import xjob.v1.Common.GlueType;
import xjob.v1.Common.RunStatus;
import xjob.v1.Executor.RunRequest;
import xjob.v1.RegistryOuterClass.RunResult;

/**
 * The executor's half of a run's trace, with the same span names and attributes as every xjob
 * SDK:
 *
 * <pre>
 * (admin) dispatch ─▶ run (server span; parent = RunRequest.traceparent)
 *                      └─▶ handler (the handler's own spans nest here: JobContext.traceContext)
 *                            └─▶ callback (client span, open until an admin accepts the
 *                                 result; RunResult.traceparent, so the admin's complete span
 *                                 continues it)
 * </pre>
 *
 * <p>Only the OpenTelemetry API is needed here; exporting (OTLP/gRPC) needs the OpenTelemetry SDK
 * and OTLP exporter on the classpath ({@link OtlpExport}). Off, every method returns at once and
 * the result carries the admin's own context back.
 */
final class RunTraces {
  private static final Logger LOG = Logger.getLogger(RunTraces.class.getName());
  static final RunTraces OFF = new RunTraces(null, () -> {});

  private final Tracer tracer;
  private final Runnable flush;
  private final Map<Long, Span[]> runs = new HashMap<>(); // log id -> {run, handler or null}
  private final Map<Long, Span> callbacks = new HashMap<>();

  RunTraces(Tracer tracer, Runnable flush) {
    this.tracer = tracer;
    this.flush = flush;
  }

  /**
   * Traces exported for appName when endpoint or a standard variable names a collector and the
   * OpenTelemetry SDK is on the classpath; off otherwise.
   */
  static RunTraces start(String appName, String endpoint) {
    String resolved = endpoint;
    if (resolved == null || resolved.isBlank()) {
      resolved = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    }
    if (resolved.isBlank()) {
      resolved = env("OTEL_EXPORTER_OTLP_ENDPOINT");
    }
    if (resolved.isBlank()) {
      return OFF;
    }
    try {
      Class.forName("io.opentelemetry.sdk.trace.SdkTracerProvider");
      Class.forName("io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter");
    } catch (ClassNotFoundException | LinkageError e) {
      LOG.warning(
          "an OTLP endpoint is set but the OpenTelemetry SDK is not on the classpath"
              + " (io.opentelemetry:opentelemetry-sdk, opentelemetry-exporter-otlp): runs are not"
              + " traced");
      return OFF;
    }
    return OtlpExport.start(appName, resolved);
  }

  static String env(String key) {
    String value = System.getenv(key);
    return value == null ? "" : value.trim();
  }

  boolean on() {
    return tracer != null;
  }

  /** What a run calls, as its spans name it: the handler, or glue: and its interpreter. */
  static String runHandlerName(RunRequest request) {
    Glue.Language language = Glue.LANGUAGES.get(request.getGlueType());
    if (language != null) {
      return "glue:" + language.interpreter();
    }
    if (request.getGlueType() == GlueType.GLUE_TYPE_GROOVY) {
      return "glue:groovy";
    }
    return request.getHandler();
  }

  private static final TextMapGetter<String> TRACEPARENT_GETTER =
      new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(String carrier) {
          return List.of("traceparent");
        }

        @Override
        public String get(String carrier, String key) {
          return "traceparent".equals(key) ? carrier : null;
        }
      };

  /** Opens the run span of a run the admin sent, continuing the admin's trace. */
  Span runSpan(RunRequest request) {
    if (tracer == null) {
      return null;
    }
    Context parent =
        W3CTraceContextPropagator.getInstance()
            .extract(Context.root(), request.getTraceparent(), TRACEPARENT_GETTER);
    return tracer
        .spanBuilder("run")
        .setParent(parent)
        .setSpanKind(SpanKind.SERVER)
        .setAllAttributes(
            Attributes.builder()
                .put("xjob.job_id", request.getJobId())
                .put("xjob.log_id", request.getLogId())
                .put("xjob.handler", runHandlerName(request))
                .put("xjob.attempt", (long) request.getAttempt())
                .put("xjob.shard_index", (long) request.getShardIndex())
                .put("xjob.shard_total", (long) request.getShardTotal())
                .build())
        .startSpan();
  }

  /** Keeps the run span of an accepted run open until its result. */
  synchronized void accepted(long logId, Span run) {
    if (run != null) {
      runs.put(logId, new Span[] {run, null});
    }
  }

  /** Ends the run span of a refused run with the reason as its error. */
  void refused(Span run, String reason) {
    if (run != null) {
      run.setStatus(StatusCode.ERROR, reason);
      run.end();
    }
  }

  /** Opens the handler span of a run about to call its handler; null when off. */
  synchronized Span handlerSpan(long logId) {
    Span[] open = tracer == null ? null : runs.get(logId);
    if (open == null) {
      return null;
    }
    open[1] =
        tracer
            .spanBuilder("handler")
            .setParent(Context.root().with(open[0]))
            .setSpanKind(SpanKind.INTERNAL)
            .startSpan();
    return open[1];
  }

  /**
   * Ends the run's handler and run spans with its result (ERROR unless it succeeded), opens its
   * callback span and returns the result carrying that span's context.
   */
  synchronized RunResult finished(RunResult result) {
    Span[] open = tracer == null ? null : runs.remove(result.getLogId());
    if (open == null) {
      return result;
    }
    Span parent = open[1] != null ? open[1] : open[0];
    Span callback =
        tracer
            .spanBuilder("callback")
            .setParent(Context.root().with(parent))
            .setSpanKind(SpanKind.CLIENT)
            .setAttribute(AttributeKey.longKey("xjob.log_id"), result.getLogId())
            .startSpan();
    callbacks.put(result.getLogId(), callback);
    boolean success = result.getStatus() == RunStatus.RUN_STATUS_SUCCESS;
    for (Span span : new Span[] {open[1], open[0]}) {
      if (span == null) {
        continue;
      }
      span.setAttribute("xjob.status", result.getStatus().name());
      if (success) {
        span.setStatus(StatusCode.OK);
      } else {
        span.setStatus(StatusCode.ERROR, result.getStatus().name() + ": " + result.getMessage());
      }
      span.end();
    }
    return result.toBuilder().setTraceparent(traceparent(callback)).build();
  }

  /** Ends the callback spans of results an admin accepted. */
  synchronized void acceptedResults(Collection<Long> logIds) {
    if (tracer == null) {
      return;
    }
    for (Long logId : logIds) {
      Span callback = callbacks.remove(logId);
      if (callback != null) {
        callback.end();
      }
    }
  }

  /** Ends what is still open and sends the buffered spans (graceful stop). */
  void shutdown() {
    if (tracer == null) {
      return;
    }
    synchronized (this) {
      for (Span callback : callbacks.values()) {
        callback.setStatus(
            StatusCode.ERROR, "executor stopped before an admin accepted the result");
        callback.end();
      }
      for (Span[] open : runs.values()) {
        open[0].setStatus(StatusCode.ERROR, "executor stopped while the run was open");
        open[0].end();
      }
      callbacks.clear();
      runs.clear();
    }
    try {
      flush.run();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, "flushing traces at shutdown failed: " + e);
    }
  }

  /** The W3C traceparent of a span; empty for none. */
  static String traceparent(Span span) {
    if (span == null) {
      return "";
    }
    SpanContext context = span.getSpanContext();
    if (!context.isValid()) {
      return "";
    }
    return "00-"
        + context.getTraceId()
        + "-"
        + context.getSpanId()
        + "-"
        + context.getTraceFlags().asHex();
  }
}
