package xjob.spring;

import java.util.Locale;
import xjob.executor.XjobExecutor;
import xjob.v1.Common.GlueType;

/**
 * Applies the {@code xjob.dispatch}, {@code xjob.tls.*}, {@code xjob.glue.*} and {@code
 * xjob.otlp-endpoint} settings.
 */
final class XjobExtraSettings {
  private XjobExtraSettings() {}

  static void apply(XjobProperties properties, XjobExecutor.Builder builder) {
    builder.sessionDispatch(sessionDispatch(properties.getDispatch()));
    XjobProperties.Tls tls = properties.getTls();
    if ((tls.getCert() == null) != (tls.getKey() == null)) {
      throw new IllegalArgumentException("xjob.tls.cert and xjob.tls.key go together");
    }
    if (tls.getCert() != null) {
      builder.tls(tls.getCert(), tls.getKey());
    }
    if (tls.getCa() != null) {
      builder.tlsCa(tls.getCa());
    }
    if (tls.getClientCert() != null) {
      builder.tlsClientCert(
          tls.getClientCert(), tls.getClientKey() != null ? tls.getClientKey() : tls.getKey());
    }
    builder.requireClientCert(tls.isRequireClientCert());
    XjobProperties.Glue glue = properties.getGlue();
    for (String language : glue.getLanguages()) {
      builder.glueInterpreter(glueType(language), glue.getInterpreters().get(language));
    }
    glue.getEnv().forEach(builder::glueEnv);
    builder.otlpEndpoint(properties.getOtlpEndpoint());
  }

  /** {@code xjob.dispatch}: dial (the default) or session. */
  static boolean sessionDispatch(String dispatch) {
    String mode = dispatch == null ? "" : dispatch.trim().toLowerCase(Locale.ROOT);
    return switch (mode) {
      case "", "dial" -> false;
      case "session" -> true;
      default ->
          throw new IllegalArgumentException(
              "xjob.dispatch: unknown mode '" + dispatch + "' (dial or session)");
    };
  }

  /** shell, python, nodejs, php, powershell (or the enum's own name) as a glue type. */
  static GlueType glueType(String language) {
    String name = language.trim().toUpperCase(Locale.ROOT);
    try {
      return GlueType.valueOf(name.startsWith("GLUE_TYPE_") ? name : "GLUE_TYPE_" + name);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "xjob.glue.languages: unknown language '" + language
              + "' (shell, python, nodejs, php, powershell)", e);
    }
  }
}
