//! Binds executors' client certificates to groups (`executor_cert_names`). With mTLS, the TLS
//! layer proves a caller holds a certificate from `tls_ca`; without a binding that certificate
//! could register as, and report results for, any group. With one, a `Registry` call for an app
//! must come with a certificate that names one of the app's listed names in its subject
//! alternative names (DNS names or IP addresses), and apps not listed are refused.

use tonic::Status;
use xjob_tls::CertificateDer;

use crate::config::Config;

/// Whether the caller's certificate may act for `app_name`; `Ok` when no binding is configured.
/// `what` names the call's object in the refusal (`app 'billing'`, `log 12`).
pub fn check(
    config: &Config,
    cert: Option<&CertificateDer<'static>>,
    app_name: &str,
    what: &str,
) -> Result<(), Status> {
    if config.executor_cert_names.is_empty() {
        return Ok(());
    }
    let allowed = config
        .executor_cert_names
        .get(app_name)
        .zip(cert)
        .is_some_and(|(names, cert)| xjob_tls::cert_names_one_of(cert, names));
    if allowed {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "the client certificate is not bound to the group of {what}: executor_cert_names must \
         list one of its names for that app"
    )))
}
