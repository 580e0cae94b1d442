//go:build !unix

package executor

import (
	"context"
	"errors"
)

func runCommand(context.Context, CommandSpec, *Run) (string, error) {
	return "", errors.New("the command handler needs a unix system (process groups and signals)")
}
