package xjob.executor;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.exporter.otlp.trace.OtlpGrpcSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.util.concurrent.TimeUnit;

/**
 * The OTLP/gRPC export of {@link RunTraces}: loaded only when the OpenTelemetry SDK and OTLP
 * exporter are on the classpath (they are optional dependencies of the library).
 */
final class OtlpExport {
  private OtlpExport() {}

  static RunTraces start(String appName, String endpoint) {
    // Its own provider, not the global one: an executor inside a traced app is its own service.
    SdkTracerProvider provider =
        SdkTracerProvider.builder()
            .setResource(
                Resource.getDefault()
                    .merge(
                        Resource.create(
                            Attributes.of(AttributeKey.stringKey("service.name"), serviceName(appName)))))
            .addSpanProcessor(
                BatchSpanProcessor.builder(
                        OtlpGrpcSpanExporter.builder().setEndpoint(endpoint).build())
                    .build())
            .build();
    return new RunTraces(
        provider.get("xjob-executor"),
        () -> provider.shutdown().join(10, TimeUnit.SECONDS));
  }

  /** The app's name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise. */
  static String serviceName(String appName) {
    String named = RunTraces.env("OTEL_SERVICE_NAME");
    if (!named.isEmpty()) {
      return named;
    }
    for (String pair : RunTraces.env("OTEL_RESOURCE_ATTRIBUTES").split(",")) {
      String trimmed = pair.trim();
      if (trimmed.startsWith("service.name=")) {
        return trimmed.substring("service.name=".length());
      }
    }
    return appName;
  }
}
