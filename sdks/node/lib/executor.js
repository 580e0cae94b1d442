'use strict';
// The Executor: handlers by name, and the ordered start and stop of the server, the session
// and the callback sender.
//
// Graceful stop: Deregister (the admin stops routing here) -> refuse new runs, let running ones
// finish within shutdownGraceMs, kill the rest -> flush results (up to callbackFlushTimeoutMs)
// -> stop the server.
const dns = require('node:dns/promises');
const net = require('node:net');
const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { xjob } = require('./proto');
const { Admins } = require('./admins');
const { CallbackSender } = require('./callback');
const { JobLogStore } = require('./joblog');
const { commandHandler } = require('./command');
const { RunTraces } = require('./tracing');
const { glueRunners, glueTypeName } = require('./glue');
const { Runner } = require('./runner');
const { Session } = require('./session');
const { service } = require('./server');
const { SESSION_SCHEME, SessionCalls, defaultSessionAddress } = require('./session_dispatch');

const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

const consoleLog = {
  info: (message) => console.error(`${new Date().toISOString()} INFO ${message}`),
  warn: (message) => console.error(`${new Date().toISOString()} WARN ${message}`),
};

class Executor {
  // bind: host:port to listen on; address: the URL the admin dials (default http://<bind>);
  // adminAddrs: admin URLs, tried in turn. Bound off loopback, start() refuses without
  // accessToken unless insecureOpenNetwork is true: anyone who reaches the port could then run
  // its handlers with any params and read its run logs.
  constructor({
    appName, adminAddrs, bind = '127.0.0.1:9999', address, accessToken = '', logDir = 'xjob-executor-logs',
    killGraceMs = 2000, shutdownGraceMs = 5000, callbackFlushTimeoutMs = 10000, labels = {}, log = consoleLog,
    logRetentionDays = 30, insecureOpenNetwork = false,
    tlsCert, tlsKey, tlsCa, tlsClientCert, tlsClientKey, requireClientCert = false, otlpEndpoint = '',
    sessionDispatch = false,
  }) {
    if (Boolean(tlsCert) !== Boolean(tlsKey)) throw new Error('tlsCert and tlsKey go together');
    if (requireClientCert && !(tlsCert && tlsCa)) throw new Error('requireClientCert needs tlsCert, tlsKey and tlsCa');
    // TLS (PEM file paths, as the Rust SDK): tlsCert/tlsKey serve this executor's port over TLS
    // (the default address becomes https://); tlsCa verifies the admins of https:// addresses
    // (default: the system's roots) and, with requireClientCert, callers' client certificates
    // (only the admins may then call); tlsClientCert/tlsClientKey are presented to admins that
    // ask for one (default: tlsCert/tlsKey).
    this.tls = {
      cert: tlsCert, key: tlsKey, ca: tlsCa, clientCert: tlsClientCert || tlsCert, clientKey: tlsClientKey || tlsKey, requireClientCert,
    };
    this.appName = appName;
    this.adminAddrs = adminAddrs;
    this.bind = bind;
    // Session dispatch: no port; the admin's runs, kills and log reads come down the session
    // this executor opens. `address` may name it (session://NAME, unique in the app, the same
    // across restarts), else it is the app name, the process id and a random part. bind, the
    // server TLS files and insecureOpenNetwork are then unused.
    this.sessionDispatch = sessionDispatch;
    this.address = advertisedAddress(appName, bind, address, Boolean(tlsCert), sessionDispatch);
    this.accessToken = accessToken;
    this.logDir = logDir;
    this.killGraceMs = killGraceMs;
    this.shutdownGraceMs = shutdownGraceMs;
    this.callbackFlushTimeoutMs = callbackFlushTimeoutMs;
    this.labels = labels;
    this.logRetentionDays = logRetentionDays;
    this.insecureOpenNetwork = insecureOpenNetwork;
    // Tracing (lib/tracing.js): with the optional OpenTelemetry SDK packages installed, runs are
    // traced and exported over OTLP/gRPC to otlpEndpoint, else to OTEL_EXPORTER_OTLP_ENDPOINT.
    this.otlpEndpoint = otlpEndpoint;
    this.log = log;
    this.handlers = new Map();
    this.glue = new Map(); // enabled script glue type -> interpreter (undefined: the usual one)
    this.glueEnv = {};
  }

