// Package executor is a small xjob executor library for Go, written from the contract in
// proto/xjob/v1 and docs/api.md; it behaves like the Rust SDK in executor-sdk/.
//
//	New(Config) ─Handle(name, fn)─▶ Start ─▶ gRPC server (ExecutorService) ─▶ runner ─▶ handlers
//	                                   ├──▶ session (Registry.Session: Register, Heartbeat, Deregister)
//	                                   └──▶ callbacks (Registry.Callback: batch, retry, spool)
//
// The executor binds its server first and registers second. On shutdown it deregisters first,
// stops accepting runs, lets running handlers finish within a grace period, reports the rest
// KILLED, flushes results (spooling to disk what no admin took) and stops the server.
//
// A handler is a func(ctx, *Run) (message, error). Its ctx is cancelled when the run is killed,
// times out, is replaced by COVER_EARLY or the executor shuts down. Go cannot abort a goroutine:
// a handler that ignores ctx keeps running after its kill grace, although its run is already
// reported and the next run of the job starts. Handlers must honour ctx.
package executor
