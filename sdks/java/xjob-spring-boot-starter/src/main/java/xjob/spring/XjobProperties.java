package xjob.spring;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** The executor's settings, from {@code xjob.*} properties (application.properties, env, …). */
@ConfigurationProperties(prefix = "xjob")
public class XjobProperties {
  /** Whether to start an executor at all. */
  private boolean enabled = true;
  /** The app name of the executor's group (required). */
  private String appName = "";
  /** The admins' URLs (http://host:port), tried in order. */
  private List<String> adminAddresses = new ArrayList<>(List.of("http://127.0.0.1:8080"));
  /** The host the executor's server binds (a non-loopback one needs an access token). */
  private String bindHost = "127.0.0.1";
  /** The port the executor's server binds; 0 picks a free one. */
  private int port = 9999;
  /** The URL the admins dial; default http://{bind host}:{port}. */
  private String advertiseAddress = "";
  /** The group's access token, sent to the admin and required on incoming calls. */
  private String accessToken = "";
  /** Serve off loopback without an access token (logs an INSECURE warning). */
  private boolean insecureOpenNetwork = false;
  /** The run log directory. */
  private Path logDir = Path.of("xjob-executor-logs");
  /** Days of run logs kept. */
  private int logRetentionDays = 30;
  /** How long a graceful stop waits for running handlers. */
  private Duration shutdownGrace = Duration.ofSeconds(5);
  /** How long a stopped handler may take to return before its run is reported. */
  private Duration killGrace = Duration.ofSeconds(2);
  /**
   * How the admins reach the executor: dial (they call its port) or session (no port is opened;
   * their calls come down the executor's own connection to them, and advertise-address, when
   * set, is session://NAME).
   */
  private String dispatch = "dial";
  /** Labels sent at registration. */
  private Map<String, String> labels = new LinkedHashMap<>();

  public boolean isEnabled() { return enabled; }
  public void setEnabled(boolean enabled) { this.enabled = enabled; }
  public String getAppName() { return appName; }
  public void setAppName(String appName) { this.appName = appName; }
  public List<String> getAdminAddresses() { return adminAddresses; }
  public void setAdminAddresses(List<String> adminAddresses) { this.adminAddresses = adminAddresses; }
  public String getBindHost() { return bindHost; }
  public void setBindHost(String bindHost) { this.bindHost = bindHost; }
  public int getPort() { return port; }
  public void setPort(int port) { this.port = port; }
  public String getAdvertiseAddress() { return advertiseAddress; }
  public void setAdvertiseAddress(String advertiseAddress) { this.advertiseAddress = advertiseAddress; }
  public String getAccessToken() { return accessToken; }
  public void setAccessToken(String accessToken) { this.accessToken = accessToken; }
  public boolean isInsecureOpenNetwork() { return insecureOpenNetwork; }
  public void setInsecureOpenNetwork(boolean insecureOpenNetwork) { this.insecureOpenNetwork = insecureOpenNetwork; }
  public Path getLogDir() { return logDir; }
  public void setLogDir(Path logDir) { this.logDir = logDir; }
  public int getLogRetentionDays() { return logRetentionDays; }
  public void setLogRetentionDays(int logRetentionDays) { this.logRetentionDays = logRetentionDays; }
  public Duration getShutdownGrace() { return shutdownGrace; }
  public void setShutdownGrace(Duration shutdownGrace) { this.shutdownGrace = shutdownGrace; }
  public Duration getKillGrace() { return killGrace; }
  public void setKillGrace(Duration killGrace) { this.killGrace = killGrace; }
  public String getDispatch() { return dispatch; }
  public void setDispatch(String dispatch) { this.dispatch = dispatch; }
  public Map<String, String> getLabels() { return labels; }
  public void setLabels(Map<String, String> labels) { this.labels = labels; }

  // TLS, script jobs and tracing: nested groups (xjob.tls.*, xjob.glue.*, xjob.otlp-endpoint).

  /** TLS of the executor's port and of its admin connections (PEM files). */
  private Tls tls = new Tls();
  /** Script (GLUE) jobs, off unless their language is listed. */
  private Glue glue = new Glue();
  /**
   * The OTLP/gRPC collector runs' spans are exported to (http://127.0.0.1:4317); empty: the
   * standard OTEL_EXPORTER_OTLP_ENDPOINT. Needs the OpenTelemetry SDK and OTLP exporter on the
   * classpath.
   */
  private String otlpEndpoint = "";

  public Tls getTls() { return tls; }
  public void setTls(Tls tls) { this.tls = tls; }
  public Glue getGlue() { return glue; }
  public void setGlue(Glue glue) { this.glue = glue; }
  public String getOtlpEndpoint() { return otlpEndpoint; }
  public void setOtlpEndpoint(String otlpEndpoint) { this.otlpEndpoint = otlpEndpoint; }

  /** {@code xjob.tls.*}: each a PEM file path; unset means no TLS. */
  public static class Tls {
    /** Certificate chain served on the executor's port (its address becomes https://). */
    private Path cert;
    /** Private key of the certificate. */
    private Path key;
    /** CA bundle verifying https:// admins (default: the JVM's roots) and client certificates. */
    private Path ca;
    /** Client certificate presented to admins that ask for one (default: cert). */
    private Path clientCert;
    /** Key of the client certificate (default: key). */
    private Path clientKey;
    /** Accept only callers with a client certificate from the CA (mTLS). */
    private boolean requireClientCert = false;

    public Path getCert() { return cert; }
    public void setCert(Path cert) { this.cert = cert; }
    public Path getKey() { return key; }
    public void setKey(Path key) { this.key = key; }
    public Path getCa() { return ca; }
    public void setCa(Path ca) { this.ca = ca; }
    public Path getClientCert() { return clientCert; }
    public void setClientCert(Path clientCert) { this.clientCert = clientCert; }
    public Path getClientKey() { return clientKey; }
    public void setClientKey(Path clientKey) { this.clientKey = clientKey; }
    public boolean isRequireClientCert() { return requireClientCert; }
    public void setRequireClientCert(boolean requireClientCert) { this.requireClientCert = requireClientCert; }
  }

  /** {@code xjob.glue.*}: which script languages run, with which interpreters and environment. */
  public static class Glue {
    /** Languages enabled: shell, python, nodejs, php, powershell. */
    private List<String> languages = new ArrayList<>();
    /** An interpreter program per language (default: bash, python3, node, php, pwsh). */
    private Map<String, String> interpreters = new LinkedHashMap<>();
    /** Environment variables of script runs (the XJOB_* ones win). */
    private Map<String, String> env = new LinkedHashMap<>();

    public List<String> getLanguages() { return languages; }
    public void setLanguages(List<String> languages) { this.languages = languages; }
    public Map<String, String> getInterpreters() { return interpreters; }
    public void setInterpreters(Map<String, String> interpreters) { this.interpreters = interpreters; }
    public Map<String, String> getEnv() { return env; }
    public void setEnv(Map<String, String> env) { this.env = env; }
  }
}
