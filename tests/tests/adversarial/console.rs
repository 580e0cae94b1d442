//! The web console and `/metrics` attacked as a page on another site and as a password guesser
//! would: DNS rebinding (a foreign `Host` on the loopback console), a form posted from another
//! origin, an open redirect after login, a flood of junk names to wash out a lockout, login
//! timing that tells which names exist, and pages that leave new tokens in caches. Every
//! request is raw HTTP/1.1 over a real socket to a real admin on loopback, so each test
//! chooses its `Host`, `Origin` and source address freely, as an attacker does.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use xjob_proto::pb;
use xjob_tests::TestCluster;

const WAIT: Duration = Duration::from_secs(10);
const PASSWORD: &str = "a long console passphrase";

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The `name=value` of the first `Set-Cookie` for `name`.
    fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .filter(|(key, _)| key == "set-cookie")
            .filter_map(|(_, value)| value.split(';').next())
            .find(|pair| pair.starts_with(&format!("{name}=")) && pair.len() > name.len() + 1)
            .map(str::to_string)
    }

    /// The value of the first hidden `csrf` field on the page.
    fn csrf(&self) -> Option<String> {
        let start = self.body.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
        let end = self.body[start..].find('"')?;
        Some(self.body[start..start + end].to_string())
    }
}

/// A keep-alive HTTP/1.1 connection to one listener.
struct Http {
    stream: BufReader<TcpStream>,
}

impl Http {
    async fn connect(address: SocketAddr) -> anyhow::Result<Http> {
        Ok(Http {
            stream: BufReader::new(TcpStream::connect(address).await?),
        })
    }

