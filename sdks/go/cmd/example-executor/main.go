// Command example-executor is an xjob executor written with the Go library in ../../executor.
// It serves the conformance suite's handlers (succeed, fail, sleep, log; see docs/executors.md)
// and two app-style ones (hello, failOnDemand), configured from the environment:
//
//	XJOB_ADMIN_ADDR=http://127.0.0.1:8080 XJOB_APP_NAME=go-demo XJOB_EXECUTOR_PORT=9996 \
//	  XJOB_LOG_DIR=/tmp/xjob-go-logs [XJOB_ACCESS_TOKEN=secret] go run ./cmd/example-executor
//
// XJOB_ADMIN_ADDR may list several admins separated by commas (failover order).
// XJOB_DISPATCH=session opens no port: the admins' calls come down the session, which registers
// as session://<app>-<port> (the port then only makes the name unique). SIGTERM or SIGINT shuts
// it down gracefully: deregister, finish or kill runs, flush results.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"xjob.dev/sdk/go/executor"
	"xjob.dev/sdk/go/xjobpb"
)

// succeed logs a line and succeeds with "ok params=<params> shard=<i>/<n>".
func succeed(_ context.Context, run *executor.Run) (string, error) {
	message := fmt.Sprintf("ok params=%s shard=%d/%d", run.Params(), run.ShardIndex(), run.ShardTotal())
	run.Logf("%s", message)
	return message, nil
}

// fail fails with "failed on purpose: <params>".
func fail(_ context.Context, run *executor.Run) (string, error) {
	run.Logf("failing on purpose")
	return "", fmt.Errorf("failed on purpose: %s", run.Params())
}

// sleep sleeps params ms (default 1000), logging "tick <n>" every 100 ms, and stops at once
// when the run is cancelled (kill, timeout, COVER_EARLY, shutdown).
func sleep(ctx context.Context, run *executor.Run) (string, error) {
	millis := intParam(run.Params(), 1000)
	run.Logf("sleeping %d ms", millis)
	deadline := time.Now().Add(time.Duration(millis) * time.Millisecond)
	for tick := 1; ; tick++ {
		wait := min(100*time.Millisecond, time.Until(deadline))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return "", errors.New("cancelled while sleeping")
		}
		if !time.Now().Before(deadline) {
			return fmt.Sprintf("slept %d ms", millis), nil
		}
		run.Logf("tick %d", tick)
	}
}

// logLines writes "line 1" … "line <params>" (default 3) and succeeds.
func logLines(_ context.Context, run *executor.Run) (string, error) {
	lines := intParam(run.Params(), 3)
	for line := 1; line <= lines; line++ {
		run.Logf("line %d", line)
	}
	return fmt.Sprintf("wrote %d lines", lines), nil
}

// hello succeeds with a greeting: what an app's handler looks like.
func hello(_ context.Context, run *executor.Run) (string, error) {
	name := strings.TrimSpace(run.Params())
	if name == "" {
		name = "world"
	}
	run.Logf("greeting %s (attempt %d)", name, run.Attempt())
	return "hello, " + name, nil
}

// failOnDemand fails when its params say "fail" and succeeds otherwise.
func failOnDemand(_ context.Context, run *executor.Run) (string, error) {
	if strings.TrimSpace(run.Params()) == "fail" {
		run.Logf("asked to fail")
		return "", errors.New("failed on demand")
	}
	return "did not fail (params are not \"fail\")", nil
}

func intParam(params string, fallback int) int {
	value, err := strconv.Atoi(strings.TrimSpace(params))
	if err != nil || value < 0 {
		return fallback
	}
	return value
}

func requireEnv(name string) string {
	value := os.Getenv(name)
	if value == "" {
		log.Fatalf("%s must be set", name)
	}
	return value
}

func main() {
	var admins []string
	for _, address := range strings.Split(requireEnv("XJOB_ADMIN_ADDR"), ",") {
		if address = strings.TrimSpace(address); address != "" {
			admins = append(admins, address)
		}
	}
	port := requireEnv("XJOB_EXECUTOR_PORT")
	logDir := os.Getenv("XJOB_LOG_DIR")
	if logDir == "" {
		logDir = "./xjob-executor-logs"
	}
	// TLS (all optional): the port's certificate (also presented to admins), the CA of the
	// admins, and whether callers need a client certificate from it.
	tlsConfig := executor.TLS{
		CertFile: os.Getenv("XJOB_TLS_CERT"), KeyFile: os.Getenv("XJOB_TLS_KEY"),
		CAFile: os.Getenv("XJOB_TLS_CA"), RequireClientCert: os.Getenv("XJOB_TLS_REQUIRE_CLIENT_CERT") == "1",
	}
	scheme := "http"
	if tlsConfig.CertFile != "" {
		scheme = "https"
	}
	// Script (GLUE) jobs are off unless enabled: XJOB_GLUE_SHELL=1 enables shell scripts (bash).
	var glue executor.Glue
	if os.Getenv("XJOB_GLUE_SHELL") == "1" {
		glue.Interpreters = map[xjobpb.GlueType]string{xjobpb.GlueType_GLUE_TYPE_SHELL: ""}
	}
	appName := requireEnv("XJOB_APP_NAME")
	sessionDispatch := os.Getenv("XJOB_DISPATCH") == "session"
	address := scheme + "://127.0.0.1:" + port
	if sessionDispatch {
		address = "session://" + appName + "-" + port
	}
	exec, err := executor.New(executor.Config{
		Glue:             glue,
		TLS:              tlsConfig,
		AppName:          appName,
		AdminAddrs:       admins,
		Bind:             "127.0.0.1:" + port,
		AdvertiseAddress: address,
		SessionDispatch:  sessionDispatch,
		AccessToken:      os.Getenv("XJOB_ACCESS_TOKEN"),
		LogDir:           logDir,
		ShutdownGrace:    2 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	handlers := map[string]executor.Handler{
		"succeed": succeed, "fail": fail, "sleep": sleep, "log": logLines,
		"hello": hello, "failOnDemand": failOnDemand,
		// The built-in command handler: the params are the command line (docs/executors.md).
		"command": executor.CommandHandler(executor.CommandSpec{}),
	}
	for name, handler := range handlers {
		if err := exec.Handle(name, handler); err != nil {
			log.Fatal(err)
		}
	}
	if err := exec.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
