package xjob.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import xjob.executor.JobContext;

class XjobHandlerMethodsTest {
  static class Jobs {
    @XjobHandler("greet")
    String greet() {
      return "hello";
    }

    @XjobHandler("quiet")
    void quiet(JobContext run) {}

    @XjobHandler("boom")
    String boom() {
      throw new IllegalStateException("broken on purpose");
    }

    String notAHandler() {
      return "no";
    }
  }

  static class SameName {
    @XjobHandler("greet")
    String greetAgain() {
      return "again";
    }
  }

  static class WrongSignature {
    @XjobHandler("wrong")
    String wrong(String params) {
      return params;
    }
  }

  @Test
  void annotatedMethodsBecomeHandlersByName() throws Exception {
    XjobHandlerMethods methods = new XjobHandlerMethods();
    methods.postProcessAfterInitialization(new Jobs(), "jobs");
    assertEquals(3, methods.handlers().size(), methods.handlers().keySet().toString());
    assertEquals("hello", methods.handlers().get("greet").handle(null));
    assertEquals("", methods.handlers().get("quiet").handle(null));
    // The handler's own exception reaches the runner, so the run fails with its message.
    IllegalStateException failure =
        assertThrows(IllegalStateException.class, () -> methods.handlers().get("boom").handle(null));
    assertEquals("broken on purpose", failure.getMessage());
  }

  @Test
  void aNameDeclaredTwiceIsRefusedNamingBothMethods() {
    XjobHandlerMethods methods = new XjobHandlerMethods();
    methods.postProcessAfterInitialization(new Jobs(), "jobs");
    IllegalStateException refusal =
        assertThrows(
            IllegalStateException.class,
            () -> methods.postProcessAfterInitialization(new SameName(), "sameName"));
    assertTrue(refusal.getMessage().contains("jobs.greet"), refusal.getMessage());
    assertTrue(refusal.getMessage().contains("sameName.greetAgain"), refusal.getMessage());
  }

  @Test
  void aWrongSignatureIsRefused() {
    IllegalStateException refusal =
        assertThrows(
            IllegalStateException.class,
            () -> new XjobHandlerMethods().postProcessAfterInitialization(new WrongSignature(), "w"));
    assertTrue(refusal.getMessage().contains("one JobContext"), refusal.getMessage());
  }
}
