//! A started executor: spawns every background task in one place (server, connection,
//! callbacks, log cleanup) and owns their ordered stop.
//!
//! Graceful `shutdown`: Deregister → runner stops accepting, waits for handlers up to the grace,
//! kills the rest → the log writer writes the last runs' lines and hands their results over →
//! callbacks flushed (or spooled) → server stopped. `crash` aborts everything at once, without
//! Deregister or callbacks, and drops what waits for the log writer, as a killed process would.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
#[cfg(feature = "test-crash")]
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::ServerAuth;
use crate::callback::{CallbackConfig, ResultsSender, Unreported, callback_loop};
use crate::connection::{Announcement, SessionState, connection_loop};
use crate::error::Error;
use crate::joblog::{JobLogStore, cleanup_loop};
use crate::runner::{Runner, RunnerConfig};
use crate::server::{ExecutorServer, follow_session, health, report_stopping, serve};
use crate::settings::ExecutorSettings;
use crate::telemetry::RunTraces;

/// How long batches may fail before their results are spooled to disk.
const CALLBACK_SPOOL_AFTER: Duration = Duration::from_secs(10);
/// Bound on the Deregister exchange (the connection waits ≤ 2 s for the answer itself).
const DEREGISTER_BOUND: Duration = Duration::from_secs(3);
/// Bound on the server's graceful stop (open connections draining).
const SERVER_STOP_BOUND: Duration = Duration::from_secs(5);
/// How often the TLS certificate files are checked for changes.
const TLS_RELOAD_POLL: Duration = Duration::from_secs(2);
/// Retention below this disables the log cleanup, as XXL-JOB.
const MIN_RETENTION_DAYS: u32 = 3;

/// A started executor. Dropping it leaves it running in the background; stop it with
/// [`shutdown`](Self::shutdown) (or [`crash`](Self::crash) in tests).
#[derive(Debug)]
pub struct RunningExecutor {
    address: String,
    local_addr: SocketAddr,
    metrics_addr_opt: Option<SocketAddr>,
    runner: Runner,
    joblog: JobLogStore,
    session_rx: watch::Receiver<SessionState>,
    shutdown_grace: Duration,
    callback_flush_timeout: Duration,
    // Read only by `crash`, which exists with the `test-crash` feature alone.
    #[cfg_attr(not(feature = "test-crash"), allow(dead_code))]
    crashed: Arc<AtomicBool>,
    health: tonic_health::server::HealthReporter,
    /// Keeps health in step with the session (`server::follow_session`) until shutdown.
    health_task: JoinHandle<()>,
    deregister: CancellationToken,
    flush_callbacks: CancellationToken,
    stop_server: CancellationToken,
    stop_cleanup: CancellationToken,
    server_task: JoinHandle<()>,
    connection_task: JoinHandle<()>,
    callback_task: JoinHandle<()>,
    cleanup_task_opt: Option<JoinHandle<()>>,
    traces: Arc<RunTraces>,
}

