'use strict';
// Result reporting: finished runs wait here until an admin acknowledges them durable.
//
// Results go out with Registry.Callback in batches of at most 100. A log id leaves the backlog
// only when it is listed in acceptedLogIds; anything else is retried with backoff, failing over
// between admins, for as long as the process lives. Until then the run stays in the
// heartbeat's running list (pendingLogIds), so the admin does not take a finished but unreported
// run for a lost one while it is briefly down.
//
// When no admin has taken a result for SPOOL_AFTER_MS, or a graceful stop could not deliver it,
// it is also written to {spoolDir}/{logId}.json, so a restarted executor sends it again; the
// file goes once the result is acknowledged.
//
// An admin refuses a request larger than its max_request_bytes with OUT_OF_RANGE: the batch is
// then sent again as halves, down to one result, and a single result still refused has its
// message halved, so no result is retried unchanged for ever.
const fs = require('node:fs');
const path = require('node:path');
const { Backoff } = require('./backoff');
const { sleep } = require('./runner');

const MAX_BATCH = 100;
const BATCH_WINDOW_MS = 5;
const CALL_TIMEOUT_MS = 10000;
const SPOOL_AFTER_MS = 10000;
// Below this many characters a cut message would be mostly the cut mark: it is emptied instead.
const MIN_CUT_CHARS = 32;
const OUT_OF_RANGE = 11; // gRPC status code

class CallbackSender {
  constructor(admins, log, spoolDir, onAccepted = () => {}) {
    this.admins = admins;
    this.onAccepted = onAccepted; // called with the log ids an admin accepted (tracing)
    this.log = log;
    this.spoolDir = spoolDir;
    this.pending = new Map(); // log id -> RunResult
    this.reportedAt = new Map(); // log id -> Date.now() when reported
    this.spooled = new Set();
    this.sending = null;
    this.batchLimit = MAX_BATCH; // lowered for good when an admin refuses a batch as too large
    this.loadSpool();
  }

  report(result) {
    this.pending.set(result.logId, result);
    this.reportedAt.set(result.logId, Date.now());
    this.wake();
  }

  wake() {
    if (!this.sending) this.sending = this.drain().finally(() => { this.sending = null; });
  }

  // Writes every unacknowledged result to disk (a stop that could not deliver them).
  spoolAll() {
    this.spool(() => true);
  }

  spool(wanted) {
    for (const [logId, result] of this.pending) {
      if (this.spooled.has(logId) || !wanted(logId)) continue;
      try {
        fs.mkdirSync(this.spoolDir, { recursive: true });
        const file = path.join(this.spoolDir, `${logId}.json`);
        fs.writeFileSync(`${file}.tmp`, JSON.stringify(result));
        fs.renameSync(`${file}.tmp`, file); // whole files only
        this.spooled.add(logId);
      } catch (error) {
        this.log.warn(`cannot spool the result of log ${logId}: ${error.message}`);
      }
    }
  }

  loadSpool() {
    let names;
    try {
      names = fs.readdirSync(this.spoolDir).filter((name) => name.endsWith('.json')).sort();
    } catch {
      return;
    }
    for (const name of names) {
      try {
        const result = JSON.parse(fs.readFileSync(path.join(this.spoolDir, name), 'utf8'));
        this.log.info(`re-sending the spooled result of log ${result.logId}`);
        this.pending.set(result.logId, result);
        this.reportedAt.set(result.logId, Date.now());
        this.spooled.add(result.logId);
      } catch (error) {
        this.log.warn(`unreadable callback spool file ${name} left in place: ${error.message}`);
      }
    }
    if (this.pending.size) this.wake();
  }

  acknowledged(logId) {
    this.onAccepted([logId]);
    this.pending.delete(logId);
    this.reportedAt.delete(logId);
    if (this.spooled.delete(logId)) fs.rmSync(path.join(this.spoolDir, `${logId}.json`), { force: true });
  }

  pendingLogIds() { return [...this.pending.keys()]; }

  // Resolves true once every result is acknowledged, false after timeoutMs.
  async flush(timeoutMs) {
    if (!this.pending.size) return true;
    await Promise.race([this.sending, sleep(timeoutMs)]);
    return this.pending.size === 0;
  }

  async drain() {
    const backoff = new Backoff();
    await sleep(BATCH_WINDOW_MS);
    while (this.pending.size) {
      if (await this.sendBatch()) {
        backoff.reset();
      } else {
        const horizon = Date.now() - SPOOL_AFTER_MS;
        this.spool((logId) => (this.reportedAt.get(logId) || 0) < horizon);
        await sleep(backoff.nextDelayMs());
      }
    }
  }

  sendBatch() {
    const batch = [...this.pending.values()].slice(0, this.batchLimit);
    const address = this.admins.current;
    return new Promise((resolve) => {
      const deadline = new Date(Date.now() + CALL_TIMEOUT_MS);
      this.admins.registry(address).Callback({ results: batch }, this.admins.metadata(), { deadline }, (error, response) => {
        if (error) {
          // gRPC servers answer OUT_OF_RANGE to a request over their decoding limit.
          if (error.code === OUT_OF_RANGE && this.shrink(batch)) {
            resolve(true);
            return;
          }
          this.log.warn(`callback of ${batch.length} result(s) to ${address} failed: ${error.code} ${error.details}`);
          this.admins.advance();
          resolve(false);
          return;
        }
        const accepted = new Set(response.acceptedLogIds.map(Number));
        for (const result of batch) if (accepted.has(result.logId)) this.acknowledged(result.logId);
        if (accepted.size < batch.length) {
          this.log.warn(`admin ${address} acknowledged ${accepted.size} of ${batch.length} results; retrying the rest`);
          resolve(false);
          return;
        }
        resolve(true);
      });
    });
  }

  // After a refusal of batch as too large; false when nothing is left to make smaller.
  shrink(batch) {
    if (batch.length > 1) {
      this.batchLimit = Math.max(1, Math.floor(batch.length / 2));
      this.log.warn(`an admin refused a callback batch as too large; sending at most ${this.batchLimit} results a batch`);
      return true;
    }
    const result = batch[0];
    const chars = [...(result.message || '')];
    if (!chars.length) return false;
    const keep = Math.floor(chars.length / 2);
    result.message = keep >= MIN_CUT_CHARS ? `${chars.slice(0, keep).join('')}...` : '';
    this.log.warn(`an admin refused the result of log ${result.logId} as too large; its message is cut to ${keep} characters`);
    return true;
  }
}

module.exports = { CallbackSender };
