//! Host names, authorities and origins, parsed once with `http`'s own
//! parsers, the same way for configuration, the Host and Origin checks and
//! the HTTPS redirect.
//!
//! Hosts come out lowercase and without IPv6 brackets (`::1`), as the
//! configuration lists them.

use http::uri::{Authority, Uri};

/// A host, lowercase and without brackets, and the port if one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: Option<u16>,
}

/// Parses `host[:port]` (`[v6]:port` too), as a `Host` header or an HTTP/2
/// `:authority` carries it. `None` when it is not an authority.
pub fn authority(raw: &str) -> Option<HostPort> {
    let authority: Authority = raw.parse().ok()?;
    host_port(&authority)
}

fn host_port(authority: &Authority) -> Option<HostPort> {
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    (!host.is_empty()).then(|| HostPort {
        host: host.to_ascii_lowercase(),
        port: authority.port_u16(),
    })
}

/// The host of an `http://` or `https://` URL; `None` for anything else.
pub fn url_host(url: &str) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return None;
    }
    host_port(uri.authority()?).map(|h| h.host)
}

/// Whether `name` is a bare DNS name: a host with no port, scheme or path.
pub fn is_dns_name(name: &str) -> bool {
    authority(name).is_some_and(|h| h.port.is_none() && h.host == name && !name.contains('@'))
}

/// A browser origin, `scheme://host:port`, with the scheme's default port
/// made explicit so `https://a` and `https://a:443` compare equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: &'static str,
    host: String,
    port: u16,
}

impl Origin {
    /// Parses an `Origin` header or a configured origin; only `http` and
    /// `https` origins exist here (`null`, `file://` are none).
    pub fn parse(raw: &str) -> Option<Origin> {
        let uri: Uri = raw.trim_end_matches('/').parse().ok()?;
        let (scheme, default_port) = match uri.scheme_str()? {
            s if s.eq_ignore_ascii_case("http") => ("http", 80),
            s if s.eq_ignore_ascii_case("https") => ("https", 443),
            _ => return None,
        };
        let host = host_port(uri.authority()?)?;
        Some(Origin {
            scheme,
            port: host.port.unwrap_or(default_port),
            host: host.host,
        })
    }

    /// The origin of a page served by this relay under `authority`.
    pub fn served(tls: bool, authority: &str) -> Option<Origin> {
        let scheme = if tls { "https" } else { "http" };
        Origin::parse(&format!("{scheme}://{authority}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://Relay.Example.com/"),
            Some("relay.example.com".into())
        );
        assert_eq!(
            url_host("http://relay.example.com:8787"),
            Some("relay.example.com".into())
        );
        assert_eq!(url_host("http://[::1]:8787/x"), Some("::1".into()));
        assert_eq!(url_host("relay.example.com"), None);
        assert_eq!(url_host("https://"), None);
        assert_eq!(url_host("ftp://relay.example.com"), None);
    }

    #[test]
    fn authorities() {
        assert_eq!(
            authority("Relay.Example.com:8443"),
            Some(HostPort {
                host: "relay.example.com".into(),
                port: Some(8443)
            })
        );
        assert_eq!(authority("[::1]:80").unwrap().host, "::1");
        assert_eq!(authority("localhost").unwrap().port, None);
        assert_eq!(authority("bad host"), None);
        assert!(is_dns_name("relay.example.com"));
        assert!(!is_dns_name("relay.example.com:443"));
        assert!(!is_dns_name("https://relay.example.com"));
    }

    #[test]
    fn origins_compare_with_default_ports() {
        assert_eq!(
            Origin::parse("https://Relay.Example.com"),
            Origin::parse("https://relay.example.com:443")
        );
        assert_ne!(
            Origin::parse("http://relay.example.com"),
            Origin::parse("https://relay.example.com")
        );
        assert_eq!(
            Origin::parse("http://[::1]:8787"),
            Some(Origin {
                scheme: "http",
                host: "::1".into(),
                port: 8787
            })
        );
        assert_eq!(Origin::parse("null"), None);
        assert_eq!(Origin::parse("file://x"), None);
    }
}
