'use strict';
// The executor's half of a run's trace, exported over OTLP/gRPC when an endpoint is configured
// (the executor's `otlpEndpoint`, or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables), with the same span names and attributes as
// every xjob SDK:
//
//   (admin) dispatch ─▶ run (server span; parent = RunRequest.traceparent)
//                        └─▶ handler (the handler's own spans nest here: ctx.traceContext)
//                              └─▶ callback (client span, open until an admin accepts the
//                                   result; RunResult.traceparent, so the admin's `complete`
//                                   span continues it)
//
// The OpenTelemetry API is a dependency; the SDK and OTLP exporter are optional peer
// dependencies (@opentelemetry/sdk-trace-base, @opentelemetry/resources,
// @opentelemetry/exporter-trace-otlp-grpc). Without them, or without an endpoint, tracing is off,
// every method returns at once and the result carries the admin's own context back.
const api = require('@opentelemetry/api');

// What a script run's spans call its handler (`glue:` and the language's usual interpreter).
const GLUE_NAMES = {
  GLUE_TYPE_SHELL: 'glue:bash',
  GLUE_TYPE_PYTHON: 'glue:python3',
  GLUE_TYPE_NODEJS: 'glue:node',
  GLUE_TYPE_PHP: 'glue:php',
  GLUE_TYPE_POWERSHELL: 'glue:pwsh',
  GLUE_TYPE_GROOVY: 'glue:groovy',
};

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

function runHandlerName(request) {
  return GLUE_NAMES[request.glueType] || request.handler;
}

function env(key) {
  return (process.env[key] || '').trim();
}

// The remote span a W3C traceparent names; null for anything else (a bad header is ignored:
// tracing must not refuse work).
function parseTraceparent(text) {
  const match = TRACEPARENT.exec(text || '');
  if (!match || match[1] === 'ff') return null;
  const context = { traceId: match[2], spanId: match[3], traceFlags: parseInt(match[4], 16), isRemote: true };
  return api.trace.isSpanContextValid(context) ? context : null;
}

// The W3C traceparent of a span; '' for none.
function spanTraceparent(span) {
  if (!span) return '';
  const context = span.spanContext();
  if (!api.trace.isSpanContextValid(context)) return '';
  return `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

class RunTraces {
  // Off; `RunTraces.start` turns it on, or a test hands it a tracer.
  constructor(tracer = null, provider = null) {
    this.tracer = tracer;
    this.provider = provider;
    this.runs = new Map(); // log id -> { run, handler }
    this.callbacks = new Map(); // log id -> callback span
  }

  static start(appName, endpoint = '', log = console) {
    if (!endpoint && !env('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') && !env('OTEL_EXPORTER_OTLP_ENDPOINT')) {
      return new RunTraces();
    }
    let sdk;
    let resources;
    let otlp;
    try {
      sdk = require('@opentelemetry/sdk-trace-base');
      resources = require('@opentelemetry/resources');
      otlp = require('@opentelemetry/exporter-trace-otlp-grpc');
    } catch (error) {
      log.warn(`an OTLP endpoint is set but the OpenTelemetry SDK is not installed (${error.code || error.message}): `
        + 'runs are not traced; npm install @opentelemetry/sdk-trace-base @opentelemetry/resources '
        + '@opentelemetry/exporter-trace-otlp-grpc');
      return new RunTraces();
    }
    // The app's name unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise.
    const resource = resources.resourceFromAttributes({ 'service.name': appName })
      .merge(resources.detectResources({ detectors: [resources.envDetector] }));
    const exporter = new otlp.OTLPTraceExporter(endpoint ? { url: endpoint } : {});
    // Its own provider, not the global one: an executor inside a traced app is its own service.
    // The sampler comes from OTEL_TRACES_SAMPLER(_ARG).
    const provider = new sdk.BasicTracerProvider({
      resource,
      spanProcessors: [new sdk.BatchSpanProcessor(exporter)],
    });
    return new RunTraces(provider.getTracer('xjob-executor'), provider);
  }

  get on() { return this.tracer !== null; }

  // Opens the `run` span of a run the admin sent, continuing the admin's trace.
  runSpan(request) {
    if (!this.tracer) return null;
    const remote = parseTraceparent(request.traceparent);
    const parent = remote ? api.trace.setSpanContext(api.ROOT_CONTEXT, remote) : api.ROOT_CONTEXT;
    return this.tracer.startSpan('run', {
      kind: api.SpanKind.SERVER,
      attributes: {
        'xjob.job_id': Number(request.jobId),
        'xjob.log_id': Number(request.logId),
        'xjob.handler': runHandlerName(request),
        'xjob.attempt': request.attempt,
        'xjob.shard_index': request.shardIndex,
        'xjob.shard_total': request.shardTotal,
      },
    }, parent);
  }

  // Keeps the `run` span of an accepted run open until its result.
  accepted(logId, run) {
    if (run) this.runs.set(logId, { run, handler: null });
  }

  // Ends the `run` span of a refused run with the reason as its error.
  refused(run, reason) {
    if (!run) return;
    run.setStatus({ code: api.SpanStatusCode.ERROR, message: reason });
    run.end();
  }

  // Opens the `handler` span of a run about to call its handler.
  handlerSpan(logId) {
    const open = this.tracer && this.runs.get(logId);
    if (!open) return null;
    open.handler = this.tracer.startSpan('handler', { kind: api.SpanKind.INTERNAL },
      api.trace.setSpan(api.ROOT_CONTEXT, open.run));
    return open.handler;
  }

  // Ends the run's `handler` and `run` spans with its result (ERROR unless it succeeded), opens
  // its `callback` span and writes that span's context into the result.
  finished(result) {
    const open = this.tracer && this.runs.get(result.logId);
    if (!open) return;
    this.runs.delete(result.logId);
    const callback = this.tracer.startSpan('callback', {
      kind: api.SpanKind.CLIENT,
      attributes: { 'xjob.log_id': Number(result.logId) },
    }, api.trace.setSpan(api.ROOT_CONTEXT, open.handler || open.run));
    result.traceparent = spanTraceparent(callback);
    this.callbacks.set(result.logId, callback);
    const status = result.status === 'RUN_STATUS_SUCCESS'
      ? { code: api.SpanStatusCode.OK }
      : { code: api.SpanStatusCode.ERROR, message: `${result.status}: ${result.message}` };
    for (const span of [open.handler, open.run]) {
      if (!span) continue;
      span.setAttribute('xjob.status', result.status);
      span.setStatus(status);
      span.end();
    }
  }

  // Ends the `callback` spans of results an admin accepted.
  acceptedResults(logIds) {
    for (const logId of logIds) {
      const callback = this.callbacks.get(logId);
      if (!callback) continue;
      this.callbacks.delete(logId);
      callback.end();
    }
  }

  // Ends what is still open and sends the buffered spans (graceful stop).
  async shutdown() {
    if (!this.provider) return;
    for (const callback of this.callbacks.values()) {
      callback.setStatus({ code: api.SpanStatusCode.ERROR, message: 'executor stopped before an admin accepted the result' });
      callback.end();
    }
    for (const { run } of this.runs.values()) {
      run.setStatus({ code: api.SpanStatusCode.ERROR, message: 'executor stopped while the run was open' });
      run.end();
    }
    this.callbacks.clear();
    this.runs.clear();
    await this.provider.shutdown();
  }
}

module.exports = { RunTraces, runHandlerName, parseTraceparent, spanTraceparent };
