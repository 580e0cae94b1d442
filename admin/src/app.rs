//! Wiring only, in four steps: [`bind`] the ports (and read the certificates), [`open_and_register`]
//! the database and this node, [`build`] the shared handles, [`spawn`] every task into its stage
//! of the [`Lifecycle`]. Shutdown stops the stages in the lifecycle's order (loops, console,
//! dispatch, batcher, recorder: `lifecycle.rs`), and only then closes the database pool.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::api::job_admin::JobAdminService;
use crate::config::Config;
use crate::context::AdminContext;
use crate::error::Error;
use crate::executor::ExecutorClient;
use crate::health::Health;
use crate::lifecycle::{Lifecycle, Stage};
use crate::model::{ExecutorInfo, NodeIdentity, SharedClock, system_clock};
use crate::registry::{Registry, RegistryContext};
use crate::schedule::{Scheduler, SchedulerParts};
use crate::store::Store;
use crate::store::liveness::NodeLock;
use crate::trigger::recorder::{HeldOutcomes, Outcome};
use crate::trigger::{Trigger, TriggerParts};

/// A started admin: its address and the handles to stop it.
pub struct RunningAdmin {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    xxl_compat_addr: Option<SocketAddr>,
    console_addr: Option<SocketAddr>,
    node: NodeIdentity,
    lifecycle: Lifecycle,
    store: Store,
    tls: bool,
    /// The demo executor of `serve --demo`, stopped before the admin's own stages.
    demo: Option<DemoExecutor>,
}

/// The demo executor's task and the token that stops it.
struct DemoExecutor {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl DemoExecutor {
    /// Stops the demo executor and waits (bounded) for it to deregister and end.
    async fn stop(self) {
        self.stop.cancel();
        if tokio::time::timeout(std::time::Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            tracing::warn!("the demo executor did not stop within 5 s");
        }
    }
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

