'use strict';
// The built-in `command` handler: each run executes a program, and a stopped run really stops
// it. It behaves as the Rust SDK's (docs/executors.md, "The built-in command handler"):
//
//   argv + params split on whitespace ─spawn: own process group, XJOB_* env, stdin null─▶ child
//   child stdout + stderr ─line by line, as they arrive─▶ run log (ctx.log)
//   exit 0 ─▶ success · exit N / signal S ─▶ failure "command exited with status N"
//   stopped (kill, job timeout, COVER_EARLY, shutdown) or the handler's own timeout
//       ─▶ SIGTERM the group ─(killGraceMs / 2)─▶ SIGKILL the group ─▶ reap ─▶ return
//
// The command leads its own process group (`detached`), so a stop reaches the processes it
// started too. The whole stop takes at most three quarters of the kill grace, so the handler
// returns before the runner abandons it. After a normal exit, background processes are left
// alone and their output is read for at most OUTPUT_DRAIN_MS more.
const { spawn } = require('node:child_process');
const os = require('node:os');
const { JobError } = require('./context');

const OUTPUT_DRAIN_MS = 1000;
const MAX_LINE_BYTES = 64 * 1024;

function duration(ms) {
  return ms < 1000 ? `${ms}ms` : `${ms / 1000}s`;
}

// The XJOB_* variables describing the run.
function runEnvironment(ctx) {
  const environment = {
    XJOB_JOB_ID: String(ctx.jobId),
    XJOB_LOG_ID: String(ctx.logId),
    XJOB_PARAMS: ctx.params,
    XJOB_SHARD_INDEX: String(ctx.shardIndex),
    XJOB_SHARD_TOTAL: String(ctx.shardTotal),
    XJOB_SCHEDULED_AT_MS: String(ctx.scheduledAtMs),
    XJOB_ATTEMPT: String(ctx.attempt),
    XJOB_TRIGGER_TYPE: String(ctx.triggerType).replace(/^TRIGGER_TYPE_/, ''),
  };
  // The command's own spans can join the run's trace.
  if (ctx.traceparent) environment.TRACEPARENT = ctx.traceparent;
  return environment;
}

// { ok, text } for how the command ended.
function describeExit(code, signal) {
  if (code === 0) return { ok: true, text: 'command exited with status 0' };
  if (code !== null) return { ok: false, text: `command exited with status ${code}` };
  if (signal) {
    const number = os.constants.signals[signal];
    return { ok: false, text: `command killed by signal ${number} (${signal})` };
  }
  return { ok: false, text: 'command ended abnormally' };
}

function signalGroup(group, signal) {
  try {
    process.kill(-group, signal);
  } catch (error) {
    if (error.code !== 'ESRCH') throw error; // ESRCH: the whole group is gone already
  }
}

// Logs each line of one pipe as it arrives; resolves once it closes.
function forwardLines(stream, ctx) {
  return new Promise((resolve) => {
    let pending = Buffer.alloc(0);
    stream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf(10);
        let line;
        if (end < 0) {
          if (pending.length < MAX_LINE_BYTES) break;
          line = pending.subarray(0, MAX_LINE_BYTES);
          pending = pending.subarray(MAX_LINE_BYTES);
        } else {
          line = pending.subarray(0, end);
          pending = pending.subarray(end + 1);
          if (line.length && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
        }
        ctx.log(line.toString('utf8'));
      }
    });
    stream.on('close', () => {
      if (pending.length) ctx.log(pending.toString('utf8'));
      resolve();
    });
    stream.on('error', (error) => ctx.log(`failed to read command output: ${error.message}`));
  });
}

function within(promise, ms) {
  let timer;
  const expired = new Promise((resolve) => { timer = setTimeout(() => resolve(false), Math.max(ms, 0)); });
  return Promise.race([promise.then(() => true), expired]).finally(() => clearTimeout(timer));
}

// Returns the handler that runs `argv` followed by each run's params split on whitespace.
// Options: cwd, env (extra variables; the XJOB_* ones win), timeoutMs (the handler's own).
function commandHandler(argv = [], { cwd, env = {}, timeoutMs = 0 } = {}) {
  const fixed = [...argv];
  return async function command(ctx) {
    const commandLine = fixed.concat(ctx.params.split(/\s+/).filter(Boolean));
    if (commandLine.length === 0) {
      throw new JobError('no command to run: the handler has no argv and the run has no params');
    }
    if (ctx.isCancelled()) throw new JobError('run cancelled before the command started');
    const [program, ...args] = commandLine;
    const child = spawn(program, args, {
      cwd,
      env: { ...process.env, ...env, ...runEnvironment(ctx) },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, led by the child
    });
    const exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
      child.once('error', (error) => resolve({ error }));
    });
    if (child.pid === undefined) {
      const { error } = await exited;
      throw new JobError(`failed to start command ${JSON.stringify(program)}: ${error && error.message}`);
    }
    const group = child.pid;
    ctx.log(`command started: pid=${group} argv=[${commandLine.map((arg) => JSON.stringify(arg)).join(', ')}]`);
    const output = Promise.all([forwardLines(child.stdout, ctx), forwardLines(child.stderr, ctx)]);
    const stopRequested = new Promise((resolve) => {
      if (ctx.signal.aborted) resolve('cancelled');
      ctx.signal.addEventListener('abort', () => resolve('cancelled'), { once: true });
      if (timeoutMs > 0) setTimeout(() => resolve('timedOut'), timeoutMs).unref();
    });
    const first = await Promise.race([exited.then((status) => ({ status })), stopRequested.then((stop) => ({ stop }))]);
    if (first.stop) {
      await stopGroup(group, exited, output, ctx);
      if (first.stop === 'timedOut') throw new JobError(`command timed out after ${duration(timeoutMs)} (handler timeout)`);
      throw new JobError('command stopped');
    }
    if (!(await within(output, OUTPUT_DRAIN_MS))) {
      ctx.log(`command exited but its output is still open after ${duration(OUTPUT_DRAIN_MS)} `
        + '(a background process holds it): no longer read');
      child.stdout.destroy();
      child.stderr.destroy();
    }
    const { ok, text } = describeExit(first.status.code, first.status.signal);
    if (!ok) throw new JobError(text);
    return text;
  };
}

// SIGTERM to the group, up to half the kill grace for the command to exit, SIGKILL to the group
// (stragglers included), then waits for it and the rest of its output, all within three
// quarters of the kill grace.
async function stopGroup(group, exited, output, ctx) {
  const grace = ctx.stopGraceMs;
  const deadline = Date.now() + (grace * 3) / 4;
  signalGroup(group, 'SIGTERM');
  ctx.log(`run stopped: sent SIGTERM to process group ${group}`);
  let ended = null;
  exited.then((status) => { ended = status; });
  const reaped = await within(exited, grace / 2);
  if (reaped) {
    ctx.log(`after SIGTERM: ${describeExit(ended.code, ended.signal).text}`);
  } else {
    ctx.log(`command still running ${duration(grace / 2)} after SIGTERM: sending SIGKILL`);
  }
  // Always: processes of the group may outlive its leader, or ignore SIGTERM.
  signalGroup(group, 'SIGKILL');
  if (!reaped && !(await within(exited, deadline - Date.now()))) {
    ctx.log('command not reaped in time after SIGKILL');
  }
  await within(output, deadline - Date.now());
  ctx.log(`command stopped: process group ${group} killed`);
}

module.exports = { commandHandler, describeExit };