    /// Sends `method path` with `headers` (and a form `body` for posts), reads the answer.
    async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> anyhow::Result<Answer> {
        let mut request = format!("{method} {path} HTTP/1.1\r\n");
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if method == "POST" {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            request.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        tokio::time::timeout(WAIT, self.read_answer()).await?
    }

    async fn read_answer(&mut self) -> anyhow::Result<Answer> {
        let mut status_line = String::new();
        self.stream.read_line(&mut status_line).await?;
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("no status line: {status_line:?}"))?;
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).await?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body).await?;
        Ok(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

/// An admin with the console on loopback (and `/metrics` when `metrics` is set), no users yet:
/// the open laptop mode a rebinding page goes for.
async fn console_cluster(
    allowed_hosts: &[&str],
    metrics: bool,
) -> anyhow::Result<(TestCluster, SocketAddr)> {
    let allowed: Vec<String> = allowed_hosts.iter().map(|name| name.to_string()).collect();
    let cluster = TestCluster::builder()
        .configure(move |config| {
            config.http_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            config.http_allowed_hosts = allowed;
            if metrics {
                config.metrics_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
            }
        })
        .start()
        .await?;
    let console = cluster
        .console_addr()
        .ok_or_else(|| anyhow::anyhow!("no console address"))?;
    Ok((cluster, console))
}

/// Creates a user with a console password over gRPC (the cluster's client: open while no
/// user exists, so this must be the first user).
async fn create_first_user(cluster: &TestCluster, name: &str) -> anyhow::Result<String> {
    let created = cluster
        .client()
        .create_user(pb::CreateUserRequest {
            name: name.to_string(),
            role: "admin".to_string(),
            password: PASSWORD.to_string(),
            token_ttl_ms: 0,
        })
        .await?
        .into_inner();
    Ok(created.token)
}

fn form(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(key, value)| {
            let value: String = url_encode(value);
            format!("{key}={value}")
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A login post (double-submit CSRF: the same value in the cookie and the form).
async fn login(
    http: &mut Http,
    host: &str,
    name: &str,
    password: &str,
    next: &str,
) -> anyhow::Result<Answer> {
    let body = form(&[
        ("csrf", "logincsrf"),
        ("name", name),
        ("password", password),
        ("next", next),
    ]);
    let headers = [("Host", host), ("Cookie", "xjob_login=logincsrf")];
    http.send("POST", "/login", &headers, &body).await
}

#[tokio::test]
async fn a_rebinding_page_gets_nothing_from_the_open_console() -> anyhow::Result<()> {
    let (cluster, console) = console_cluster(&["xjob.internal.example"], false).await?;
    let port = console.port();
    let mut http = Http::connect(console).await?;
    let rebound = format!("rebind.attacker.example:{port}");

    // What the rebinding page tried: a session, a CSRF token, a new admin with its token.
    for path in ["/", "/jobs/new", "/users"] {
        let answer = http.send("GET", path, &[("Host", &rebound)], "").await?;
        assert_eq!(answer.status, 421, "GET {path}: {answer:?}");
        assert_eq!(answer.cookie("xjob_session"), None, "GET {path}");
    }
    let body = form(&[("name", "evil"), ("role", "admin"), ("csrf", "guess")]);
    let answer = http
        .send("POST", "/users", &[("Host", &rebound)], &body)
        .await?;
    assert_eq!(answer.status, 421, "{answer:?}");
    let users = cluster
        .client()
        .list_users(pb::ListUsersRequest {})
        .await?
        .into_inner()
        .users;
    assert!(users.is_empty(), "{users:?}");

    // The console's own address, localhost on loopback and the configured name are answered.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "xjob.internal.example".to_string(),
    ] {
        let answer = http.send("GET", "/", &[("Host", &host)], "").await?;
        assert_eq!(answer.status, 303, "Host {host}: {answer:?}");
        assert!(answer.cookie("xjob_session").is_some(), "Host {host}");
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_form_posted_from_another_site_is_refused_even_with_its_csrf_token() -> anyhow::Result<()>
{
    let (cluster, console) = console_cluster(&[], false).await?;
    let host = format!("127.0.0.1:{}", console.port());
    let mut http = Http::connect(console).await?;
    let first = http.send("GET", "/users", &[("Host", &host)], "").await?;
    let session = first
        .cookie("xjob_session")
        .ok_or_else(|| anyhow::anyhow!("no open session: {first:?}"))?;
    let page = http
        .send(
            "GET",
            "/users",
            &[("Host", &host), ("Cookie", &session)],
            "",
        )
        .await?;
    let csrf = page
        .csrf()
        .ok_or_else(|| anyhow::anyhow!("no CSRF token on /users: {page:?}"))?;
    let body = form(&[
        ("name", "planted"),
        ("role", "admin"),
        ("password", ""),
        ("csrf", &csrf),
    ]);

    for (header, source) in [
        ("Origin", "http://evil.example"),
        ("Origin", "null"),
        ("Referer", "http://evil.example/attack.html"),
        ("Origin", "http://localhost:1"),
    ] {
        let headers = [
            ("Host", host.as_str()),
            ("Cookie", &session),
            (header, source),
        ];
        let answer = http.send("POST", "/users", &headers, &body).await?;
        assert_eq!(answer.status, 403, "{header}: {source}: {answer:?}");
    }
    let users = cluster
        .client()
        .list_users(pb::ListUsersRequest {})
        .await?
        .into_inner()
        .users;
    assert!(users.is_empty(), "a cross-site post created {users:?}");

    // From the console's own page the same post works, and its answer (the new token) is
    // not kept by any cache.
    let origin = format!("http://{host}");
    let headers = [
        ("Host", host.as_str()),
        ("Cookie", &session),
        ("Origin", &origin),
    ];
    let answer = http.send("POST", "/users", &headers, &body).await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("xjob_"), "the token is shown once");
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn metrics_answer_only_requests_naming_their_address() -> anyhow::Result<()> {
    let (cluster, _) = console_cluster(&[], true).await?;
    let metrics = cluster
        .metrics_addr()
        .ok_or_else(|| anyhow::anyhow!("no metrics address"))?;
    let mut http = Http::connect(metrics).await?;
    let rebound = format!("rebind.attacker.example:{}", metrics.port());
    let answer = http
        .send("GET", "/metrics", &[("Host", &rebound)], "")
        .await?;
    assert_eq!(answer.status, 421, "{answer:?}");
    assert!(
        !answer.body.contains("xjob_"),
        "no metric leaks: {answer:?}"
    );
    let own = format!("127.0.0.1:{}", metrics.port());
    let answer = http.send("GET", "/metrics", &[("Host", &own)], "").await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn login_redirects_only_to_paths_on_the_console() -> anyhow::Result<()> {
    let (cluster, console) = console_cluster(&[], false).await?;
    create_first_user(&cluster, "alice").await?;
    let host = format!("127.0.0.1:{}", console.port());
    let mut http = Http::connect(console).await?;
    for (next, expected) in [
        ("/\t/evil.example/", "/"),
        ("/\n/evil.example/", "/"),
        ("/\r\nSet-Cookie: planted=1", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/jobs?group=1", "/jobs?group=1"),
    ] {
        let answer = login(&mut http, &host, "alice", PASSWORD, next).await?;
        assert_eq!(answer.status, 303, "next {next:?}: {answer:?}");
        assert_eq!(answer.header("location"), Some(expected), "next {next:?}");
        assert_eq!(answer.cookie("planted"), None);
    }
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_new_api_token_page_is_not_cached() -> anyhow::Result<()> {
    let (cluster, console) = console_cluster(&[], false).await?;
    create_first_user(&cluster, "alice").await?;
    let host = format!("127.0.0.1:{}", console.port());
    let mut http = Http::connect(console).await?;
    let answer = login(&mut http, &host, "alice", PASSWORD, "/").await?;
    let session = answer
        .cookie("xjob_session")
        .ok_or_else(|| anyhow::anyhow!("not logged in: {answer:?}"))?;
    let headers = [("Host", host.as_str()), ("Cookie", &session)];
    let page = http.send("GET", "/users/1/tokens", &headers, "").await?;
    let csrf = page
        .csrf()
        .ok_or_else(|| anyhow::anyhow!("no CSRF token: {page:?}"))?;
    let body = form(&[("description", "ci"), ("ttl_days", "1"), ("csrf", &csrf)]);
    let answer = http
        .send("POST", "/users/1/tokens", &headers, &body)
        .await?;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("xjob_"), "the token is shown once");
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    cluster.shutdown().await;
    Ok(())
}

/// The lockout bypass as reported: 4 wrong passwords, 10 000 junk names to wash the name out
/// of the failure table, 4 more wrong ones, then the right password, all from one client. The
/// client is locked after 20 failures whatever the names, so the right password is refused
/// too. (Tables full of junk from many addresses: `console::throttle`'s unit tests.)
#[tokio::test]
async fn a_flood_of_junk_names_does_not_wash_out_a_lockout() -> anyhow::Result<()> {
    let (cluster, console) = console_cluster(&[], false).await?;
    create_first_user(&cluster, "victim").await?;
    let host = format!("127.0.0.1:{}", console.port());
    let mut http = Http::connect(console).await?;
    for _ in 0..4 {
        let answer = login(&mut http, &host, "victim", "wrong guess", "/").await?;
        assert_eq!(answer.status, 401, "{answer:?}");
    }
    for index in 0..10_000 {
        let name = format!("junk-{index}");
        let answer = login(&mut http, &host, &name, "x", "/").await?;
        assert!(matches!(answer.status, 401 | 429), "{answer:?}");
    }
    for _ in 0..4 {
        let answer = login(&mut http, &host, "victim", "wrong guess", "/").await?;
        assert_ne!(answer.status, 303, "{answer:?}");
    }
    let answer = login(&mut http, &host, "victim", PASSWORD, "/").await?;
    assert_eq!(answer.status, 429, "the right password got in: {answer:?}");
    assert_eq!(answer.cookie("xjob_session"), None);
    assert!(
        answer.body.contains("Too many failed logins"),
        "{}",
        answer.body
    );
    cluster.shutdown().await;
    Ok(())
}

/// A wrong password for a real user and any password for a name that does not exist take
/// the same password-hash work. Medians of interleaved attempts, compared with a factor of 3
/// (without the stand-in hash the unknown name answers many times faster).
#[tokio::test]
async fn login_time_does_not_tell_which_names_exist() -> anyhow::Result<()> {
    let (cluster, console) = console_cluster(&[], false).await?;
    create_first_user(&cluster, "known").await?;
    let host = format!("127.0.0.1:{}", console.port());
    let mut http = Http::connect(console).await?;
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    // 4 of each: below the per-name lock (5) and the per-address lock (20).
    for attempt in 0..4 {
        let started = Instant::now();
        let answer = login(&mut http, &host, "known", "wrong guess", "/").await?;
        known.push(started.elapsed());
        assert_eq!(answer.status, 401, "{answer:?}");
        let started = Instant::now();
        let name = format!("nobody-{attempt}");
        let answer = login(&mut http, &host, &name, "wrong guess", "/").await?;
        unknown.push(started.elapsed());
        assert_eq!(answer.status, 401, "{answer:?}");
    }
    let (known, unknown) = (median(known), median(unknown));
    eprintln!("login medians: known name {known:?}, unknown name {unknown:?}");
    assert!(
        unknown * 3 >= known,
        "an unknown name answers in {unknown:?}, a known one in {known:?}"
    );
    cluster.shutdown().await;
    Ok(())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Under TLS every answer tells the browser to use HTTPS only from now on, so a network
/// attacker cannot serve a look-alike console over plain HTTP on a later visit.
#[tokio::test]
async fn the_console_over_tls_sends_strict_transport_security() -> anyhow::Result<()> {
    use std::sync::Arc;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::crypto::ring::default_provider;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};

    let dir = tempfile::tempdir()?;
    let ca = xjob_tests::TestCa::new(dir.path(), "console")?;
    let (cert, key) = ca.issue("admin")?;
    let mut config = xjob_admin::Config::for_tests(dir.path().join("admin-data"));
    config.tls_cert = Some(cert);
    config.tls_key = Some(key);
    config.http_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let admin = xjob_admin::app::start(config.validate()?).await?;
    let console = admin
        .console_addr()
        .ok_or_else(|| anyhow::anyhow!("no console address"))?;

    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca.ca_path())? {
        roots.add(certificate?)?;
    }
    let client = ClientConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(console).await?;
    let server_name = ServerName::try_from("127.0.0.1")?;
    let mut tls = TlsConnector::from(Arc::new(client))
        .connect(server_name, tcp)
        .await?;
    let request = format!(
        "GET /login HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        console.port()
    );
    tls.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    // The server closes after the answer; a TLS close without close_notify is fine here.
    let _ = tokio::time::timeout(WAIT, tls.read_to_end(&mut answer)).await?;
    let answer = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 "), "{answer:.200}");
    assert!(
        answer.contains("\r\nstrict-transport-security: max-age=31536000\r\n"),
        "{answer:.600}"
    );
    admin.shutdown().await;
    Ok(())
}
