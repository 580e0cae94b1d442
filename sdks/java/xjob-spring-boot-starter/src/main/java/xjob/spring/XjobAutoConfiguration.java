package xjob.spring;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * An xjob executor for a Spring Boot app: {@code xjob.*} properties configure it, bean methods
 * annotated {@link XjobHandler} are its handlers, and it starts and stops with the context.
 * {@code xjob.enabled=false} turns it off.
 */
@AutoConfiguration
@EnableConfigurationProperties(XjobProperties.class)
@ConditionalOnProperty(prefix = "xjob", name = "enabled", matchIfMissing = true)
public class XjobAutoConfiguration {
  // Static: a post-processor must exist before the beans it inspects are created.
  @Bean
  @ConditionalOnMissingBean
  public static XjobHandlerMethods xjobHandlerMethods() {
    return new XjobHandlerMethods();
  }

  @Bean
  @ConditionalOnMissingBean
  public XjobExecutorLifecycle xjobExecutor(
      XjobProperties properties, XjobHandlerMethods methods) {
    return new XjobExecutorLifecycle(properties, methods);
  }
}