  // Registers the built-in `command` handler under `name`: each run executes `argv` followed by
  // the run's params split on whitespace (empty argv: the params are the whole command line),
  // with XJOB_* variables describing the run in its environment; stdout and stderr go to the
  // run log line by line; exit status 0 succeeds. The command leads its own process group: a
  // stop sends SIGTERM to the group, then SIGKILL after half the kill grace.
  // Options: cwd, env, timeoutMs (the handler's own, besides the job's).
  commandHandler(name, argv = [], options = {}) {
    return this.handler(name, commandHandler(argv, options));
  }

  // Enables script (GLUE) jobs of one language ('shell', 'python', 'nodejs', 'php',
  // 'powershell' or the GLUE_TYPE_ name), run with `interpreter` or its usual one on the PATH
  // (bash, python3, node, php, pwsh). Off by default: a run of a type not enabled is refused.
  // Each run writes the job's script under {logDir}/gluesource/ (once per version) and runs it
  // like the command handler. glueEnv adds variables for script runs.
  enableGlue(glueType, interpreter) {
    this.glue.set(glueTypeName(glueType), interpreter);
    return this;
  }

  glueEnvVar(key, value) {
    this.glueEnv[key] = value;
    return this;
  }

  // Registers an async function (ctx) => message. Throwing (JobError or anything) ends the run
  // FAILED with the error's message.
  handler(name, fn) {
    this.handlers.set(name, fn);
    return this;
  }

  async start() {
    if (!this.sessionDispatch) {
      // mTLS (only callers with a certificate from the CA) guards the port as a token does.
      await refuseOpenNetwork(this.bind, Boolean(this.accessToken) || this.tls.requireClientCert, this.insecureOpenNetwork, this.log);
    }
    this.admins = new Admins(this.adminAddrs, this.accessToken, channelCredentials(this.tls));
    this.traces = RunTraces.start(this.appName, this.otlpEndpoint, this.log);
    this.callbacks = new CallbackSender(this.admins, this.log, path.join(this.logDir, 'callback-spool'),
      (logIds) => this.traces.acceptedResults(logIds));
    this.joblog = new JobLogStore(this.logDir);
    this.runner = new Runner({
      handlers: this.handlers, joblog: this.joblog, report: (result) => this.callbacks.report(result), killGraceMs: this.killGraceMs,
      glue: glueRunners(this.glue, this.glueEnv, this.logDir), traces: this.traces,
    });
    let calls = null;
    if (this.sessionDispatch) {
      // No server holds the event loop open in this mode, and the reconnect and callback retry
      // timers are unref'd: without this, the process would exit between two connection
      // attempts to an admin that is down.
      this.keepAlive = setInterval(() => {}, 60 * 60 * 1000);
      // No token check on these calls: they come from the admin this executor dialed.
      calls = new SessionCalls(service({ runner: this.runner, joblog: this.joblog, accessToken: '' }), this.log);
    } else {
      await this.serve();
    }
    this.session = new Session({
      admins: this.admins,
      register: {
        appName: this.appName,
        address: this.address,
        handlers: [...this.handlers.keys()].sort(),
        labels: this.labels,
        capacity: 0,
        dispatchMode: this.sessionDispatch ? 'DISPATCH_MODE_SESSION' : 'DISPATCH_MODE_DIAL',
      },
      runningList: () => this.runningList(),
      log: this.log,
      calls,
    });
    this.sessionDone = this.session.run();
    // Run log folders older than the retention go at start and then hourly.
    const sweep = () => {
      const removed = this.joblog.removeExpired(this.logRetentionDays);
      if (removed) this.log.info(`removed ${removed} expired run log folder(s)`);
    };
    sweep();
    this.sweepTimer = setInterval(sweep, 60 * 60 * 1000);
    this.sweepTimer.unref();
    const mode = this.sessionDispatch ? 'session dispatch, no port' : 'serving';
    this.log.info(`executor ${this.appName} ${mode} as ${this.address}, admins ${this.adminAddrs.join(', ')}`);
  }

