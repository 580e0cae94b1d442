package xjob.executor;

import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Logger;
import xjob.v1.Common.GlueType;
import xjob.v1.RegistryOuterClass.Heartbeat;

/**
 * An xjob executor, behaving like the Rust SDK in executor-sdk/.
 *
 * <pre>
 * XjobExecutor.builder() ─start()─▶ gRPC server (ExecutorService) ─▶ runner ─▶ handlers
 *                                ├──▶ session (Registry.Session: Register, Heartbeat, Deregister)
 *                                └──▶ callbacks (Registry.Callback: batch, retry, spool)
 * </pre>
 *
 * <p>It binds its server first and registers second. {@link #shutdown()} deregisters first, stops
 * accepting runs, lets running handlers finish within the shutdown grace, reports the rest KILLED,
 * flushes results (spooling what no admin took) and stops the server.
 *
 * <p>With {@link Builder#sessionDispatch session dispatch} there is no server: the same
 * ExecutorService code answers the calls the admin sends down the session ({@link SessionCalls}).
 */
public final class XjobExecutor {
  private static final Logger LOG = Logger.getLogger(XjobExecutor.class.getName());

  private final Builder config;
  private final String address;
  private final Admins admins;
  private final Runner runner;
  private final CallbackSender callbacks;
  private final RunTraces traces;
  private final Session session;
  /** The port the admins dial; null in session dispatch. */
  private final Server server;
  /** Answers the calls that come down the session; null in the dialed mode. */
  private final SessionCalls calls;
  private final CountDownLatch stopped = new CountDownLatch(1);
  private final ScheduledExecutorService cleanup =
      Executors.newSingleThreadScheduledExecutor(Runner.daemonThreads());
  private boolean shutDown;

  private XjobExecutor(Builder config) throws IOException {
    this.config = config;
    Path spoolDir = config.logDir.resolve("callbacklogs");
    Files.createDirectories(spoolDir);
    LogStore logs = new LogStore(config.logDir);
    config.tls.check();
    this.admins = new Admins(config.adminAddrs, config.accessToken, config.tls.channel());
    this.callbacks = new CallbackSender(admins, spoolDir, config.callbackFlushTimeout.toMillis());
    this.traces = RunTraces.start(config.appName, config.otlpEndpoint);
    callbacks.onAccepted(traces::acceptedResults);
    this.runner =
        new Runner(
            config.handlers,
            logs,
            result -> callbacks.send(traces.finished(result)),
            config.killGrace,
            Glue.runners(config.glue, config.glueEnv, config.logDir),
            traces);
    ExecutorServer service = new ExecutorServer(runner, logs);
    if (config.sessionDispatch) {
      // No token check on these calls: they come from the admin this executor dialed.
      this.server = null;
      this.calls = new SessionCalls(service);
      this.address =
          config.advertiseAddress != null
              ? config.advertiseAddress
              : SessionCalls.defaultAddress(config.appName);
    } else {
      this.server = serve(config, service);
      this.calls = null;
      int boundPort = ((InetSocketAddress) server.getListenSockets().get(0)).getPort();
      String host = config.host.equals("0.0.0.0") ? "127.0.0.1" : config.host;
      this.address =
          config.advertiseAddress != null
              ? config.advertiseAddress
              : (config.tls.serves() ? "https://" : "http://") + host + ":" + boundPort;
    }
    this.session =
        new Session(
            admins,
            config.appName,
            address,
            List.copyOf(config.handlers.keySet()),
            config.labels,
            this::heartbeat,
            calls);
    callbacks.start();
    session.start();
    if (config.logRetentionDays >= 3) {
      // Once at start, then daily: date folders older than the retention go (below 3: off).
      cleanup.scheduleAtFixedRate(
          () -> {
            int removed = logs.removeExpired(LocalDate.now(), config.logRetentionDays);
            if (removed > 0) {
              LOG.info("removed " + removed + " run log folders older than "
                  + config.logRetentionDays + " days");
            }
          },
          0,
          1,
          TimeUnit.DAYS);
    }
    LOG.info(
        "executor " + config.appName
            + (calls != null ? " in session dispatch (no port) as " : " started on ")
            + address);
  }

