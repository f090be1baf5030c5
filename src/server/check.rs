//! `crosstalk check`: the configuration and the machine, checked as `serve`
//! would find them, without serving. Each finding names the variable to
//! change; the command fails where `serve` would refuse to start.

use crate::config::DatabaseUrl;
use crate::config::{Config, ServeArgs, Tls};
use crate::store::{PostgresStore, SqliteStore, Store};
use std::{
    fmt,
    net::{IpAddr, SocketAddr},
    path::Path,
    time::Duration,
};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    /// Worth fixing; `serve` would start.
    Warn,
    /// `serve` would refuse to start, or could not work.
    Fail,
}

/// One thing checked, and what was found.
#[derive(Debug, Clone)]
pub struct Finding {
    pub level: Level,
    /// The variable that governs it, to change if need be.
    pub variable: &'static str,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        write!(f, "{level}  {:<28} {}", self.variable, self.message)
    }
}

fn finding(level: Level, variable: &'static str, message: impl Into<String>) -> Finding {
    Finding {
        level,
        variable,
        message: message.into(),
    }
}

/// Checks everything `serve` needs; the findings in the order checked.
pub async fn check(args: &ServeArgs) -> Vec<Finding> {
    let config = match Config::from_args(args) {
        Ok(config) => config,
        Err(error) => return vec![finding(Level::Fail, "configuration", error.0)],
    };
    let mut findings = vec![finding(
        Level::Ok,
        "configuration",
        format!(
            "every variable is valid; agents are told {}",
            config.public_url
        ),
    )];
    let people = match &config.database_url {
        Some(url) => postgres(url, &mut findings).await,
        None => database(&config.db, &mut findings).await,
    };
    match config.check_exposure(people.unwrap_or(0) > 0) {
        Ok(()) => findings.push(finding(
            Level::Ok,
            "credentials",
            describe_credentials(&config, people.unwrap_or(0)),
        )),
        Err(refused) => findings.push(finding(Level::Fail, "credentials", refused.0)),
    }
    tls(&config, &mut findings);
    for (variable, addr) in [
        ("RELAY_PORT", Some(config.listen)),
        ("RELAY_HTTP_PORT", config.http_listen),
    ] {
        if let Some(addr) = addr {
            findings.push(port(variable, addr).await);
        }
    }
    if let Tls::Acme(acme) = &config.tls {
        for domain in &acme.domains {
            findings.push(dns(domain).await);
        }
    }
    findings
}

fn describe_credentials(config: &Config, people: usize) -> String {
    let settings = &config.settings;
    format!(
        "{people} people, {} participants, shared token {}",
        settings.participants.len(),
        if settings.shared_token.is_some() {
            "set"
        } else {
            "not set"
        }
    )
}

/// The PostgreSQL database: whether it answers (its schema brought up to
/// date, as serve would), and how many people it has.
async fn postgres(url: &DatabaseUrl, findings: &mut Vec<Finding>) -> Option<usize> {
    let people = match PostgresStore::connect(url.expose()).await {
        Ok(store) => store.people().await,
        Err(error) => Err(error),
    };
    match people {
        Ok(people) => {
            let live = people.iter().filter(|p| p.revoked_at.is_none()).count();
            findings.push(finding(
                Level::Ok,
                "RELAY_DATABASE_URL",
                format!("PostgreSQL answers: {live} people can connect"),
            ));
            Some(live)
        }
        Err(error) => {
            findings.push(finding(Level::Fail, "RELAY_DATABASE_URL", chain(&error)));
            None
        }
    }
}