    /// Stops every stage in order, each within its bound, then closes the database pool: the
    /// recorder, stopped last, has written what the dispatches recorded.
    pub async fn shutdown(self) {
        // The demo executor leaves first, while the admin still answers, as a real executor's
        // clean exit would: its Deregister is seen rather than its session being cut by the
        // admin's own shutdown (the two raced when both stopped with the loops).
        if let Some(demo) = self.demo {
            demo.stop().await;
        }
        self.lifecycle.shutdown().await;
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
    let listeners = bind(&config).await?;
    // The system clock, unless the fault campaign's test hook steps it (`model::clock`).
    let clock = crate::model::clock::from_environment();
    let opened = open_and_register(&config, &clock).await?;
    let (store, node) = (opened.store.clone(), opened.node.clone());
    let lifecycle = Lifecycle::new();
    let built = build(Arc::clone(&config), opened, clock, &lifecycle);
    let addresses = listeners.addresses;
    let demo = spawn(built, listeners, alarm, &lifecycle).await?;

    let tls = match (config.tls_cert.is_some(), config.tls_client_auth) {
        (false, _) => "off",
        (true, crate::config::TlsClientAuth::None) => "on",
        (true, crate::config::TlsClientAuth::Executors) => "on, executors need client certificates",
        (true, crate::config::TlsClientAuth::All) => "on, every client needs a certificate",
    };
    tracing::info!(address = %addresses.grpc, node = %node.node_id, epoch = node.epoch, %tls,
        database = %redact(&config.database_url), "admin started");
    if let Some(address) = addresses.xxl_compat {
        tracing::info!(%address, "serving XXL-JOB executors (registry, callback)");
    }
    crate::auth::startup::warn_open_registry(&config, addresses.grpc, addresses.xxl_compat);
    Ok(RunningAdmin {
        local_addr: addresses.grpc,
        metrics_addr: addresses.metrics,
        xxl_compat_addr: addresses.xxl_compat,
        console_addr: addresses.console,
        node,
        lifecycle,
        store,
        tls: config.tls_cert.is_some(),
        demo,
    })
}

/// The bound ports (and the server certificates), before anything else starts.
struct Listeners {
    grpc: TcpListener,
    server_tls: Option<Arc<xjob_tls::ServerTls>>,
    metrics: Option<TcpListener>,
    console: Option<TcpListener>,
    xxl_compat: Option<TcpListener>,
    addresses: Addresses,
}

/// Where each bound port listens.
#[derive(Clone, Copy)]
struct Addresses {
    grpc: SocketAddr,
    metrics: Option<SocketAddr>,
    console: Option<SocketAddr>,
    xxl_compat: Option<SocketAddr>,
}

/// Binds every configured port and reads the certificates: a taken port or a bad file fails
/// startup here, before the database is touched.
async fn bind(config: &Config) -> Result<Listeners, Error> {
    let grpc = TcpListener::bind(config.listen).await.map_err(|error| {
        Error::unavailable(
            format!("cannot listen on {}: {error}", config.listen),
            error,
        )
    })?;
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
    let metrics = match config.metrics_listen {
        Some(address) => Some(crate::metrics::bind(address).await.map_err(|error| {
            Error::unavailable(
                format!("cannot listen on {address} for metrics: {error}"),
                error,
            )
        })?),
        None => None,
    };
    let console = match config.http_listen {
        Some(address) => Some(crate::console::bind(address).await?),
        None => None,
    };
    let xxl_compat = match config.xxl_job_compat_listen {
        Some(address) => Some(crate::xxl_compat::bind(address).await?),
        None => None,
    };
    let addresses = Addresses {
        grpc: address_of(&grpc, "listener")?,
        metrics: optional_address_of(&metrics, "metrics listener")?,
        console: optional_address_of(&console, "console listener")?,
        xxl_compat: optional_address_of(&xxl_compat, "XXL-JOB compatibility listener")?,
    };
    Ok(Listeners {
        grpc,
        server_tls,
        metrics,
        console,
        xxl_compat,
        addresses,
    })
}

fn address_of(listener: &TcpListener, what: &str) -> Result<SocketAddr, Error> {
    listener
        .local_addr()
        .map_err(|error| Error::internal(format!("{what} address: {error}"), error))
}

fn optional_address_of(
    listener: &Option<TcpListener>,
    what: &str,
) -> Result<Option<SocketAddr>, Error> {
    listener
        .as_ref()
        .map(|listener| address_of(listener, what))
        .transpose()
}

/// The database opened and this node registered under a new epoch.
struct Opened {
    store: Store,
    node: NodeIdentity,
    /// Held for the whole epoch (`liveness_locks`); the liveness loop keeps it.
    node_lock: Option<NodeLock>,
    /// This node's executor sessions of its previous run, restored for one lease.
    previous_sessions: Vec<ExecutorInfo>,
    /// When the registration started: its lease counts from here (`TriggerParts::lease_start`).
    lease_start: std::time::Instant,
}

/// Opens the database, checks the access rules, and registers this node (a new epoch).
async fn open_and_register(config: &Config, clock: &SharedClock) -> Result<Opened, Error> {
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
    // Before this node registers or serves anything: JobAdmin never runs open on a network.
    crate::auth::startup::check(&store, config, clock.now_ms()).await?;
    // Taken before the epoch is registered, so the lock covers the whole epoch.
    let node_lock = match config.liveness_locks {
        true => crate::schedule::liveness::acquire_at_start(&store, &config.node_id).await,
        false => None,
    };
    // The lease is written by the database's clock, as every admin judges it.
    let lease_start = std::time::Instant::now();
    let epoch = store
        .register_node(
            &config.node_id,
            store.database_now_ms().await?,
            config.node_lease.as_millis() as i64,
        )
        .await?;
    let node = NodeIdentity {
        node_id: config.node_id.clone(),
        epoch,
    };
    let previous_sessions = store.list_registry_of_node(&node.node_id).await?;
    Ok(Opened {
        store,
        node,
        node_lock,
        previous_sessions,
        lease_start,
    })
}

/// The shared handles, built once; nothing runs yet.
struct Built {
    ctx: Arc<AdminContext>,
    scheduler: Arc<Scheduler>,
    job_admin: Arc<JobAdminService>,
    node_lock: Option<NodeLock>,
    records_rx: mpsc::UnboundedReceiver<Outcome>,
    held_outcomes: HeldOutcomes,
}

/// Builds the registry, the executor client, the trigger, the scheduler and the context, each
/// given the stage its tasks run in.
fn build(config: Arc<Config>, opened: Opened, clock: SharedClock, lifecycle: &Lifecycle) -> Built {
    let Opened {
        store,
        node,
        node_lock,
        previous_sessions,
        lease_start,
    } = opened;
    let (records_tx, records_rx) = mpsc::unbounded_channel();
    let held_outcomes = HeldOutcomes::default();
    let registry = Arc::new(Registry::default());
    crate::registry::leases::restore_sessions(&registry, previous_sessions, &clock);
    let executors = Arc::new(
        ExecutorClient::new(config.executor_timeout, config.executor_client_tls())
            .with_default_token(config.executor_token.clone())
            .with_registry(Arc::clone(&registry))
            .with_batcher_tasks(lifecycle.stage(Stage::Batcher).clone()),
    );
    let trigger = Arc::new(Trigger::new(
        TriggerParts {
            store: store.clone(),
            registry: Arc::clone(&registry),
            executors: Arc::clone(&executors),
            node: node.clone(),
            clock: Arc::clone(&clock),
            lease_start,
            recorder_tx: records_tx,
            held: held_outcomes.clone(),
            tasks: lifecycle.stage(Stage::Dispatch).clone(),
        },
        &config,
    ));
    let schedule_wake = Arc::new(Notify::new());
    let calendars_changed = Arc::new(std::sync::atomic::AtomicBool::new(false));
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
        registry,
        sessions,
        trigger: Arc::clone(&trigger),
        executors,
        schedule_wake: Arc::clone(&schedule_wake),
        workflow_wake: Arc::default(),
        node: node.clone(),
        clock: Arc::clone(&clock),
        tasks: lifecycle.stage(Stage::Loops).clone(),
        health: Arc::clone(&health),
        calendars_changed: Arc::clone(&calendars_changed),
    });
    let scheduler = Arc::new(Scheduler::new(
        SchedulerParts {
            store,
            trigger,
            node,
            wake: schedule_wake,
            clock,
            tasks: lifecycle.stage(Stage::Dispatch).clone(),
            health,
            calendars_changed,
        },
        config,
    ));
    let job_admin = Arc::new(JobAdminService::new(Arc::clone(&ctx)));
    Built {
        ctx,
        scheduler,
        job_admin,
        node_lock,
        records_rx,
        held_outcomes,
    }
}

