package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "xjob.dev/sdk/go/xjobpb"
)

// maxReceiveBytes is the largest request the executor accepts (as the Python and Node.js ones).
const maxReceiveBytes = 64 << 20

// Executor is an xjob executor: register handlers with Handle, then Start (or Run).
type Executor struct {
	config   Config
	handlers map[string]Handler

	address  string
	listener net.Listener // nil with session dispatch
	grpc     *grpc.Server // nil with session dispatch
	admins   *admins
	adminTLS *tls.Config
	runner   *runner
	session  *session
	traces   *runTraces

	deregister    context.CancelFunc
	sessionDone   chan struct{}
	flush         chan struct{}
	callbacksDone chan struct{}
	stopCleanup   chan struct{}
	stopOnce      sync.Once
	stopped       chan struct{} // closed when the graceful stop has finished
}

// New validates the config; it does not bind or connect yet.
func New(config Config) (*Executor, error) {
	valid, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Executor{config: valid, handlers: map[string]Handler{}}, nil
}

// Handle registers a BEAN handler under name. Names must be unique and not empty.
func (e *Executor) Handle(name string, handler Handler) error {
	if name == "" {
		return errors.New("executor: a handler name must not be empty")
	}
	if _, taken := e.handlers[name]; taken {
		return fmt.Errorf("executor: handler name %q is registered twice", name)
	}
	e.handlers[name] = handler
	return nil
}

// Start binds the server, starts serving, and registers with the admins in the background; it
// returns once the server is bound. With session dispatch it binds nothing: the admins' calls
// come down the session.
func (e *Executor) Start() error {
	spoolDir := filepath.Join(e.config.LogDir, spoolDirName)
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return fmt.Errorf("executor: log dir: %w", err)
	}
	var serverTLS *tls.Config
	if e.config.SessionDispatch {
		e.address = e.config.AdvertiseAddress // session://NAME, set by New
	} else {
		var err error
		if serverTLS, err = e.listen(); err != nil {
			return err
		}
	}
	closeListener := func() {
		if e.listener != nil {
			_ = e.listener.Close()
		}
	}
	adminTLS, err := e.config.TLS.clientConfig()
	if err != nil {
		closeListener()
		return err
	}
	e.adminTLS = adminTLS

	logs := logStore{root: e.config.LogDir}
	unreported := &unreported{ids: map[int64]bool{}}
	traces, err := startRunTraces(e.config.AppName, e.config.OTLPEndpoint)
	if err != nil {
		closeListener()
		return err
	}
	e.traces = traces
	results := &resultSender{ch: make(chan *pb.RunResult, 4096), unreported: unreported, traces: traces}
	e.admins = newAdmins(e.config.AdminAddrs, e.config.AccessToken, e.adminTLS)
	e.runner = newRunner(e.handlers, logs, results, e.config.KillGrace, e.config.Logf)
	e.runner.glue = e.config.Glue.runners(e.config.LogDir)

	service := &server{runner: e.runner, logs: logs}
	var calls *sessionCalls
	dispatch := pb.DispatchMode_DISPATCH_MODE_DIAL
	if e.config.SessionDispatch {
		calls, dispatch = &sessionCalls{service: service, logf: e.config.Logf}, pb.DispatchMode_DISPATCH_MODE_SESSION
	} else {
		e.serve(service, serverTLS)
	}

	b := &backlog{spooled: map[int64]bool{}, unreported: unreported, traces: traces, spoolDir: spoolDir, logf: e.config.Logf}
	b.load()
	e.flush, e.callbacksDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(e.callbacksDone)
		callbackLoop(e.admins, results.ch, b, e.flush, e.config.CallbackFlushTimeout)
	}()

	names := make([]string, 0, len(e.handlers))
	for name := range e.handlers {
		names = append(names, name)
	}
	e.session = &session{
		admins: e.admins, runner: e.runner, unreported: unreported, calls: calls, logf: e.config.Logf,
		announce: announcement{
			appName: e.config.AppName, address: e.address, handlers: names, labels: e.config.Labels, dispatch: dispatch,
		},
		registered: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.deregister, e.sessionDone = cancel, make(chan struct{})
	go func() {
		defer close(e.sessionDone)
		e.session.loop(ctx)
	}()
	e.stopCleanup = make(chan struct{})
	go cleanupLoop(e.config.LogDir, e.config.LogRetentionDays, e.stopCleanup, e.config.Logf)
	if e.config.SessionDispatch {
		e.config.Logf("executor %s started in session dispatch (no port) as %s", e.config.AppName, e.address)
	} else {
		e.config.Logf("executor %s started on %s", e.config.AppName, e.address)
	}
	return nil
}

// listen binds the port the admins dial (the dialed mode), refusing an open one, and sets the
// advertised address; it returns the port's TLS (nil for plaintext).
func (e *Executor) listen() (*tls.Config, error) {
	listener, err := net.Listen("tcp", e.config.Bind)
	if err != nil {
		return nil, fmt.Errorf("executor: bind %s: %w", e.config.Bind, err)
	}
	// mTLS (only callers with a certificate from the CA) guards the port as a token does.
	if err := refuseOpenNetwork(listener.Addr().(*net.TCPAddr), e.config.AccessToken != "" || e.config.TLS.RequireClientCert,
		e.config.InsecureOpenNetwork, e.config.Logf); err != nil {
		_ = listener.Close()
		return nil, err
	}
	serverTLS, err := e.config.TLS.serverConfig()
	if err != nil {
		_ = listener.Close()
		return nil, err
	}
	e.listener = listener
	e.address = e.config.AdvertiseAddress
	if e.address == "" {
		e.address = advertiseAddress(listener.Addr().(*net.TCPAddr), serverTLS != nil)
	}
	return serverTLS, nil
}

