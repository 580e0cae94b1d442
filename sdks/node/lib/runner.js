'use strict';
// The runner: one queue per job id, one run at a time per job, block strategies, timeouts and
// kills that abort the handler's signal, and each run's result handed to the callback sender.
//
//   Run ──submit──▶ slot(queue, running) ──drain──▶ handler ──▶ RunResult ──▶ callbacks
//        refusals: shutting down, duplicate log id, glue type, unknown handler, DISCARD_LATER
//   Kill / COVER_EARLY ──▶ queued runs reported KILLED at once + the running one stopped
//
// A stopped run's handler sees ctx.signal abort; if it has not returned within killGraceMs it
// is abandoned and the run is reported all the same. The job's next run starts only after that.
const { JobContext, JobError } = require('./context');
const { GROOVY_UNSUPPORTED, LANGUAGES } = require('./glue');
const { RunTraces } = require('./tracing');

const CODE_SUCCESS = 200;
const CODE_FAIL = 500;
const CODE_TIMEOUT = 502;
const RECENT_RUN_TTL_MS = 10 * 60 * 1000;

const killed = (message) => ({ status: 'RUN_STATUS_KILLED', code: CODE_FAIL, message });

class Runner {
  constructor({ handlers, joblog, report, killGraceMs, glue = new Map(), traces = new RunTraces() }) {
    this.traces = traces; // off unless the executor traces
    this.glue = glue; // enabled script glue type -> its handler
    this.handlers = handlers;
    this.joblog = joblog;
    this.report = report;
    this.killGraceMs = killGraceMs;
    this.slots = new Map(); // job id -> { queue, running, draining }
    this.active = new Set(); // log ids queued or running
    this.recent = new Map(); // finished log id -> finish time
    this.accepting = true;
    this.drains = new Set();
  }

  submit(request) {
    const runSpan = this.traces.runSpan(request);
    const refusal = this.refusal(request);
    if (refusal) {
      this.traces.refused(runSpan, refusal);
      return { accepted: false, message: refusal };
    }
    this.traces.accepted(request.logId, runSpan);
    let slot = this.slots.get(request.jobId);
    if (!slot) {
      slot = { queue: [], running: null, draining: null };
      this.slots.set(request.jobId, slot);
    }
    if (busy(slot) && request.blockStrategy === 'BLOCK_STRATEGY_COVER_EARLY') {
      this.stopSlot(slot, killed(`block strategy COVER_EARLY: replaced by log ${request.logId}`));
    }
    const ctx = new JobContext(request, this.joblog.open(request.logId, request.logDateMs), this.killGraceMs);
    slot.queue.push({ request, ctx, handler: this.glue.get(request.glueType) || this.handlers.get(request.handler), stopReason: null, stop: null });
    this.active.add(request.logId);
    if (!slot.draining) {
      slot.draining = this.drain(request.jobId, slot);
      this.drains.add(slot.draining);
      slot.draining.finally(() => this.drains.delete(slot.draining));
    }
    return { accepted: true, message: '' };
  }

  refusal(request) {
    if (!this.accepting) return 'executor is shutting down';
    this.forgetOld();
    if (this.active.has(request.logId) || this.recent.has(request.logId)) {
      return `duplicate run: log_id ${request.logId} already queued or running`;
    }
    const { glueType } = request;
    if (glueType === 'GLUE_TYPE_GROOVY') return GROOVY_UNSUPPORTED;
    if (glueType !== 'GLUE_TYPE_BEAN' && glueType !== 'GLUE_TYPE_UNSPECIFIED') {
      if (!LANGUAGES[glueType]) return `glue type ${glueType} is not supported`;
      if (!this.glue.has(glueType)) return `glue type ${glueType} is not enabled on this executor`;
    } else if (!this.handlers.has(request.handler)) {
      return `job handler [${request.handler}] not found`;
    }
    const slot = this.slots.get(request.jobId);
    if (slot && busy(slot) && request.blockStrategy === 'BLOCK_STRATEGY_DISCARD_LATER') {
      return `block strategy DISCARD_LATER: job ${request.jobId} is running or queued`;
    }
    return null;
  }

  killJob(jobId) {
    const slot = this.slots.get(jobId);
    if (!slot || !busy(slot)) return false;
    this.stopSlot(slot, killed('killed by admin'));
    return true;
  }

  isIdle(jobId) {
    const slot = this.slots.get(jobId);
    return !slot || !busy(slot);
  }

  isActive(logId) { return this.active.has(logId); }

  activeLogIds() { return [...this.active]; }

  queuedCount() {
    let count = 0;
    for (const slot of this.slots.values()) count += slot.queue.length;
    return count;
  }

