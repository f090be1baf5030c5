//! TLS: certificate files (with a SIGHUP reload) and ACME end to end against
//! Debian's pebble, a real ACME server, on loopback.

use crate::support::LogWatch;
use crosstalk::config::{Acme, Config, Tls};
use crosstalk::server::{self, Running};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A certificate authority made for one test.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "crosstalk test CA");
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names`: (certificate PEM, key PEM, certificate DER).
    pub fn leaf(&self, names: &[&str]) -> (String, String, Vec<u8>) {
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// An HTTPS client that trusts only `root_pem`, and shows the peer's certificate.
fn https_client(root_pem: &str) -> reqwest::Client {
    crosstalk::tls::install_crypto_provider();
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(root_pem.as_bytes()).unwrap()])
        .tls_info(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// GETs `url`; returns the status, the HTTP version, HSTS, and the peer's certificate.
async fn fetch(
    client: &reqwest::Client,
    url: &str,
) -> (u16, reqwest::Version, Option<String>, Vec<u8>) {
    let response = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e:?}"));
    let certificate = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    let hsts = response
        .headers()
        .get("strict-transport-security")
        .map(|v| v.to_str().unwrap().to_owned());
    (
        response.status().as_u16(),
        response.version(),
        hsts,
        certificate,
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[tokio::test]
async fn certificate_files_serve_http2_with_hsts_and_a_redirect() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let (cert, key, der) = ca.leaf(&["localhost"]);
    let mut config = Config::local(dir.path().join("relay.db"));
    config.tls = Tls::Files {
        cert: write(dir.path(), "cert.pem", &cert),
        key: write(dir.path(), "key.pem", &key),
    };
    config.http_listen = Some("127.0.0.1:0".parse().unwrap());
    config.public_url = "https://localhost".into();
    config.allowed_hosts = Some(vec!["localhost".into(), "127.0.0.1".into()]);
    let running = server::spawn(config).await.unwrap();
    let port = running.addr.port();
    let client = https_client(&ca.pem);

    let (status, version, hsts, served) =
        fetch(&client, &format!("https://localhost:{port}/healthz")).await;
    assert_eq!((status, version), (200, reqwest::Version::HTTP_2));
    assert_eq!(hsts.as_deref(), Some("max-age=31536000"));
    assert_eq!(served, der);

    let redirect = running.redirect_addr.unwrap();
    let response = client
        .get(format!(
            "http://127.0.0.1:{}/api/people?since=1",
            redirect.port()
        ))
        .header("host", "localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 308);
    assert_eq!(
        response.headers()["location"],
        format!("https://localhost:{port}/api/people?since=1")
    );

    // The redirector has a small budget of its own (16 a client): the
    // client's next connection closes its oldest idle one, and the relay
    // itself is untouched.
    let mut idle = Vec::new();
    for _ in 0..16 {
        idle.push(tokio::net::TcpStream::connect(redirect).await.unwrap());
    }
    let first_line = |mut socket: tokio::net::TcpStream| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        socket
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = socket.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        answer.lines().next().unwrap_or_default().to_owned()
    };
    let answered = first_line(tokio::net::TcpStream::connect(redirect).await.unwrap()).await;
    assert_eq!(answered, "HTTP/1.1 308 Permanent Redirect");
    let mut byte = [0; 1];
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut idle[0], &mut byte),
    )
    .await
    .expect("the oldest idle connection is closed to make room");
    assert_eq!(read.unwrap(), 0);
    let (status, ..) = fetch(&client, &format!("https://localhost:{port}/healthz")).await;
    assert_eq!(status, 200);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn sighup_reloads_certificate_files_and_a_bad_pair_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let (cert1, key1, der1) = ca.leaf(&["localhost"]);
    let cert = write(dir.path(), "cert.pem", &cert1);
    let key = write(dir.path(), "key.pem", &key1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
        .args(["serve", "--port", "0", "--http-port", "0"])
        .env("RELAY_DB", dir.path().join("relay.db"))
        .env("RELAY_TLS_CERT", &cert)
        .env("RELAY_TLS_KEY", &key)
        .env("RUST_LOG", "crosstalk=info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = LogWatch::new(&mut child);
    let line = log.wait_for("crosstalk is serving");
    let addr: SocketAddr = line
        .split("listen=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let url = format!("https://localhost:{}/healthz", addr.port());
    assert_eq!(fetch(&https_client(&ca.pem), &url).await.3, der1);

    // A key that does not belong to the certificate is refused; the old pair stays.
    let (_, stranger_key, _) = ca.leaf(&["localhost"]);
    std::fs::write(&key, stranger_key).unwrap();
    Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    log.wait_for("kept the TLS certificate in use");
    assert_eq!(fetch(&https_client(&ca.pem), &url).await.3, der1);

    let (cert2, key2, der2) = ca.leaf(&["localhost"]);
    std::fs::write(&cert, cert2).unwrap();
    std::fs::write(&key, key2).unwrap();
    Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    log.wait_for("reloaded the TLS certificate");
    assert_eq!(
        fetch(&https_client(&ca.pem), &url).await.3,
        der2,
        "new connections get the new certificate"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_mismatched_or_missing_pair_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let (cert, _, _) = ca.leaf(&["localhost"]);
    let (_, other_key, _) = ca.leaf(&["localhost"]);
    let cert = write(dir.path(), "cert.pem", &cert);
    let key = write(dir.path(), "key.pem", &other_key);
    let serve = |cert: &Path, key: &Path| {
        let output = Command::new(env!("CARGO_BIN_EXE_crosstalk"))
            .args(["serve", "--port", "0", "--http-port", "0"])
            .env("RELAY_DB", dir.path().join("relay.db"))
            .env("RELAY_TLS_CERT", cert)
            .env("RELAY_TLS_KEY", key)
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(serve(&cert, &key).contains("does not belong to the certificate"));
    assert!(serve(&cert, &dir.path().join("missing.pem")).contains("RELAY_TLS_KEY"));
}

/// Debian's pebble on loopback, with its own HTTPS certificate from a test CA.
struct Pebble {
    child: Child,
    directory: String,
    management: String,
    ca: TestCa,
    ca_file: PathBuf,
}

impl Pebble {
    /// Starts pebble validating TLS-ALPN-01 on `tls_port`. (The tests that
    /// need it are `#[ignore]`d, saying so: where it is missing, they fail.)
    fn start(dir: &Path, tls_port: u16) -> Pebble {
        assert!(
            Command::new("pebble").arg("-h").output().is_ok(),
            "pebble is not installed: apt-get install pebble (.ci/run does)"
        );
        let ca = TestCa::new();
        let (cert, key, _) = ca.leaf(&["localhost", "127.0.0.1"]);
        let (listen, management) = (free_port(), free_port());
        let config = serde_json::json!({ "pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": write(dir, "pebble-cert.pem", &cert),
            "privateKey": write(dir, "pebble-key.pem", &key),
            "httpPort": free_port(),
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false
        }});
        let config_file = write(dir, "pebble.json", &config.to_string());
        let mut child = Command::new("pebble")
            .arg("-config")
            .arg(&config_file)
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pebble");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (ready, listening) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if line.contains("Listening on") && line.contains(&listen.to_string()) {
                    let _ = ready.send(());
                }
            }
        });
        listening
            .recv_timeout(Duration::from_secs(20))
            .expect("pebble listens");
        let ca_file = write(dir, "pebble-ca.pem", &ca.pem);
        Pebble {
            child,
            directory: format!("https://localhost:{listen}/dir"),
            management: format!("https://localhost:{management}"),
            ca,
            ca_file,
        }
    }

    /// The root pebble issues from (it makes a new one at every start).
    async fn issuing_root(&self) -> String {
        let response = https_client(&self.ca.pem)
            .get(format!("{}/roots/0", self.management))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn acme_config(dir: &Path, port: u16, directory: &str, ca: &Path) -> Config {
    let mut config = Config::local(dir.join("relay.db"));
    config.listen = SocketAddr::from(([127, 0, 0, 1], port));
    config.public_url = format!("https://localhost:{port}");
    config.allowed_hosts = Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]);
    config.http_listen = Some("127.0.0.1:0".parse().unwrap());
    config.tls = Tls::Acme(Acme {
        domains: vec!["localhost".into()],
        email: Some("ops@example.com".into()),
        directory: directory.to_owned(),
        ca: Some(ca.to_owned()),
        cache_dir: dir.join("acme"),
    });
    config
}

