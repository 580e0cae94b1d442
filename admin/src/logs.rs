//! How the admin's commands (`serve`, `migrate`, `user create`, `import-xxl-job`) write their
//! logs on stderr: plain text for people, colours only on a terminal (and never with
//! `NO_COLOR`), or one JSON object per line for log collectors (`--log-format json`,
//! `XJOB_LOG_FORMAT=json`). A startup error is one line too, with its causes.

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use xjob_admin::telemetry::Telemetry;

/// The `--log-format` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    // One line per event: time, level, message, fields.
    #[default]
    Text,
    // One JSON object per line: timestamp, level, fields (message included), span.
    Json,
}

/// The logging option of every command that writes logs.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct LogArgs {
    /// Log lines as text (colours on a terminal only, none with NO_COLOR) or json (one object
    /// per line).
    #[arg(long, env = "XJOB_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Whether text logs may carry ANSI colours: stderr is a terminal and `NO_COLOR` is unset or
/// empty (<https://no-color.org>). Files, pipes and container logs get plain text.
fn colours() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    !no_color && std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// Logs to stderr in `format`; with `otlp_endpoint` (serve) also exports traces when an
/// endpoint is configured. The returned handle flushes the spans still buffered at the end.
pub fn init(format: LogFormat, otlp_endpoint: Option<&str>) -> anyhow::Result<Telemetry> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,sqlx=warn,h2=warn,tower=warn,hyper=warn")
    });
    let telemetry = match otlp_endpoint {
        Some(endpoint) => Telemetry::start(endpoint)?,
        None => Telemetry::off(),
    };
    // The demo executor runs in this process and traces its runs itself, under its own service:
    // its `tracing` spans stay out of the admin's. So do the spans that only label a run's log
    // lines with its trace id (the run's trace has spans of its own).
    let otel_layer = telemetry.layer().map(|layer| {
        layer.with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            !metadata.target().starts_with("xjob_executor")
                && metadata.target() != xjob_admin::telemetry::RUN_SPAN_TARGET
        }))
    });
    let output = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(colours())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(otel_layer)
        .with(filter)
        .with(output)
        .init();
    Ok(telemetry)
}

/// Prints why a command could not start: one line on stderr (`xjob: what: why: root cause`),
/// or one JSON object in the json format, so a log collector keeps it whole.
pub fn report_error(format: LogFormat, error: &anyhow::Error) {
    let line = one_line(error);
    match format {
        LogFormat::Text => eprintln!("xjob: {line}"),
        LogFormat::Json => {
            let object = serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "ERROR",
                "fields": { "message": line },
            });
            eprintln!("{object}");
        }
    }
}

/// The error and its causes on one line; a cause whose text the line already holds (errors
/// that quote their source) is not repeated.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot open the database: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_the_message_quotes_is_printed_once() {
        let root = std::io::Error::other("permission denied");
        let error = anyhow::Error::new(Quoting(root)).context("migrate");
        assert_eq!(
            one_line(&error),
            "migrate: cannot open the database: permission denied"
        );
    }

    #[test]
    fn multi_line_messages_become_one_line() {
        let error = anyhow::anyhow!("config key listen:\n  expected an address");
        assert_eq!(one_line(&error), "config key listen: expected an address");
    }
}
