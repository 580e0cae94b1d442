//! Wiring only: opens the store, registers this node, builds the shared context, binds the
//! port, and spawns every background task under one `CancellationToken` and a `TaskTracker`.
//! Shutdown runs in order: stop the scan, stop the ring (its fires are durable), end executor
//! sessions, stop the server, drain dispatches and claims, flush the recorder, and only then
//! close the database pool.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::context::AdminContext;
use crate::error::Error;
use crate::executor::ExecutorClient;
use crate::health::Health;
use crate::model::{NodeIdentity, SharedClock, system_clock};
use crate::registry::{Registry, RegistryContext};
use crate::schedule::{Scheduler, SchedulerParts};
use crate::store::Store;
use crate::trigger::{Trigger, TriggerParts};

/// A started admin: its address and the handles to stop it.
pub struct RunningAdmin {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    xxl_compat_addr: Option<SocketAddr>,
    console_addr: Option<SocketAddr>,
    node: NodeIdentity,
    cancel: CancellationToken,
    tracker: TaskTracker,
    dispatch_tracker: TaskTracker,
    recorder_cancel: CancellationToken,
    recorder_tracker: TaskTracker,
    store: Store,
    tls: bool,
}

impl RunningAdmin {
    /// The bound gRPC address, e.g. `127.0.0.1:8080`.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://host:port` (`https://` with TLS), for clients and executors.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.local_addr)
    }

    /// The bound `/metrics` address, when `metrics_listen` is set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The bound XXL-JOB compatibility address, when `xxl_job_compat_listen` is set.
    pub fn xxl_compat_addr(&self) -> Option<SocketAddr> {
        self.xxl_compat_addr
    }

    /// The bound web console address, when `http_listen` is set.
    pub fn console_addr(&self) -> Option<SocketAddr> {
        self.console_addr
    }

    /// This admin's node id and epoch.
    pub fn node(&self) -> &NodeIdentity {
        &self.node
    }

    /// Stops everything in order and waits (bounded) for the tasks to end.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        if tokio::time::timeout(Duration::from_secs(10), self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("background tasks did not stop within 10s");
        }
        self.dispatch_tracker.close();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.dispatch_tracker.wait()).await;
        // The recorder writes what the dispatches recorded, then ends; the pool closes after
        // its last flush.
        self.recorder_cancel.cancel();
        self.recorder_tracker.close();
        if tokio::time::timeout(Duration::from_secs(10), self.recorder_tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("dispatch outcomes were still being written after 10s");
        }
        self.store.close().await;
        tracing::info!("admin stopped");
    }
}

/// Starts an admin and runs it until `shutdown` resolves.
pub async fn run(
    config: Config,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let admin = start(config).await?;
    shutdown.await;
    tracing::info!("shutting down");
    admin.shutdown().await;
    Ok(())
}

/// Starts an admin: returns once the port is bound and every task is running. Alarms go to
/// the log and to the e-mail and webhook channels of `config.alarm` (`monitor::Notifier`).
pub async fn start(config: Config) -> Result<RunningAdmin, Error> {
    let notifier = crate::monitor::Notifier::new(&config.alarm, system_clock())
        .map_err(|message| Error::InvalidArgument(format!("alarm configuration: {message}")))?;
    start_with(config, Arc::new(notifier)).await
}

/// Like [`start`], with the given alarm hook (tests count alarms through it).
pub async fn start_with(
    config: Config,
    alarm: Arc<dyn crate::monitor::Alarm>,
) -> Result<RunningAdmin, Error> {
    let config = Arc::new(config);
    // Bind first: a second admin started by mistake on the same port fails here, before it
    // touches the node row (and the epoch) of the one already running.
    let listener = TcpListener::bind(config.listen).await.map_err(|error| {
        Error::unavailable(
            format!("cannot listen on {}: {error}", config.listen),
            error,
        )
    })?;
    let local_addr = listener
        .local_addr()
        .map_err(|error| Error::internal(format!("listener address: {error}"), error))?;
    // Certificates are read before anything else starts, so a bad file fails startup.
    let server_tls = match config.server_tls() {
        Some(files) => Some(xjob_tls::ServerTls::load(files).map_err(|error| {
            Error::unavailable(format!("cannot load TLS certificates: {error}"), error)
        })?),
        None => None,
    };
    let client_tls = config.executor_client_tls();
    if !client_tls.is_empty() {
        client_tls.check().map_err(|error| {
            Error::unavailable(
                format!("cannot load TLS client certificates: {error}"),
                error,
            )
        })?;
    }
    let metrics_listener = match config.metrics_listen {
        Some(address) => Some(crate::metrics::bind(address).await.map_err(|error| {
            Error::unavailable(
                format!("cannot listen on {address} for metrics: {error}"),
                error,
            )
        })?),
        None => None,
    };
    let console_listener = match config.http_listen {
        Some(address) => Some(crate::console::bind(address).await?),
        None => None,
    };
    let console_addr = match &console_listener {
        Some(listener) => Some(listener.local_addr().map_err(|error| {
            Error::internal(format!("console listener address: {error}"), error)
        })?),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(listener) => Some(listener.local_addr().map_err(|error| {
            Error::internal(format!("metrics listener address: {error}"), error)
        })?),
        None => None,
    };
    let xxl_compat_listener = match config.xxl_job_compat_listen {
        Some(address) => Some(crate::xxl_compat::bind(address).await?),
        None => None,
    };
    let xxl_compat_addr = match &xxl_compat_listener {
        Some(listener) => Some(listener.local_addr().map_err(|error| {
            Error::internal(
                format!("XXL-JOB compatibility listener address: {error}"),
                error,
            )
        })?),
        None => None,
    };
    if config.database_url.starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir).map_err(|error| {
            Error::unavailable(
                format!(
                    "cannot create data dir {}: {error}",
                    config.data_dir.display()
                ),
                error,
            )
        })?;
    }
    let store = Store::connect(&config.database_url)
        .await
        .map_err(|error| Error::unavailable(format!("cannot open database: {error}"), error))?;
    let clock = system_clock();
    // Before this node registers or serves anything: JobAdmin never runs open on a network.
    crate::auth::startup::check(&store, &config, clock.now_ms()).await?;
    // Taken before the epoch is registered, so the lock covers the whole epoch.
    let node_lock = match config.liveness_locks {
        true => crate::schedule::liveness::acquire_at_start(&store, &config.node_id).await,
        false => None,
    };
    let epoch = store
        .register_node(
            &config.node_id,
            clock.now_ms(),
            config.node_lease.as_millis() as i64,
        )
        .await?;
    let node = NodeIdentity {
        node_id: config.node_id.clone(),
        epoch,
    };
    let previous_sessions = store.list_registry_of_node(&node.node_id).await?;

    let cancel = CancellationToken::new();
    let tracker = TaskTracker::new();
    let dispatch_tracker = TaskTracker::new();
    let recorder_cancel = CancellationToken::new();
    let recorder_tracker = TaskTracker::new();
    let (records_tx, records_rx) = mpsc::unbounded_channel();
    let held_outcomes = crate::trigger::recorder::HeldOutcomes::default();
    let registry = Arc::new(Registry::default());
    restore_routes(&registry, previous_sessions, &clock);
    let executors = Arc::new(
        ExecutorClient::new(config.executor_timeout, config.executor_client_tls())
            .with_default_token(config.executor_token.clone())
            .with_registry(Arc::clone(&registry)),
    );
    let trigger = Arc::new(Trigger::new(
        TriggerParts {
            store: store.clone(),
            registry: Arc::clone(&registry),
            executors: Arc::clone(&executors),
            node: node.clone(),
            clock: Arc::clone(&clock),
            recorder_tx: records_tx,
            held: held_outcomes.clone(),
            tracker: dispatch_tracker.clone(),
        },
        &config,
    ));
    let schedule_wake = Arc::new(Notify::new());
    let health = Arc::new(Health::new(Arc::clone(&clock)));
    let sessions = Arc::new(RegistryContext {
        config: Arc::clone(&config),
        store: store.clone(),
        registry: Arc::clone(&registry),
        node: node.clone(),
        clock: Arc::clone(&clock),
        health: Arc::clone(&health),
        superseded: std::sync::Mutex::default(),
        session_peers: std::sync::Mutex::default(),
        session_tokens: std::sync::Mutex::default(),
        session_counts: Arc::default(),
    });
    let ctx = Arc::new(AdminContext {
        config: Arc::clone(&config),
        store: store.clone(),
        registry: Arc::clone(&registry),
        sessions: Arc::clone(&sessions),
        trigger: Arc::clone(&trigger),
        executors: Arc::clone(&executors),
        schedule_wake: Arc::clone(&schedule_wake),
        node: node.clone(),
        clock: Arc::clone(&clock),
        tracker: tracker.clone(),
        health: Arc::clone(&health),
    });
    let scheduler = Arc::new(Scheduler::new(
        SchedulerParts {
            store: store.clone(),
            trigger: Arc::clone(&trigger),
            node: node.clone(),
            wake: schedule_wake,
            clock: Arc::clone(&clock),
            tracker: dispatch_tracker.clone(),
            health: Arc::clone(&health),
        },
        Arc::clone(&config),
    ));

    let job_admin = Arc::new(crate::api::job_admin::JobAdminService::new(Arc::clone(
        &ctx,
    )));
    let (routes, health_reporter) =
        crate::api::routes(Arc::clone(&ctx), Arc::clone(&job_admin), cancel.clone())
            .await
            .map_err(|error| Error::internal(format!("reflection setup: {error}"), error))?;

    recorder_tracker.spawn(crate::trigger::recorder::run_recorder(
        store.clone(),
        records_rx,
        held_outcomes,
        Arc::clone(&health),
        recorder_cancel.clone(),
    ));
    tracker.spawn(crate::executor::follow_removals(
        Arc::clone(&executors),
        registry.removals(),
        cancel.clone(),
    ));
    if let Some(tls) = &server_tls {
        tracker.spawn(Arc::clone(tls).watch(config.tls_reload_interval, cancel.clone()));
    }
    tracker.spawn(serve(
        routes,
        listener,
        server_tls.clone(),
        Arc::clone(&config),
        cancel.clone(),
    ));
    if let Some(metrics_listener) = metrics_listener {
        tracker.spawn(crate::metrics::serve(
            metrics_listener,
            cancel.clone(),
            config
                .allowed_hosts()
                .map_err(|error| Error::internal(error.to_string(), error))?,
        ));
    }
    if let Some(listener) = xxl_compat_listener {
        tracker.spawn(crate::xxl_compat::serve(
            listener,
            Arc::clone(&ctx),
            cancel.clone(),
        ));
        tracker.spawn(crate::xxl_compat::run_row_refresh(
            Arc::clone(&ctx),
            cancel.clone(),
        ));
    }
    if let Some(console_listener) = console_listener {
        let console = crate::console::Console::new(Arc::clone(&job_admin), Arc::clone(&ctx));
        tracker.spawn(crate::console::serve(
            console_listener,
            server_tls.clone(),
            console,
            cancel.clone(),
        ));
    }
    tracker.spawn(crate::schedule::run_scan(
        Arc::clone(&scheduler),
        cancel.clone(),
    ));
    tracker.spawn(crate::schedule::run_ring(
        Arc::clone(&scheduler),
        cancel.clone(),
    ));
    tracker.spawn(crate::schedule::run_recovery(
        Arc::clone(&scheduler),
        cancel.clone(),
    ));
    if config.liveness_locks {
        tracker.spawn(crate::schedule::liveness::run_liveness(
            Arc::clone(&scheduler),
            node_lock,
            cancel.clone(),
        ));
    }
    tracker.spawn(run_reaper(Arc::clone(&ctx), cancel.clone()));
    // Cluster: other admins' executors into routing each second; database health and the
    // loops' progress to gRPC health.
    let (database_healthy_tx, database_health) = crate::registry::refresh::database_health();
    tracker.spawn(crate::registry::refresh::run_refresh(
        sessions,
        database_healthy_tx,
        cancel.clone(),
    ));
    tracker.spawn(crate::api::run_health(
        health_reporter,
        database_health,
        Arc::clone(&health),
        cancel.clone(),
    ));
    // Alarms leave from their own task: a hung mail server never holds up the follow-up.
    let (alarms, deliveries) =
        crate::monitor::AlarmQueue::new(crate::monitor::alarm_queue::QUEUE_CAPACITY);
    tracker.spawn(deliveries.run(Arc::clone(&ctx), alarm, cancel.clone()));
    tracker.spawn(crate::monitor::run_followup(
        Arc::clone(&ctx),
        alarms,
        cancel.clone(),
    ));
    tracker.spawn(crate::monitor::run_lost_monitor(
        Arc::clone(&ctx),
        cancel.clone(),
    ));
    tracker.spawn(crate::maintenance::report::run_report_refresh(
        store.clone(),
        Arc::clone(&config),
        Arc::clone(&ctx.clock),
        cancel.clone(),
    ));
    tracker.spawn(crate::maintenance::cleanup::run_retention(
        store.clone(),
        Arc::clone(&config),
        Arc::clone(&ctx.clock),
        cancel.clone(),
    ));
    #[cfg(feature = "demo")]
    if config.demo {
        tracker.spawn(crate::demo::run_demo(
            Arc::clone(&ctx),
            format!("http://{local_addr}"),
            cancel.clone(),
        ));
    }
    tracker.close();
    let tls = match (config.tls_cert.is_some(), config.tls_client_auth) {
        (false, _) => "off",
        (true, crate::config::TlsClientAuth::None) => "on",
        (true, crate::config::TlsClientAuth::Executors) => "on, executors need client certificates",
        (true, crate::config::TlsClientAuth::All) => "on, every client needs a certificate",
    };
    tracing::info!(address = %local_addr, node = %node.node_id, epoch, %tls, database = %redact(&config.database_url), "admin started");
    if let Some(address) = xxl_compat_addr {
        tracing::info!(%address, "serving XXL-JOB executors (registry, callback)");
    }
    crate::auth::startup::warn_open_registry(&config, local_addr, xxl_compat_addr);
    Ok(RunningAdmin {
        local_addr,
        metrics_addr,
        xxl_compat_addr,
        console_addr,
        node,
        cancel,
        tracker,
        dispatch_tracker,
        recorder_cancel,
        recorder_tracker,
        store,
        tls: config.tls_cert.is_some(),
    })
}