impl RunningExecutor {
    /// Binds first, then starts serving, delivering callbacks and registering.
    pub(crate) async fn launch(settings: ExecutorSettings) -> Result<Self, Error> {
        let log_dir = settings.log_dir.clone();
        let spool_dir = log_dir.join("callbacklogs");
        std::fs::create_dir_all(&spool_dir).map_err(|source| Error::LogDir {
            path: spool_dir.clone(),
            source,
        })?;
        // In session dispatch no port is opened: the calls come down the session.
        let (listener_opt, local_addr) = bind_server(&settings).await?;
        let server_tls_opt = match listener_opt {
            Some(_) => load_server_tls(settings.server_tls_opt.clone())?,
            None => None,
        };
        let scheme = if server_tls_opt.is_some() {
            "https"
        } else {
            "http"
        };
        let metrics_listener_opt = match &settings.metrics_listen_opt {
            Some(metrics_listen) => Some(
                TcpListener::bind(metrics_listen.as_str())
                    .await
                    .map_err(|source| Error::Bind {
                        address: metrics_listen.clone(),
                        source,
                    })?,
            ),
            None => None,
        };
        let metrics_addr_opt =
            match &metrics_listener_opt {
                Some(metrics_listener) => Some(metrics_listener.local_addr().map_err(
                    |source| Error::Bind {
                        address: settings.metrics_listen_opt.clone().unwrap_or_default(),
                        source,
                    },
                )?),
                None => None,
            };
        let address = match (&listener_opt, settings.advertise_address_opt) {
            (_, Some(address)) => address,
            (Some(_), None) => default_advertise_address(scheme, local_addr),
            (None, None) => crate::session_dispatch::default_session_address(&settings.app_name),
        };

        let joblog = JobLogStore::new(&log_dir);
        let (results_tx, results_rx) = mpsc::unbounded_channel();
        let runner_config = RunnerConfig {
            idle_timeout: settings.runner_idle_timeout,
            kill_grace: settings.kill_grace,
        };
        let announcement = Announcement {
            app_name: settings.app_name,
            address: address.clone(),
            handlers: settings.handlers.names(),
            labels: settings.labels,
        };
        let unreported = Unreported::default();
        // Tracing is optional: a collector that cannot be set up is reported, not fatal.
        let traces = Arc::new(
            RunTraces::start(&announcement.app_name, &settings.otlp_endpoint).unwrap_or_else(
                |error| {
                    tracing::warn!(%error, "traces will not be exported");
                    RunTraces::default()
                },
            ),
        );
        let results = ResultsSender::new(results_tx, unreported.clone(), Arc::clone(&traces));
        let runner = Runner::new(settings.handlers, joblog.clone(), results, runner_config);
        let crashed = Arc::new(AtomicBool::new(false));

        let stop_server = CancellationToken::new();
        let server = ExecutorServer::new(runner.clone(), joblog.clone(), Arc::clone(&crashed));
        let auth = ServerAuth::new(settings.auth_header_opt);
        let (health, health_service) = health().await;
        if let Some(tls) = &server_tls_opt {
            tokio::spawn(Arc::clone(tls).watch(TLS_RELOAD_POLL, stop_server.clone()));
        }
        let session_calls_opt = listener_opt.is_none().then(|| server.clone());
        let server_task = match listener_opt {
            Some(listener) => tokio::spawn(serve(
                listener,
                server_tls_opt,
                server,
                auth,
                health_service,
                stop_server.clone(),
            )),
            // Nothing to serve; the task only marks the server's place in the ordered stop.
            None => tokio::spawn(stop_server.clone().cancelled_owned()),
        };

        if let Some(metrics_listener) = metrics_listener_opt {
            // Ends with the gRPC server, at shutdown.
            tokio::spawn(crate::metrics::serve(metrics_listener, stop_server.clone()));
        }
        let flush_callbacks = CancellationToken::new();
        let callback_config = CallbackConfig {
            spool_dir,
            spool_after: CALLBACK_SPOOL_AFTER,
            flush_timeout: settings.callback_flush_timeout,
            traces: Arc::clone(&traces),
        };
        let callback_task = tokio::spawn(callback_loop(
            settings.admins.clone(),
            results_rx,
            callback_config,
            flush_callbacks.clone(),
            unreported.clone(),
        ));

        let deregister = CancellationToken::new();
        let (state_tx, session_rx) = watch::channel(SessionState::Connecting);
        let connection_task = tokio::spawn(connection_loop(
            settings.admins,
            announcement,
            session_calls_opt,
            runner.clone(),
            unreported,
            state_tx,
            deregister.clone(),
        ));
        let health_task = tokio::spawn(follow_session(health.clone(), session_rx.clone()));

        let stop_cleanup = CancellationToken::new();
        let cleanup_task_opt = (settings.log_retention_days >= MIN_RETENTION_DAYS).then(|| {
            let root = joblog.root().to_path_buf();
            tokio::spawn(cleanup_loop(
                root,
                settings.log_retention_days,
                stop_cleanup.clone(),
            ))
        });
        tracing::info!(address = %address, local_addr = %local_addr, "executor started");
        Ok(Self {
            address,
            local_addr,
            metrics_addr_opt,
            runner,
            joblog,
            session_rx,
            shutdown_grace: settings.shutdown_grace,
            callback_flush_timeout: settings.callback_flush_timeout,
            crashed,
            health,
            health_task,
            deregister,
            flush_callbacks,
            stop_server,
            stop_cleanup,
            server_task,
            connection_task,
            callback_task,
            cleanup_task_opt,
            traces,
        })
    }

