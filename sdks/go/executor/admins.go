package executor

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "xjob.dev/sdk/go/xjobpb"
)

// admins are the admin addresses, in the order they are tried, each with one lazily connecting
// gRPC client shared by the session and the callbacks. Every call carries the access token.
type admins struct {
	addresses []string
	token     string
	tls       *tls.Config // of https:// admins
	mu        sync.Mutex
	conns     map[string]*grpc.ClientConn
}

func newAdmins(addresses []string, token string, tlsConfig *tls.Config) *admins {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &admins{addresses: addresses, token: token, tls: tlsConfig, conns: map[string]*grpc.ClientConn{}}
}

// client returns the Registry client of an admin, creating its connection on first use.
func (a *admins) client(address string) (pb.RegistryClient, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if conn, ok := a.conns[address]; ok {
		return pb.NewRegistryClient(conn), nil
	}
	target, creds := strings.TrimPrefix(address, "http://"), insecure.NewCredentials()
	if strings.HasPrefix(address, "https://") {
		target, creds = strings.TrimPrefix(address, "https://"), credentials.NewTLS(a.tls.Clone())
	}
	conn, err := grpc.NewClient(strings.TrimSuffix(target, "/"),
		grpc.WithTransportCredentials(creds),
		// grpc-go's own reconnect backoff grows to 2 minutes; an admin back from an outage must
		// see its executors again within seconds, as with the session's own backoff.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: backoffInitial, Multiplier: 1.6, Jitter: 0.2, MaxDelay: backoffMax},
			MinConnectTimeout: 3 * time.Second,
		}),
		// HTTP/2 pings find a dead admin on an idle session.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
	)
	if err != nil {
		return nil, err
	}
	a.conns[address] = conn
	return pb.NewRegistryClient(conn), nil
}

// withToken adds "authorization: Bearer <token>" to an outgoing call's context.
func (a *admins) withToken(ctx context.Context) context.Context {
	if a.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+a.token)
}

// callback sends one batch to the first admin that answers and returns the log ids it
// accepted; nil when none answered, with tooLarge when one refused the batch as larger than it
// takes (gRPC servers answer OUT_OF_RANGE to a request over their decoding limit).
func (a *admins) callback(ctx context.Context, batch []*pb.RunResult, logf func(string, ...any)) (accepted []int64, tooLarge bool) {
	for _, address := range a.addresses {
		client, err := a.client(address)
		if err != nil {
			continue
		}
		callCtx, cancel := context.WithTimeout(a.withToken(ctx), callTimeout)
		response, err := client.Callback(callCtx, &pb.CallbackRequest{Results: batch})
		cancel()
		if err == nil {
			return append([]int64{}, response.GetAcceptedLogIds()...), false
		}
		if ctx.Err() != nil {
			return nil, tooLarge
		}
		tooLarge = tooLarge || status.Code(err) == codes.OutOfRange
		logf("callback to %s failed: %v", address, status.Convert(err).Message())
	}
	return nil, tooLarge
}

func (a *admins) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, conn := range a.conns {
		_ = conn.Close()
	}
}
