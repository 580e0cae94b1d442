//! Questions on the terminal before a command destroys something.

use std::io::IsTerminal;

use super::error::CliError;

/// Asks on the terminal; without one, `--yes` is required.
pub fn confirm(question: &str) -> Result<(), CliError> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::Usage(
            "stdin is not a terminal: pass --yes to confirm".into(),
        ));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    stdin
        .read_line(&mut answer)
        .map_err(|error| CliError::Failed(format!("cannot read the answer: {error}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(CliError::Usage("not confirmed".into()))
    }
}