    /// Returns the advertised address (what the admins dial).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Returns the address `/metrics` is served on, when the builder set `metrics_listen`.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr_opt
    }

    /// Returns the socket address the server is bound to; in session dispatch, where no port
    /// is opened, the unspecified address with port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Returns the executor id of the current admin session, when registered.
    pub fn executor_id(&self) -> Option<String> {
        match &*self.session_rx.borrow() {
            SessionState::Registered { executor_id, .. } => Some(executor_id.clone()),
            SessionState::Connecting | SessionState::Refused { .. } | SessionState::Stopped => None,
        }
    }

    /// Waits until an admin has answered `Registered` (at once when already registered). A
    /// refusal does not end the wait (the admin's side may still be fixed), but when the time is
    /// up while the admin refuses, the error is the refusal with the admin's reason.
    pub async fn wait_registered(&self, timeout: Duration) -> Result<(), Error> {
        let mut session_rx = self.session_rx.clone();
        let waited = tokio::time::timeout(
            timeout,
            session_rx.wait_for(|state| {
                matches!(
                    state,
                    SessionState::Registered { .. } | SessionState::Stopped
                )
            }),
        )
        .await;
        match waited {
            Ok(Ok(state)) if matches!(*state, SessionState::Registered { .. }) => Ok(()),
            Ok(_) => Err(Error::Stopped),
            Err(_) => match &*self.session_rx.borrow() {
                SessionState::Refused { admin, message } => Err(Error::RegistrationRefused {
                    admin: admin.clone(),
                    message: message.clone(),
                }),
                _ => Err(Error::RegistrationTimeout(timeout)),
            },
        }
    }

    /// Whether the last admin that answered refused the registration (and none accepted it
    /// since): the executor is then NOT_SERVING on gRPC health.
    pub fn is_refused(&self) -> bool {
        matches!(*self.session_rx.borrow(), SessionState::Refused { .. })
    }

    /// Graceful stop: Deregister first, stop accepting runs, wait for running handlers up to
    /// the shutdown grace, report the rest KILLED, flush callbacks, stop the server.
    pub async fn shutdown(self) {
        tracing::info!(address = %self.address, "executor shutting down");
        // Stopped first, so a session change cannot turn health back to SERVING.
        self.health_task.abort();
        let _ = self.health_task.await;
        report_stopping(&self.health).await;
        self.deregister.cancel();
        join_bounded("connection", self.connection_task, DEREGISTER_BOUND).await;
        self.runner.shutdown(self.shutdown_grace).await;
        // The last runs' results follow their log lines through the log writer: all of them
        // reach the callback task before it flushes.
        let drain_bound = self.callback_flush_timeout + Duration::from_secs(2);
        if tokio::time::timeout(drain_bound, self.joblog.drain())
            .await
            .is_err()
        {
            tracing::warn!(bound = ?drain_bound, "run log writer did not catch up in time");
        }
        self.flush_callbacks.cancel();
        let flush_bound = self.callback_flush_timeout + Duration::from_secs(2);
        join_bounded("callback", self.callback_task, flush_bound).await;
        self.stop_server.cancel();
        join_bounded("server", self.server_task, SERVER_STOP_BOUND).await;
        self.stop_cleanup.cancel();
        if let Some(cleanup_task) = self.cleanup_task_opt {
            cleanup_task.abort();
        }
        // Flushing waits for the exporter, which runs on this runtime: off the async thread.
        let traces = Arc::clone(&self.traces);
        let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
        tracing::info!(address = %self.address, "executor stopped");
    }

    /// Simulates a process crash (for tests): aborts every task and handler, drops the session
    /// without Deregister, stops the server and sends no callbacks. Only with the `test-crash`
    /// feature, which the workspace's own tests turn on: an app has no use for it.
    #[cfg(feature = "test-crash")]
    pub fn crash(self) {
        tracing::warn!(address = %self.address, "executor crashing on purpose");
        self.crashed.store(true, Ordering::SeqCst);
        self.runner.abort_all();
        // The lines (and results) still waiting for the log writer die with the process.
        self.joblog.abandon();
        self.connection_task.abort();
        self.health_task.abort();
        self.callback_task.abort();
        self.server_task.abort();
        if let Some(cleanup_task) = self.cleanup_task_opt {
            cleanup_task.abort();
        }
    }
}

/// Waits for a task up to `bound`, then aborts it.
async fn join_bounded(name: &'static str, mut task: JoinHandle<()>, bound: Duration) {
    if tokio::time::timeout(bound, &mut task).await.is_err() {
        tracing::warn!(
            task = name,
            ?bound,
            "task did not stop in time, aborting it"
        );
        task.abort();
    }
}

/// Binds the executor's server, or nothing in session dispatch (then the unspecified address
/// with port 0 stands for the missing socket). An executor reachable from other machines must
/// check its callers (`refuse_open_network`).
async fn bind_server(
    settings: &ExecutorSettings,
) -> Result<(Option<TcpListener>, SocketAddr), Error> {
    if settings.session_dispatch {
        return Ok((None, SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))));
    }
    let bind_error = |source| Error::Bind {
        address: settings.bind.clone(),
        source,
    };
    let listener = TcpListener::bind(settings.bind.as_str())
        .await
        .map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    refuse_open_network(
        local_addr,
        callers_checked(settings.auth_header_opt.is_some(), &settings.server_tls_opt),
        settings.insecure_open_network,
    )?;
    Ok((Some(listener), local_addr))
}

