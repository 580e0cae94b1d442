'use strict';
// What a handler sees of its run (JobContext), and how it fails on purpose (JobError).
const api = require('@opentelemetry/api');
const { spanTraceparent } = require('./tracing');

class JobError extends Error {}

class JobContext {
  constructor(request, runLog, stopGraceMs = 2000) {
    this.request = request;
    this.runLog = runLog;
    // How long a stopped handler has to return before it is abandoned (the executor's
    // killGraceMs): time to clean up, e.g. stop child processes.
    this.stopGraceMs = stopGraceMs;
    this.controller = new AbortController();
    this.traceSpan = null; // the run's `handler` span, when the executor traces
  }

  get jobId() { return this.request.jobId; }
  get logId() { return this.request.logId; }
  get handler() { return this.request.handler; }
  get params() { return this.request.params; }
  get shardIndex() { return this.request.shardIndex; }
  get shardTotal() { return this.request.shardTotal; }
  get attempt() { return this.request.attempt; }
  get scheduledAtMs() { return this.request.scheduledAtMs; }
  get triggerType() { return this.request.triggerType; }
  get timeoutMs() { return this.request.timeoutMs; }

  // Aborted once the run is being stopped (kill, timeout, COVER_EARLY, shutdown). JavaScript
  // cannot interrupt a promise: a handler must watch this signal (pass it to fetch, timers,
  // child processes) and return. One that does not is abandoned after the kill grace.
  get signal() { return this.controller.signal; }

  // The OpenTelemetry context of the run's `handler` span when the executor traces (null
  // otherwise): start your own spans with it as parent, tracer.startSpan(name, {}, ctx.traceContext).
  get traceContext() { return this.traceSpan ? api.trace.setSpan(api.ROOT_CONTEXT, this.traceSpan) : null; }

  // The W3C traceparent to pass to services the handler calls so their spans join the run's
  // trace: the run's `handler` span when the executor traces, else the admin's `dispatch` span
  // the run came with; '' when the run has no trace.
  get traceparent() { return spanTraceparent(this.traceSpan) || this.request.traceparent || ''; }

  isCancelled() { return this.controller.signal.aborted; }

  // Appends a line to the run's log, readable through the admin's ReadRunLog.
  log(line) { this.runLog.write(line); }
}

module.exports = { JobContext, JobError };
