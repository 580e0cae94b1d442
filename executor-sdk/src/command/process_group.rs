//! The process group of one command run (unix): signals to the whole group, and a drop guard
//! that SIGKILLs the group if the handler is dropped or aborted before it could stop it.
//!
//! The command is spawned as the leader of a new group (`process_group(0)`), so its pid is the
//! group id and every process it starts (`sh -c 'a & b'`) is in the group unless it leaves it on
//! purpose (`setsid`). A signal sent with `killpg` reaches all of them at once.

use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The group of a spawned command; SIGKILLs it when dropped while armed.
#[derive(Debug)]
pub(super) struct ProcessGroup {
    group_id: Pid,
    armed: bool,
}

impl ProcessGroup {
    /// Returns the group led by the freshly spawned process `leader_pid` (armed).
    pub(super) fn led_by(leader_pid: u32) -> Option<Self> {
        let raw = i32::try_from(leader_pid).ok().filter(|raw| *raw > 1)?;
        Some(Self {
            group_id: Pid::from_raw(raw),
            armed: true,
        })
    }

    /// Returns the group id (the leader's pid).
    pub(super) fn id(&self) -> i32 {
        self.group_id.as_raw()
    }

    /// Sends SIGTERM to every process of the group.
    pub(super) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// Sends SIGKILL to every process of the group.
    pub(super) fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// Stops the guard from signalling the group on drop: the run has dealt with it.
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    fn signal(&self, signal: Signal) {
        match killpg(self.group_id, signal) {
            // ESRCH: every process of the group is gone already, which is what we want.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => tracing::warn!(
                process_group = self.id(),
                signal = signal.as_str(),
                %error,
                "failed to signal process group"
            ),
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.armed {
            tracing::warn!(
                process_group = self.id(),
                "command handler dropped while its processes ran, killing the process group"
            );
            self.kill();
        }
    }
}

/// Describes how the command ended: `Ok` for exit status 0, else the failure text.
pub(super) fn describe_exit(status: ExitStatus) -> Result<String, String> {
    use std::os::unix::process::ExitStatusExt;

    match (status.code(), status.signal()) {
        (Some(0), _) => Ok("command exited with status 0".to_owned()),
        (Some(code), _) => Err(format!("command exited with status {code}")),
        (None, Some(number)) => {
            let name = Signal::try_from(number).map_or("unknown", Signal::as_str);
            Err(format!("command killed by signal {number} ({name})"))
        }
        (None, None) => Err(format!("command ended abnormally: {status}")),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn exit_statuses_are_described_by_code_or_signal() {
        // Wait statuses as waitpid reports them: exit code in the high byte, signal in the low.
        assert_eq!(
            describe_exit(ExitStatus::from_raw(0)),
            Ok("command exited with status 0".to_owned())
        );
        assert_eq!(
            describe_exit(ExitStatus::from_raw(3 << 8)),
            Err("command exited with status 3".to_owned())
        );
        assert_eq!(
            describe_exit(ExitStatus::from_raw(9)),
            Err("command killed by signal 9 (SIGKILL)".to_owned())
        );
    }

    #[test]
    fn init_and_unrepresentable_pids_are_never_a_group() {
        assert!(ProcessGroup::led_by(0).is_none());
        assert!(ProcessGroup::led_by(1).is_none());
        assert!(ProcessGroup::led_by(u32::MAX).is_none());
        let mut group = ProcessGroup::led_by(4242).expect("a group");
        assert_eq!(group.id(), 4242);
        group.disarm();
    }
}
