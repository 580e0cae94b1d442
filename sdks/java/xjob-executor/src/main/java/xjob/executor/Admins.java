package xjob.executor;

import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ConnectivityState;
import io.grpc.ForwardingClientCall;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The admin addresses, in the order they are tried, each with one lazily connecting channel
 * shared by the session and the callbacks. Every call carries the access token.
 */
final class Admins {
  static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final List<String> addresses;
  private final String token;
  private final ChannelCredentials tlsCredentials;
  private final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();

  Admins(List<String> addresses, String token) {
    this(addresses, token, TlsChannelCredentials.create());
  }

  /** With the credentials of https:// admins. */
  Admins(List<String> addresses, String token, ChannelCredentials tlsCredentials) {
    this.addresses = List.copyOf(addresses);
    this.token = token;
    this.tlsCredentials = tlsCredentials;
  }

  List<String> addresses() {
    return addresses;
  }

  /**
   * The admin's channel. A channel that failed to connect waits out grpc-java's own reconnect
   * backoff (up to 2 minutes) before trying again; the callers retry on their own, shorter
   * backoff, so a failed channel is told to reconnect at once.
   */
  Channel channel(String address) {
    ManagedChannel channel = channels.computeIfAbsent(address, this::connect);
    if (channel.getState(false) == ConnectivityState.TRANSIENT_FAILURE) {
      channel.resetConnectBackoff();
    }
    return channel;
  }

  private ManagedChannel connect(String address) {
    boolean tls = address.startsWith("https://");
    String target = address.replaceFirst("^https?://", "").replaceAll("/+$", "");
    var builder =
        Grpc.newChannelBuilder(
                target,
                tls ? tlsCredentials : InsecureChannelCredentials.create())
            // HTTP/2 pings find a dead admin on an idle session.
            .keepAliveTime(10, TimeUnit.SECONDS)
            .keepAliveTimeout(5, TimeUnit.SECONDS)
            .keepAliveWithoutCalls(true);
    if (token != null && !token.isEmpty()) {
      builder.intercept(new BearerToken(token));
    }
    return builder.build();
  }

  void close() {
    channels.values().forEach(ManagedChannel::shutdownNow);
  }

  /** Adds "authorization: Bearer <token>" to every outgoing call. */
  private static final class BearerToken implements ClientInterceptor {
    private final String value;

    BearerToken(String token) {
      this.value = "Bearer " + token;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          headers.put(AUTHORIZATION, value);
          super.start(listener, headers);
        }
      };
    }
  }
}
