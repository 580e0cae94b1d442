"""Run log files: `{log_dir}/{yyyy-MM-dd}/{log_id}.log`, the date of the run's log_date_ms in
the executor's local time zone (as the Rust SDK), read back in 1-based line ranges for ReadLog,
and swept by date folder once older than the retention.
"""

import datetime
import shutil
from pathlib import Path

from ._proto import executor_pb2

MAX_LINES_PER_READ = 1000
MAX_BYTES_PER_READ = 1 << 20
MIN_RETENTION_DAYS = 3  # below this the sweep is off, as XXL-JOB


def _timestamp() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class RunLog:
    """The log of one run. Each line is one append, so readers see whole lines."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, line: str) -> None:
        text = "".join(f"{_timestamp()} {part}\n" for part in str(line).splitlines() or [""])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(text)


class JobLogStore:
    def __init__(self, root) -> None:
        self.root = Path(root)

    def path_for(self, log_id: int, log_date_ms: int) -> Path:
        try:
            date = datetime.datetime.fromtimestamp(log_date_ms / 1000).date()
        except (OverflowError, OSError, ValueError):
            date = datetime.date.today()
        return self.root / date.strftime("%Y-%m-%d") / f"{log_id}.log"

    def open(self, log_id: int, log_date_ms: int) -> RunLog:
        return RunLog(self.path_for(log_id, log_date_ms))

    def read(self, log_id: int, log_date_ms: int, from_line: int, run_active: bool):
        """Lines from `from_line` on, bounded; `is_end` only once the run is over and every
        line was returned. A missing file answers its path in `content`, with no lines."""
        from_line = max(from_line, 1)
        path = self.path_for(log_id, log_date_ms)
        try:
            with open(path, "rb") as file:
                raw = file.read()
        except FileNotFoundError:
            return executor_pb2.ReadLogResponse(
                from_line=from_line,
                to_line=from_line - 1,
                content=f"log file not found: {path}",
                is_end=not run_active,
            )
        except OSError as error:
            return executor_pb2.ReadLogResponse(
                from_line=from_line,
                to_line=from_line - 1,
                content=f"failed to read log file {path}: {error}",
                is_end=not run_active,
            )
        lines = raw.splitlines(keepends=True)
        # A line still being written counts only once the run is over.
        if run_active and lines and not lines[-1].endswith(b"\n"):
            lines.pop()
        chosen, size = [], 0
        for line in lines[from_line - 1:]:
            if len(chosen) >= MAX_LINES_PER_READ or (chosen and size + len(line) > MAX_BYTES_PER_READ):
                break
            chosen.append(line)
            size += len(line)
        reached_end = from_line - 1 + len(chosen) >= len(lines)
        return executor_pb2.ReadLogResponse(
            from_line=from_line,
            to_line=from_line - 1 + len(chosen),
            content=b"".join(chosen).decode("utf-8", errors="replace"),
            is_end=not run_active and reached_end,
        )

    def remove_expired(self, retention_days: int, today: datetime.date = None) -> int:
        """Deletes date folders older than `retention_days`; returns how many. Off below
        MIN_RETENTION_DAYS."""
        if retention_days < MIN_RETENTION_DAYS or not self.root.is_dir():
            return 0
        horizon = (today or datetime.date.today()) - datetime.timedelta(days=retention_days)
        removed = 0
        for folder in self.root.iterdir():
            try:
                date = datetime.datetime.strptime(folder.name, "%Y-%m-%d").date()
            except ValueError:
                continue  # not a date folder: never ours to delete
            if folder.is_dir() and date < horizon:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed
