'use strict';
// The runner's spans, exported to memory: npm test (needs the optional OpenTelemetry SDK
// packages, devDependencies here).
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { SpanStatusCode } = require('@opentelemetry/api');
const { Runner } = require('../lib/runner');
const { JobLogStore } = require('../lib/joblog');
const { RunTraces } = require('../lib/tracing');

const ADMIN_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const ADMIN_SPAN = '00f067aa0ba902b7';

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'xjob-node-tracing-'));
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const traces = new RunTraces(provider.getTracer('test'), provider);
  const results = new Map();
  const handlers = new Map([
    ['succeed', async (ctx) => `ok ${ctx.traceparent}`],
    ['fail', async () => { throw new Error('failed on purpose'); }],
  ]);
  const runner = new Runner({
    handlers, joblog: new JobLogStore(dir), report: (result) => results.set(result.logId, result), killGraceMs: 500, traces,
  });
  const spans = () => Object.fromEntries(exporter.getFinishedSpans().map((span) => [span.name, span]));
  const runOne = async (logId, handler) => {
    const response = runner.submit({
      jobId: 1, logId, handler, params: '', blockStrategy: 'BLOCK_STRATEGY_SERIAL_EXECUTION', timeoutMs: 0,
      logDateMs: 1_700_000_000_000, glueType: 'GLUE_TYPE_BEAN', shardIndex: 0, shardTotal: 1, attempt: 0,
      traceparent: `00-${ADMIN_TRACE}-${ADMIN_SPAN}-01`,
    });
    assert.ok(response.accepted, response.message);
    await Promise.allSettled([...runner.drains]);
    return results.get(logId);
  };
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
  return { traces, runner, spans, runOne, cleanup };
}

test('run, handler and callback spans continue the admin\'s trace', async () => {
  const { traces, spans, runOne, cleanup } = setup();
  const result = await runOne(1, 'succeed');
  const { run, handler } = spans();
  assert.equal(spans().callback, undefined, 'the callback span stays open until an admin accepts');
  assert.equal(run.spanContext().traceId, ADMIN_TRACE);
  assert.equal(run.parentSpanContext.spanId, ADMIN_SPAN);
  assert.equal(handler.parentSpanContext.spanId, run.spanContext().spanId);
  assert.equal(run.attributes['xjob.handler'], 'succeed');
  assert.equal(run.attributes['xjob.status'], 'RUN_STATUS_SUCCESS');
  assert.ok(result.message.includes(handler.spanContext().spanId), 'ctx.traceparent is the handler span');
  traces.acceptedResults([1]);
  const { callback } = spans();
  assert.equal(callback.parentSpanContext.spanId, handler.spanContext().spanId);
  assert.equal(result.traceparent, `00-${ADMIN_TRACE}-${callback.spanContext().spanId}-01`);
  cleanup();
});

test('a failed run ends its spans in error; a refused one its run span', async () => {
  const { runner, spans, runOne, cleanup } = setup();
  await runOne(2, 'fail');
  for (const name of ['run', 'handler']) {
    assert.equal(spans()[name].status.code, SpanStatusCode.ERROR);
    assert.match(spans()[name].status.message, /RUN_STATUS_FAILED/);
  }
  const refused = runner.submit({ jobId: 1, logId: 3, handler: 'missing', glueType: 'GLUE_TYPE_BEAN' });
  assert.equal(refused.accepted, false);
  const runs = Object.values(spans()).filter((span) => span.name === 'run');
  assert.ok(runs.every((span) => span.status.code === SpanStatusCode.ERROR));
  cleanup();
});