  // Starts the gRPC server the admins dial (the dialed mode).
  async serve() {
    // The admin batches up to 512 runs per RunBatch, each with up to 64 KiB of params.
    this.server = new grpc.Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES });
    this.server.addService(xjob.ExecutorService.service, service({ runner: this.runner, joblog: this.joblog, accessToken: this.accessToken }));
    await new Promise((resolve, reject) => {
      this.server.bindAsync(this.bind, serverCredentials(this.tls), (error) => (error ? reject(error) : resolve()));
    });
  }

  waitRegistered() {
    return this.session.waitRegistered();
  }

  // What a heartbeat reports: runs queued or running, and finished runs whose result the admin
  // has not acknowledged yet.
  runningList() {
    const logIds = new Set([...this.runner.activeLogIds(), ...this.callbacks.pendingLogIds()]);
    return { logIds: [...logIds], queued: this.runner.queuedCount() };
  }

  async stop() {
    clearInterval(this.sweepTimer);
    this.session.stop();
    await this.sessionDone;
    await this.runner.shutdown(this.shutdownGraceMs);
    if (!(await this.callbacks.flush(this.callbackFlushTimeoutMs))) {
      this.log.warn(`results of log ids ${this.callbacks.pendingLogIds().join(', ')} could not be reported; spooled for the next start`);
      this.callbacks.spoolAll();
    }
    if (this.server) {
      await new Promise((resolve) => {
        const timer = setTimeout(() => { this.server.forceShutdown(); resolve(); }, 1000);
        this.server.tryShutdown(() => { clearTimeout(timer); resolve(); });
      });
    }
    this.admins.close();
    try {
      await this.traces.shutdown(); // sends the buffered spans
    } catch (error) {
      this.log.warn(`flushing traces at shutdown failed: ${error.message}`);
    }
    clearInterval(this.keepAlive);
    this.log.info('executor stopped');
  }

  // Starts, serves until SIGTERM or SIGINT, then stops gracefully.
  async run() {
    await this.start();
    await new Promise((resolve) => {
      process.once('SIGTERM', resolve);
      process.once('SIGINT', resolve);
    });
    await this.stop();
  }
}

// The address sent in Register: what the admins dial, or the executor's session name.
function advertisedAddress(appName, bind, address, tls, session) {
  if (session) {
    if (address && !address.startsWith(SESSION_SCHEME)) {
      throw new Error(`with sessionDispatch the address is ${SESSION_SCHEME}NAME, not ${address}`);
    }
    return address || defaultSessionAddress(appName);
  }
  if (address && address.startsWith(SESSION_SCHEME)) throw new Error(`${address} is a session address: set sessionDispatch: true`);
  return (address || `${tls ? 'https' : 'http'}://${bind}`).replace(/\/+$/, '');
}

// Thrown by start() for a non-loopback bind with no access token and no opt-out.
class OpenNetworkRefused extends Error {
  constructor(message) {
    super(message);
    this.name = 'OpenNetworkRefused';
  }
}

const isLoopbackIp = (ip) => (net.isIPv4(ip) ? ip.startsWith('127.')
  : ip === '::1' || /^::ffff:127\./i.test(ip));

// True when every address the host of `bind` (host:port, [v6]:port) resolves to is a loopback
// one. An empty host or a wildcard (0.0.0.0, [::]) listens on every interface, so it is not.
async function isLoopbackBind(bind) {
  const colon = bind.lastIndexOf(':');
  const host = (colon >= 0 ? bind.slice(0, colon) : bind).replace(/^\[|\]$/g, '');
  if (!host) return false;
  if (net.isIP(host)) return isLoopbackIp(host);
  try {
    const addresses = await dns.lookup(host, { all: true });
    return addresses.length > 0 && addresses.every(({ address }) => isLoopbackIp(address));
  } catch {
    return false;
  }
}

// An executor reachable from other machines must know who calls it: the group's access token.
// Without one, anyone who reaches the port runs its handlers with any params and reads its
// logs, so starting is refused unless the operator opted out by name.
const readOpt = (file) => (file ? fs.readFileSync(file) : null);

// Credentials of the executor's own port: TLS with tls.cert, plaintext without.
function serverCredentials(tls) {
  if (!tls.cert) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    tls.requireClientCert ? readOpt(tls.ca) : null,
    [{ private_key: readOpt(tls.key), cert_chain: readOpt(tls.cert) }],
    tls.requireClientCert,
  );
}

// Credentials of https:// admin channels: the CA (or the system's roots), and the client
// certificate when there is one.
function channelCredentials(tls) {
  return grpc.credentials.createSsl(readOpt(tls.ca), readOpt(tls.clientKey), readOpt(tls.clientCert));
}

async function refuseOpenNetwork(bind, tokenSet, insecureOpenNetwork, log) {
  if (tokenSet || await isLoopbackBind(bind)) return;
  if (insecureOpenNetwork) {
    log.warn(`INSECURE: executor open to the network without access token (insecureOpenNetwork) on ${bind}`);
    return;
  }
  throw new OpenNetworkRefused(`${bind} is reachable from other machines, and with no access token anyone who `
    + "reaches it can run this executor's handlers and read its logs. Set accessToken (the group's token, also "
    + 'set on the group in the admin), or bind 127.0.0.1; to run open anyway, set insecureOpenNetwork: true');
}

module.exports = { Executor, OpenNetworkRefused, isLoopbackBind };