  /** Binds and starts the gRPC server the admins dial (the dialed mode). */
  private static Server serve(Builder config, ExecutorServer service) throws IOException {
    InetSocketAddress bindAddress = new InetSocketAddress(config.host, config.port);
    // mTLS (only callers with a certificate from the CA) guards the port as a token does.
    refuseOpenNetwork(
        bindAddress,
        !config.accessToken.isEmpty() || config.tls.requireClientCert,
        config.insecureOpenNetwork);
    NettyServerBuilder serverBuilder =
        (config.tls.serves()
                ? NettyServerBuilder.forAddress(bindAddress, config.tls.server())
                : NettyServerBuilder.forAddress(bindAddress))
            // A RunBatch can carry 512 runs with 64 KiB of params each; gRPC's 4 MiB default
            // would fail the whole batch.
            .maxInboundMessageSize(64 << 20);
    if (config.accessToken.isEmpty()) {
      serverBuilder.addService(service);
    } else {
      serverBuilder.addService(
          ServerInterceptors.intercept(service, new ExecutorServer.TokenCheck(config.accessToken)));
    }
    return serverBuilder.build().start();
  }

  /**
   * An executor reachable from other machines must know who calls it: the group's access token.
   * Without one, anyone who reaches the port runs its handlers with any params and reads its
   * logs, so starting is refused unless the operator opted out by name. The address checked is
   * the one the server binds (a host name resolved as Netty resolves it).
   */
  static void refuseOpenNetwork(
      InetSocketAddress bind, boolean tokenSet, boolean insecureOpenNetwork) {
    boolean loopback = !bind.isUnresolved() && bind.getAddress().isLoopbackAddress();
    if (loopback || tokenSet) {
      return;
    }
    String where = bind.getHostString() + ":" + bind.getPort();
    if (insecureOpenNetwork) {
      LOG.warning("INSECURE: executor open to the network without access token"
          + " (insecureOpenNetwork) on " + where);
      return;
    }
    throw new OpenNetworkRefusedException(
        where + " is reachable from other machines, and"
            + " with no access token anyone who reaches it can run this executor's handlers and"
            + " read its logs. Set accessToken (the group's token, also set on the group in the"
            + " admin), or bind 127.0.0.1; to run open anyway, set insecureOpenNetwork(true)");
  }

