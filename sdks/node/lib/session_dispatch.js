'use strict';
// Session dispatch: the admin's ExecutorService calls arrive on the executor's own
// Registry.Session stream instead of a port the executor serves, so an executor behind NAT, in
// a serverless box or on a laptop needs no inbound route. TLS covers them through the admin's
// certificate (the executor dialed the admin).
//
// Each SessionCall is answered by the same ExecutorService code a dialed call runs
// (server.js), bounded by the call's deadline, with a SessionReply carrying the call's id.
// Replies go out in any order; the admin matches them by id. A reply that cannot be sent (the
// session ended) is dropped: the admin has already ended that call as it ends a dialed call to
// a vanished executor.
const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');

const SESSION_SCHEME = 'session://';
// The longest a call is worked on when the admin sent no deadline.
const DEFAULT_CALL_DEADLINE_MS = 30000;

// SessionCall.request field -> ExecutorService method (the reply's field has the same name).
const METHODS = {
  beat: 'Beat', idleBeat: 'IdleBeat', run: 'Run', kill: 'Kill', readLog: 'ReadLog',
};

// The address of an executor that names none: the app, this process and a random part, fixed
// for the life of the process so that a reconnect keeps it (the admin kills and reads the logs
// of runs by the address they were sent to).
function defaultSessionAddress(appName) {
  return `${SESSION_SCHEME}${appName}-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
}

// Runs one call through `service` (the object server.service() returns, built without an
// access token: the admin's identity was checked when this executor dialed it) exactly as if
// it had been dialed; resolves to the SessionReply.
function serve(service, call) {
  const kind = call.request;
  const method = METHODS[kind];
  if (!method) {
    return Promise.resolve({
      callId: call.callId,
      error: { code: grpc.status.INVALID_ARGUMENT, message: `session call ${call.callId} carries no request this executor knows` },
    });
  }
  const deadlineMs = Number(call.deadlineMs) > 0 ? Number(call.deadlineMs) : DEFAULT_CALL_DEADLINE_MS;
  return new Promise((resolve) => {
    let done = false;
    const answer = (reply) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ callId: call.callId, ...reply });
    };
    const timer = setTimeout(() => answer({ error: { code: grpc.status.DEADLINE_EXCEEDED, message: 'call deadline passed' } }), deadlineMs);
    const unaryCall = { request: call[kind], metadata: new grpc.Metadata() };
    service[method](unaryCall, (error, response) => {
      if (error) answer({ error: { code: error.code ?? grpc.status.UNKNOWN, message: String(error.details ?? error.message ?? '') } });
      else answer({ [kind]: response });
    });
  });
}

// Answers the calls of one executor's sessions; `send` writes an ExecutorMessage on the
// session the call came from.
class SessionCalls {
  constructor(service, log) {
    this.service = service;
    this.log = log;
  }

  answer(call, send) {
    serve(this.service, call).then((reply) => {
      try {
        send({ reply });
      } catch (error) {
        this.log.info(`session ended before the reply to call ${call.callId} could be sent: ${error.message}`);
      }
    });
  }
}

module.exports = {
  SESSION_SCHEME, SessionCalls, defaultSessionAddress, serve,
};
