//! The result table: one row per scenario, one column per executor.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// Outcomes by (scenario, executor), in run order.
#[derive(Default)]
pub struct Report {
    scenarios: Vec<&'static str>,
    executors: Vec<String>,
    outcomes: BTreeMap<(&'static str, String), Result<Duration, String>>,
    /// Scenarios that do not apply to an executor (a port scenario in session dispatch).
    not_applicable: Vec<(&'static str, String)>,
}

impl Report {
    pub fn record(
        &mut self,
        scenario: &'static str,
        executor: &str,
        outcome: Result<Duration, String>,
    ) {
        if !self.scenarios.contains(&scenario) {
            self.scenarios.push(scenario);
        }
        if !self.executors.iter().any(|name| name == executor) {
            self.executors.push(executor.to_string());
        }
        self.outcomes
            .insert((scenario, executor.to_string()), outcome);
    }

    /// Marks a scenario as not applying to `executor` (shown `n/a`, not a failure).
    pub fn not_applicable(&mut self, scenario: &'static str, executor: &str) {
        if !self.scenarios.contains(&scenario) {
            self.scenarios.push(scenario);
        }
        if !self.executors.iter().any(|name| name == executor) {
            self.executors.push(executor.to_string());
        }
        self.not_applicable.push((scenario, executor.to_string()));
    }

    /// Adds another report's columns after this one's (the suite runs columns apart, then
    /// joins them in the executors' order).
    pub fn append(&mut self, other: Report) {
        for scenario in other.scenarios {
            if !self.scenarios.contains(&scenario) {
                self.scenarios.push(scenario);
            }
        }
        for executor in other.executors {
            if !self.executors.contains(&executor) {
                self.executors.push(executor);
            }
        }
        self.outcomes.extend(other.outcomes);
        self.not_applicable.extend(other.not_applicable);
    }

    /// Every failure, as `executor / scenario: reason`.
    pub fn failures(&self) -> Vec<String> {
        self.outcomes
            .iter()
            .filter_map(|((scenario, executor), outcome)| {
                outcome
                    .as_ref()
                    .err()
                    .map(|reason| format!("{executor} / {scenario}: {reason}"))
            })
            .collect()
    }

    /// The table, e.g. `| kill | pass 2.1s | FAIL |`.
    pub fn table(&self) -> String {
        let mut out = String::from("| scenario |");
        for executor in &self.executors {
            let _ = write!(out, " {executor} |");
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(self.executors.len()));
        for scenario in &self.scenarios {
            let _ = write!(out, "\n| {scenario} |");
            for executor in &self.executors {
                let cell = match self.outcomes.get(&(*scenario, executor.clone())) {
                    Some(Ok(took)) => format!("pass {:.1}s", took.as_secs_f64()),
                    Some(Err(_)) => "FAIL".to_string(),
                    None if self
                        .not_applicable
                        .iter()
                        .any(|(s, e)| s == scenario && e == executor) =>
                    {
                        "n/a".to_string()
                    }
                    None => "-".to_string(),
                };
                let _ = write!(out, " {cell} |");
            }
        }
        out.push('\n');
        out
    }
}