  /** Thrown by {@link Builder#start()} for a non-loopback bind without access token or opt-out. */
  public static final class OpenNetworkRefusedException extends IllegalStateException {
    OpenNetworkRefusedException(String message) {
      super(message);
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The advertised address (what the admins dial), or session://NAME in session dispatch. */
  public String address() {
    return address;
  }

  /** The id of the current admin session, empty while not registered. */
  public String executorId() {
    return session.executorId();
  }

  /** Waits until an admin has answered Registered once; false on timeout. */
  public boolean awaitRegistered(Duration timeout) throws InterruptedException {
    return session.awaitRegistered(timeout.toMillis());
  }

  /**
   * Heartbeat content: runs running or queued here plus finished runs whose result no admin has
   * accepted yet: the admin must not take any of them for lost.
   */
  private Heartbeat heartbeat() {
    TreeSet<Long> ids = new TreeSet<>(runner.activeLogIds());
    ids.addAll(callbacks.unreportedLogIds());
    return Heartbeat.newBuilder().addAllRunningLogIds(ids).setQueued(runner.queuedCount()).build();
  }

  /**
   * Graceful stop: Deregister first, stop accepting runs, wait for running handlers up to the
   * shutdown grace, report the rest KILLED, flush (or spool) results, stop the server.
   */
  public synchronized void shutdown() {
    if (shutDown) {
      return;
    }
    shutDown = true;
    LOG.info("executor shutting down");
    try {
      session.deregister();
      runner.shutdown(config.shutdownGrace);
      callbacks.shutdown();
      if (server != null) {
        server.shutdown();
        if (!server.awaitTermination(5, TimeUnit.SECONDS)) {
          server.shutdownNow();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (server != null) {
        server.shutdownNow();
      }
    } finally {
      if (calls != null) {
        calls.shutdown();
      }
      cleanup.shutdownNow();
      admins.close();
      traces.shutdown(); // sends the buffered spans
      stopped.countDown();
      LOG.info("executor stopped");
    }
  }

  /** Blocks until {@link #shutdown()} has finished (e.g. from a SIGTERM hook). */
  public void awaitStopped() throws InterruptedException {
    stopped.await();
  }

  /**
   * Starts an executor, waits for SIGTERM or SIGINT, shuts it down gracefully and returns, so the
   * caller can exit with status 0. The signals are handled (not left to a shutdown hook, which
   * would make the JVM exit with 143 and reset java.util.logging before the shutdown logs).
   */
  public static void runUntilSignalled(Builder builder) throws IOException, InterruptedException {
    XjobExecutor executor = builder.start();
    CountDownLatch signalled = new CountDownLatch(1);
    for (String name : List.of("TERM", "INT")) {
      sun.misc.Signal.handle(new sun.misc.Signal(name), signal -> signalled.countDown());
    }
    signalled.await();
    executor.shutdown();
  }

  /** Settings and handlers; {@link #start()} validates them, binds and registers. */
  public static final class Builder {
    private String appName = "";
    private final List<String> adminAddrs = new ArrayList<>();
    private String host = "127.0.0.1";
    private int port = 9999;
    private String advertiseAddress;
    private String accessToken = "";
    private Path logDir = Path.of("xjob-executor-logs");
    private final Map<String, String> labels = new HashMap<>();
    private Duration shutdownGrace = Duration.ofSeconds(5);
    private Duration killGrace = Duration.ofSeconds(2);
    private final ExecutorTls tls = new ExecutorTls();
    private String otlpEndpoint = "";
    private final Map<GlueType, String> glue = new EnumMap<>(GlueType.class);
    private final Map<String, String> glueEnv = new LinkedHashMap<>();
    private Duration callbackFlushTimeout = Duration.ofSeconds(3);
    private int logRetentionDays = 30;
    private boolean insecureOpenNetwork;
    private boolean sessionDispatch;
    private final Map<String, JobHandler> handlers = new LinkedHashMap<>();

    private Builder() {}

    /** The app name of the executor's group (required). */
    public Builder appName(String appName) {
      this.appName = appName;
      return this;
    }

    /** An admin (http://host:port); several are tried in the order added. */
    public Builder adminAddr(String address) {
      if (!address.startsWith("http://") && !address.startsWith("https://")) {
        throw new IllegalArgumentException(
            "admin address '" + address + "' must start with http:// or https://");
      }
      adminAddrs.add(address);
      return this;
    }

    /**
     * The listen address (default 127.0.0.1:9999; port 0 picks a free port). Off loopback,
     * {@link #start()} refuses without {@link #accessToken} unless {@link #insecureOpenNetwork}.
     */
    public Builder bind(String host, int port) {
      this.host = host;
      this.port = port;
      return this;
    }

    /**
     * The URL the admins dial (default http://{bound host}:{port}); with {@link #sessionDispatch},
     * the executor's name as session://NAME (1-200 letters, digits, '.', '-', '_' or ':'), unique
     * in its app and the same across restarts of one deployment (default: the app name, the
     * process id and a random part).
     */
    public Builder advertiseAddress(String address) {
      if (address.startsWith(SessionCalls.SCHEME)) {
        if (!SessionCalls.validAddress(address)) {
          throw new IllegalArgumentException(
              "session address '" + address + "' must be session://NAME, NAME 1-200 letters,"
                  + " digits, '.', '-', '_' or ':'");
        }
      } else if (!address.startsWith("http://") && !address.startsWith("https://")) {
        throw new IllegalArgumentException(
            "advertise address must start with http://, https:// or session://");
      }
      this.advertiseAddress = address;
      return this;
    }

    /**
     * Session dispatch: opens no port; the admin's calls (Run, Kill, Beat, IdleBeat, ReadLog) come
     * down this executor's own session with the admin, so the admins need no route to it (behind
     * NAT, on a laptop, in a serverless box). {@link #bind}, {@link #tls}, {@link
     * #requireClientCert} and {@link #insecureOpenNetwork} are then unused; {@link #tlsCa} and the
     * client certificate still apply to the connection to the admins.
     */
    public Builder sessionDispatch(boolean session) {
      this.sessionDispatch = session;
      return this;
    }

    /** Required on incoming calls and sent on outgoing ones as "authorization: Bearer ...". */
    public Builder accessToken(String token) {
      if (!token.chars().allMatch(c -> c > ' ' && c <= '~')) {
        throw new IllegalArgumentException("the access token must be visible ASCII, no spaces");
      }
      this.accessToken = token;
      return this;
    }

    /**
     * Allows serving on a non-loopback address without an access token. Anyone who reaches the
     * port can then run this executor's handlers with any params and read its run logs: only for
     * networks where that is acceptable.
     */
    public Builder insecureOpenNetwork(boolean open) {
      this.insecureOpenNetwork = open;
      return this;
    }

    /** The run log directory (default ./xjob-executor-logs). */
    public Builder logDir(Path logDir) {
      this.logDir = logDir;
      return this;
    }

    public Builder label(String key, String value) {
      labels.put(key, value);
      return this;
    }

    /** How long a graceful shutdown waits for running handlers (default 5 s). */
    public Builder shutdownGrace(Duration grace) {
      this.shutdownGrace = grace;
      return this;
    }

    /**
     * Serves the executor's port over TLS with this PEM certificate chain and key; the default
     * advertised address becomes https://.
     */
    public Builder tls(Path cert, Path key) {
      tls.cert = cert;
      tls.key = key;
      return this;
    }

    /**
     * The PEM CA bundle that signs the admins' certificates (for https:// admin addresses;
     * default: the JVM's roots) and, with {@link #requireClientCert}, callers' certificates.
     */
    public Builder tlsCa(Path ca) {
      tls.ca = ca;
      return this;
    }

    /** The client certificate presented to admins that ask for one (default: the tls one). */
    public Builder tlsClientCert(Path cert, Path key) {
      tls.clientCert = cert;
      tls.clientKey = key;
      return this;
    }

    /** Accepts only callers with a client certificate from {@link #tlsCa} (mTLS). */
    public Builder requireClientCert(boolean required) {
      tls.requireClientCert = required;
      return this;
    }

    /**
     * Enables script (GLUE) jobs of one language (GLUE_TYPE_SHELL, _PYTHON, _NODEJS, _PHP,
     * _POWERSHELL), run with its usual interpreter on the PATH (bash, python3, node, php, pwsh).
     * Off by default: a run of a type not enabled is refused. Each run writes the job's script
     * under {logDir}/gluesource/ (once per version) and runs it like {@link CommandHandler}.
     */
    public Builder enableGlue(GlueType glueType) {
      return glueInterpreter(glueType, null);
    }

    /** Like {@link #enableGlue} with an interpreter program of its own (null: the usual one). */
    public Builder glueInterpreter(GlueType glueType, String program) {
      if (!Glue.LANGUAGES.containsKey(glueType)) {
        throw new IllegalArgumentException(glueType + " is not a script glue type");
      }
      glue.put(glueType, program);
      return this;
    }

    /** Adds an environment variable for script runs (the XJOB_* ones win). */
    public Builder glueEnv(String key, String value) {
      glueEnv.put(key, value);
      return this;
    }

    /** How long a stopped handler may take to return before its run is reported (2 s). */
    public Builder killGrace(Duration grace) {
      this.killGrace = grace;
      return this;
    }

    /** How long shutdown tries to deliver pending results before spooling them (3 s). */
    public Builder callbackFlushTimeout(Duration timeout) {
      this.callbackFlushTimeout = timeout;
      return this;
    }

    /** How many days of run logs are kept (default 30; below 3 the daily sweep is off). */
    public Builder logRetentionDays(int days) {
      this.logRetentionDays = days;
      return this;
    }

    /** Registers a BEAN handler; names must be unique and not blank. */
    public Builder handler(String name, JobHandler handler) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("a handler name must not be blank");
      }
      if (handlers.putIfAbsent(name, handler) != null) {
        throw new IllegalArgumentException("handler name '" + name + "' is registered twice");
      }
      return this;
    }

    /**
     * The OTLP/gRPC collector runs' spans (run, handler, callback, under the admin's trace) are
     * exported to, e.g. {@code http://127.0.0.1:4317}. Default: the standard
     * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT variables; no tracing when
     * none is set or the OpenTelemetry SDK and OTLP exporter are not on the classpath.
     */
    public Builder otlpEndpoint(String endpoint) {
      this.otlpEndpoint = endpoint == null ? "" : endpoint;
      return this;
    }

    /** Binds the server, starts serving and registers in the background. */
    public XjobExecutor start() throws IOException {
      if (appName.isBlank()) {
        throw new IllegalArgumentException("an app name is required");
      }
      if (adminAddrs.isEmpty()) {
        throw new IllegalArgumentException("at least one admin address is required");
      }
      boolean sessionAddress =
          advertiseAddress != null && advertiseAddress.startsWith(SessionCalls.SCHEME);
      if (sessionDispatch && advertiseAddress != null && !sessionAddress) {
        throw new IllegalArgumentException(
            "with sessionDispatch the address is session://NAME, not '" + advertiseAddress + "'");
      }
      if (!sessionDispatch && sessionAddress) {
        throw new IllegalArgumentException(
            "'" + advertiseAddress + "' is a session address: set sessionDispatch(true)");
      }
      return new XjobExecutor(this);
    }
  }
}
