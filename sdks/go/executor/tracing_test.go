package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	pb "xjob.dev/sdk/go/xjobpb"
)

const (
	adminTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	adminSpan  = "00f067aa0ba902b7"
)

// tracedRunner is a runner whose spans go to memory.
func tracedRunner(t *testing.T) (*runner, chan *pb.RunResult, *runTraces, *tracetest.InMemoryExporter) {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	traces := newRunTraces(provider, provider.Tracer("test"))
	results := make(chan *pb.RunResult, 16)
	handlers := map[string]Handler{
		"ok": func(ctx context.Context, run *Run) (string, error) {
			// The handler's ctx carries its span: user spans nest under it.
			return trace.SpanContextFromContext(ctx).SpanID().String() + " " + run.Traceparent(), nil
		},
		"fail": func(context.Context, *Run) (string, error) { return "", errors.New("failed on purpose") },
	}
	sender := &resultSender{ch: results, unreported: &unreported{ids: map[int64]bool{}}, traces: traces}
	return newRunner(handlers, logStore{root: t.TempDir()}, sender, 500*time.Millisecond, t.Logf), results, traces, exporter
}

func spansByName(exporter *tracetest.InMemoryExporter) map[string]tracetest.SpanStub {
	spans := map[string]tracetest.SpanStub{}
	for _, span := range exporter.GetSpans() {
		spans[span.Name] = span
	}
	return spans
}

func tracedRequest(logID int64, handler string) *pb.RunRequest {
	request := request(1, logID, handler, pb.BlockStrategy_BLOCK_STRATEGY_SERIAL_EXECUTION)
	request.Traceparent = "00-" + adminTrace + "-" + adminSpan + "-01"
	return request
}

func TestRunHandlerCallbackSpansContinueTheAdminsTrace(t *testing.T) {
	r, results, traces, exporter := tracedRunner(t)
	if refusal := r.submit(tracedRequest(1, "ok")); refusal != "" {
		t.Fatal(refusal)
	}
	result := next(t, results)
	spans := spansByName(exporter)
	run, handler := spans["run"], spans["handler"]
	if _, open := spans["callback"]; open {
		t.Fatal("the callback span must stay open until an admin accepts the result")
	}
	if run.SpanContext.TraceID().String() != adminTrace || run.Parent.SpanID().String() != adminSpan {
		t.Errorf("run span not under the admin's dispatch span: %v / %v", run.SpanContext, run.Parent)
	}
	if handler.Parent.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("handler span's parent %v is not the run span", handler.Parent.SpanID())
	}
	if !strings.HasPrefix(result.GetMessage(), handler.SpanContext.SpanID().String()+" 00-"+adminTrace+"-"+handler.SpanContext.SpanID().String()) {
		t.Errorf("the handler's ctx and Traceparent should name its span: %q", result.GetMessage())
	}
	traces.acceptedResults(map[int64]bool{1: true})
	callback := spansByName(exporter)["callback"]
	if callback.Parent.SpanID() != handler.SpanContext.SpanID() {
		t.Errorf("callback span's parent %v is not the handler span", callback.Parent.SpanID())
	}
	if want := "00-" + adminTrace + "-" + callback.SpanContext.SpanID().String() + "-01"; result.GetTraceparent() != want {
		t.Errorf("result traceparent %q, want the callback span %q", result.GetTraceparent(), want)
	}
}

func TestFailedAndRefusedRunsAreErrors(t *testing.T) {
	r, results, _, exporter := tracedRunner(t)
	if refusal := r.submit(tracedRequest(2, "fail")); refusal != "" {
		t.Fatal(refusal)
	}
	next(t, results)
	for _, name := range []string{"run", "handler"} {
		span := spansByName(exporter)[name]
		if span.Status.Code != codes.Error || !strings.Contains(span.Status.Description, "RUN_STATUS_FAILED") {
			t.Errorf("%s span status %+v", name, span.Status)
		}
	}
	exporter.Reset()
	if refusal := r.submit(tracedRequest(3, "missing")); refusal == "" {
		t.Fatal("an unknown handler must be refused")
	}
	if run := spansByName(exporter)["run"]; run.Status.Code != codes.Error {
		t.Errorf("refused run span status %+v", run.Status)
	}
}
