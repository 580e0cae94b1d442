package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	pb "xjob.dev/sdk/go/xjobpb"
)

// Script (GLUE) jobs: the job carries its script, the executor runs it with an interpreter, as
// the Rust SDK does (docs/executors.md, "Script (GLUE) jobs"):
//
//	RunRequest{GlueType, GlueSource, GlueUpdatedMs}
//	  ─▶ {LogDir}/gluesource/{jobID}_{glueUpdatedMs}.{ext}   (written once per version)
//	  ─▶ command handler: [interpreter, leading args…, script, params split on whitespace]
//
// Off unless Config.Glue enables a language: scripts are code sent over the network.

const glueScriptDir = "gluesource"

const groovyUnsupported = "GLUE_TYPE_GROOVY is not supported: it is Java source compiled inside " +
	"XXL-JOB's JVM executor, and xjob executors are not JVMs; use a BEAN handler or a script glue " +
	"type (shell, python, nodejs, php, powershell)"

type glueLanguage struct {
	interpreter, extension string
	leading                []string
}

var glueLanguages = map[pb.GlueType]glueLanguage{
	pb.GlueType_GLUE_TYPE_SHELL:      {"bash", "sh", nil},
	pb.GlueType_GLUE_TYPE_PYTHON:     {"python3", "py", nil},
	pb.GlueType_GLUE_TYPE_NODEJS:     {"node", "js", nil},
	pb.GlueType_GLUE_TYPE_PHP:        {"php", "php", nil},
	pb.GlueType_GLUE_TYPE_POWERSHELL: {"pwsh", "ps1", []string{"-NoLogo", "-NoProfile", "-NonInteractive", "-File"}},
}

// Glue enables script (GLUE) jobs, off by default: a run of a type not enabled is refused.
type Glue struct {
	// Interpreters maps each enabled script type (GLUE_TYPE_SHELL, _PYTHON, _NODEJS, _PHP,
	// _POWERSHELL) to its interpreter program; "" is its usual one on the PATH (bash, python3,
	// node, php, pwsh).
	Interpreters map[pb.GlueType]string
	// Env holds extra variables for script runs as KEY=value (the XJOB_* ones win).
	Env []string
}

func (g Glue) check() error {
	for glueType := range g.Interpreters {
		if _, ok := glueLanguages[glueType]; !ok {
			return fmt.Errorf("executor: %s is not a script glue type", glueType)
		}
	}
	return nil
}

// runners is one handler per enabled script type; scripts go under {logDir}/gluesource/.
func (g Glue) runners(logDir string) map[pb.GlueType]Handler {
	runners := map[pb.GlueType]Handler{}
	for glueType, interpreter := range g.Interpreters {
		language := glueLanguages[glueType]
		if interpreter == "" {
			interpreter = language.interpreter
		}
		runners[glueType] = glueHandler(glueType, language, interpreter, g.Env, filepath.Join(logDir, glueScriptDir))
	}
	return runners
}

func glueHandler(glueType pb.GlueType, language glueLanguage, interpreter string, env []string, scriptDir string) Handler {
	return func(ctx context.Context, run *Run) (string, error) {
		script, err := glueScript(language, scriptDir, run.request)
		if err != nil {
			return "", err
		}
		run.Logf("glue %s version %d from %s", glueType, run.request.GetGlueUpdatedMs(), script)
		argv := append(append([]string{interpreter}, language.leading...), script)
		return runCommand(ctx, CommandSpec{Argv: argv, Env: env}, run)
	}
}

// glueScript is the script of the run's job and version, written if this version is not stored
// yet (and then the job's older versions deleted).
func glueScript(language glueLanguage, scriptDir string, request *pb.RunRequest) (string, error) {
	prefix := fmt.Sprintf("%d_", request.GetJobId())
	name := fmt.Sprintf("%s%d.%s", prefix, request.GetGlueUpdatedMs(), language.extension)
	path := filepath.Join(scriptDir, name)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	failed := func(err error) (string, error) {
		return "", fmt.Errorf("failed to write the glue script %s: %v", path, err)
	}
	if err := os.MkdirAll(scriptDir, 0o755); err != nil {
		return failed(err)
	}
	// Written aside then renamed: a half-written file is never taken for this version.
	partial := filepath.Join(scriptDir, fmt.Sprintf("%s.%d.partial", name, request.GetLogId()))
	if err := os.WriteFile(partial, []byte(request.GetGlueSource()), 0o644); err != nil {
		return failed(err)
	}
	if err := os.Rename(partial, path); err != nil {
		return failed(err)
	}
	if entries, err := os.ReadDir(scriptDir); err == nil {
		for _, entry := range entries {
			if strings.HasPrefix(entry.Name(), prefix) && entry.Name() != name {
				_ = os.Remove(filepath.Join(scriptDir, entry.Name())) // only costs disk space
			}
		}
	}
	return path, nil
}
