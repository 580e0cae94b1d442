package consumer;

import java.nio.file.Path;
import xjob.executor.XjobExecutor;

/** An app on the installed library: one handler, settings from the environment. */
public final class Main {
  public static void main(String[] args) throws Exception {
    XjobExecutor.Builder builder =
        XjobExecutor.builder()
            .appName(System.getenv("XJOB_APP_NAME"))
            .adminAddr(System.getenv("XJOB_ADMIN_ADDR"))
            .bind("127.0.0.1", Integer.parseInt(System.getenv("XJOB_EXECUTOR_PORT")))
            .logDir(Path.of(System.getenv("XJOB_LOG_DIR")))
            .handler(
                "greet",
                run -> {
                  run.log("hello from a Maven artifact, " + run.params());
                  return "java greeted " + run.params();
                });
    XjobExecutor.runUntilSignalled(builder);
  }
}
