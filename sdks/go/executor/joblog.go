package executor

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	pb "xjob.dev/sdk/go/xjobpb"
)

// Run log files: one per run at {logDir}/{yyyy-MM-dd}/{log_id}.log, the date being that of the
// run's log_date_ms in the executor's local time zone (as the Rust SDK). Each line is written
// with one write on a file opened for append, so it is readable as soon as the call returns.
// ReadLog reads them back in bounded 1-based ranges.

const (
	maxLinesPerRead = 1000
	maxBytesPerRead = 1 << 20
	dateDirLayout   = "2006-01-02"
	lineTimeLayout  = "2006-01-02 15:04:05.000"
)

type logStore struct{ root string }

// pathFor returns {root}/{local date of logDateMs}/{logID}.log.
func (s logStore) pathFor(logID, logDateMs int64) string {
	date := time.Now()
	if logDateMs > 0 {
		date = time.UnixMilli(logDateMs)
	}
	return filepath.Join(s.root, date.Local().Format(dateDirLayout), strconv.FormatInt(logID, 10)+".log")
}

// runLog is the log of one run; the file is created by its first line.
type runLog struct {
	path string
	logf func(string, ...any)
	mu   sync.Mutex
	file *os.File
}

func (s logStore) open(logID, logDateMs int64, logf func(string, ...any)) *runLog {
	return &runLog{path: s.pathFor(logID, logDateMs), logf: logf}
}

func (l *runLog) append(line string) {
	text := time.Now().Format(lineTimeLayout) + " " + line + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
			l.logf("run log %s: %v", l.path, err)
			return
		}
		file, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			l.logf("run log %s: %v", l.path, err)
			return
		}
		l.file = file
	}
	if _, err := l.file.WriteString(text); err != nil {
		l.logf("run log %s: %v", l.path, err)
	}
}

func (l *runLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
}

// read returns lines [fromLine, ...] of a run's file, at most maxLinesPerRead lines and
// maxBytesPerRead bytes. runActive says whether the run is still queued or running here: only a
// finished run can be at its end, and only then is an unterminated last line returned.
func (s logStore) read(logID, logDateMs int64, fromLine int32, runActive bool) *pb.ReadLogResponse {
	if fromLine < 1 {
		fromLine = 1
	}
	path := s.pathFor(logID, logDateMs)
	content, count, reachedEnd, err := readLines(path, int(fromLine), !runActive)
	if err != nil {
		text := fmt.Sprintf("failed to read log file %s: %v", path, err)
		if errors.Is(err, fs.ErrNotExist) {
			text = "log file not found: " + path
		}
		return &pb.ReadLogResponse{FromLine: fromLine, ToLine: fromLine - 1, Content: text, IsEnd: !runActive}
	}
	return &pb.ReadLogResponse{
		FromLine: fromLine,
		ToLine:   fromLine - 1 + int32(count),
		Content:  content,
		IsEnd:    !runActive && reachedEnd,
	}
}

func readLines(path string, fromLine int, includeUnterminated bool) (string, int, bool, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", 0, false, err
	}
	defer file.Close()
	reader := bufio.NewReader(file)
	var content []byte
	lineNumber, count := 0, 0
	for {
		line, err := reader.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return string(content), count, true, nil
		}
		if err != nil && err != io.EOF {
			return "", 0, false, err
		}
		terminated := line[len(line)-1] == '\n'
		if !terminated && !includeUnterminated {
			// A line still being written counts only once the run is over.
			return string(content), count, true, nil
		}
		if !terminated {
			line = append(line, '\n')
		}
		lineNumber++
		if lineNumber < fromLine {
			continue
		}
		if count >= maxLinesPerRead || (count > 0 && len(content)+len(line) > maxBytesPerRead) {
			return string(content), count, false, nil
		}
		content = append(content, line...)
		count++
	}
}
