package xjob.executor;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import java.io.IOException;
import java.nio.file.Path;

/**
 * An executor's TLS settings (PEM files), as the Rust SDK's: the certificate of its own port, the
 * CA of the admins (and of callers' client certificates), and the client certificate presented
 * to admins.
 */
final class ExecutorTls {
  Path cert;
  Path key;
  Path ca;
  Path clientCert;
  Path clientKey;
  boolean requireClientCert;

  boolean serves() {
    return cert != null;
  }

  void check() {
    if ((cert == null) != (key == null)) {
      throw new IllegalStateException("tls needs both the certificate and the key");
    }
    if (requireClientCert && (cert == null || ca == null)) {
      throw new IllegalStateException("requireClientCert needs tls (certificate and key) and tlsCa");
    }
  }

  /** The credentials of the executor's own port: TLS with a certificate, else plaintext. */
  ServerCredentials server() throws IOException {
    TlsServerCredentials.Builder builder =
        TlsServerCredentials.newBuilder().keyManager(cert.toFile(), key.toFile());
    if (requireClientCert) {
      builder.trustManager(ca.toFile()).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE);
    }
    return builder.build();
  }

  /** The credentials of https:// admin channels. */
  ChannelCredentials channel() throws IOException {
    TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
    if (ca != null) {
      builder.trustManager(ca.toFile());
    }
    Path presentedCert = clientCert != null ? clientCert : cert;
    Path presentedKey = clientCert != null ? clientKey : key;
    if (presentedCert != null) {
      builder.keyManager(presentedCert.toFile(), presentedKey.toFile());
    }
    return builder.build();
  }
}
