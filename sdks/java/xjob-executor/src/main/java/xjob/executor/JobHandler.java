package xjob.executor;

/**
 * A BEAN handler: runs one run and returns its success message, or throws to fail it (the
 * exception's message becomes the run's message).
 *
 * <p>When the run is killed, times out, is replaced (COVER_EARLY) or the executor shuts down,
 * the handler's thread is interrupted and {@link JobContext#isCancelled()} turns true; the handler
 * must then return promptly. Java cannot stop a thread that ignores both: after the kill grace
 * its run is reported anyway and the job's next run starts.
 */
@FunctionalInterface
public interface JobHandler {
  String handle(JobContext context) throws Exception;
}