  // Refuses new runs, reports queued runs KILLED, lets running handlers finish within graceMs,
  // then stops the rest (KILLED).
  async shutdown(graceMs) {
    this.accepting = false;
    const reason = killed('executor is shutting down');
    for (const slot of this.slots.values()) this.dropQueued(slot, reason);
    await Promise.race([Promise.allSettled([...this.drains]), sleep(graceMs)]);
    for (const slot of this.slots.values()) if (slot.running) stopRun(slot.running, reason);
    await Promise.race([Promise.allSettled([...this.drains]), sleep(this.killGraceMs + 1000)]);
  }

  stopSlot(slot, reason) {
    this.dropQueued(slot, reason);
    if (slot.running) stopRun(slot.running, reason);
  }

  dropQueued(slot, reason) {
    for (const run of slot.queue.splice(0)) {
      run.ctx.log(`run not started: ${reason.message}`);
      this.finish(run, reason, 0);
    }
  }

  async drain(jobId, slot) {
    try {
      while (slot.queue.length) {
        const run = slot.queue.shift();
        slot.running = run;
        try {
          await this.execute(run);
        } finally {
          slot.running = null;
        }
      }
    } finally {
      slot.draining = null;
      if (!busy(slot) && this.slots.get(jobId) === slot) this.slots.delete(jobId);
    }
  }

  async execute(run) {
    const { request, ctx } = run;
    const startedAtMs = Date.now();
    ctx.log(startLine(request));
    ctx.traceSpan = this.traces.handlerSpan(request.logId);
    const stopped = new Promise((resolve) => { run.stop = resolve; });
    if (run.stopReason) run.stop();
    let timer = null;
    const timedOut = request.timeoutMs > 0
      ? new Promise((resolve) => { timer = setTimeout(resolve, request.timeoutMs); })
      : new Promise(() => {});
    const handlerDone = this.call(run);
    const first = await Promise.race([
      handlerDone.then((outcome) => ({ outcome })),
      stopped.then(() => ({ stopped: true })),
      timedOut.then(() => ({ timedOut: true })),
    ]);
    clearTimeout(timer);
    let outcome;
    if (first.outcome && !run.stopReason) {
      outcome = first.outcome;
    } else {
      if (!run.stopReason) {
        run.stopReason = { status: 'RUN_STATUS_TIMEOUT', code: CODE_TIMEOUT, message: `job execute timeout after ${request.timeoutMs} ms` };
      }
      outcome = run.stopReason;
      ctx.controller.abort(new Error(outcome.message));
      const returned = await Promise.race([handlerDone.then(() => true), sleep(this.killGraceMs).then(() => false)]);
      if (!returned) ctx.log(`handler did not stop within ${this.killGraceMs} ms; abandoned`);
    }
    this.finish(run, outcome, startedAtMs);
  }

  // Runs the handler; resolves to { status, code, message }, never rejects.
  async call(run) {
    try {
      const returned = await run.handler(run.ctx);
      return { status: 'RUN_STATUS_SUCCESS', code: CODE_SUCCESS, message: returned == null ? '' : String(returned) };
    } catch (error) {
      const message = error instanceof JobError ? error.message : `${error && error.name}: ${error && error.message}`;
      return { status: 'RUN_STATUS_FAILED', code: CODE_FAIL, message };
    }
  }

  finish(run, outcome, startedAtMs) {
    const { request, ctx } = run;
    // A run that never started has its "run not started" line only.
    if (startedAtMs) ctx.log(`run end: status=${outcome.status} code=${outcome.code} message=${outcome.message}`);
    this.active.delete(request.logId);
    this.recent.set(request.logId, Date.now());
    const result = {
      logId: request.logId,
      logDateMs: request.logDateMs,
      status: outcome.status,
      code: outcome.code,
      message: outcome.message,
      startedAtMs,
      finishedAtMs: Date.now(),
      // Untraced, the admin's dispatch context goes back: its `complete` span closes the run's
      // trace all the same. Traced, the `callback` span's context replaces it.
      traceparent: request.traceparent,
    };
    this.traces.finished(result);
    this.report(result);
  }

  forgetOld() {
    const horizon = Date.now() - RECENT_RUN_TTL_MS;
    for (const [logId, finished] of this.recent) {
      if (finished > horizon) break;
      this.recent.delete(logId);
    }
  }
}

// The first line of every run's log, as in every xjob SDK (docs/executors.md).
function startLine(request) {
  return `run start: job_id=${request.jobId} log_id=${request.logId} handler=${request.handler} `
    + `params=${request.params} shard=${request.shardIndex}/${request.shardTotal} `
    + `attempt=${request.attempt} trigger=${request.triggerType} timeout_ms=${request.timeoutMs}`;
}

function busy(slot) {
  return slot.running !== null || slot.queue.length > 0;
}

function stopRun(run, reason) {
  if (!run.stopReason) run.stopReason = reason;
  if (run.stop) run.stop();
}

// A delay that does not keep the process alive on its own (a stopped executor exits at once,
// not when its last grace or retry timer fires).
function sleep(ms) {
  return new Promise((resolve) => { setTimeout(resolve, ms).unref(); });
}

module.exports = { Runner, sleep };
