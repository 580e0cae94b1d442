'use strict';
// The open-network refusal and the access token check: npm test (node --test). The executors
// started here point at an admin port nothing listens on: their session only retries in the
// background, which is all these tests need.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { test, beforeEach, afterEach } = require('node:test');
const grpc = require('@grpc/grpc-js');
const { Executor, OpenNetworkRefused } = require('../lib');
const { isLoopbackBind } = require('../lib/executor');
const { xjob } = require('../lib/proto');

let dir;
let started;
let warnings;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xjob-node-guard-'));
  started = [];
  warnings = [];
});

afterEach(async () => {
  for (const executor of started) await executor.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const freePort = (host) => new Promise((resolve, reject) => {
  const probe = net.createServer();
  probe.once('error', reject);
  probe.listen(0, host, () => {
    const { port } = probe.address();
    probe.close(() => resolve(port));
  });
});

const quietLog = { info: () => {}, warn: (message) => warnings.push(message) };

const executor = (bind, options = {}) => new Executor({
  appName: 'guard-test', adminAddrs: ['http://127.0.0.1:1'], bind, logDir: dir, shutdownGraceMs: 100,
  callbackFlushTimeoutMs: 100, log: quietLog, ...options,
});

const start = async (instance) => {
  await instance.start();
  started.push(instance);
};

// The gRPC status code of a call with the given authorization header (null: none), OK = 0.
const call = (port, method, request, header) => new Promise((resolve) => {
  const client = new xjob.ExecutorService(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (header !== null) metadata.set('authorization', header);
  client[method](request, metadata, { deadline: Date.now() + 5000 }, (error) => {
    client.close();
    resolve(error ? error.code : grpc.status.OK);
  });
});

test('loopback binds are told from the others', async () => {
  for (const bind of ['127.0.0.1:9999', '127.8.0.1:1', '[::1]:9999', 'localhost:9999']) {
    assert.equal(await isLoopbackBind(bind), true, bind);
  }
  for (const bind of ['0.0.0.0:9999', '[::]:9999', ':9999', '10.1.2.3:9999', '[2001:db8::1]:9999']) {
    assert.equal(await isLoopbackBind(bind), false, bind);
  }
});

test('off loopback without a token, start is refused and nothing listens', async () => {
  const port = await freePort('0.0.0.0');
  await assert.rejects(executor(`0.0.0.0:${port}`).start(), (error) => {
    assert.ok(error instanceof OpenNetworkRefused);
    assert.match(error.message, /accessToken/);
    assert.match(error.message, /insecureOpenNetwork/);
    return true;
  });
  assert.equal(await call(port, 'Beat', {}, null), grpc.status.UNAVAILABLE);
});

test('the opt-out starts off loopback with a warning', async () => {
  const port = await freePort('0.0.0.0');
  await start(executor(`0.0.0.0:${port}`, { insecureOpenNetwork: true }));
  assert.ok(warnings.some((line) => line.includes('INSECURE')), warnings.join('\n'));
  assert.equal(await call(port, 'Beat', {}, null), grpc.status.OK);
});

test('off loopback with a token starts', async () => {
  const port = await freePort('0.0.0.0');
  await start(executor(`0.0.0.0:${port}`, { accessToken: 's3cret' }));
  assert.equal(await call(port, 'Beat', {}, 'Bearer s3cret'), grpc.status.OK);
});

test('on loopback without a token starts', async () => {
  const port = await freePort('127.0.0.1');
  await start(executor(`127.0.0.1:${port}`));
  assert.equal(await call(port, 'Beat', {}, null), grpc.status.OK);
  assert.ok(!warnings.some((line) => line.includes('INSECURE')), warnings.join('\n'));
});

test('with a token, every call needs exactly that token', async () => {
  const port = await freePort('127.0.0.1');
  await start(executor(`127.0.0.1:${port}`, { accessToken: 's3cret' }));
  for (const header of [null, 'Bearer wrong', 'Bearer s3cret ', 's3cret', 'bearer s3cret']) {
    assert.equal(await call(port, 'Beat', {}, header), grpc.status.UNAUTHENTICATED, String(header));
  }
  assert.equal(await call(port, 'Run', { jobId: 1, logId: 1, handler: 'x' }, null), grpc.status.UNAUTHENTICATED);
  assert.equal(await call(port, 'Kill', { jobId: 1 }, null), grpc.status.UNAUTHENTICATED);
  assert.equal(await call(port, 'ReadLog', { logId: 1, fromLine: 1 }, null), grpc.status.UNAUTHENTICATED);
  assert.equal(await call(port, 'Beat', {}, 'Bearer s3cret'), grpc.status.OK);
});
