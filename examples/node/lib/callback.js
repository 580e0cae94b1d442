'use strict';
// Result reporting: finished runs wait here until an admin acknowledges them durable.
//
// Results go out with Registry.Callback in batches of at most 100. A log id leaves the backlog
// only when it is listed in acceptedLogIds; anything else is retried with backoff, failing over
// between admins, for as long as the process lives. Until then the run stays in the
// heartbeat's running list (pendingLogIds), so the admin does not take a finished but unreported
// run for a lost one while it is briefly down.
const { Backoff } = require('./backoff');
const { sleep } = require('./runner');

const MAX_BATCH = 100;
const BATCH_WINDOW_MS = 5;
const CALL_TIMEOUT_MS = 10000;

class CallbackSender {
  constructor(admins, log) {
    this.admins = admins;
    this.log = log;
    this.pending = new Map(); // log id -> RunResult
    this.sending = null;
    this.idleWaiters = [];
  }

  report(result) {
    this.pending.set(result.logId, result);
    if (!this.sending) this.sending = this.drain().finally(() => { this.sending = null; });
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
      if (await this.sendBatch()) backoff.reset();
      else await sleep(backoff.nextDelayMs());
    }
  }

  sendBatch() {
    const batch = [...this.pending.values()].slice(0, MAX_BATCH);
    const address = this.admins.current;
    return new Promise((resolve) => {
      const deadline = new Date(Date.now() + CALL_TIMEOUT_MS);
      this.admins.registry(address).Callback({ results: batch }, this.admins.metadata(), { deadline }, (error, response) => {
        if (error) {
          this.log.warn(`callback of ${batch.length} result(s) to ${address} failed: ${error.code} ${error.details}`);
          this.admins.advance();
          resolve(false);
          return;
        }
        const accepted = new Set(response.acceptedLogIds.map(Number));
        for (const result of batch) if (accepted.has(result.logId)) this.pending.delete(result.logId);
        if (accepted.size < batch.length) {
          this.log.warn(`admin ${address} acknowledged ${accepted.size} of ${batch.length} results; retrying the rest`);
          resolve(false);
          return;
        }
        resolve(true);
      });
    });
  }
}

module.exports = { CallbackSender };
