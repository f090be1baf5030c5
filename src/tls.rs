//! TLS: certificate files or ACME, and the plain listener that redirects to
//! HTTPS.
//!
//! Both modes end in a rustls `ServerConfig` that offers HTTP/2 and
//! HTTP/1.1. Certificate files are re-read on SIGHUP; a bad new pair is
//! refused and the old one kept. ACME (rustls-acme, TLS-ALPN-01 on the TLS
//! port) keeps its account and certificates in the cache directory, so a
//! restart serves the cached certificate at once and never orders one it
//! has; it renews in the background and, when the directory cannot be
//! reached, keeps serving and retries with backoff (1 s doubling to 18 h).
//! Relays that share a PostgreSQL store keep the ACME account and
//! certificates in it instead ([`StoreCache`]), so N relays behind one name
//! share one account and one certificate.

use crate::config::{Acme, Config, Tls};
use crate::host;
use crate::store::Store;
use axum::{
    Router,
    http::{HeaderMap, Uri, header},
    response::Redirect,
};
use futures::StreamExt;
use rustls::{
    ClientConfig, RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    sign::CertifiedKey,
};
use rustls_acme::{AccountCache, AcmeConfig, CertCache, caches::DirCache};
use std::{path::Path, sync::Arc};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The application protocols served, best first.
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// The protocol of ACME's TLS-ALPN-01 challenge.
const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// Why TLS could not be set up: which file or step, and the cause.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} from {}", path.display())]
    Read {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no certificate", .0.display())]
    NoCertificate(std::path::PathBuf),
    #[error("cannot use the key in {}", path.display())]
    Key {
        path: std::path::PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("the key in {} does not belong to the certificate in {}", key.display(), cert.display())]
    Mismatch {
        cert: std::path::PathBuf,
        key: std::path::PathBuf,
    },
    #[error("RELAY_ACME_CA {} holds an unusable root", .path.display())]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot create the ACME cache {}", .path.display())]
    Cache {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One crypto provider for the whole process: ring.
pub fn install_crypto_provider() {
    // An error means one is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A server configuration from a PEM chain and key, checked to belong together.
pub fn from_files(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = read_certificates(cert, "a certificate chain")?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate(cert.to_owned()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Read {
        what: "a private key",
        path: key.to_owned(),
        source,
    })?;
    let unusable = |source| TlsError::Key {
        path: key.to_owned(),
        source,
    };
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(private.clone_key())
        .map_err(unusable)?;
    CertifiedKey::new(chain.clone(), signing)
        .keys_match()
        .map_err(|_| TlsError::Mismatch {
            cert: cert.to_owned(),
            key: key.to_owned(),
        })?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(unusable)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

fn read_certificates(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| TlsError::Read {
            what,
            path: path.to_owned(),
            source,
        })
}

/// ACME's account and certificates kept in the store that several relays
/// share, named as rustls-acme's directory cache names its files.
pub struct StoreCache(pub Arc<dyn Store>);

impl StoreCache {
    /// The name of what is kept for `parts` (contact addresses or domains)
    /// at `directory`.
    fn name(kind: &str, parts: &[String], directory: &str) -> String {
        use base64::prelude::*;
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in parts {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hash.update(directory.as_bytes());
        format!(
            "acme/cached_{kind}_{}",
            BASE64_URL_SAFE_NO_PAD.encode(hash.finalize())
        )
    }

    async fn load(&self, name: String) -> std::io::Result<Option<Vec<u8>>> {
        self.0.kept(&name).await.map_err(std::io::Error::other)
    }

    async fn store(&self, name: String, value: &[u8]) -> std::io::Result<()> {
        self.0
            .keep(&name, value.to_vec())
            .await
            .map_err(std::io::Error::other)
    }
}

#[async_trait::async_trait]
impl CertCache for StoreCache {
    type EC = std::io::Error;
    async fn load_cert(
        &self,
        domains: &[String],
        directory: &str,
    ) -> std::io::Result<Option<Vec<u8>>> {
        self.load(Self::name("cert", domains, directory)).await
    }
    async fn store_cert(
        &self,
        domains: &[String],
        directory: &str,
        cert: &[u8],
    ) -> std::io::Result<()> {
        self.store(Self::name("cert", domains, directory), cert)
            .await
    }
}

#[async_trait::async_trait]
impl AccountCache for StoreCache {
    type EA = std::io::Error;
    async fn load_account(
        &self,
        contact: &[String],
        directory: &str,
    ) -> std::io::Result<Option<Vec<u8>>> {
        self.load(Self::name("account", contact, directory)).await
    }
    async fn store_account(
        &self,
        contact: &[String],
        directory: &str,
        account: &[u8],
    ) -> std::io::Result<()> {
        self.store(Self::name("account", contact, directory), account)
            .await
    }
}

/// Starts ACME for `acme` and returns the server configuration that serves
/// its certificates, and a flag that turns true once one is deployed. With
/// `shared`, the account and certificates are kept in that store (several
/// relays on one PostgreSQL); else in the cache directory.
pub fn start_acme(
    acme: &Acme,
    shared: Option<Arc<dyn Store>>,
    shutdown: CancellationToken,
) -> Result<(Arc<ServerConfig>, watch::Receiver<bool>), TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(ca) = &acme.ca {
        for root in read_certificates(ca, "the RELAY_ACME_CA roots")? {
            roots.add(root).map_err(|source| TlsError::Root {
                path: ca.to_owned(),
                source,
            })?;
        }
    }
    let client = ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let config = AcmeConfig::new_with_client_config(&acme.domains, Arc::new(client))
        .contact(acme.email.iter().map(|email| format!("mailto:{email}")));
    let (config, kept_in) = match shared {
        Some(store) => (config.cache(StoreCache(store)), "the database".to_owned()),
        None => {
            create_private_dir(&acme.cache_dir)?;
            let dir = DirCache::new(acme.cache_dir.clone());
            (config.cache(dir), acme.cache_dir.display().to_string())
        }
    };
    let mut state = config.directory(&acme.directory).state();
    let resolver = state.resolver();
    let (deployed, ready) = watch::channel(false);
    tracing::info!(
        domains = ?acme.domains,
        directory = %acme.directory,
        cache = %kept_in,
        "ACME: using a cached certificate if there is one, else ordering one"
    );
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                event = state.next() => event,
                () = shutdown.cancelled() => return,
            };
            match event {
                Some(Ok(ok)) => {
                    tracing::info!(event = ?ok, "ACME");
                    if matches!(
                        ok,
                        rustls_acme::EventOk::DeployedCachedCert
                            | rustls_acme::EventOk::DeployedNewCert
                    ) {
                        deployed.send_replace(true);
                    }
                }
                Some(Err(error)) => {
                    tracing::error!(%error, "ACME failed; serving what it has and retrying with backoff");
                }
                None => return,
            }
        }
    });
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = ALPN
        .iter()
        .map(|p| p.to_vec())
        .chain([ACME_TLS_ALPN.to_vec()])
        .collect();
    Ok((Arc::new(config), ready))
}

/// Creates `dir` readable by its owner only (it holds private keys).
fn create_private_dir(dir: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|source| TlsError::Cache {
            path: dir.to_owned(),
            source,
        })
}

/// The plain listener's app: every request is sent, permanently, to the same
/// path and query over HTTPS on `port`. The host is the request's when it is one of
/// the relay's names (its domains), else the public URL's.
pub fn redirect_router(config: &Config, port: u16) -> Router {
    let public = host::url_host(&config.public_url).unwrap_or_else(|| "localhost".into());
    let mut names = match &config.tls {
        Tls::Acme(acme) => acme.domains.clone(),
        _ => Vec::new(),
    };
    names.push(public.clone());
    Router::new().fallback(move |headers: HeaderMap, uri: Uri| {
        let named = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(host::authority)
            .map(|a| a.host);
        let host = match named {
            Some(named) if names.contains(&named) => named,
            _ => public.clone(),
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let port = if port == 443 {
            String::new()
        } else {
            format!(":{port}")
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        async move { Redirect::permanent(&format!("https://{host}{port}{path}")) }
    })
}
