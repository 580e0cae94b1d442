package xjob.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Makes a bean method an xjob BEAN handler under the given name, which jobs name as their
 * handler. The method takes no parameter or one {@link xjob.executor.JobContext}; what it returns
 * (its {@code toString()}, nothing for {@code void} or {@code null}) is the run's success
 * message, and an exception fails the run with its message.
 *
 * <pre>{@code
 * @Component
 * class Reports {
 *   @XjobHandler("nightlyReport")
 *   String nightly(JobContext run) {
 *     run.log("building the report for " + run.params());
 *     return "report sent";
 *   }
 * }
 * }</pre>
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface XjobHandler {
  /** The handler name; unique among the application's handlers. */
  String value();
}
