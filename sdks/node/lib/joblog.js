'use strict';
// Run log files: {logDir}/{yyyy-MM-dd}/{logId}.log, the date of the run's log_date_ms in the
// executor's local time zone (as the Rust SDK), read back in 1-based line ranges for ReadLog,
// and swept by date folder once older than the retention.
const fs = require('node:fs');
const path = require('node:path');

const MAX_LINES_PER_READ = 1000;
const MAX_BYTES_PER_READ = 1 << 20;
const MIN_RETENTION_DAYS = 3; // below this the sweep is off, as XXL-JOB
const DAY_MS = 24 * 60 * 60 * 1000;

const pad = (number, width = 2) => String(number).padStart(width, '0');

function localDate(date) {
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

function timestamp(date = new Date()) {
  return `${localDate(date)} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

class RunLog {
  constructor(file) {
    this.file = file;
  }

  // One append per call, so readers only ever see whole lines.
  write(line) {
    const parts = String(line).split(/\r?\n/);
    const text = parts.map((part) => `${timestamp()} ${part}\n`).join('');
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    fs.appendFileSync(this.file, text);
  }
}

class JobLogStore {
  constructor(root) {
    this.root = root;
  }

  pathFor(logId, logDateMs) {
    const date = Number.isFinite(logDateMs) && logDateMs > 0 ? new Date(logDateMs) : new Date();
    return path.join(this.root, localDate(date), `${logId}.log`);
  }

  open(logId, logDateMs) {
    return new RunLog(this.pathFor(logId, logDateMs));
  }

  // Deletes date folders older than retentionDays; returns how many. Off below 3 days.
  removeExpired(retentionDays, today = new Date()) {
    if (retentionDays < MIN_RETENTION_DAYS || !fs.existsSync(this.root)) return 0;
    const horizon = localDate(new Date(today.getTime() - retentionDays * DAY_MS));
    let removed = 0;
    for (const entry of fs.readdirSync(this.root, { withFileTypes: true })) {
      // Only date folders are ours; yyyy-MM-dd names compare like dates.
      if (entry.isDirectory() && /^\d{4}-\d{2}-\d{2}$/.test(entry.name) && entry.name < horizon) {
        fs.rmSync(path.join(this.root, entry.name), { recursive: true, force: true });
        removed += 1;
      }
    }
    return removed;
  }

  // Lines from fromLine on, bounded; isEnd only once the run is over and every line was
  // returned. A missing file answers its path in content, with no lines.
  read(logId, logDateMs, fromLine, runActive) {
    const from = Math.max(fromLine, 1);
    const file = this.pathFor(logId, logDateMs);
    let raw;
    try {
      raw = fs.readFileSync(file);
    } catch (error) {
      const content = error.code === 'ENOENT'
        ? `log file not found: ${file}`
        : `failed to read log file ${file}: ${error.message}`;
      return { fromLine: from, toLine: from - 1, content, isEnd: !runActive };
    }
    const text = raw.toString('utf8');
    const lines = text.split(/(?<=\n)/).filter((line) => line.length > 0);
    // A line still being written counts only once the run is over.
    if (runActive && lines.length && !lines[lines.length - 1].endsWith('\n')) lines.pop();
    const chosen = [];
    let size = 0;
    for (const line of lines.slice(from - 1)) {
      const bytes = Buffer.byteLength(line);
      if (chosen.length >= MAX_LINES_PER_READ || (chosen.length && size + bytes > MAX_BYTES_PER_READ)) break;
      chosen.push(line);
      size += bytes;
    }
    const reachedEnd = from - 1 + chosen.length >= lines.length;
    return {
      fromLine: from,
      toLine: from - 1 + chosen.length,
      content: chosen.join(''),
      isEnd: !runActive && reachedEnd,
    };
  }
}

module.exports = { JobLogStore, RunLog, localDate };
