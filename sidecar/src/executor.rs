//! Turns a validated [`Config`] into an SDK executor builder: one handler per `[handlers.*]`
//! entry, glue languages as enabled.

use std::sync::Arc;

use xjob_executor::GlueType;
use xjob_executor::{CommandSpec, Executor, ExecutorBuilder};

use crate::config::{Config, GlueLanguage, HandlerConfig};
use crate::http::{HttpHandler, HttpTarget};

/// Builds the executor the config describes.
pub fn builder(config: &Config) -> anyhow::Result<ExecutorBuilder> {
    let mut builder = Executor::builder()
        .app_name(&config.app_name)
        .admin_addrs(config.admin_addrs.iter().cloned())
        .bind(&config.bind)
        .log_dir(&config.log_dir)
        .shutdown_grace(config.shutdown_grace)
        .kill_grace(config.kill_grace)
        .log_retention_days(config.log_retention_days);
    if !config.access_token.is_empty() {
        builder = builder.access_token(&config.access_token);
    }
    if !config.advertise_address.is_empty() {
        builder = builder.advertise_address(&config.advertise_address);
    }
    if !config.metrics_listen.is_empty() {
        builder = builder.metrics_listen(&config.metrics_listen);
    }
    builder = with_tls(builder, config)?.insecure_open_network(config.insecure_open_network);
    if config.dispatch == crate::config::Dispatch::Session {
        builder = builder.session_dispatch(true);
    }
    for (key, value) in &config.labels {
        builder = builder.label(key, value);
    }
    for (name, handler) in &config.handlers {
        builder = match handler {
            HandlerConfig::Command(command) => {
                let mut spec = CommandSpec::new(command.argv.iter().cloned())
                    // The sidecar's own secret is not the job's business.
                    .env("XJOB_ACCESS_TOKEN", "");
                if let Some(dir) = &command.working_dir {
                    spec = spec.working_dir(dir);
                }
                for (key, value) in &command.env {
                    spec = spec.env(key, value);
                }
                if let Some(timeout) = command.timeout {
                    spec = spec.timeout(timeout);
                }
                builder.command(name, spec)
            }
            HandlerConfig::Http(http) => {
                let target = HttpTarget::parse(&http.method, &config.app_url, &http.url).map_err(
                    |(field, message)| {
                        anyhow::anyhow!("config key handlers.{name}.{field}: {message}")
                    },
                )?;
                let handler =
                    HttpHandler::new(target, &http.headers, http.body.clone(), http.timeout)
                        .map_err(|message| {
                            anyhow::anyhow!("config key handlers.{name}.{message}")
                        })?;
                let handler = Arc::new(handler);
                builder.handler(name, move |context| Arc::clone(&handler).call(context))
            }
        };
    }
    // The sidecar's own secret is not the scripts' business either.
    builder = builder.glue_env("XJOB_ACCESS_TOKEN", "");
    for (key, value) in &config.glue.env {
        builder = builder.glue_env(key, value);
    }
    for language in &config.glue.enabled {
        let glue_type = glue_type(*language);
        builder = match config.glue.interpreters.get(language) {
            Some(program) => builder.glue_interpreter(glue_type, program),
            None => builder.enable_glue(glue_type),
        };
    }
    Ok(builder)
}

fn glue_type(language: GlueLanguage) -> GlueType {
    match language {
        GlueLanguage::Shell => GlueType::Shell,
        GlueLanguage::Python => GlueType::Python,
        GlueLanguage::Nodejs => GlueType::Nodejs,
        GlueLanguage::Php => GlueType::Php,
        GlueLanguage::Powershell => GlueType::Powershell,
    }
}

/// The `[tls]` table as builder options.
fn with_tls(mut builder: ExecutorBuilder, config: &Config) -> anyhow::Result<ExecutorBuilder> {
    let tls = &config.tls;
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => builder = builder.tls(cert, key),
        (None, None) => {}
        _ => anyhow::bail!("config key tls.cert: tls.cert and tls.key go together"),
    }
    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => builder = builder.tls_client_cert(cert, key),
        (None, None) => {}
        _ => anyhow::bail!(
            "config key tls.client_cert: tls.client_cert and tls.client_key go together"
        ),
    }
    if let Some(ca) = &tls.ca {
        builder = builder.tls_ca(ca);
    }
    Ok(builder.require_client_cert(tls.require_client_cert))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path, extra: &str) -> Config {
        let text = format!(
            "app_name = \"orders\"\nadmin_addrs = [\"http://127.0.0.1:9\"]\nbind = \"0.0.0.0:0\"\nlog_dir = {:?}\n{extra}",
            dir.display().to_string()
        );
        Config::from_toml(&text).expect("config")
    }

    #[tokio::test]
    async fn an_open_network_bind_is_refused_unless_opted_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let refused = builder(&config(dir.path(), ""))
            .expect("builder")
            .start()
            .await
            .expect_err("open executor on 0.0.0.0");
        assert!(
            refused.to_string().contains("insecure_open_network"),
            "{refused}"
        );
        let opted_out = builder(&config(dir.path(), "insecure_open_network = true\n"))
            .expect("builder")
            .start()
            .await
            .expect("opted out");
        opted_out.shutdown().await;
    }
}