/// The database: where it is, who may read it, and how many people it has.
async fn database(db: &Path, findings: &mut Vec<Finding>) -> Option<usize> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(meta) = std::fs::metadata(db) else {
        let folder = db
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let writable = folder_writable(folder);
        findings.push(finding(
            if writable { Level::Warn } else { Level::Fail },
            "RELAY_DB",
            if writable {
                format!("{} does not exist yet; serve will create it", db.display())
            } else {
                format!(
                    "{} does not exist, and {} cannot be written by this user: run as the \
                     service's user, or choose another RELAY_DB",
                    db.display(),
                    folder.display()
                )
            },
        ));
        return None;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        findings.push(finding(
            Level::Warn,
            "RELAY_DB",
            format!(
                "{} is readable by others (mode {mode:o}): chmod 600 it; serve will",
                db.display()
            ),
        ));
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        findings.push(finding(
            Level::Warn,
            "RELAY_DB",
            format!(
                "{} belongs to another user: run commands as the service's user \
                 (sudo crosstalk-admin …)",
                db.display()
            ),
        ));
    }
    match SqliteStore::open_existing(db) {
        Ok(store) => match store.people().await {
            Ok(people) => {
                let live = people.iter().filter(|p| p.revoked_at.is_none()).count();
                findings.push(finding(
                    Level::Ok,
                    "RELAY_DB",
                    format!("{}: {live} people can connect", db.display()),
                ));
                Some(live)
            }
            Err(error) => {
                findings.push(finding(Level::Fail, "RELAY_DB", chain(&error)));
                None
            }
        },
        Err(error) => {
            findings.push(finding(Level::Fail, "RELAY_DB", chain(&error)));
            None
        }
    }
}

fn folder_writable(folder: &Path) -> bool {
    rustix::fs::access(folder, rustix::fs::Access::WRITE_OK).is_ok()
        || (!folder.exists() && folder.parent().is_some_and(folder_writable))
}

/// Certificate files load and match; the ACME cache is private.
fn tls(config: &Config, findings: &mut Vec<Finding>) {
    use std::os::unix::fs::PermissionsExt;
    match &config.tls {
        Tls::Off => findings.push(finding(
            Level::Ok,
            "RELAY_DOMAINS",
            "no TLS: plain HTTP (loopback, or a private network behind a proxy)",
        )),
        Tls::Files { cert, key } => findings.push(match crate::tls::from_files(cert, key) {
            Ok(_) => finding(
                Level::Ok,
                "RELAY_TLS_CERT",
                format!("{} and its key load", cert.display()),
            ),
            Err(error) => finding(Level::Fail, "RELAY_TLS_CERT", chain(&error)),
        }),
        Tls::Acme(acme) => {
            let mode = std::fs::metadata(&acme.cache_dir).map(|m| m.permissions().mode() & 0o777);
            findings.push(match mode {
                Ok(mode) if mode & 0o077 != 0 => finding(
                    Level::Warn,
                    "RELAY_CACHE_DIR",
                    format!(
                        "{} is open to others (mode {mode:o}): it holds private keys; chmod 700 it",
                        acme.cache_dir.display()
                    ),
                ),
                Ok(_) => finding(
                    Level::Ok,
                    "RELAY_CACHE_DIR",
                    format!("{} is private", acme.cache_dir.display()),
                ),
                Err(_) => finding(
                    Level::Ok,
                    "RELAY_CACHE_DIR",
                    format!("{} will be created, private", acme.cache_dir.display()),
                ),
            });
        }
    }
}

/// Whether `addr` can be bound now, or a crosstalk relay serves there
/// already (`check` run beside the running relay).
async fn port(variable: &'static str, addr: SocketAddr) -> Finding {
    match std::net::TcpListener::bind(addr) {
        Ok(_) => finding(Level::Ok, variable, format!("{addr} can be bound")),
        Err(error)
            if error.kind() == std::io::ErrorKind::AddrInUse && serves_crosstalk(addr).await =>
        {
            finding(
                Level::Ok,
                variable,
                format!(
                    "a crosstalk relay already serves on {addr} (stop it to check the port itself)"
                ),
            )
        }
        Err(error) => {
            let hint = match error.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "another process listens there (a running crosstalk?)"
                }
                std::io::ErrorKind::PermissionDenied => {
                    "ports below 1024 need CAP_NET_BIND_SERVICE, which the systemd unit grants"
                }
                _ => "choose another address or port",
            };
            finding(
                Level::Fail,
                variable,
                format!("cannot bind {addr}: {error}; {hint}"),
            )
        }
    }
}

