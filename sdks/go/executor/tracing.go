package executor

// The executor's half of a run's trace, exported over OTLP/gRPC when an endpoint is configured
// (Config.OTLPEndpoint, or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables), with the same span names and attributes as
// every xjob SDK:
//
//	(admin) dispatch ─▶ run (server span; parent = RunRequest.traceparent)
//	                     └─▶ handler (the handler's ctx carries it: its own spans nest here)
//	                           └─▶ callback (client span, open until an admin accepts the
//	                                result; RunResult.traceparent, so the admin's `complete`
//	                                span continues it)
//
// Off (no endpoint), every method returns at once and the result carries the admin's own
// context back.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	pb "xjob.dev/sdk/go/xjobpb"
)

// runTraces holds the open spans of this executor's runs, by log id; nil or with a nil tracer,
// it is off.
type runTraces struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer

	mu        sync.Mutex
	runs      map[int64]*openRun
	callbacks map[int64]trace.Span
}

type openRun struct {
	run     trace.Span
	handler trace.Span
}

func newRunTraces(provider *sdktrace.TracerProvider, tracer trace.Tracer) *runTraces {
	return &runTraces{provider: provider, tracer: tracer, runs: map[int64]*openRun{}, callbacks: map[int64]trace.Span{}}
}

// startRunTraces exports the spans of appName's runs when endpoint or a standard variable names
// a collector; off otherwise.
func startRunTraces(appName, endpoint string) (*runTraces, error) {
	env := func(key string) string { return strings.TrimSpace(os.Getenv(key)) }
	if endpoint == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return newRunTraces(nil, nil), nil
	}
	options := []otlptracegrpc.Option{}
	if endpoint != "" {
		// An http:// endpoint is plaintext, https:// TLS, as the standard variable says.
		options = append(options, otlptracegrpc.WithEndpointURL(endpoint))
	}
	// The exporter connects lazily: a collector that is down costs spans, never the start.
	exporter, err := otlptracegrpc.New(context.Background(), options...)
	if err != nil {
		return nil, fmt.Errorf("executor: OTLP trace exporter: %w", err)
	}
	// The app's name unless OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES say otherwise (the
	// environment's resource is merged last, so it wins).
	named, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", appName)),
		resource.Environment(),
	)
	if err != nil {
		named = resource.NewSchemaless(attribute.String("service.name", appName))
	}
	// Its own provider, not the global one: an executor inside a traced app is its own service.
	// The sampler comes from OTEL_TRACES_SAMPLER(_ARG).
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(named))
	return newRunTraces(provider, provider.Tracer("xjob-executor")), nil
}

// runHandlerName is what a run calls, as its spans name it: the handler, or for a script
// `glue:` and its language's usual interpreter.
func runHandlerName(request *pb.RunRequest) string {
	if language, ok := glueLanguages[request.GetGlueType()]; ok {
		return "glue:" + language.interpreter
	}
	if request.GetGlueType() == pb.GlueType_GLUE_TYPE_GROOVY {
		return "glue:groovy"
	}
	return request.GetHandler()
}

// runSpan opens the `run` span of a run the admin sent, continuing the admin's trace.
func (t *runTraces) runSpan(request *pb.RunRequest) trace.Span {
	if t == nil || t.tracer == nil {
		return nil
	}
	parent := propagation.TraceContext{}.Extract(context.Background(),
		propagation.MapCarrier{"traceparent": request.GetTraceparent()})
	_, span := t.tracer.Start(parent, "run", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.Int64("xjob.job_id", request.GetJobId()),
		attribute.Int64("xjob.log_id", request.GetLogId()),
		attribute.String("xjob.handler", runHandlerName(request)),
		attribute.Int64("xjob.attempt", int64(request.GetAttempt())),
		attribute.Int64("xjob.shard_index", int64(request.GetShardIndex())),
		attribute.Int64("xjob.shard_total", int64(request.GetShardTotal())),
	))
	return span
}

// accepted keeps the `run` span of an accepted run open until its result.
func (t *runTraces) accepted(logID int64, run trace.Span) {
	if run == nil {
		return
	}
	t.mu.Lock()
	t.runs[logID] = &openRun{run: run}
	t.mu.Unlock()
}

// refused ends the `run` span of a refused run with the reason as its error.
func (t *runTraces) refused(run trace.Span, reason string) {
	if run == nil {
		return
	}
	run.SetStatus(codes.Error, reason)
	run.End()
}

// handlerContext opens the `handler` span of a run about to call its handler and returns ctx
// carrying it (ctx itself when off), and the span (nil when off).
func (t *runTraces) handlerContext(ctx context.Context, logID int64) (context.Context, trace.Span) {
	if t == nil || t.tracer == nil {
		return ctx, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	open := t.runs[logID]
	if open == nil {
		return ctx, nil
	}
	handlerCtx, span := t.tracer.Start(trace.ContextWithSpan(ctx, open.run), "handler",
		trace.WithSpanKind(trace.SpanKindInternal))
	open.handler = span
	return handlerCtx, span
}

// finished ends the run's `handler` and `run` spans with its result (an error status unless
// it succeeded), opens its `callback` span and writes that span's context into the result.
func (t *runTraces) finished(result *pb.RunResult) {
	if t == nil || t.tracer == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	open := t.runs[result.GetLogId()]
	if open == nil {
		return
	}
	delete(t.runs, result.GetLogId())
	parent := open.run
	if open.handler != nil {
		parent = open.handler
	}
	_, callback := t.tracer.Start(trace.ContextWithSpan(context.Background(), parent), "callback",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Int64("xjob.log_id", result.GetLogId())))
	result.Traceparent = spanTraceparent(callback)
	t.callbacks[result.GetLogId()] = callback
	for _, span := range []trace.Span{open.handler, open.run} {
		if span == nil {
			continue
		}
		span.SetAttributes(attribute.String("xjob.status", result.GetStatus().String()))
		if result.GetStatus() == pb.RunStatus_RUN_STATUS_SUCCESS {
			span.SetStatus(codes.Ok, "")
		} else {
			span.SetStatus(codes.Error, fmt.Sprintf("%s: %s", result.GetStatus(), result.GetMessage()))
		}
		span.End()
	}
}

// acceptedResults ends the `callback` spans of results an admin accepted.
func (t *runTraces) acceptedResults(logIDs map[int64]bool) {
	if t == nil || t.tracer == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for logID := range logIDs {
		if callback := t.callbacks[logID]; callback != nil {
			delete(t.callbacks, logID)
			callback.End()
		}
	}
}

// shutdown ends what is still open and sends the buffered spans (graceful stop).
func (t *runTraces) shutdown(ctx context.Context) error {
	if t == nil || t.provider == nil {
		return nil
	}
	t.mu.Lock()
	for logID, callback := range t.callbacks {
		callback.SetStatus(codes.Error, "executor stopped before an admin accepted the result")
		callback.End()
		delete(t.callbacks, logID)
	}
	for logID, open := range t.runs {
		open.run.SetStatus(codes.Error, "executor stopped while the run was open")
		open.run.End()
		delete(t.runs, logID)
	}
	t.mu.Unlock()
	return t.provider.Shutdown(ctx)
}

// spanTraceparent is the W3C traceparent of a span; empty for none.
func spanTraceparent(span trace.Span) string {
	if span == nil || !span.SpanContext().IsValid() {
		return ""
	}
	context := span.SpanContext()
	return fmt.Sprintf("00-%s-%s-%02x", context.TraceID(), context.SpanID(), byte(context.TraceFlags()))
}
