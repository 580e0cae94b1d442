package executor

import (
	"os"
	"path/filepath"
	"time"
)

// Run logs are swept by date folder: once a day (and at start), every {logDir}/{yyyy-MM-dd}
// folder older than the retention is removed. Other folders (callbacklogs) are left alone.

const minRetentionDays = 3

// cleanupLoop sweeps until stop is closed; retention below 3 days turns it off (as the Rust SDK).
func cleanupLoop(root string, retentionDays int, stop <-chan struct{}, logf func(string, ...any)) {
	if retentionDays < minRetentionDays {
		return
	}
	ticker := time.NewTicker(24 * time.Hour)
	defer ticker.Stop()
	for {
		if removed := removeExpired(root, time.Now(), retentionDays); removed > 0 {
			logf("removed %d run log folders older than %d days", removed, retentionDays)
		}
		select {
		case <-ticker.C:
		case <-stop:
			return
		}
	}
}

// removeExpired removes the date folders older than retentionDays before today; it returns how
// many it removed.
func removeExpired(root string, now time.Time, retentionDays int) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	year, month, day := now.Local().Date()
	oldestKept := time.Date(year, month, day, 0, 0, 0, 0, time.Local).AddDate(0, 0, -retentionDays)
	removed := 0
	for _, entry := range entries {
		if !entry.IsDir() {
			continue
		}
		date, err := time.ParseInLocation(dateDirLayout, entry.Name(), time.Local)
		if err != nil || !date.Before(oldestKept) {
			continue
		}
		if os.RemoveAll(filepath.Join(root, entry.Name())) == nil {
			removed++
		}
	}
	return removed
}
