package xjob.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.MapConfigurationPropertySource;
import xjob.executor.XjobExecutor;
import xjob.v1.Common.GlueType;

/** The xjob.tls.*, xjob.glue.* and xjob.otlp-endpoint properties bind and apply. */
class XjobExtraSettingsTest {
  private static XjobProperties bind(Map<String, String> values) {
    return new Binder(new MapConfigurationPropertySource(values))
        .bind("xjob", XjobProperties.class)
        .get();
  }

  @Test
  void tlsGlueAndTracingPropertiesBind() {
    XjobProperties properties =
        bind(
            Map.of(
                "xjob.app-name", "app",
                "xjob.tls.cert", "/etc/xjob/executor.pem",
                "xjob.tls.key", "/etc/xjob/executor.key",
                "xjob.tls.ca", "/etc/xjob/ca.pem",
                "xjob.tls.require-client-cert", "true",
                "xjob.glue.languages", "shell,python",
                "xjob.glue.interpreters.python", "/usr/bin/python3",
                "xjob.glue.env.REGION", "eu",
                "xjob.otlp-endpoint", "http://127.0.0.1:4317"));
    assertEquals(Path.of("/etc/xjob/executor.pem"), properties.getTls().getCert());
    assertEquals(Path.of("/etc/xjob/ca.pem"), properties.getTls().getCa());
    assertTrue(properties.getTls().isRequireClientCert());
    assertEquals(List.of("shell", "python"), properties.getGlue().getLanguages());
    assertEquals("/usr/bin/python3", properties.getGlue().getInterpreters().get("python"));
    assertEquals("eu", properties.getGlue().getEnv().get("REGION"));
    assertEquals("http://127.0.0.1:4317", properties.getOtlpEndpoint());
    XjobExtraSettings.apply(properties, XjobExecutor.builder()); // every value is accepted
  }

  @Test
  void dispatchPropertyChoosesSessionDispatch(@TempDir Path logDir) throws Exception {
    XjobProperties session = bind(Map.of("xjob.app-name", "app", "xjob.dispatch", "session"));
    assertEquals("session", session.getDispatch());
    assertTrue(XjobExtraSettings.sessionDispatch(session.getDispatch()));
    assertEquals("dial", bind(Map.of("xjob.app-name", "app")).getDispatch());
    assertFalse(XjobExtraSettings.sessionDispatch("dial"));
    assertThrows(IllegalArgumentException.class, () -> XjobExtraSettings.sessionDispatch("push"));
    // A session address is accepted only together with session dispatch.
    XjobExecutor.Builder dialed =
        XjobExecutor.builder()
            .appName("app")
            .adminAddr("http://127.0.0.1:1")
            .advertiseAddress("session://app-1");
    XjobExtraSettings.apply(bind(Map.of("xjob.dispatch", "dial")), dialed);
    assertThrows(IllegalArgumentException.class, dialed::start);
    XjobExecutor.Builder sessionBuilder =
        XjobExecutor.builder()
            .appName("app")
            .adminAddr("http://127.0.0.1:1")
            .advertiseAddress("session://app-1")
            .logDir(logDir);
    XjobExtraSettings.apply(session, sessionBuilder);
    XjobExecutor executor = sessionBuilder.start();
    try {
      assertEquals("session://app-1", executor.address());
    } finally {
      executor.shutdown();
    }
  }

  @Test
  void languagesAndHalfATlsPairAreChecked() {
    assertEquals(GlueType.GLUE_TYPE_NODEJS, XjobExtraSettings.glueType("nodejs"));
    assertEquals(GlueType.GLUE_TYPE_SHELL, XjobExtraSettings.glueType("GLUE_TYPE_SHELL"));
    assertThrows(IllegalArgumentException.class, () -> XjobExtraSettings.glueType("cobol"));
    XjobProperties halfTls = bind(Map.of("xjob.tls.cert", "/etc/xjob/executor.pem"));
    assertThrows(
        IllegalArgumentException.class,
        () -> XjobExtraSettings.apply(halfTls, XjobExecutor.builder()));
  }
}
