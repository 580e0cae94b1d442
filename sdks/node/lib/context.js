'use strict';
// What a handler sees of its run (JobContext), and how it fails on purpose (JobError).

class JobError extends Error {}

class JobContext {
  constructor(request, runLog, stopGraceMs = 2000) {
    this.request = request;
    this.runLog = runLog;
    // How long a stopped handler has to return before it is abandoned (the executor's
    // killGraceMs): time to clean up, e.g. stop child processes.
    this.stopGraceMs = stopGraceMs;
    this.controller = new AbortController();
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

  isCancelled() { return this.controller.signal.aborted; }

  // Appends a line to the run's log, readable through the admin's ReadRunLog.
  log(line) { this.runLog.write(line); }
}

module.exports = { JobContext, JobError };
