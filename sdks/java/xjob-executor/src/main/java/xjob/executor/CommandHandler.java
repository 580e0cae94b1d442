package xjob.executor;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The built-in {@code command} handler: each run executes a program, and a stopped run really
 * stops it. It behaves as the Rust SDK's (docs/executors.md, "The built-in command handler").
 *
 * <pre>
 * argv + params split on whitespace ─spawn: own process group, XJOB_* env, stdin null─▶ child
 * child stdout + stderr ─line by line, as they arrive─▶ run log (JobContext.log)
 * exit 0 ─▶ success · exit N / signal S ─▶ failure "command exited with status N"
 * stopped (kill, job timeout, COVER_EARLY, shutdown) or the handler's own timeout
 *     ─▶ SIGTERM the group ─(killGrace / 2)─▶ SIGKILL the group ─▶ reap ─▶ return
 * </pre>
 *
 * <p>Java cannot make a child lead a process group, so the command starts under {@code setsid}
 * (util-linux, on every Linux) and the group is signalled with {@code kill -SIG -- -pgid}.
 * Without {@code setsid} the command runs in the executor's group and a stop signals the
 * command's process tree instead. The whole stop takes at most three quarters of the kill
 * grace, so the handler returns before the runner gives up on it.
 */
public final class CommandHandler implements JobHandler {
  /** How long output is still read after the command exited. */
  static final Duration OUTPUT_DRAIN = Duration.ofSeconds(1);

  private static final String SETSID = findSetsid();

  private final List<String> argv;
  private Path workingDir;
  private final Map<String, String> env = new LinkedHashMap<>();
  private Duration timeout;

  /** A handler running {@code argv} followed by each run's params (empty: params only). */
  public CommandHandler(List<String> argv) {
    this.argv = List.copyOf(argv);
  }

  public CommandHandler(String... argv) {
    this(Arrays.asList(argv));
  }

  /** The directory the command starts in (default: the executor's own). */
  public CommandHandler workingDir(Path dir) {
    this.workingDir = dir;
    return this;
  }

  /** An extra environment variable (the XJOB_* run variables are set after these and win). */
  public CommandHandler env(String key, String value) {
    env.put(key, value);
    return this;
  }

  /** How long one run may take before the command is stopped; zero for no own timeout. */
  public CommandHandler timeout(Duration timeout) {
    this.timeout = timeout.isZero() ? null : timeout;
    return this;
  }

  private static String findSetsid() {
    for (String dir : new String[] {"/usr/bin", "/bin", "/usr/sbin", "/sbin"}) {
      File candidate = new File(dir, "setsid");
      if (candidate.canExecute()) {
        return candidate.getPath();
      }
    }
    return null;
  }

  static Map<String, String> runEnvironment(JobContext context) {
    Map<String, String> vars = new LinkedHashMap<>();
    vars.put("XJOB_JOB_ID", Long.toString(context.jobId()));
    vars.put("XJOB_LOG_ID", Long.toString(context.logId()));
    vars.put("XJOB_PARAMS", context.params());
    vars.put("XJOB_SHARD_INDEX", Integer.toString(context.shardIndex()));
    vars.put("XJOB_SHARD_TOTAL", Integer.toString(context.shardTotal()));
    vars.put("XJOB_SCHEDULED_AT_MS", Long.toString(context.scheduledAtMs()));
    vars.put("XJOB_ATTEMPT", Integer.toString(context.attempt()));
    vars.put("XJOB_TRIGGER_TYPE", context.triggerType().name().replaceFirst("^TRIGGER_TYPE_", ""));
    String traceparent = context.traceparent();
    if (!traceparent.isEmpty()) {
      vars.put("TRACEPARENT", traceparent); // the command's own spans can join the run's trace
    }
    return vars;
  }

  /** How the command ended (Java reports a signal N as status 128 + N, as a shell does). */
  static String describeExit(int status) {
    return "command exited with status " + status;
  }

