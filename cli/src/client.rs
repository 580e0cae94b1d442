//! Where the admin is and how to reach it: `--admin` (`XJOB_ADMIN`), the API token sent as
//! `authorization: Bearer …` (`--token`, `XJOB_TOKEN`), and TLS for `https://` admins (`--ca`,
//! and `--cert`/`--key` when the admin requires client certificates), built by `xjob-tls` like
//! the executor SDK's client.

use std::path::PathBuf;
use std::time::Duration;

use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use xjob_proto::pb::job_admin_client::JobAdminClient;

use super::error::{CliError, error_chain};
use super::render::Format;

/// A connected `JobAdmin` client that sends the token on every call.
pub type Client = JobAdminClient<InterceptedService<Channel, Bearer>>;

/// How long connecting may take before the admin counts as unreachable (exit code 3).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Upper bound of one call; `runs log --follow` makes many short ones.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Options every client command takes (before or after its verb).
#[derive(clap::Args, Clone)]
#[command(next_help_heading = "Connection and output")]
pub struct ClientOptions {
    /// The admin's gRPC address (https:// for TLS).
    #[arg(
        long,
        global = true,
        env = "XJOB_ADMIN",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL"
    )]
    pub admin: String,
    /// API token (`xjob user create` prints one); sent as `authorization: Bearer <token>`.
    #[arg(long, global = true, env = "XJOB_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// CA certificate (PEM) that signs the admin's certificate (https:// admins).
    #[arg(long, global = true, env = "XJOB_CA", value_name = "PEM")]
    pub ca: Option<PathBuf>,
    /// Client certificate (PEM) for admins that require mTLS; needs --key.
    #[arg(long, global = true, env = "XJOB_CERT", value_name = "PEM")]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, env = "XJOB_KEY", value_name = "PEM")]
    pub key: Option<PathBuf>,
    /// table (aligned, for people) or json (stable fields, for scripts).
    #[arg(
        long,
        short = 'o',
        global = true,
        value_enum,
        default_value = "table",
        env = "XJOB_OUTPUT"
    )]
    pub output: Format,
}

impl ClientOptions {
    pub fn token_given(&self) -> bool {
        self.token.as_deref().is_some_and(|token| !token.is_empty())
    }

    fn tls(&self) -> xjob_tls::ClientTls {
        xjob_tls::ClientTls {
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }
}

/// Adds the bearer token (when there is one) to every call.
#[derive(Clone)]
pub struct Bearer(Option<AsciiMetadataValue>);

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// Connects now (not lazily), so an unreachable admin is reported as such (exit code 3) before
/// any call is made.
pub async fn connect(options: &ClientOptions) -> Result<Client, CliError> {
    let bearer = bearer(options)?;
    let endpoint = endpoint(options)?;
    let channel = endpoint.connect().await.map_err(|error| {
        CliError::Connect(format!(
            "cannot connect to the admin at {}: {}",
            options.admin,
            error_chain(&error)
        ))
    })?;
    Ok(JobAdminClient::with_interceptor(channel, bearer))
}

fn bearer(options: &ClientOptions) -> Result<Bearer, CliError> {
    let Some(token) = options.token.as_deref().filter(|token| !token.is_empty()) else {
        return Ok(Bearer(None));
    };
    let value = AsciiMetadataValue::try_from(format!("Bearer {}", token.trim()))
        .map_err(|_| CliError::Usage("--token: not a valid token (printable ASCII only)".into()))?;
    Ok(Bearer(Some(value)))
}

fn endpoint(options: &ClientOptions) -> Result<Endpoint, CliError> {
    let url = options.admin.trim();
    let https = url.starts_with("https://");
    if !https && !url.starts_with("http://") {
        return Err(CliError::Usage(format!(
            "--admin '{}': use http://HOST:PORT or https://HOST:PORT",
            short(url)
        )));
    }
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|error| CliError::Usage(format!("--admin '{}': {error}", short(url))))?
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(CALL_TIMEOUT);
    let tls = options.tls();
    if !https {
        if !tls.is_empty() {
            return Err(CliError::Usage(
                "--ca/--cert/--key are for an https:// admin; --admin is http://".into(),
            ));
        }
        return Ok(endpoint);
    }
    let config = tls
        .tonic_config()
        .map_err(|error| CliError::Usage(error.to_string()))?;
    endpoint
        .tls_config(config)
        .map_err(|error| CliError::Usage(format!("tls: {}", error_chain(&error))))
}

/// The first characters of a value the user gave, for messages.
pub fn short(text: &str) -> String {
    const MAX: usize = 80;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
