package executor

import (
	"context"
	"crypto/subtle"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "xjob.dev/sdk/go/xjobpb"
)

// server implements ExecutorService, thin over the runner and the run logs.
type server struct {
	pb.UnimplementedExecutorServiceServer
	runner *runner
	logs   logStore
}

func (s *server) Beat(context.Context, *pb.BeatRequest) (*pb.BeatResponse, error) {
	return &pb.BeatResponse{}, nil
}

func (s *server) IdleBeat(_ context.Context, request *pb.IdleBeatRequest) (*pb.IdleBeatResponse, error) {
	if s.runner.jobBusy(request.GetJobId()) {
		return &pb.IdleBeatResponse{Reason: fmt.Sprintf("job %d is running or has queued runs", request.GetJobId())}, nil
	}
	return &pb.IdleBeatResponse{Idle: true}, nil
}

func (s *server) Run(_ context.Context, request *pb.RunRequest) (*pb.RunResponse, error) {
	return s.submit(request), nil
}

// RunBatch answers each run exactly as Run would, in order.
func (s *server) RunBatch(_ context.Context, request *pb.RunBatchRequest) (*pb.RunBatchResponse, error) {
	results := make([]*pb.RunResponse, 0, len(request.GetRuns()))
	for _, run := range request.GetRuns() {
		results = append(results, s.submit(run))
	}
	return &pb.RunBatchResponse{Results: results}, nil
}

func (s *server) submit(request *pb.RunRequest) *pb.RunResponse {
	if refusal := s.runner.submit(request); refusal != "" {
		return &pb.RunResponse{Message: refusal}
	}
	return &pb.RunResponse{Accepted: true}
}

func (s *server) Kill(_ context.Context, request *pb.KillRequest) (*pb.KillResponse, error) {
	if s.runner.kill(request.GetJobId()) {
		return &pb.KillResponse{Killed: true}, nil
	}
	return &pb.KillResponse{Message: fmt.Sprintf("job %d has no running or queued run", request.GetJobId())}, nil
}

func (s *server) ReadLog(_ context.Context, request *pb.ReadLogRequest) (*pb.ReadLogResponse, error) {
	// Asked before reading: a run that is over has written its last line already.
	active := s.runner.logActive(request.GetLogId())
	return s.logs.read(request.GetLogId(), request.GetLogDateMs(), request.GetFromLine(), active), nil
}

// tokenInterceptor refuses calls without "authorization: Bearer <token>" when a token is set.
func tokenInterceptor(token string) grpc.UnaryServerInterceptor {
	expected := []byte("Bearer " + token)
	return func(ctx context.Context, request any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if token != "" {
			presented := metadata.ValueFromIncomingContext(ctx, "authorization")
			if len(presented) != 1 || subtle.ConstantTimeCompare([]byte(presented[0]), expected) != 1 {
				return nil, status.Error(codes.Unauthenticated, "missing or invalid access token")
			}
		}
		return handler(ctx, request)
	}
}