// serve starts the gRPC server on the bound port (the dialed mode).
func (e *Executor) serve(service *server, serverTLS *tls.Config) {
	serverOptions := []grpc.ServerOption{}
	if serverTLS != nil {
		serverOptions = append(serverOptions, grpc.Creds(credentials.NewTLS(serverTLS)))
	}
	e.grpc = grpc.NewServer(append(serverOptions,
		grpc.UnaryInterceptor(tokenInterceptor(e.config.AccessToken)),
		// A RunBatch can carry 512 runs with 64 KiB of params each; gRPC's 4 MiB default would
		// fail the whole batch.
		grpc.MaxRecvMsgSize(maxReceiveBytes),
	)...)
	pb.RegisterExecutorServiceServer(e.grpc, service)
	go func() {
		if err := e.grpc.Serve(e.listener); err != nil {
			e.config.Logf("server stopped: %v", err)
		}
	}()
}

// Address is the advertised address (what the admins dial), or session://NAME with session
// dispatch.
func (e *Executor) Address() string { return e.address }

// ExecutorID is the id of the current admin session, empty while not registered.
func (e *Executor) ExecutorID() string { return e.session.currentExecutorID() }

// WaitRegistered waits until an admin has answered Registered once.
func (e *Executor) WaitRegistered(ctx context.Context) error {
	select {
	case <-e.session.registered:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown stops gracefully: Deregister first, stop accepting runs, wait for running handlers
// up to the shutdown grace, report the rest KILLED, flush (or spool) results, stop the server.
// Each wait is bounded by the Config's graces; ctx bounds the whole stop: when it ends first,
// the server is stopped at once (open calls fail), Shutdown returns ctx.Err(), and the rest of
// the stop finishes in the background within those graces. Calling it again waits for the same
// stop.
func (e *Executor) Shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() {
		e.stopped = make(chan struct{})
		go func() {
			defer close(e.stopped)
			e.stop()
		}()
	})
	select {
	case <-e.stopped:
		return nil
	case <-ctx.Done():
		if e.grpc != nil {
			e.grpc.Stop()
		}
		return ctx.Err()
	}
}

// stop is the graceful stop in order; every wait in it is bounded.
func (e *Executor) stop() {
	e.config.Logf("executor shutting down")
	e.deregister()
	waitChan(e.sessionDone, deregisterTimeout+time.Second)
	e.runner.shutdown(e.config.ShutdownGrace)
	close(e.flush)
	waitChan(e.callbacksDone, e.config.CallbackFlushTimeout+2*time.Second)
	if e.grpc != nil {
		stopped := make(chan struct{})
		go func() { e.grpc.GracefulStop(); close(stopped) }()
		if !waitChan(stopped, 5*time.Second) {
			e.grpc.Stop()
		}
	}
	close(e.stopCleanup)
	e.admins.close()
	// Sends the buffered spans; a collector that is down costs them, not the stop.
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.traces.shutdown(flushCtx); err != nil {
		e.config.Logf("flushing traces at shutdown failed: %v", err)
	}
	e.config.Logf("executor stopped")
}

// Run starts the executor, serves until ctx is done or the process gets SIGINT or SIGTERM, then
// shuts down gracefully (within the Config's graces, whatever ctx says by then).
func (e *Executor) Run(ctx context.Context) error {
	if err := e.Start(); err != nil {
		return err
	}
	signalled, stopSignals := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	<-signalled.Done()
	return e.Shutdown(context.WithoutCancel(ctx))
}

func waitChan(ch <-chan struct{}, timeout time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(timeout):
		return false
	}
}

// advertiseAddress is http(s)://{ip}:{port} of the bound socket, with loopback when bound to
// all interfaces (set Config.AdvertiseAddress for anything else).
func advertiseAddress(bound *net.TCPAddr, secure bool) string {
	ip := bound.IP
	if ip == nil || ip.IsUnspecified() {
		if ip.To4() == nil && ip != nil {
			ip = net.IPv6loopback
		} else {
			ip = net.IPv4(127, 0, 0, 1)
		}
	}
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(ip.String(), fmt.Sprint(bound.Port))
}

// ErrOpenNetwork is returned (wrapped) by Start for a non-loopback bind with no access token and
// no InsecureOpenNetwork.
var ErrOpenNetwork = errors.New("executor: open to the network without an access token")

// refuseOpenNetwork: an executor reachable from other machines must know who calls it, by the
// group's access token. Without one, anyone who reaches the port runs its handlers with any
// params and reads its logs, so starting is refused unless the operator opted out by name.
func refuseOpenNetwork(bound *net.TCPAddr, tokenSet, insecureOpenNetwork bool, logf func(string, ...any)) error {
	if bound.IP.IsLoopback() || tokenSet {
		return nil
	}
	if insecureOpenNetwork {
		logf("INSECURE: executor open to the network without access token (InsecureOpenNetwork) on %s", bound)
		return nil
	}
	return fmt.Errorf("%w: %s is reachable from other machines, and with no access token anyone who "+
		"reaches it can run this executor's handlers and read its logs. Set AccessToken (the group's "+
		"token, also set on the group in the admin), or bind 127.0.0.1; to run open anyway, set "+
		"InsecureOpenNetwork", ErrOpenNetwork, bound)
}