/// What `launch` checks before serving, without binding: the bind address as it resolves (the
/// first address, as `TcpListener::bind` tries it first), the open-network rule, the TLS files.
pub(crate) async fn preflight(settings: &ExecutorSettings) -> Result<(), Error> {
    if settings.session_dispatch {
        return Ok(());
    }
    let bind_error = |source| Error::Bind {
        address: settings.bind.clone(),
        source,
    };
    let address = tokio::net::lookup_host(settings.bind.as_str())
        .await
        .map_err(bind_error)?
        .next()
        .ok_or_else(|| {
            bind_error(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the address resolves to nothing",
            ))
        })?;
    refuse_open_network(
        address,
        callers_checked(settings.auth_header_opt.is_some(), &settings.server_tls_opt),
        settings.insecure_open_network,
    )?;
    load_server_tls(settings.server_tls_opt.clone())?;
    Ok(())
}

/// Whether callers must prove who they are: the group's access token, or client certificates.
fn callers_checked(token: bool, server_tls: &Option<xjob_tls::ServerTlsFiles>) -> bool {
    token
        || server_tls
            .as_ref()
            .is_some_and(|tls| tls.client_auth == xjob_tls::ClientAuth::Required)
}

/// Reads and checks the server's certificate, key and CA files.
fn load_server_tls(
    files: Option<xjob_tls::ServerTlsFiles>,
) -> Result<Option<Arc<xjob_tls::ServerTls>>, Error> {
    files
        .map(|files| {
            xjob_tls::ServerTls::load(files).map_err(|error| Error::InvalidConfig {
                field: "tls",
                message: error.to_string(),
            })
        })
        .transpose()
}

/// An executor reachable from other machines must know who calls it: the group's access token
/// or mTLS. Without either, anyone who reaches the port runs its handlers with any params and
/// reads its logs, so starting is refused unless the operator opted out by name.
fn refuse_open_network(
    local_addr: SocketAddr,
    callers_checked: bool,
    insecure_open_network: bool,
) -> Result<(), Error> {
    if local_addr.ip().is_loopback() || callers_checked || insecure_open_network {
        if insecure_open_network && !callers_checked && !local_addr.ip().is_loopback() {
            tracing::warn!(%local_addr, "INSECURE: executor open to the network without access token or mTLS (insecure_open_network)");
        }
        return Ok(());
    }
    Err(Error::InvalidConfig {
        field: "bind",
        message: format!(
            "{local_addr} is reachable from other machines, and with neither an access token nor \
             mTLS anyone who reaches it can run this executor's handlers and read its logs. Set \
             access_token (the group's token, also set on the group in the admin), or tls + tls_ca \
             + require_client_cert, or bind 127.0.0.1; to run open anyway, set \
             insecure_open_network"
        ),
    })
}

/// `{scheme}://{ip}:{port}` of the bound socket; when bound to all interfaces, the IP of the
/// interface that routes outward (found with an unsent UDP "connect"), else loopback.
fn default_advertise_address(scheme: &str, local_addr: SocketAddr) -> String {
    let ip = if local_addr.ip().is_unspecified() {
        outbound_ip(local_addr.is_ipv6()).unwrap_or(if local_addr.is_ipv6() {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        })
    } else {
        local_addr.ip()
    };
    format!("{scheme}://{}", SocketAddr::new(ip, local_addr.port()))
}

fn outbound_ip(ipv6: bool) -> Option<IpAddr> {
    let (bind, probe) = if ipv6 {
        ("[::]:0", "[2001:4860:4860::8888]:53")
    } else {
        ("0.0.0.0:0", "8.8.8.8:53")
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(probe).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_advertise_address_uses_the_bound_ip() {
        let bound: SocketAddr = "127.0.0.1:9999".parse().expect("addr");
        assert_eq!(
            default_advertise_address("http", bound),
            "http://127.0.0.1:9999"
        );
        let v6: SocketAddr = "[::1]:80".parse().expect("addr");
        assert_eq!(default_advertise_address("http", v6), "http://[::1]:80");
        let any: SocketAddr = "0.0.0.0:9000".parse().expect("addr");
        let advertised = default_advertise_address("http", any);
        assert!(advertised.starts_with("http://") && advertised.ends_with(":9000"));
        assert!(!advertised.contains("0.0.0.0"));
    }
}