async fn certificate_ready(running: &Running) -> Duration {
    let started = Instant::now();
    let mut ready = running.certificate_ready.clone().expect("ACME mode");
    tokio::time::timeout(Duration::from_secs(60), ready.wait_for(|ready| *ready))
        .await
        .expect("a certificate within 60 s")
        .unwrap();
    started.elapsed()
}

#[tokio::test]
#[ignore = "needs pebble (apt-get install pebble); cargo test -- --ignored"]
async fn acme_with_pebble_issues_serves_redirects_and_restarts_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let pebble = Pebble::start(dir.path(), port);
    let config = acme_config(dir.path(), port, &pebble.directory, &pebble.ca_file);

    let running = server::spawn(config.clone()).await.unwrap();
    let took = certificate_ready(&running).await;
    println!(
        "ACME: the first certificate for localhost took {} ms",
        took.as_millis()
    );
    let client = https_client(&pebble.issuing_root().await);
    let url = format!("https://localhost:{port}/healthz");
    let (status, version, hsts, first) = fetch(&client, &url).await;
    assert_eq!((status, version), (200, reqwest::Version::HTTP_2));
    assert_eq!(hsts.as_deref(), Some("max-age=31536000"));
    assert!(!first.is_empty());
    // Ready once the certificate is deployed (before it, no TLS handshake
    // succeeds at all, which a load balancer reads as not ready too).
    let ready = client
        .get(format!("https://localhost:{port}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(
        ready.json::<serde_json::Value>().await.unwrap(),
        serde_json::json!({ "status": "ready" })
    );
    let mode = |path: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&dir.path().join("acme")), 0o700);
    // The account key and the certificate's key: the owner's alone.
    let cached: Vec<PathBuf> = std::fs::read_dir(dir.path().join("acme"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(
        cached.len() >= 2,
        "an account and a certificate: {cached:?}"
    );
    for file in cached {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }

    let redirect = client
        .get(format!(
            "http://127.0.0.1:{}/api/people?since=3",
            running.redirect_addr.unwrap().port()
        ))
        .header("host", "localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 308);
    assert_eq!(
        redirect.headers()["location"],
        format!("https://localhost:{port}/api/people?since=3")
    );
    running.stop().await.unwrap();

    // A restart serves the cached certificate: the same one, no new order.
    let running = server::spawn(config.clone()).await.unwrap();
    let took = certificate_ready(&running).await;
    println!(
        "ACME: a restart deployed the cached certificate in {} ms",
        took.as_millis()
    );
    assert_eq!(fetch(&client, &url).await.3, first);
    running.stop().await.unwrap();

    // With the ACME server gone, a restart still serves from the cache.
    drop(pebble);
    let running = server::spawn(config).await.unwrap();
    certificate_ready(&running).await;
    let (status, _, _, served) = fetch(&client, &url).await;
    assert_eq!((status, served), (200, first));
    running.stop().await.unwrap();
}

#[tokio::test]
#[ignore = "needs PostgreSQL and pebble (apt-get install postgresql pebble); cargo test -- --ignored"]
async fn relays_on_one_postgres_share_one_acme_account_and_certificate() {
    let database = crate::postgres::fresh_database().await;
    let url: crosstalk::config::DatabaseUrl = database.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let pebble = Pebble::start(dir.path(), port);
    let (directory, ca_file) = (pebble.directory.clone(), pebble.ca_file.clone());
    let shared = |port| {
        let mut config = acme_config(dir.path(), port, &directory, &ca_file);
        config.database_url = Some(url.clone());
        config
    };
    let first_relay = server::spawn(shared(port)).await.unwrap();
    certificate_ready(&first_relay).await;
    let client = https_client(&pebble.issuing_root().await);
    let first = fetch(&client, &format!("https://localhost:{port}/healthz"))
        .await
        .3;
    assert!(!first.is_empty());
    assert!(
        !dir.path().join("acme").exists(),
        "kept in the database, not in a cache directory"
    );

    // A second relay behind the same name, with the ACME server gone (so
    // it could not order): it serves the same certificate from the store.
    drop(pebble);
    let other = free_port();
    let second_relay = server::spawn(shared(other)).await.unwrap();
    certificate_ready(&second_relay).await;
    let (status, _, _, served) =
        fetch(&client, &format!("https://localhost:{other}/healthz")).await;
    assert_eq!((status, served), (200, first));
    first_relay.stop().await.unwrap();
    second_relay.stop().await.unwrap();
}
