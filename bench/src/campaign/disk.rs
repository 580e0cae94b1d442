//! A small file system for the SQLite database (a tmpfs the harness mounts), so a fault can
//! fill it: a filler file takes every free byte, the admin's writes fail with "database or
//! disk is full" while it is there, and deleting it frees the space. Needs root (mount); the
//! tmpfs is unmounted when the [`SmallDisk`] is dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs of a fixed size.
pub struct SmallDisk {
    path: PathBuf,
    filler: PathBuf,
}

impl SmallDisk {
    /// Why the harness cannot mount one here, if so.
    pub fn unavailable() -> Option<String> {
        (!nix::unistd::geteuid().is_root())
            .then(|| "the full-disk fault needs root (it mounts a tmpfs)".to_string())
    }

    /// Mounts a tmpfs of `size_mb` at `path` (created).
    pub fn mount(path: &Path, size_mb: u64) -> anyhow::Result<SmallDisk> {
        std::fs::create_dir_all(path)?;
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_mb}m"),
                "xjob-campaign",
            ])
            .arg(path)
            .output()?;
        anyhow::ensure!(
            output.status.success(),
            "mount tmpfs at {}: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(SmallDisk {
            path: path.to_path_buf(),
            filler: path.join("filler"),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes every free byte: writes zeros until the file system says it is full.
    pub fn fill(&self) -> anyhow::Result<()> {
        let mut file = std::fs::File::create(&self.filler)?;
        let chunk = vec![0u8; 1 << 20];
        loop {
            match file.write(&chunk) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(nix::libc::ENOSPC) => return Ok(()),
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Gives the space back.
    pub fn free(&self) -> anyhow::Result<()> {
        match std::fs::remove_file(&self.filler) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error.into()),
            _ => Ok(()),
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = self.free();
        // Lazy: a process still holding a file there does not keep the mount.
        let unmounted = Command::new("umount").arg("-l").arg(&self.path).status();
        if !unmounted.is_ok_and(|status| status.success()) {
            eprintln!(
                "campaign: cannot unmount the tmpfs at {}",
                self.path.display()
            );
        }
    }
}
