package executor

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config holds an executor's settings. AppName and AdminAddrs are required; the zero value of
// every other field means its default.
type Config struct {
	// AppName is the app name of the executor's group.
	AppName string
	// AdminAddrs are the admins (http://host:port), tried in order: the next one is used when
	// one fails.
	AdminAddrs []string
	// Bind is the listen address (default "127.0.0.1:9999"; port 0 picks a free port). Bound
	// off loopback, Start refuses to run without AccessToken unless InsecureOpenNetwork is set.
	Bind string
	// AdvertiseAddress is the URL the admins dial (default http://{bound ip}:{bound port}, with
	// 127.0.0.1 when bound to all interfaces). With SessionDispatch it is the executor's name,
	// session://NAME (letters, digits, '.', '-', '_', ':'; unique in the app and best the same
	// across restarts); by default the app name, the process id and a random part.
	AdvertiseAddress string
	// SessionDispatch is for an executor the admins cannot dial (behind NAT, in another
	// network, on a laptop): it opens no port, and the admins' runs, kills, probes and log reads
	// come down the session this executor opens to them. Bind, InsecureOpenNetwork and the
	// serving part of TLS (RequireClientCert) are then unused; TLS.CAFile and the client
	// certificate still apply to the connection to the admins.
	SessionDispatch bool
	// AccessToken, when set, is required on incoming calls and sent on outgoing ones as
	// "authorization: Bearer <token>".
	AccessToken string
	// InsecureOpenNetwork allows serving on a non-loopback address without an access token.
	// Anyone who reaches the port can then run this executor's handlers with any params and
	// read its run logs: only for networks where that is acceptable.
	InsecureOpenNetwork bool
	// LogDir is the run log directory (default "./xjob-executor-logs").
	LogDir string
	// Labels are announced at registration.
	Labels map[string]string
	// ShutdownGrace is how long a graceful shutdown waits for running handlers (default 5 s).
	ShutdownGrace time.Duration
	// KillGrace is how long a cancelled handler may take to return before its run is reported
	// and the job moves on (default 2 s).
	KillGrace time.Duration
	// LogRetentionDays is how many days of run logs are kept (default 30; below 3 the daily
	// sweep is off).
	LogRetentionDays int
	// CallbackFlushTimeout is how long a graceful shutdown tries to deliver pending results
	// before spooling them to {LogDir}/callbacklogs (default 3 s).
	CallbackFlushTimeout time.Duration
	// TLS serves the executor's port over TLS and sets the TLS of its admin connections.
	TLS TLS
	// Glue enables script (GLUE) jobs per language; none by default.
	Glue Glue
	// OTLPEndpoint is the OTLP/gRPC collector runs' spans (`run`, `handler`, `callback`, under
	// the admin's trace) are exported to, e.g. http://127.0.0.1:4317. Empty: the standard
	// OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables; no tracing when
	// none is set.
	OTLPEndpoint string
	// Logf receives the executor's own diagnostics (default: the standard logger).
	Logf func(format string, args ...any)
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if strings.TrimSpace(out.AppName) == "" {
		return out, errors.New("executor: AppName is required")
	}
	if len(out.AdminAddrs) == 0 {
		return out, errors.New("executor: at least one admin address is required")
	}
	for _, address := range out.AdminAddrs {
		if !strings.HasPrefix(address, "http://") && !strings.HasPrefix(address, "https://") {
			return out, fmt.Errorf("executor: admin address %q must start with http:// or https://", address)
		}
	}
	if err := checkAdvertiseAddress(out.AdvertiseAddress, out.SessionDispatch); err != nil {
		return out, err
	}
	for _, r := range out.AccessToken {
		if r <= ' ' || r > '~' {
			return out, errors.New("executor: the access token must be visible ASCII without spaces")
		}
	}
	if err := out.Glue.check(); err != nil {
		return out, err
	}
	if err := out.TLS.check(); err != nil {
		return out, err
	}
	if out.SessionDispatch && out.AdvertiseAddress == "" {
		out.AdvertiseAddress = defaultSessionAddress(out.AppName)
	}
	if out.Bind == "" {
		out.Bind = "127.0.0.1:9999"
	}
	if out.LogDir == "" {
		out.LogDir = "./xjob-executor-logs"
	}
	if out.ShutdownGrace == 0 {
		out.ShutdownGrace = 5 * time.Second
	}
	if out.KillGrace == 0 {
		out.KillGrace = 2 * time.Second
	}
	if out.LogRetentionDays == 0 {
		out.LogRetentionDays = 30
	}
	if out.CallbackFlushTimeout == 0 {
		out.CallbackFlushTimeout = 3 * time.Second
	}
	if out.Logf == nil {
		out.Logf = defaultLogf
	}
	return out, nil
}

// checkAdvertiseAddress: a URL the admins dial, or session://NAME with session dispatch.
func checkAdvertiseAddress(address string, sessionDispatch bool) error {
	switch {
	case sessionDispatch && address != "":
		return checkSessionAddress(address)
	case strings.HasPrefix(address, sessionScheme):
		return fmt.Errorf("executor: advertise address %q is a session address: set SessionDispatch", address)
	case address != "" && !strings.HasPrefix(address, "http://") && !strings.HasPrefix(address, "https://"):
		return fmt.Errorf("executor: advertise address %q must start with http:// or https://", address)
	}
	return nil
}
