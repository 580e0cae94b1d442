'use strict';
// Session dispatch against a small admin served over real gRPC on loopback: the executor opens
// no port, registers as session://NAME in DISPATCH_MODE_SESSION, and answers the calls sent
// down its session with the replies a dialed call would give: npm test (node --test).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { test, beforeEach, afterEach } = require('node:test');
const grpc = require('@grpc/grpc-js');
const { Executor } = require('../lib');
const { xjob } = require('../lib/proto');

const STEP_MS = 10000; // bound of each wait; generous for a loaded machine
const quietLog = { info: () => {}, warn: () => {} };

// Resolves when `predicate()` holds, checked on each `notify()`; rejects after STEP_MS.
class Waiters {
  constructor() { this.list = []; }

  until(predicate, what) {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), STEP_MS);
      this.list.push({ predicate, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }

  notify() {
    this.list = this.list.filter((waiter) => {
      if (!waiter.predicate()) return true;
      waiter.resolve();
      return false;
    });
  }
}

// Holds the executor's session: records its Register, sends calls, collects replies, heartbeats
// and callbacks.
function fakeAdmin() {
  const admin = {
    register: null, replies: new Map(), heartbeats: [], results: new Map(), nextCallId: 0, stream: null, waiters: new Waiters(),
  };
  admin.service = {
    Session: (stream) => {
      admin.stream = stream;
      stream.on('data', (message) => {
        if (message.register) {
          admin.register = message.register;
          stream.write({
            registered: {
              executorId: 'e-1', heartbeatIntervalMs: 200, leaseMs: 5000, dispatchMode: 'DISPATCH_MODE_SESSION',
            },
          });
        } else if (message.reply) {
          admin.replies.set(Number(message.reply.callId), message.reply);
        } else if (message.heartbeat) {
          admin.heartbeats.push(message.heartbeat);
        } else if (message.deregister) {
          stream.write({ deregistered: {} });
          stream.end();
        }
        admin.waiters.notify();
      });
      stream.on('error', () => {});
    },
    Callback: (call, callback) => {
      for (const result of call.request.results) admin.results.set(Number(result.logId), result);
      admin.waiters.notify();
      callback(null, { acceptedLogIds: call.request.results.map((result) => result.logId), unknownLogIds: [] });
    },
  };
  // Sends one SessionCall and waits for its reply.
  admin.call = async (request, deadlineMs = 5000) => {
    admin.nextCallId += 1;
    const callId = admin.nextCallId;
    admin.stream.write({ call: { callId, deadlineMs, ...request } });
    await admin.waiters.until(() => admin.replies.has(callId), `the reply to call ${callId}`);
    return admin.replies.get(callId);
  };
  admin.result = async (logId) => {
    await admin.waiters.until(() => admin.results.has(logId), `the result of log ${logId}`);
    return admin.results.get(logId);
  };
  return admin;
}

const runRequest = (logId, handler, params = '', jobId = 1) => ({
  jobId, logId, handler, params, blockStrategy: 'BLOCK_STRATEGY_SERIAL_EXECUTION', logDateMs: 1700000000000, glueType: 'GLUE_TYPE_BEAN', shardTotal: 1,
});

const freePort = () => new Promise((resolve, reject) => {
  const probe = net.createServer();
  probe.once('error', reject);
  probe.listen(0, '127.0.0.1', () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});

const isListening = (port) => new Promise((resolve) => {
  const socket = net.connect(port, '127.0.0.1');
  socket.once('connect', () => { socket.destroy(); resolve(true); });
  socket.once('error', () => resolve(false));
});

let dir;
let server;
let admin;
let executor;
let unusedPort;
let release;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xjob-node-session-'));
  admin = fakeAdmin();
  server = new grpc.Server();
  server.addService(xjob.Registry.service, admin.service);
  const adminPort = await new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port)));
  });
  unusedPort = await freePort();
  let releaseWait;
  const released = new Promise((resolve) => { releaseWait = resolve; });
  release = releaseWait;
  executor = new Executor({
    appName: 'session-test',
    adminAddrs: [`http://127.0.0.1:${adminPort}`],
    bind: `127.0.0.1:${unusedPort}`,
    address: 'session://session-test-1',
    accessToken: 's3cret',
    logDir: dir,
    shutdownGraceMs: 200,
    callbackFlushTimeoutMs: 2000,
    log: quietLog,
    sessionDispatch: true,
  });
  executor.handler('succeed', async (ctx) => {
    ctx.log(`params ${ctx.params}`);
    return `ok ${ctx.params}`;
  });
  const stopped = (ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  executor.handler('wait', (ctx) => Promise.race([released, stopped(ctx)]).then(() => 'released'));
  await executor.start();
  await executor.waitRegistered();
});

