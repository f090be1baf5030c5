//! Requests the relay makes to addresses people chose (webhooks, push
//! services, OAuth clients' metadata documents): only to the public
//! internet (unless the operator allows private destinations), checked
//! by `host::check_url` before the request and at each redirect, and
//! again after each name is resolved, with short timeouts.

use crate::host::is_public;
// What refuses an address before any request: the host module's rule, the
// same one a person's settings are held to when they give one.
use crate::host::{Refused, check_url};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Client, redirect};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// How long one request may take, connecting included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The most redirects followed.
const MAX_REDIRECTS: usize = 3;

/// Resolves names to their public addresses only.
struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .into_iter()
                .filter(|addr| is_public(addr.ip()))
                .collect();
            if public.is_empty() {
                return Err(Box::new(Refused::ResolvesPrivate(host)) as _);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// The client every outbound request goes through.
pub fn client(allow_private: bool) -> reqwest::Result<Client> {
    let policy = redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else if let Err(refused) = check_url(attempt.url(), allow_private) {
            attempt.error(refused)
        } else {
            attempt.follow()
        }
    });
    let builder = Client::builder()
        .user_agent(concat!("crosstalk/", env!("CARGO_PKG_VERSION")))
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        // A proxy would resolve the name itself, past the check.
        .no_proxy()
        .redirect(policy)
        .tls_backend_preconfigured(tls_config(allow_private));
    match allow_private {
        true => builder.build(),
        false => builder.dns_resolver(Arc::new(PublicOnly)).build(),
    }
}

/// TLS to the public internet: the web's roots, compiled in, so the relay
/// trusts the same authorities wherever it runs. Where the operator allows
/// private destinations, one named by a private address is taken with
/// whatever certificate it shows: plain `http://` is allowed there too, and
/// a private network's own server (or a test's) rarely has a public one.
/// A name, or a public address, is always verified.
fn tls_config(allow_private: bool) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = Arc::new(rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    });
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    if !allow_private {
        return builder.with_root_certificates(roots).with_no_client_auth();
    }
    let verified = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .expect("the web's roots make a verifier");
    builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PrivateUnverified { verified }))
        .with_no_client_auth()
}

/// Verifies as the web does, except for a private address's certificate.
#[derive(Debug)]
struct PrivateUnverified {
    verified: Arc<rustls::client::WebPkiServerVerifier>,
}

impl rustls::client::danger::ServerCertVerifier for PrivateUnverified {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if let rustls::pki_types::ServerName::IpAddress(ip) = server_name
            && !is_public(IpAddr::from(*ip))
        {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        }
        self.verified
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verified.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.verified.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.verified.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused() {
        let name: Name = "localhost".parse().unwrap();
        let refused = match PublicOnly.resolve(name).await {
            Ok(_) => panic!("localhost resolved to a public address"),
            Err(error) => error.to_string(),
        };
        assert_eq!(
            refused,
            "localhost resolves only to private, loopback or link-local addresses"
        );
    }
}