  @Override
  public String handle(JobContext context) throws Exception {
    List<String> line = new ArrayList<>(argv);
    for (String part : context.params().trim().split("\\s+")) {
      if (!part.isEmpty()) {
        line.add(part);
      }
    }
    if (line.isEmpty()) {
      throw new JobFailure("no command to run: the handler has no argv and the run has no params");
    }
    if (context.isCancelled()) {
      throw new JobFailure("run cancelled before the command started");
    }
    List<String> spawned = new ArrayList<>(line);
    if (SETSID != null) {
      spawned.add(0, SETSID);
    }
    ProcessBuilder builder = new ProcessBuilder(spawned).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    if (workingDir != null) {
      builder.directory(workingDir.toFile());
    }
    builder.environment().putAll(env);
    builder.environment().putAll(runEnvironment(context));
    Process process;
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new JobFailure("failed to start command \"" + line.get(0) + "\": " + e.getMessage());
    }
    long group = process.pid();
    context.log(
        "command started: pid="
            + group
            + " argv="
            + line.stream().map(arg -> "\"" + arg + "\"").collect(Collectors.joining(", ", "[", "]")));
    Thread out = forward(process.getInputStream(), context, "stdout");
    Thread err = forward(process.getErrorStream(), context, "stderr");
    boolean exited;
    try {
      exited =
          timeout == null
              ? waitForever(process)
              : process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException stopped) {
      stopGroup(process, group, out, err, context);
      throw new JobFailure("command stopped");
    }
    if (!exited) {
      stopGroup(process, group, out, err, context);
      throw new JobFailure(
          "command timed out after " + timeout.toMillis() + "ms (handler timeout)");
    }
    long drainUntil = System.nanoTime() + OUTPUT_DRAIN.toNanos();
    boolean drained = join(out, drainUntil) & join(err, drainUntil);
    if (!drained) {
      context.log(
          "command exited but its output is still open after 1s (a background process holds"
              + " it): no longer read");
    }
    int status = process.exitValue();
    if (status != 0) {
      throw new JobFailure(describeExit(status));
    }
    return describeExit(0);
  }

  private static boolean waitForever(Process process) throws InterruptedException {
    process.waitFor();
    return true;
  }

  /**
   * SIGTERM to the group, up to half the kill grace for the command to exit, SIGKILL to the
   * group (stragglers included), then waits for it and the rest of its output, all within three
   * quarters of the kill grace. Runs with the thread's interrupt cleared.
   */
  private void stopGroup(Process process, long group, Thread out, Thread err, JobContext context) {
    Thread.interrupted();
    long grace = context.stopGrace().toMillis();
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(grace * 3 / 4);
    signal(process, group, "TERM");
    context.log("run stopped: sent SIGTERM to process group " + group);
    boolean reaped = waitFor(process, grace / 2);
    if (reaped) {
      context.log("after SIGTERM: " + describeExit(process.exitValue()));
    } else {
      context.log("command still running " + grace / 2 + "ms after SIGTERM: sending SIGKILL");
    }
    // Always: processes of the group may outlive its leader, or ignore SIGTERM.
    signal(process, group, "KILL");
    if (!reaped
        && !waitFor(process, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()))) {
      context.log("command not reaped in time after SIGKILL");
    }
    join(out, deadline);
    join(err, deadline);
    context.log("command stopped: process group " + group + " killed");
  }

  private static boolean waitFor(Process process, long millis) {
    try {
      return process.waitFor(Math.max(millis, 0), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.interrupted();
      return !process.isAlive();
    }
  }

  /** Signals the command's group (its process tree without setsid). */
  private static void signal(Process process, long group, String signal) {
    if (SETSID != null) {
      try {
        new ProcessBuilder("kill", "-" + signal, "--", "-" + group)
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .start()
            .waitFor(5, TimeUnit.SECONDS);
        return;
      } catch (IOException | InterruptedException e) {
        Thread.interrupted();
        // fall through to the process tree
      }
    }
    boolean force = signal.equals("KILL");
    process.descendants().forEach(child -> destroy(child, force));
    destroy(process.toHandle(), force);
  }

  private static void destroy(ProcessHandle handle, boolean force) {
    if (force) {
      handle.destroyForcibly();
    } else {
      handle.destroy();
    }
  }

  private static boolean join(Thread thread, long deadlineNanos) {
    try {
      long millis = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
      if (millis > 0) {
        thread.join(millis);
      }
    } catch (InterruptedException e) {
      Thread.interrupted();
    }
    return !thread.isAlive();
  }

  /** Logs each line of one pipe as it arrives, on a daemon thread, until it closes. */
  private static Thread forward(InputStream stream, JobContext context, String name) {
    Thread thread =
        new Thread(
            () -> {
              try (BufferedReader reader =
                  new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                  context.log(line);
                }
              } catch (IOException e) {
                context.log("failed to read command output: " + e.getMessage());
              }
            },
            "xjob-command-" + name + "-" + context.logId());
    thread.setDaemon(true);
    thread.start();
    return thread;
  }
}
