// Type declarations of xjob-executor (written by hand; the library is plain JavaScript).
import type { Context } from '@opentelemetry/api';

/** Where the executor writes its own lines (not run logs). Default: stderr with a timestamp. */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
}

export interface ExecutorOptions {
  /** The group's app name. */
  appName: string;
  /** Admin URLs (`http://10.0.0.1:8080`), tried in turn. */
  adminAddrs: string[];
  /** host:port to listen on. Default `127.0.0.1:9999`. */
  bind?: string;
  /** The URL the admins dial. Default `http://<bind>`. */
  address?: string;
  /** The group's access token: sent to the admin and required on incoming calls. */
  accessToken?: string;
  /** Run log directory. Default `xjob-executor-logs`. */
  logDir?: string;
  /** How long a stopped handler may take to return before it is abandoned. Default 2000. */
  killGraceMs?: number;
  /** How long a graceful stop lets running handlers finish. Default 5000. */
  shutdownGraceMs?: number;
  /** How long a graceful stop tries to deliver results before spooling them. Default 10000. */
  callbackFlushTimeoutMs?: number;
  /** Labels sent at registration. */
  labels?: Record<string, string>;
  /** Run log date folders older than this are deleted. Default 30. */
  logRetentionDays?: number;
  /** Start bound off loopback with no access token (logs an INSECURE warning). Default false. */
  insecureOpenNetwork?: boolean;
  log?: Logger;
  /** PEM certificate chain served on the executor's port (TLS); the default address becomes https://. */
  tlsCert?: string;
  /** PEM private key of tlsCert. */
  tlsKey?: string;
  /** PEM CA bundle verifying https:// admins (default: the system's roots) and client certificates. */
  tlsCa?: string;
  /** Client certificate presented to admins that ask for one. Default: tlsCert. */
  tlsClientCert?: string;
  /** Key of tlsClientCert. Default: tlsKey. */
  tlsClientKey?: string;
  /** Accept only callers with a client certificate from tlsCa (mTLS). Default false. */
  requireClientCert?: boolean;
  /**
   * OTLP/gRPC endpoint runs' spans are exported to (`http://127.0.0.1:4317`). Default: the
   * standard OTEL_EXPORTER_OTLP_ENDPOINT; no tracing when neither is set or the optional
   * OpenTelemetry SDK packages are not installed.
   */
  otlpEndpoint?: string;
  /**
   * Session dispatch: open no port; the admin's runs, kills and log reads come down the session
   * this executor opens to the admin (for executors the admins cannot dial). `address` may then
   * name it (`session://NAME`), else it is the app name, the process id and a random part.
   * Default false.
   */
  sessionDispatch?: boolean;
}

/** Settings of the built-in `command` handler. */
export interface CommandOptions {
  /** The directory the command starts in. Default: the executor's own. */
  cwd?: string;
  /** Extra environment variables (the `XJOB_*` run variables win). */
  env?: Record<string, string>;
  /** The handler's own timeout in milliseconds, besides the job's; 0 for none. */
  timeoutMs?: number;
}

/** One run of a handler: its request's fields, its run log, and whether it is being stopped. */
export class JobContext {
  readonly jobId: number;
  /** The run's id; its log is read by this id. */
  readonly logId: number;
  readonly handler: string;
  /** The job's params, or the ones given to this trigger. */
  readonly params: string;
  /** This executor's shard (0-based) under the sharding broadcast route. */
  readonly shardIndex: number;
  /** The number of shards under the sharding broadcast route. */
  readonly shardTotal: number;
  /** 0 for the first attempt, +1 for each retry. */
  readonly attempt: number;
  /** When the fire was planned, in milliseconds since the Unix epoch. */
  readonly scheduledAtMs: number;
  /** Why the run was fired, a TriggerType name (`TRIGGER_TYPE_CRON`, …). */
  readonly triggerType: string;
  /** The run's timeout in milliseconds, 0 for none. */
  readonly timeoutMs: number;
  /** Aborted once the run is being stopped (kill, timeout, COVER_EARLY, shutdown). */
  readonly signal: AbortSignal;
  /** Milliseconds a stopped handler has to return before it is abandoned (killGraceMs). */
  readonly stopGraceMs: number;
  /** The OpenTelemetry context of the run's `handler` span when the executor traces, else null. */
  readonly traceContext: Context | null;
  /** W3C traceparent for services the handler calls ('' when the run has no trace). */
  readonly traceparent: string;
  isCancelled(): boolean;
  /** Appends a line to the run's log, readable through the admin's ReadRunLog. */
  log(line: string): void;
}

/** Throw it from a handler to end the run FAILED with its message (any error does the same). */
export class JobError extends Error {}

/** Thrown by start() for a bind off loopback with no access token and no opt-out. */
export class OpenNetworkRefused extends Error {}

/** A handler: resolves to the success message; throwing or rejecting fails the run. */
export type Handler = (ctx: JobContext) => Promise<string | void> | string | void;

export class Executor {
  constructor(options: ExecutorOptions);
  readonly appName: string;
  /** The URL the admins dial. */
  readonly address: string;
  /** Registers a handler under a name; returns the executor for chaining. */
  handler(name: string, fn: Handler): this;
  /**
   * Registers the built-in `command` handler: each run executes `argv` followed by the run's
   * params split on whitespace, in its own process group (killed on kill or timeout); exit
   * status 0 succeeds.
   */
  commandHandler(name: string, argv?: string[], options?: CommandOptions): this;
  /**
   * Enables script (GLUE) jobs of one language (`shell`, `python`, `nodejs`, `php`,
   * `powershell`), run with `interpreter` or its usual one; off by default.
   */
  enableGlue(glueType: string, interpreter?: string): this;
  /** Adds an environment variable for script runs (the `XJOB_*` ones win). */
  glueEnvVar(key: string, value: string): this;
  /** Binds the server and starts registering in the background. */
  start(): Promise<void>;
  /** Resolves once an admin has accepted the registration. */
  waitRegistered(): Promise<void>;
  /** Graceful stop: deregister, let runs finish, flush results, stop the server. */
  stop(): Promise<void>;
  /** start(), serve until SIGTERM or SIGINT, then stop(). */
  run(): Promise<void>;
}
