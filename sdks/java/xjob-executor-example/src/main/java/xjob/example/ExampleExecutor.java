package xjob.example;

import java.nio.file.Path;
import java.time.Duration;
import xjob.executor.CommandHandler;
import xjob.executor.JobContext;
import xjob.executor.JobFailure;
import xjob.executor.XjobExecutor;
import xjob.v1.Common.GlueType;

/**
 * An xjob executor written with the library in xjob.executor. It serves the conformance suite's
 * handlers (succeed, fail, sleep, log; see docs/executors.md) and two app-style ones (hello,
 * failOnDemand), configured from the environment:
 *
 * <pre>
 * XJOB_ADMIN_ADDR=http://127.0.0.1:8080 XJOB_APP_NAME=java-demo XJOB_EXECUTOR_PORT=9997 \
 *   XJOB_LOG_DIR=/tmp/xjob-java-logs [XJOB_ACCESS_TOKEN=secret] \
 *   java -jar target/xjob-executor-example.jar
 * </pre>
 *
 * XJOB_ADMIN_ADDR may list several admins separated by commas (failover order).
 * XJOB_DISPATCH=session opens no port: the admin's calls come down the session, and the executor
 * registers as session://{app}-{port} (the port then only makes the name unique). SIGTERM or SIGINT shuts it
 * down gracefully: deregister, finish or kill runs, flush results.
 */
public final class ExampleExecutor {
  private ExampleExecutor() {}

  /** Logs a line and succeeds with "ok params=<params> shard=<i>/<n>". */
  static String succeed(JobContext run) {
    String message =
        "ok params=" + run.params() + " shard=" + run.shardIndex() + "/" + run.shardTotal();
    run.log(message);
    return message;
  }

  /** Fails with "failed on purpose: <params>". */
  static String fail(JobContext run) throws JobFailure {
    run.log("failing on purpose");
    throw new JobFailure("failed on purpose: " + run.params());
  }

  /**
   * Sleeps params ms (default 1000), logging "tick <n>" every 100 ms, and stops at once when the
   * run is cancelled (kill, timeout, COVER_EARLY, shutdown).
   */
  static String sleep(JobContext run) throws JobFailure {
    long millis = longParam(run.params(), 1000);
    run.log("sleeping " + millis + " ms");
    long deadline = System.currentTimeMillis() + millis;
    try {
      for (int tick = 1; ; tick++) {
        long left = deadline - System.currentTimeMillis();
        run.sleep(Duration.ofMillis(Math.max(0, Math.min(100, left))));
        if (System.currentTimeMillis() >= deadline) {
          return "slept " + millis + " ms";
        }
        run.log("tick " + tick);
      }
    } catch (InterruptedException e) {
      throw new JobFailure("cancelled while sleeping");
    }
  }

  /** Writes "line 1" … "line <params>" (default 3) and succeeds. */
  static String log(JobContext run) {
    long lines = longParam(run.params(), 3);
    for (long line = 1; line <= lines; line++) {
      run.log("line " + line);
    }
    return "wrote " + lines + " lines";
  }

  /** Succeeds with a greeting: what an app's handler looks like. */
  static String hello(JobContext run) {
    String name = run.params().isBlank() ? "world" : run.params().trim();
    run.log("greeting " + name + " (attempt " + run.attempt() + ")");
    return "hello, " + name;
  }

  /** Fails when its params say "fail" and succeeds otherwise. */
  static String failOnDemand(JobContext run) throws JobFailure {
    if (run.params().trim().equals("fail")) {
      run.log("asked to fail");
      throw new JobFailure("failed on demand");
    }
    return "did not fail (params are not \"fail\")";
  }

  private static long longParam(String params, long fallback) {
    try {
      long value = Long.parseLong(params.trim());
      return value < 0 ? fallback : value;
    } catch (NumberFormatException e) {
      return fallback;
    }
  }

  private static boolean isSet(String name) {
    String value = System.getenv(name);
    return value != null && !value.isEmpty();
  }

  private static String requireEnv(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      System.err.println(name + " must be set");
      System.exit(2);
    }
    return value;
  }

  public static void main(String[] args) throws Exception {
    // One line per record for java.util.logging (set before the first logger exists).
    System.setProperty(
        "java.util.logging.SimpleFormatter.format", "%1$tF %1$tT.%1$tL %4$s %3$s: %5$s%6$s%n");
    int port = Integer.parseInt(requireEnv("XJOB_EXECUTOR_PORT"));
    String logDir = System.getenv().getOrDefault("XJOB_LOG_DIR", "xjob-executor-logs");
    String appName = requireEnv("XJOB_APP_NAME");
    boolean session = "session".equals(System.getenv("XJOB_DISPATCH"));
    XjobExecutor.Builder builder =
        XjobExecutor.builder()
            .appName(appName)
            .bind("127.0.0.1", port)
            .sessionDispatch(session)
            .advertiseAddress(
                session
                    ? "session://" + appName + "-" + port
                    : (isSet("XJOB_TLS_CERT") ? "https" : "http") + "://127.0.0.1:" + port)
            .logDir(Path.of(logDir))
            .shutdownGrace(Duration.ofSeconds(2))
            .handler("succeed", ExampleExecutor::succeed)
            .handler("fail", ExampleExecutor::fail)
            .handler("sleep", ExampleExecutor::sleep)
            .handler("log", ExampleExecutor::log)
            .handler("hello", ExampleExecutor::hello)
            .handler("failOnDemand", ExampleExecutor::failOnDemand)
            // The built-in command handler: the params are the command line.
            .handler("command", new CommandHandler());
    for (String address : requireEnv("XJOB_ADMIN_ADDR").split(",")) {
      if (!address.isBlank()) {
        builder.adminAddr(address.trim());
      }
    }
    // TLS (all optional): the port's certificate (also presented to admins), the CA of the
    // admins, and whether callers need a client certificate from it.
    if (isSet("XJOB_TLS_CERT")) {
      builder.tls(Path.of(System.getenv("XJOB_TLS_CERT")), Path.of(requireEnv("XJOB_TLS_KEY")));
    }
    if (isSet("XJOB_TLS_CA")) {
      builder.tlsCa(Path.of(System.getenv("XJOB_TLS_CA")));
    }
    builder.requireClientCert("1".equals(System.getenv("XJOB_TLS_REQUIRE_CLIENT_CERT")));
    // Script (GLUE) jobs are off unless enabled: XJOB_GLUE_SHELL=1 enables shell scripts (bash).
    if ("1".equals(System.getenv("XJOB_GLUE_SHELL"))) {
      builder.enableGlue(GlueType.GLUE_TYPE_SHELL);
    }
    String token = System.getenv("XJOB_ACCESS_TOKEN");
    if (token != null && !token.isEmpty()) {
      builder.accessToken(token);
    }
    XjobExecutor.runUntilSignalled(builder);
    System.exit(0);
  }
}
