//! Opening a log file for appending, shared by the run files and the quiet runs' files.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Opens a file for append, creating it. The date folder is made only when the open says it
/// is missing: checking for it first would cost two more system calls on every run.
pub(super) fn open_append(path: &Path) -> io::Result<File> {
    let open = || OpenOptions::new().create(true).append(true).open(path);
    match open() {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            open()
        }
        opened => opened,
    }
}