/// Starts every task in its stage: the recorder, the servers, the console, and the loops.
async fn spawn(
    built: Built,
    listeners: Listeners,
    alarm: Arc<dyn crate::monitor::Alarm>,
    lifecycle: &Lifecycle,
) -> Result<Option<DemoExecutor>, Error> {
    let Built {
        ctx,
        scheduler,
        job_admin,
        node_lock,
        records_rx,
        held_outcomes,
    } = built;
    let config = Arc::clone(&ctx.config);
    let loops = lifecycle.stage(Stage::Loops);
    let cancel = || loops.stopping().clone();
    let (routes, health_reporter) =
        crate::api::routes(Arc::clone(&ctx), Arc::clone(&job_admin), cancel())
            .await
            .map_err(|error| Error::internal(format!("reflection setup: {error}"), error))?;
    let recorder = lifecycle.stage(Stage::Recorder);
    recorder.spawn(crate::trigger::recorder::run_recorder(
        crate::trigger::recorder::OutcomeStore {
            store: ctx.store.clone(),
            node: ctx.node.clone(),
        },
        records_rx,
        held_outcomes,
        Arc::clone(&ctx.health),
        recorder.clone(),
    ));
    loops.spawn(crate::executor::follow_removals(
        Arc::clone(&ctx.executors),
        ctx.registry.removals(),
        cancel(),
    ));
    if let Some(tls) = &listeners.server_tls {
        loops.spawn(Arc::clone(tls).watch(config.tls_reload_interval, cancel()));
    }
    loops.spawn(serve(
        routes,
        listeners.grpc,
        listeners.server_tls.clone(),
        Arc::clone(&config),
        cancel(),
    ));
    if let Some(listener) = listeners.metrics {
        let hosts = config
            .allowed_hosts()
            .map_err(|error| Error::internal(error.to_string(), error))?;
        loops.spawn(crate::metrics::serve(listener, cancel(), hosts));
    }
    if let Some(listener) = listeners.xxl_compat {
        loops.spawn(crate::xxl_compat::serve(
            listener,
            Arc::clone(&ctx),
            cancel(),
        ));
        loops.spawn(crate::xxl_compat::run_row_refresh(
            Arc::clone(&ctx),
            cancel(),
        ));
    }
    if let Some(listener) = listeners.console {
        let console = crate::console::Console::new(Arc::clone(&job_admin), Arc::clone(&ctx));
        let stage = lifecycle.stage(Stage::Console);
        stage.spawn(crate::console::serve(
            listener,
            listeners.server_tls.clone(),
            console,
            stage.clone(),
        ));
    }
    loops.spawn(crate::schedule::run_scan(Arc::clone(&scheduler), cancel()));
    loops.spawn(crate::schedule::run_ring(Arc::clone(&scheduler), cancel()));
    loops.spawn(crate::schedule::run_recovery(
        Arc::clone(&scheduler),
        cancel(),
    ));
    if config.liveness_locks {
        let (dead_tx, dead_rx) = tokio::sync::mpsc::unbounded_channel();
        loops.spawn(crate::schedule::liveness::run_liveness(
            Arc::clone(&scheduler),
            node_lock,
            dead_tx,
            cancel(),
        ));
        loops.spawn(crate::monitor::fenced::run_fenced_takeovers(
            Arc::clone(&ctx),
            dead_rx,
            cancel(),
        ));
    }
    loops.spawn(crate::registry::leases::run_reaper(
        Arc::clone(&ctx.sessions),
        cancel(),
    ));
    // Cluster: other admins' executors into routing each second; database health and the
    // loops' progress to gRPC health.
    let (database_healthy_tx, database_health) = crate::registry::refresh::database_health();
    loops.spawn(crate::registry::refresh::run_refresh(
        Arc::clone(&ctx.sessions),
        database_healthy_tx,
        cancel(),
    ));
    loops.spawn(crate::api::run_health(
        health_reporter,
        database_health,
        Arc::clone(&ctx.health),
        cancel(),
    ));
    // Alarms leave from their own task: a hung mail server never holds up the follow-up.
    let (alarms, deliveries) =
        crate::monitor::AlarmQueue::new(crate::monitor::alarm_queue::QUEUE_CAPACITY);
    loops.spawn(deliveries.run(Arc::clone(&ctx), alarm, cancel()));
    loops.spawn(crate::monitor::run_followup(
        Arc::clone(&ctx),
        alarms,
        cancel(),
    ));
    loops.spawn(crate::monitor::run_lost_monitor(Arc::clone(&ctx), cancel()));
    loops.spawn(crate::monitor::run_backfills(Arc::clone(&ctx), cancel()));
    loops.spawn(crate::monitor::run_workflow_schedules(
        Arc::clone(&ctx),
        cancel(),
    ));
    loops.spawn(crate::maintenance::report::run_report_refresh(
        ctx.store.clone(),
        Arc::clone(&config),
        Arc::clone(&ctx.clock),
        cancel(),
    ));
    loops.spawn(crate::maintenance::cleanup::run_retention(
        ctx.store.clone(),
        Arc::clone(&config),
        Arc::clone(&ctx.clock),
        cancel(),
    ));
    #[cfg(feature = "demo")]
    if config.demo {
        let url = format!("http://{}", listeners.addresses.grpc);
        let stop = CancellationToken::new();
        let task = tokio::spawn(crate::demo::run_demo(Arc::clone(&ctx), url, stop.clone()));
        return Ok(Some(DemoExecutor { stop, task }));
    }
    Ok(None)
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
    // whose peer vanished without a FIN; the handshake deadline closes ones that never speak
    // (the accept loop never waits on them, and bounds them per address and in total);
    // the connection age closes idle ones.
    let mut server = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .max_concurrent_streams(config.max_concurrent_streams)
        .timeout(config.request_timeout);
    if !config.max_connection_age.is_zero() {
        server = server.max_connection_age(config.max_connection_age);
    }
    let options = config.listen_options(crate::metrics::connection_refused);
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

/// A database URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://***{}", &url[..scheme_end], &url[at..])
        }
        _ => url.to_string(),
    }
}