/// Whether what listens at `addr` answers as a crosstalk relay: its API
/// document says so, over plain HTTP or TLS, or it is the relay's plain
/// listener, sending the document's path to the relay's TLS port on this
/// machine. Nothing is sent but that request, never off this machine (no
/// redirect is followed elsewhere), and a certificate is not checked: it
/// only names the listener.
async fn serves_crosstalk(addr: SocketAddr) -> bool {
    let ip = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => IpAddr::from([127, 0, 0, 1]),
        ip if ip.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    crate::tls::install_crypto_provider();
    let Ok(client) = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(1))
        .build()
    else {
        return false;
    };
    let document = |scheme: &str, port: u16| {
        format!("{scheme}://{}/api/openapi.json", SocketAddr::new(ip, port))
    };
    for scheme in ["http", "https"] {
        match probe(&client, &document(scheme, addr.port())).await {
            Probe::Document(title) => return title == "crosstalk",
            Probe::ToTls(port) => {
                return probe(&client, &document("https", port)).await
                    == Probe::Document("crosstalk".into());
            }
            Probe::Nothing => {}
        }
    }
    false
}

/// What a listener answered `check`'s request with.
#[derive(Debug, PartialEq)]
enum Probe {
    /// An API document, with this title.
    Document(String),
    /// A redirect to the same path over TLS on this port (the relay's
    /// plain listener sends every request there).
    ToTls(u16),
    Nothing,
}

/// The largest answer `check` reads while naming a listener.
const MAX_PROBE_BYTES: usize = 1 << 20;

async fn probe(client: &reqwest::Client, url: &str) -> Probe {
    let Ok(mut response) = client.get(url).send().await else {
        return Probe::Nothing;
    };
    if response.status().is_redirection() {
        let to_tls = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|location| location.to_str().ok())
            .and_then(|location| url::Url::parse(location).ok())
            .filter(|location| {
                location.scheme() == "https" && location.path() == "/api/openapi.json"
            });
        return match to_tls {
            Some(location) => Probe::ToTls(location.port().unwrap_or(443)),
            None => Probe::Nothing,
        };
    }
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_PROBE_BYTES {
            return Probe::Nothing;
        }
    }
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(document) => {
            Probe::Document(document["info"]["title"].as_str().unwrap_or("").to_owned())
        }
        Err(_) => Probe::Nothing,
    }
}

/// Whether `domain` resolves to an address of this machine: one it can bind.
/// A machine behind 1:1 NAT (many clouds) has its public address elsewhere,
/// so a mismatch is a warning, not a failure.
async fn dns(domain: &str) -> Finding {
    let lookup = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((domain, 443)),
    )
    .await;
    let addresses: Vec<IpAddr> = match lookup {
        Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
        Ok(Err(error)) => {
            return finding(
                Level::Warn,
                "RELAY_DOMAINS",
                format!(
                    "{domain} does not resolve ({error}): point its DNS at this machine before ACME can issue a certificate"
                ),
            );
        }
        Err(_) => {
            return finding(
                Level::Warn,
                "RELAY_DOMAINS",
                format!("looking up {domain} took over 5 s"),
            );
        }
    };
    let local: Vec<&IpAddr> = addresses
        .iter()
        .filter(|ip| std::net::UdpSocket::bind((**ip, 0)).is_ok())
        .collect();
    if local.is_empty() {
        finding(
            Level::Warn,
            "RELAY_DOMAINS",
            format!(
                "{domain} resolves to {addresses:?}, none of them an address of this machine \
                 (fine behind 1:1 NAT; otherwise fix the DNS record)"
            ),
        )
    } else {
        finding(
            Level::Ok,
            "RELAY_DOMAINS",
            format!("{domain} resolves to this machine ({})", local[0]),
        )
    }
}

/// An error and its causes on one line.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}