async fn serve(
    routes: tonic::service::Routes,
    listener: TcpListener,
    tls: Option<Arc<xjob_tls::ServerTls>>,
    config: Arc<Config>,
    cancel: CancellationToken,
) {
    // HTTP/2 pings find a frozen peer (SIGSTOP, a stuck runtime, a paused VM): its TCP stack
    // still acknowledges, so only an unanswered ping shows it. The broken connection ends the
    // executor's `Session`, which takes it out of routing at once. TCP keepalive (set by the
    // accept loop: tonic ignores its own setting for a supplied stream) closes connections
    // whose peer vanished without a FIN; the handshake deadline closes ones that never speak;
    // the connection age closes idle ones.
    let mut server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .max_concurrent_streams(config.max_concurrent_streams)
        .timeout(config.request_timeout);
    if !config.max_connection_age.is_zero() {
        server = server.max_connection_age(config.max_connection_age);
    }
    let options = xjob_tls::ListenOptions {
        tcp_keepalive: (!config.tcp_keepalive.is_zero()).then_some(config.tcp_keepalive),
        handshake_timeout: config.connection_handshake_timeout,
        ..xjob_tls::ListenOptions::default()
    };
    let router = server.add_routes(routes);
    let result = match tls {
        Some(tls) => {
            let incoming = xjob_tls::tls_incoming(listener, tls, options);
            router
                .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                .await
        }
        None => {
            let incoming = xjob_tls::plain_incoming(listener, options);
            router
                .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                .await
        }
    };
    if let Err(error) = result {
        tracing::error!(%error, "grpc server failed");
    }
}