afterEach(async () => {
  release();
  await executor.stop();
  server.forceShutdown();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('registers in session dispatch and opens no port', async () => {
  assert.equal(admin.register.dispatchMode, 'DISPATCH_MODE_SESSION');
  assert.equal(admin.register.address, 'session://session-test-1');
  assert.deepEqual([...admin.register.handlers].sort(), ['succeed', 'wait']);
  assert.equal(await isListening(unusedPort), false);
});

test('beat and idle beat', async () => {
  const beat = await admin.call({ beat: {} });
  assert.equal(beat.response, 'beat');
  const idle = await admin.call({ idleBeat: { jobId: 7 } });
  assert.equal(idle.idleBeat.idle, true);
});

test('a run, its result and its log read; the same log id again is refused', async () => {
  const accepted = await admin.call({ run: runRequest(11, 'succeed', 'p1') });
  assert.equal(accepted.run.accepted, true);
  const result = await admin.result(11);
  assert.equal(result.status, 'RUN_STATUS_SUCCESS');
  assert.equal(result.message, 'ok p1');
  const read = await admin.call({ readLog: { logId: 11, logDateMs: 1700000000000, fromLine: 1 } });
  assert.match(read.readLog.content, /params p1/);
  assert.equal(read.readLog.isEnd, true);
  const again = await admin.call({ run: runRequest(11, 'succeed', 'p1') });
  assert.equal(again.run.accepted, false);
  assert.match(again.run.message, /duplicate run/);
});

test('kill stops a running run; idle beat sees it running first', async () => {
  assert.equal((await admin.call({ run: runRequest(21, 'wait', '', 3) })).run.accepted, true);
  assert.equal((await admin.call({ idleBeat: { jobId: 3 } })).idleBeat.idle, false);
  assert.equal((await admin.call({ kill: { jobId: 3, logId: 21 } })).kill.killed, true);
  assert.equal((await admin.result(21)).status, 'RUN_STATUS_KILLED');
  assert.equal((await admin.call({ kill: { jobId: 3, logId: 21 } })).kill.killed, false);
});

test('heartbeats go on between calls and list the runs', async () => {
  assert.equal((await admin.call({ run: runRequest(31, 'wait', '', 4) })).run.accepted, true);
  await admin.waiters.until(() => admin.heartbeats.some((beat) => beat.runningLogIds.map(Number).includes(31)), 'a heartbeat listing log 31');
});

test('a call without a request is an invalid argument', async () => {
  const reply = await admin.call({});
  assert.equal(reply.response, 'error');
  assert.equal(reply.error.code, grpc.status.INVALID_ARGUMENT);
});

test('a dialed address is refused in session dispatch, and the other way round', () => {
  assert.throws(() => new Executor({ appName: 'a', adminAddrs: ['http://127.0.0.1:1'], sessionDispatch: true, address: 'http://127.0.0.1:1' }));
  assert.throws(() => new Executor({ appName: 'a', adminAddrs: ['http://127.0.0.1:1'], address: 'session://a-1' }));
  const named = new Executor({ appName: 'orders', adminAddrs: ['http://127.0.0.1:1'], sessionDispatch: true });
  assert.match(named.address, /^session:\/\/orders-/);
});
