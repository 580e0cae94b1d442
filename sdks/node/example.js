'use strict';
// Example xjob executor in Node.js: the handlers of the executor conformance suite plus two
// demo handlers. Configured by environment variables (see README.md):
//   XJOB_ADMIN_ADDR     admin URL(s), comma-separated      (default http://127.0.0.1:8080)
//   XJOB_APP_NAME       the group's app name               (default xjob-node)
//   XJOB_EXECUTOR_PORT  port to listen on, 127.0.0.1       (default 9997)
//   XJOB_ACCESS_TOKEN   the group's access token, if any
//   XJOB_LOG_DIR        run log directory                  (default ./xjob-executor-logs)
//   XJOB_DISPATCH       `session`: no port, the admin's calls come down the session, as
//                       session://<app>-<port> (the port only makes the name unique)
const { setTimeout: sleep } = require('node:timers/promises');
const { Executor, JobError } = require('./lib');

const env = process.env;
const appName = env.XJOB_APP_NAME || 'xjob-node';
const port = env.XJOB_EXECUTOR_PORT || '9997';
const sessionDispatch = env.XJOB_DISPATCH === 'session';
const executor = new Executor({
  appName,
  adminAddrs: (env.XJOB_ADMIN_ADDR || 'http://127.0.0.1:8080').split(',').map((a) => a.trim()).filter(Boolean),
  bind: `127.0.0.1:${port}`,
  accessToken: env.XJOB_ACCESS_TOKEN || '',
  logDir: env.XJOB_LOG_DIR || 'xjob-executor-logs',
  shutdownGraceMs: 2000,
  // TLS (all optional): the port's certificate (also presented to admins), the CA of the admins,
  // and whether callers need a client certificate from it.
  tlsCert: env.XJOB_TLS_CERT || undefined,
  tlsKey: env.XJOB_TLS_KEY || undefined,
  tlsCa: env.XJOB_TLS_CA || undefined,
  requireClientCert: env.XJOB_TLS_REQUIRE_CLIENT_CERT === '1',
  sessionDispatch,
  address: sessionDispatch ? `session://${appName}-${port}` : undefined,
});

const count = (params, fallback) => (/^\d+$/.test(params.trim()) ? Number(params.trim()) : fallback);

// Succeeds with a message.
executor.handler('hello', async (ctx) => {
  ctx.log(`hello, ${ctx.params || 'world'}!`);
  return `greeted ${ctx.params || 'world'}`;
});

// Fails when its params say `fail`, succeeds otherwise.
executor.handler('failOnDemand', async (ctx) => {
  if (ctx.params.trim() === 'fail') throw new JobError("failed on demand (params 'fail')");
  return "did not fail (params are not 'fail')";
});

// The conformance suite's handlers (docs/executors.md).
executor.handler('succeed', async (ctx) => {
  const message = `ok params=${ctx.params} shard=${ctx.shardIndex}/${ctx.shardTotal}`;
  ctx.log(message);
  return message;
});

executor.handler('fail', async (ctx) => {
  ctx.log('failing on purpose');
  throw new JobError(`failed on purpose: ${ctx.params}`);
});

executor.handler('sleep', async (ctx) => {
  const millis = count(ctx.params, 1000);
  ctx.log(`sleeping ${millis} ms`);
  const deadline = Date.now() + millis;
  for (let tick = 1; ; tick += 1) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) return `slept ${millis} ms`;
    // Kill and timeout abort ctx.signal, which rejects the pending timer at once.
    await sleep(Math.min(100, remaining), undefined, { signal: ctx.signal });
    if (Date.now() < deadline) ctx.log(`tick ${tick}`);
  }
});

executor.handler('log', async (ctx) => {
  const lines = count(ctx.params, 3);
  for (let line = 1; line <= lines; line += 1) ctx.log(`line ${line}`);
  return `wrote ${lines} lines`;
});

// The built-in command handler: the params are the command line (docs/executors.md).
executor.commandHandler('command');
// Script (GLUE) jobs are off unless enabled: XJOB_GLUE_SHELL=1 enables shell scripts (bash).
if (env.XJOB_GLUE_SHELL === '1') executor.enableGlue('shell');

executor.run().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