/// Keeps routing to the executors this node served before it restarted, for one lease: they are
/// most likely alive and reconnecting, and fires recovered at start should not fail meanwhile.
/// Each entry is replaced as soon as its executor registers again, and expires otherwise.
fn restore_routes(
    registry: &Registry,
    previous_sessions: Vec<crate::model::ExecutorInfo>,
    clock: &SharedClock,
) {
    let now = clock.now_ms();
    for executor in previous_sessions {
        tracing::info!(app = %executor.app_name, address = %executor.address,
            "routing to an executor of this node's previous run until it reconnects");
        registry.register(crate::model::ExecutorInfo {
            last_heartbeat_ms: now,
            ..executor
        });
    }
}

/// Takes executors whose heartbeats stopped out of routing.
async fn run_reaper(ctx: Arc<AdminContext>, cancel: CancellationToken) {
    let lease_ms = ctx.config.executor_lease.as_millis() as i64;
    let xxl_lease_ms = ctx.config.xxl_job_compat_lease.as_millis() as i64;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        // The registry publishes the removals to the executor client.
        for expired in ctx
            .registry
            .expire(ctx.clock.now_ms(), lease_ms, xxl_lease_ms)
        {
            tracing::warn!(app = %expired.app_name, address = %expired.address, "executor lease expired");
            let _ = ctx.store.delete_registry(&expired.executor_id).await;
        }
    }
}

/// A database URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***{}", &url[..scheme_end], &url[at..])
        }
        _ => url.to_string(),
    }
}
