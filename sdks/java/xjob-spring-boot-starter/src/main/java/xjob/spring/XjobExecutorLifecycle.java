package xjob.spring;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.springframework.context.SmartLifecycle;
import xjob.executor.XjobExecutor;

/**
 * Starts the executor once every bean (and so every {@link XjobHandler} method) is ready, and
 * stops it gracefully (deregister, let runs finish, flush results) when the context closes.
 */
public class XjobExecutorLifecycle implements SmartLifecycle {
  private final XjobProperties properties;
  private final XjobHandlerMethods methods;
  private volatile XjobExecutor executor;

  public XjobExecutorLifecycle(XjobProperties properties, XjobHandlerMethods methods) {
    this.properties = properties;
    this.methods = methods;
  }

  @Override
  public synchronized void start() {
    XjobExecutor.Builder builder =
        XjobExecutor.builder()
            .appName(properties.getAppName())
            .bind(properties.getBindHost(), properties.getPort())
            .insecureOpenNetwork(properties.isInsecureOpenNetwork())
            .logDir(properties.getLogDir())
            .logRetentionDays(properties.getLogRetentionDays())
            .shutdownGrace(properties.getShutdownGrace())
            .killGrace(properties.getKillGrace());
    properties.getAdminAddresses().forEach(builder::adminAddr);
    if (!properties.getAdvertiseAddress().isBlank()) {
      builder.advertiseAddress(properties.getAdvertiseAddress());
    }
    if (!properties.getAccessToken().isEmpty()) {
      builder.accessToken(properties.getAccessToken());
    }
    properties.getLabels().forEach(builder::label);
    XjobExtraSettings.apply(properties, builder);
    methods.handlers().forEach(builder::handler);
    try {
      executor = builder.start();
    } catch (IOException e) {
      throw new UncheckedIOException("xjob executor: cannot start", e);
    }
    keepJvmAlive(executor);
  }

  /**
   * The executor's threads are daemons, so an app with no web server would exit as soon as its
   * main method returns. A non-daemon thread waits for the executor to stop, as a web server's
   * does; SIGTERM still closes the context, which stops the executor and ends the thread.
   */
  private static void keepJvmAlive(XjobExecutor running) {
    Thread waiter =
        new Thread(
            () -> {
              try {
                running.awaitStopped();
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            },
            "xjob-executor-await");
    waiter.setDaemon(false);
    waiter.start();
  }

  @Override
  public synchronized void stop() {
    if (executor != null) {
      executor.shutdown();
      executor = null;
    }
  }

  @Override
  public boolean isRunning() {
    return executor != null;
  }

  /** The running executor, or null before start and after stop. */
  public XjobExecutor executor() {
    return executor;
  }
}
