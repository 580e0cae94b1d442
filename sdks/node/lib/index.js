'use strict';
// An xjob executor for Node.js: serves ExecutorService, registers with the admin over
// Registry.Session and reports results through Registry.Callback (see docs/executors.md).
//
//   const { Executor, JobError } = require('xjob-executor');
//   const executor = new Executor({ appName: 'my-app', adminAddrs: ['http://127.0.0.1:8080'] });
//   executor.handler('hello', async (ctx) => { ctx.log('hi'); return 'greeted'; });
//   executor.run();   // until SIGTERM/SIGINT, then a graceful stop
const { Executor, OpenNetworkRefused } = require('./executor');
const { JobContext, JobError } = require('./context');

module.exports = { Executor, JobContext, JobError, OpenNetworkRefused };
