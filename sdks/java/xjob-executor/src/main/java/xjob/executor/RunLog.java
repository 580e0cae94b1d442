package xjob.executor;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The log file of one run, created by its first line. Each line is written with one write on a
 * file opened for append, so it is readable as soon as {@link #append} returns.
 */
final class RunLog implements AutoCloseable {
  private static final Logger LOG = Logger.getLogger(RunLog.class.getName());
  private static final DateTimeFormatter LINE_TIME =
      DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss.SSS");

  private final Path path;
  private OutputStream out;

  RunLog(Path path) {
    this.path = path;
  }

  Path path() {
    return path;
  }

  synchronized void append(String line) {
    String text = LocalDateTime.now().format(LINE_TIME) + " " + line + "\n";
    try {
      if (out == null) {
        Files.createDirectories(path.getParent());
        out =
            Files.newOutputStream(path, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
      }
      out.write(text.getBytes(StandardCharsets.UTF_8));
      out.flush();
    } catch (IOException e) {
      LOG.log(Level.WARNING, "failed to append to run log " + path, e);
    }
  }

  @Override
  public synchronized void close() {
    if (out != null) {
      try {
        out.close();
      } catch (IOException e) {
        LOG.log(Level.FINE, "closing " + path, e);
      }
      out = null;
    }
  }
}
