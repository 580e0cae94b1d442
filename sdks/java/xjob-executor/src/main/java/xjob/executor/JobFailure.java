package xjob.executor;

/** Thrown by a handler to fail its run with a plain message. */
public class JobFailure extends Exception {
  private static final long serialVersionUID = 1L;

  public JobFailure(String message) {
    super(message);
  }
}
