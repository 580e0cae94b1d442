package xjob.executor;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Comparator;
import java.util.stream.Stream;
import xjob.v1.Executor.ReadLogResponse;

/**
 * Run log files: one per run at {logDir}/{yyyy-MM-dd}/{log_id}.log, the date being that of the
 * run's log_date_ms in the executor's local time zone (as the Rust SDK), read back in bounded
 * 1-based ranges for ReadLog.
 */
final class LogStore {
  static final int MAX_LINES_PER_READ = 1000;
  static final int MAX_BYTES_PER_READ = 1 << 20;
  private static final DateTimeFormatter DATE_DIR = DateTimeFormatter.ofPattern("yyyy-MM-dd");

  private final Path root;

  LogStore(Path root) {
    this.root = root;
  }

  Path pathFor(long logId, long logDateMs) {
    Instant instant = logDateMs > 0 ? Instant.ofEpochMilli(logDateMs) : Instant.now();
    String date = DATE_DIR.format(instant.atZone(ZoneId.systemDefault()));
    return root.resolve(date).resolve(logId + ".log");
  }

  RunLog open(long logId, long logDateMs) {
    return new RunLog(pathFor(logId, logDateMs));
  }

  /**
   * Reads lines [fromLine, ...], at most 1000 lines and 1 MiB. {@code runActive} says whether the
   * run is still queued or running here: only a finished run can be at its end, and only then is
   * an unterminated last line returned.
   */
  ReadLogResponse read(long logId, long logDateMs, int fromLine, boolean runActive) {
    int from = Math.max(fromLine, 1);
    Path path = pathFor(logId, logDateMs);
    try (InputStream in = Files.newInputStream(path)) {
      byte[] bytes = in.readAllBytes();
      ByteArrayOutputStream content = new ByteArrayOutputStream();
      int lineNumber = 0;
      int count = 0;
      boolean reachedEnd = true;
      int start = 0;
      while (start < bytes.length) {
        int newline = indexOf(bytes, (byte) '\n', start);
        boolean terminated = newline >= 0;
        int end = terminated ? newline + 1 : bytes.length;
        if (!terminated && runActive) {
          // A line still being written counts only once the run is over.
          break;
        }
        lineNumber++;
        int length = end - start;
        if (lineNumber >= from) {
          int added = length + (terminated ? 0 : 1);
          if (count >= MAX_LINES_PER_READ
              || (count > 0 && content.size() + added > MAX_BYTES_PER_READ)) {
            reachedEnd = false;
            break;
          }
          content.write(bytes, start, length);
          if (!terminated) {
            content.write('\n');
          }
          count++;
        }
        start = end;
      }
      return ReadLogResponse.newBuilder()
          .setFromLine(from)
          .setToLine(from - 1 + count)
          .setContent(content.toString(StandardCharsets.UTF_8))
          .setIsEnd(!runActive && reachedEnd)
          .build();
    } catch (NoSuchFileException e) {
      return missing(from, "log file not found: " + path, runActive);
    } catch (IOException e) {
      return missing(from, "failed to read log file " + path + ": " + e.getMessage(), runActive);
    }
  }

  /**
   * Removes the {yyyy-MM-dd} folders older than retentionDays before today (other folders, such
   * as callbacklogs, are left alone); returns how many were removed.
   */
  int removeExpired(LocalDate today, int retentionDays) {
    LocalDate oldestKept = today.minusDays(retentionDays);
    int removed = 0;
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
      for (Path entry : entries) {
        LocalDate date;
        try {
          date = LocalDate.parse(entry.getFileName().toString(), DATE_DIR);
        } catch (DateTimeParseException e) {
          continue;
        }
        if (Files.isDirectory(entry) && date.isBefore(oldestKept) && deleteTree(entry)) {
          removed++;
        }
      }
    } catch (IOException e) {
      return removed;
    }
    return removed;
  }

  private static boolean deleteTree(Path dir) {
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path path : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(path);
      }
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static ReadLogResponse missing(int from, String content, boolean runActive) {
    return ReadLogResponse.newBuilder()
        .setFromLine(from)
        .setToLine(from - 1)
        .setContent(content)
        .setIsEnd(!runActive)
        .build();
  }

  private static int indexOf(byte[] bytes, byte wanted, int from) {
    for (int i = from; i < bytes.length; i++) {
      if (bytes[i] == wanted) {
        return i;
      }
    }
    return -1;
  }
}
