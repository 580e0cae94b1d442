//go:build unix

package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

func runCommand(ctx context.Context, spec CommandSpec, run *Run) (string, error) {
	line := commandLine(spec.Argv, run.Params())
	if len(line) == 0 {
		return "", errNoCommand
	}
	if ctx.Err() != nil {
		return "", errors.New("run cancelled before the command started")
	}
	cmd := exec.Command(line[0], line[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append(append(os.Environ(), spec.Env...), runEnvironment(run)...)
	// Its own process group, led by the child: a signal to the group reaches all it starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("failed to start command %q: %w", line[0], err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", fmt.Errorf("failed to start command %q: %w", line[0], err)
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("failed to start command %q: %v", line[0], err)
	}
	// Closed on return: a background process holding the write ends open no longer matters.
	defer stdout.Close()
	defer stderr.Close()
	group := cmd.Process.Pid
	run.Logf("command started: pid=%d argv=%s", group, quoted(line))
	output := make(chan struct{})
	var forwarders sync.WaitGroup
	forwarders.Add(2)
	go forwardLines(stdout, run, &forwarders)
	go forwardLines(stderr, run, &forwarders)
	go func() { forwarders.Wait(); close(output) }()
	// Wait reaps the child; the pipes are read by the forwarders (cmd.Wait would close them).
	exited := make(chan *os.ProcessState, 1)
	go func() {
		state, _ := cmd.Process.Wait()
		exited <- state
	}()
	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		timer := time.NewTimer(spec.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case state := <-exited:
		select {
		case <-output:
		case <-time.After(outputDrain):
			run.Logf("command exited but its output is still open after %v (a background process holds it): no longer read", outputDrain)
		case <-ctx.Done():
		}
		text, ok := describeExit(state)
		if !ok {
			return "", errors.New(text)
		}
		return text, nil
	case <-ctx.Done():
		stopGroup(group, exited, output, run)
		return "", errors.New("command stopped")
	case <-timeout:
		stopGroup(group, exited, output, run)
		return "", fmt.Errorf("command timed out after %v (handler timeout)", spec.Timeout)
	}
}

// describeExit says how the command ended, and whether that is a success.
func describeExit(state *os.ProcessState) (string, bool) {
	if state == nil {
		return "command ended abnormally", false
	}
	status, ok := state.Sys().(syscall.WaitStatus)
	switch {
	case ok && status.Signaled():
		signal := status.Signal()
		return fmt.Sprintf("command killed by signal %d (%s)", int(signal), signalName(signal)), false
	case state.ExitCode() == 0:
		return "command exited with status 0", true
	default:
		return fmt.Sprintf("command exited with status %d", state.ExitCode()), false
	}
}

func signalName(signal syscall.Signal) string {
	switch signal {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	default:
		return "unknown"
	}
}

func signalGroup(group int, signal syscall.Signal) {
	// ESRCH: every process of the group is gone already, which is what we want.
	_ = syscall.Kill(-group, signal)
}

// stopGroup sends SIGTERM to the group, waits up to half the kill grace for the command to exit,
// sends SIGKILL to the group (stragglers included), then waits for it and the rest of its
// output, all within three quarters of the kill grace.
func stopGroup(group int, exited <-chan *os.ProcessState, output <-chan struct{}, run *Run) {
	grace := run.StopGrace()
	deadline := time.Now().Add(grace * 3 / 4)
	signalGroup(group, syscall.SIGTERM)
	run.Logf("run stopped: sent SIGTERM to process group %d", group)
	reaped := false
	select {
	case state := <-exited:
		reaped = true
		text, _ := describeExit(state)
		run.Logf("after SIGTERM: %s", text)
	case <-time.After(grace / 2):
		run.Logf("command still running %v after SIGTERM: sending SIGKILL", grace/2)
	}
	// Always: processes of the group may outlive its leader, or ignore SIGTERM.
	signalGroup(group, syscall.SIGKILL)
	if !reaped {
		select {
		case <-exited:
		case <-time.After(time.Until(deadline)):
			run.Logf("command not reaped in time after SIGKILL")
		}
	}
	select {
	case <-output:
	case <-time.After(time.Until(deadline)):
	}
	run.Logf("command stopped: process group %d killed", group)
}

// forwardLines logs each line of one pipe as it arrives, until it closes.
func forwardLines(pipe io.Reader, run *Run, done *sync.WaitGroup) {
	defer done.Done()
	reader := bufio.NewReaderSize(pipe, maxLineBytes)
	for {
		line, err := reader.ReadSlice('\n')
		if len(line) > 0 {
			text := line
			if text[len(text)-1] == '\n' {
				text = text[:len(text)-1]
				if len(text) > 0 && text[len(text)-1] == '\r' {
					text = text[:len(text)-1]
				}
			}
			run.Logf("%s", text)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				run.Logf("failed to read command output: %v", err)
			}
			return
		}
	}
}
