'use strict';
// Unit tests of the runner and the run logs, without an admin: npm test (node --test).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test, beforeEach, afterEach } = require('node:test');
const { setTimeout: sleep } = require('node:timers/promises');
const { Runner } = require('../lib/runner');
const { JobLogStore } = require('../lib/joblog');
const { CallbackSender } = require('../lib/callback');

const LOG_DATE = 1_700_000_000_000;
const request = (logId, { handler = 'sleep', params = '', jobId = 1, block = 'BLOCK_STRATEGY_SERIAL_EXECUTION', timeoutMs = 0, glueType = 'GLUE_TYPE_BEAN' } = {}) => ({
  jobId, logId, handler, params, blockStrategy: block, timeoutMs, logDateMs: LOG_DATE, glueType, shardIndex: 0, shardTotal: 1, attempt: 0,
});

let dir;
let runner;
let joblog;
let results;
let waiters;
let exits;
let release;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xjob-node-test-'));
  results = new Map();
  waiters = [];
  exits = [];
  let released;
  release = new Promise((resolve) => { released = resolve; });
  release.resolve = released;
  const handlers = new Map([
    ['sleep', async (ctx) => {
      try {
        await sleep(Number(ctx.params || '10'), undefined, { signal: ctx.signal });
        return 'slept';
      } finally {
        exits.push(ctx.logId);
      }
    }],
    ['stubborn', async () => { await release; }], // ignores its signal until the test ends
  ]);
  joblog = new JobLogStore(dir);
  runner = new Runner({
    handlers,
    joblog,
    killGraceMs: 200,
    report: (result) => {
      results.set(result.logId, result);
      for (const wake of waiters.splice(0)) wake();
    },
  });
});

afterEach(async () => {
  release.resolve();
  await runner.shutdown(100);
  fs.rmSync(dir, { recursive: true, force: true });
});

async function result(logId, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (!results.has(logId)) {
    if (Date.now() > deadline) throw new Error(`no result for log ${logId}`);
    await Promise.race([new Promise((resolve) => waiters.push(resolve)), sleep(50)]);
  }
  return results.get(logId);
}

test('serial runs go one after the other', async () => {
  assert.equal(runner.submit(request(1, { params: '100' })).accepted, true);
  assert.equal(runner.submit(request(2, { params: '10' })).accepted, true);
  const first = await result(1);
  const second = await result(2);
  assert.equal(first.status, 'RUN_STATUS_SUCCESS');
  assert.ok(second.startedAtMs >= first.finishedAtMs);
});

test('refusals: duplicate, unknown handler, DISCARD_LATER, other glue types', async () => {
  runner.submit(request(1, { params: '200' }));
  assert.match(runner.submit(request(1)).message, /duplicate run/);
  assert.match(runner.submit(request(2, { handler: 'nope' })).message, /not found/);
  assert.match(runner.submit(request(3, { block: 'BLOCK_STRATEGY_DISCARD_LATER' })).message, /DISCARD_LATER/);
  assert.match(runner.submit(request(4, { jobId: 2, glueType: 'GLUE_TYPE_SHELL' })).message, /GLUE_TYPE_SHELL/);
  await result(1);
  assert.match(runner.submit(request(1)).message, /duplicate run/, 'finished ids are remembered');
});

test('COVER_EARLY kills the running and queued runs', async () => {
  runner.submit(request(1, { params: '10000' }));
  runner.submit(request(2, { params: '10000' }));
  await sleep(50);
  assert.equal(runner.submit(request(3, { params: '10', block: 'BLOCK_STRATEGY_COVER_EARLY' })).accepted, true);
  for (const logId of [1, 2]) {
    const killed = await result(logId);
    assert.equal(killed.status, 'RUN_STATUS_KILLED');
    assert.match(killed.message, /replaced by log 3/);
  }
  assert.equal((await result(3)).status, 'RUN_STATUS_SUCCESS');
  assert.ok(exits.includes(1), 'the running handler saw its signal and returned');
});

test('timeout and kill stop the handler', async () => {
  runner.submit(request(1, { params: '10000', timeoutMs: 100 }));
  const timedOut = await result(1);
  assert.deepEqual([timedOut.status, timedOut.code], ['RUN_STATUS_TIMEOUT', 502]);
  assert.ok(exits.includes(1));
  runner.submit(request(2, { params: '10000', jobId: 5 }));
  await sleep(50);
  assert.equal(runner.isIdle(5), false);
  assert.equal(runner.killJob(5), true);
  const killed = await result(2);
  assert.deepEqual([killed.status, killed.code, killed.message], ['RUN_STATUS_KILLED', 500, 'killed by admin']);
  assert.equal(runner.isIdle(5), true);
  assert.equal(runner.killJob(5), false);
});

