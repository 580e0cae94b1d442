package consumer;

import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.stereotype.Component;
import xjob.executor.JobContext;
import xjob.spring.XjobHandler;

/** A Spring Boot app on the starter: xjob.* properties, one @XjobHandler bean method. */
@SpringBootApplication
public class SpringApp {
  public static void main(String[] args) {
    SpringApplication app = new SpringApplication(SpringApp.class);
    // The settings every consumer of .ci/sdk-packages.sh reads from its environment.
    app.setDefaultProperties(
        Map.of(
            "xjob.app-name", "${XJOB_APP_NAME}",
            "xjob.admin-addresses", "${XJOB_ADMIN_ADDR}",
            "xjob.port", "${XJOB_EXECUTOR_PORT}",
            "xjob.log-dir", "${XJOB_LOG_DIR}",
            "xjob.shutdown-grace", "2s"));
    app.run(args);
  }

  @Component
  static class Greeter {
    @XjobHandler("greet")
    String greet(JobContext run) {
      run.log("hello from a Spring Boot starter, " + run.params());
      return "spring greeted " + run.params();
    }
  }
}
