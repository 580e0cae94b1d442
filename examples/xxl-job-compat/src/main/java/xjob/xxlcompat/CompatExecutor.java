package xjob.xxlcompat;

import com.xxl.job.core.context.XxlJobHelper;
import com.xxl.job.core.executor.impl.XxlJobSimpleExecutor;
import com.xxl.job.core.handler.annotation.XxlJob;

import java.util.List;
import java.util.concurrent.CountDownLatch;

/**
 * An ordinary XXL-JOB executor, built only on xxl-job-core's public API, that the xjob admin's
 * XXL-JOB compatibility tests start as a real JVM. Configured through the environment:
 * XXL_ADMIN (admin addresses), XXL_TOKEN (access token), XXL_APP (app name), XXL_PORT (port of
 * its embedded server), XXL_LOG_PATH (run-log directory).
 */
public final class CompatExecutor {

    public static void main(String[] args) throws Exception {
        XxlJobSimpleExecutor executor = new XxlJobSimpleExecutor();
        executor.setAdminAddresses(env("XXL_ADMIN", "http://127.0.0.1:8080"));
        executor.setAccessToken(env("XXL_TOKEN", ""));
        executor.setAppname(env("XXL_APP", "xxl-compat"));
        executor.setIp("127.0.0.1");
        executor.setPort(Integer.parseInt(env("XXL_PORT", "9999")));
        executor.setLogPath(env("XXL_LOG_PATH", "/tmp/xxl-compat-logs"));
        executor.setLogRetentionDays(30);
        executor.setXxlJobBeanList(List.of(new Handlers()));
        executor.start();
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            executor.destroy();
            stopped.countDown();
        }));
        System.out.println("xxl-job compat executor started");
        stopped.await();
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    /** The handlers the tests trigger; each says in its result what it received. */
    public static final class Handlers {

        @XxlJob("succeed")
        public void succeed() {
            XxlJobHelper.log("succeed handler ran");
            XxlJobHelper.handleSuccess("ok params=" + XxlJobHelper.getJobParam());
        }

        @XxlJob("fail")
        public void fail() {
            XxlJobHelper.log("fail handler ran");
            XxlJobHelper.handleFail("failed on purpose params=" + XxlJobHelper.getJobParam());
        }

        /** Sleeps the number of seconds in its params (default 60), logging each second. */
        @XxlJob("sleep")
        public void sleep() throws InterruptedException {
            String param = XxlJobHelper.getJobParam();
            int seconds = param == null || param.isBlank() ? 60 : Integer.parseInt(param.trim());
            for (int i = 0; i < seconds; i++) {
                XxlJobHelper.log("sleeping " + i);
                Thread.sleep(1000);
            }
            XxlJobHelper.handleSuccess("slept " + seconds + " s");
        }

        /** Writes as many numbered log lines as its params say (default 5). */
        @XxlJob("logLines")
        public void logLines() {
            String param = XxlJobHelper.getJobParam();
            int lines = param == null || param.isBlank() ? 5 : Integer.parseInt(param.trim());
            for (int i = 1; i <= lines; i++) {
                XxlJobHelper.log("log line " + i);
            }
            XxlJobHelper.handleSuccess("wrote " + lines + " lines");
        }

        @XxlJob("shard")
        public void shard() {
            XxlJobHelper.handleSuccess("shard " + XxlJobHelper.getShardIndex() + "/"
                    + XxlJobHelper.getShardTotal() + " params=" + XxlJobHelper.getJobParam());
        }
    }
}
