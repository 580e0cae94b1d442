'use strict';
// The Registry.Session stream: Register first, then a Heartbeat every interval the admin asks
// for (listing runs queued, running, or finished but not yet acknowledged), Deregister on a
// clean stop. On any failure it reconnects with backoff, moving to the next admin of the list.
//
//   disconnected ──connect+Register──▶ registering ──Registered──▶ registered ──heartbeats─┐
//        ▲                                  │                          │  ◀────────────────┘
//        └──────── backoff, next admin ◀────┴── stream error / end ────┘
//   registered ──stop──▶ Deregister ──Deregistered (or 2 s)──▶ closed
//
// In session dispatch (`calls` given) the admin's calls arrive on the same stream while it is
// open; each is handed to calls.answer with a writer for its reply.
const grpc = require('@grpc/grpc-js');
const { PROTOCOL_VERSION } = require('./proto');
const { Backoff } = require('./backoff');
const { sleep } = require('./runner');

const HANDSHAKE_TIMEOUT_MS = 10000;
const DEREGISTER_TIMEOUT_MS = 2000;
const DEFAULT_HEARTBEAT_INTERVAL_MS = 10000; // when the admin answers 0 (or less)
const MIN_HEARTBEAT_INTERVAL_MS = 10;

class Session {
  constructor({
    admins, register, runningList, log, calls = null,
  }) {
    this.calls = calls; // session_dispatch.SessionCalls, or null in the dialed mode
    this.admins = admins;
    this.register = register;
    this.runningList = runningList; // () => { logIds, queued }
    this.log = log;
    this.stopping = false;
    this.wakeStop = () => {};
    this.registered = false;
    this.onRegistered = [];
  }

  // Keeps a session open until stop() (then deregisters).
  async run() {
    const backoff = new Backoff();
    while (!this.stopping) {
      const address = this.admins.current;
      try {
        await this.oneSession(address, backoff);
      } catch (error) {
        // The status by name (UNAUTHENTICATED: the access token was refused), as the other SDKs log it.
        const status = error.code !== undefined ? `${grpc.status[error.code] ?? error.code} ${error.details}` : error.message;
        this.log.warn(`session with ${address} ended: ${status}`);
      }
      this.registered = false;
      if (this.stopping) return;
      this.admins.advance();
      await new Promise((resolve) => {
        this.wakeStop = resolve;
        setTimeout(resolve, backoff.nextDelayMs()).unref();
      });
    }
  }

  stop() {
    this.stopping = true;
    this.wakeStop();
  }

  waitRegistered() {
    if (this.registered) return Promise.resolve();
    return new Promise((resolve) => this.onRegistered.push(resolve));
  }

  oneSession(address, backoff) {
    return new Promise((resolve, reject) => {
      const call = this.admins.registry(address).Session(this.admins.metadata());
      let heartbeatTimer = null;
      let handshakeTimer = null;
      let deregisterTimer = null;
      let settled = false;
      const finish = (error) => {
        if (settled) return;
        settled = true;
        clearTimeout(heartbeatTimer);
        clearTimeout(handshakeTimer);
        clearTimeout(deregisterTimer);
        this.wakeStop = () => {};
        call.cancel();
        if (error) reject(error); else resolve();
      };
      const heartbeat = (intervalMs) => {
        heartbeatTimer = setTimeout(() => {
          const { logIds, queued } = this.runningList();
          call.write({ heartbeat: { runningLogIds: logIds.sort((a, b) => a - b), queued } });
          heartbeat(intervalMs);
        }, intervalMs);
      };
      const deregister = () => {
        clearTimeout(heartbeatTimer);
        call.write({ deregister: {} });
        deregisterTimer = setTimeout(() => finish(), DEREGISTER_TIMEOUT_MS);
      };
      call.on('data', (message) => {
        if (message.registered && !this.registered) {
          clearTimeout(handshakeTimer);
          const ms = Number(message.registered.heartbeatIntervalMs);
          const intervalMs = ms > 0 ? Math.max(ms, MIN_HEARTBEAT_INTERVAL_MS) : DEFAULT_HEARTBEAT_INTERVAL_MS;
          this.registered = true;
          backoff.reset();
          this.log.info(`registered with ${address} as ${message.registered.executorId} (heartbeat every ${intervalMs} ms)`);
          if (this.calls && message.registered.dispatchMode !== 'DISPATCH_MODE_SESSION') {
            // An admin without session dispatch would dial the session:// address and fail.
            this.log.warn(`${address} did not confirm session dispatch: it cannot send runs here`);
          }
          for (const resolveWaiter of this.onRegistered.splice(0)) resolveWaiter();
          if (this.stopping) { deregister(); return; }
          this.wakeStop = deregister;
          heartbeat(intervalMs);
        } else if (message.call) {
          if (!this.calls) {
            this.log.warn('the admin sent a session call to a dialed executor; ignored');
            return;
          }
          this.calls.answer(message.call, (reply) => {
            if (settled) throw new Error('the session ended');
            call.write(reply);
          });
        } else if (message.deregistered) {
          this.log.info('deregistered');
          finish();
        }
      });
      call.on('error', (error) => finish(error));
      call.on('end', () => finish(this.stopping ? null : new Error('the admin closed the session')));
      handshakeTimer = setTimeout(() => finish(new Error(`${address} did not answer Register`)), HANDSHAKE_TIMEOUT_MS);
      call.write({ register: { ...this.register, protocolVersion: PROTOCOL_VERSION } });
    });
  }
}

module.exports = { Session };
