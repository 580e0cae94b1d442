'use strict';
// ExecutorService, served to the admin: Beat, IdleBeat, Run, RunBatch, Kill, ReadLog. With an
// access token set, every call must carry `authorization: Bearer <token>`, otherwise it is
// refused with UNAUTHENTICATED before it does anything.
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');

function service({ runner, joblog, accessToken }) {
  const expected = accessToken ? Buffer.from(`Bearer ${accessToken}`) : null;
  const authorized = (call) => {
    if (!expected) return true;
    const presented = Buffer.from(String(call.metadata.get('authorization')[0] || ''));
    return presented.length === expected.length && crypto.timingSafeEqual(presented, expected);
  };
  // Wraps a method: checks the token, then answers with what `body` returns.
  const unary = (body) => (call, callback) => {
    if (!authorized(call)) {
      callback({ code: grpc.status.UNAUTHENTICATED, details: 'missing or invalid access token' });
      return;
    }
    try {
      callback(null, body(call.request));
    } catch (error) {
      callback({ code: grpc.status.INTERNAL, details: String(error && error.message) });
    }
  };
  return {
    Beat: unary(() => ({})),
    IdleBeat: unary(({ jobId }) => (runner.isIdle(jobId)
      ? { idle: true, reason: '' }
      : { idle: false, reason: `job ${jobId} is running or has queued runs` })),
    Run: unary((request) => runner.submit(request)),
    RunBatch: unary(({ runs }) => ({ results: runs.map((run) => runner.submit(run)) })),
    Kill: unary(({ jobId }) => (runner.killJob(jobId)
      ? { killed: true, message: '' }
      : { killed: false, message: `job ${jobId} has no running or queued run` })),
    // Asked before reading: a run that is over has written its last line already.
    ReadLog: unary(({ logId, logDateMs, fromLine }) => joblog.read(logId, logDateMs, fromLine, runner.isActive(logId))),
  };
}

module.exports = { service };