test('a handler ignoring its signal is abandoned after the grace', async () => {
  runner.submit(request(1, { handler: 'stubborn' }));
  await sleep(50);
  runner.killJob(1);
  assert.equal((await result(1, 2000)).status, 'RUN_STATUS_KILLED');
  assert.match(joblog.read(1, LOG_DATE, 1, false).content, /abandoned/);
});

test('run logs read in ranges, missing files are reported', () => {
  const log = joblog.open(9, LOG_DATE);
  for (const line of ['one', 'two', 'three']) log.write(line);
  const page = joblog.read(9, LOG_DATE, 2, true);
  assert.deepEqual([page.fromLine, page.toLine, page.isEnd], [2, 3, false]);
  assert.match(page.content, /three\n$/);
  const done = joblog.read(9, LOG_DATE, 4, false);
  assert.deepEqual([done.toLine, done.content, done.isEnd], [3, '', true]);
  const missing = joblog.read(10, LOG_DATE, 1, false);
  assert.deepEqual([missing.toLine, missing.isEnd], [0, true]);
  assert.match(missing.content, /log file not found/);
});

test('run log folders older than the retention are swept', () => {
  for (const name of ['2026-01-01', '2026-01-20', '2026-01-31', 'not-a-date']) fs.mkdirSync(path.join(dir, name));
  const today = new Date(2026, 1, 1, 12);
  assert.equal(joblog.removeExpired(2, today), 0, 'retention below 3 days is off');
  assert.equal(joblog.removeExpired(7, today), 2);
  assert.deepEqual(fs.readdirSync(dir).sort(), ['2026-01-31', 'not-a-date']);
});

test('spooled results are loaded again and deleted once acknowledged', () => {
  const quiet = { info() {}, warn() {} };
  const unreachable = { current: 'http://127.0.0.1:1' };
  const spoolDir = path.join(dir, 'spool');
  const sender = new CallbackSender(unreachable, quiet, spoolDir);
  sender.pending.set(7, { logId: 7, status: 'RUN_STATUS_SUCCESS', code: 200 });
  sender.spoolAll();
  const again = new CallbackSender({ ...unreachable, registry: () => ({ Callback() {} }), metadata() {}, advance() {} }, quiet, spoolDir);
  assert.deepEqual(again.pendingLogIds(), [7]);
  again.acknowledged(7);
  assert.deepEqual(fs.readdirSync(spoolDir), []);
});

// An admin that refuses, as OUT_OF_RANGE (code 11), a request whose messages exceed `limit`
// characters in all; it records how many results each request it took carried.
const silent = { info() {}, warn() {} };
const tooLargeAdmin = (limit) => {
  const sizes = [];
  const registry = {
    Callback({ results: batch }, _metadata, _options, done) {
      const size = batch.reduce((sum, result) => sum + result.message.length, 0);
      if (size > limit) {
        done(Object.assign(new Error('message too large'), { code: 11, details: 'message too large' }));
        return;
      }
      sizes.push(batch.length);
      done(null, { acceptedLogIds: batch.map((result) => result.logId) });
    },
  };
  return { sizes, admins: { current: 'http://127.0.0.1:1', registry: () => registry, metadata() {}, advance() {} } };
};

test('a callback batch refused as too large is sent as halves', async () => {
  const { sizes, admins } = tooLargeAdmin(2500);
  const sender = new CallbackSender(admins, silent, path.join(dir, 'spool'));
  for (let logId = 1; logId <= 4; logId += 1) sender.pending.set(logId, { logId, message: 'x'.repeat(1000) });
  while (sender.pending.size) assert.equal(await sender.sendBatch(), true);
  assert.deepEqual(sizes, [2, 2]);
});

test('a single result refused as too large has its message cut', async () => {
  const { sizes, admins } = tooLargeAdmin(300);
  const sender = new CallbackSender(admins, silent, path.join(dir, 'spool'));
  const result = { logId: 9, message: 'y'.repeat(1000) };
  sender.pending.set(9, result);
  while (sender.pending.size) assert.equal(await sender.sendBatch(), true);
  assert.deepEqual(sizes, [1]);
  // Halved until it fits: 1000 -> 500 + '...' -> 251 + '...'.
  assert.equal(result.message, `${'y'.repeat(251)}...`);
});
