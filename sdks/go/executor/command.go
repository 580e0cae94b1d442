package executor

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The built-in command handler: each run executes a program, and a stopped run really stops
// it. It behaves as the Rust SDK's (docs/executors.md, "The built-in command handler"):
//
//	argv + params split on whitespace ─spawn: own process group, XJOB_* env, stdin null─▶ child
//	child stdout + stderr ─line by line, as they arrive─▶ run log (Run.Logf)
//	exit 0 ─▶ success · exit N / signal S ─▶ failure "command exited with status N"
//	stopped (kill, job timeout, COVER_EARLY, shutdown) or the spec's own timeout
//	    ─▶ SIGTERM the group ─(KillGrace / 2)─▶ SIGKILL the group ─▶ reap ─▶ return
//
// The command leads its own process group, so a stop reaches the processes it started too. The
// whole stop takes at most three quarters of the KillGrace, so the handler returns before the
// runner abandons it. After a normal exit, background processes are left alone and their output
// is read for at most outputDrain more.

const (
	// outputDrain is how long output is still read after the command exited (background
	// processes may hold the pipes open forever).
	outputDrain = time.Second
	// maxLineBytes is the longest run of bytes logged as one line; longer lines are split.
	maxLineBytes = 64 * 1024
)

// CommandSpec is what the command handler runs: a program with leading arguments, and
// optionally a working directory, extra environment variables and a timeout of its own.
type CommandSpec struct {
	// Argv is the program and its first arguments; each run appends its params split on
	// whitespace. Empty: the params are the whole command line.
	Argv []string
	// Dir is the directory the command starts in (default: the executor's own).
	Dir string
	// Env holds extra variables as KEY=value (the XJOB_* run variables are set after these).
	Env []string
	// Timeout stops the command like a kill does, besides the job's timeout; 0 for none.
	Timeout time.Duration
}

// CommandHandler returns the built-in command handler running spec; register it with Handle.
func CommandHandler(spec CommandSpec) Handler {
	return func(ctx context.Context, run *Run) (string, error) {
		return runCommand(ctx, spec, run)
	}
}

func commandLine(argv []string, params string) []string {
	line := append([]string{}, argv...)
	return append(line, strings.Fields(params)...)
}

// runEnvironment is the XJOB_* variables describing the run.
func runEnvironment(run *Run) []string {
	trigger := strings.TrimPrefix(run.TriggerType().String(), "TRIGGER_TYPE_")
	environment := []string{
		"XJOB_JOB_ID=" + strconv.FormatInt(run.JobID(), 10),
		"XJOB_LOG_ID=" + strconv.FormatInt(run.LogID(), 10),
		"XJOB_PARAMS=" + run.Params(),
		"XJOB_SHARD_INDEX=" + strconv.Itoa(int(run.ShardIndex())),
		"XJOB_SHARD_TOTAL=" + strconv.Itoa(int(run.ShardTotal())),
		"XJOB_SCHEDULED_AT_MS=" + strconv.FormatInt(run.ScheduledAtMs(), 10),
		"XJOB_ATTEMPT=" + strconv.Itoa(int(run.Attempt())),
		"XJOB_TRIGGER_TYPE=" + trigger,
	}
	// The command's own spans can join the run's trace.
	if traceparent := run.Traceparent(); traceparent != "" {
		environment = append(environment, "TRACEPARENT="+traceparent)
	}
	return environment
}

var errNoCommand = errors.New("no command to run: the handler has no argv and the run has no params")

// quoted renders a command line as ["a", "b"], as the Rust SDK logs it.
func quoted(line []string) string {
	parts := make([]string, len(line))
	for i, arg := range line {
		parts[i] = strconv.Quote(arg)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
