'use strict';
// Exponential backoff with jitter for reconnects and callback retries: 100 ms doubling to 5 s,
// each delay spread ±20 % so many executors do not retry in step.
const INITIAL_DELAY_MS = 100;
const MAX_DELAY_MS = 5000;

class Backoff {
  constructor() {
    this.current = INITIAL_DELAY_MS;
  }

  nextDelayMs() {
    const base = this.current;
    this.current = Math.min(this.current * 2, MAX_DELAY_MS);
    return Math.min(base * (0.8 + Math.random() * 0.4), MAX_DELAY_MS);
  }

  reset() {
    this.current = INITIAL_DELAY_MS;
  }
}

module.exports = { Backoff };
