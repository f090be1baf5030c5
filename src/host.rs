//! Host names, authorities and origins, parsed once with `http`'s own
//! parsers, the same way for configuration, the Host and Origin checks and
//! the HTTPS redirect.
//!
//! Hosts come out lowercase and without IPv6 brackets (`::1`), as the
//! configuration lists them.
//!
//! Here too is the one rule for an address someone chose for the relay to
//! post to or fetch from ([`destination`], [`check_url`]): what can be
//! decided without resolving it, the same when a person gives it and
//! before every request and redirect (`outbound`, which checks names
//! again once resolved).

use http::uri::{Authority, Uri};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use url::Url;

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
    // What follows the host is nothing or `:digits` (`http` reads the host
    // of `127.0.0.1:80.evil.example` as `127.0.0.1`, with no port).
    // (No user info: then the authority starts with the host.)
    let rest = match authority.as_str().contains('@') {
        true => return None,
        false => authority.as_str().get(host.len()..).unwrap_or_default(),
    };
    let port_ok = match rest.strip_prefix(':') {
        None => rest.is_empty(),
        Some(port) => port.parse::<u16>().is_ok(),
    };
    if !port_ok {
        return None;
    }
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

/// Whether a host (as [`url_host`] gives it) is this machine: `localhost`
/// or a loopback address.
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The names of this machine's loopback interface, as a `Host` header
/// has them.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Whether `name` is a bare DNS name: a host with no port, scheme or path.
pub fn is_dns_name(name: &str) -> bool {
    authority(name).is_some_and(|h| h.port.is_none() && h.host == name && !name.contains('@'))
}

/// The header a trusted proxy appends the client's address to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For`.
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=`.
    Forwarded,
}

impl ForwardedHeader {
    pub fn parse(name: &str) -> Option<ForwardedHeader> {
        match name.trim().to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Some(ForwardedHeader::XForwardedFor),
            "forwarded" => Some(ForwardedHeader::Forwarded),
            _ => None,
        }
    }
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

    /// The origin as a browser writes it in `Origin`: the scheme's default
    /// port left out, IPv6 hosts in brackets.
    pub fn serialized(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match (self.scheme, self.port) {
            ("http", 80) | ("https", 443) => format!("{}://{host}", self.scheme),
            (scheme, port) => format!("{scheme}://{host}:{port}"),
        }
    }

    /// The origin of a page served by this relay under `authority`.
    pub fn served(tls: bool, authority: &str) -> Option<Origin> {
        let scheme = if tls { "https" } else { "http" };
        Origin::parse(&format!("{scheme}://{authority}"))
    }

    /// Whether this is the origin of the relay's own page: the one it
    /// serves the request under (`authority`, over TLS or not), or the one
    /// it is published at (`RELAY_PUBLIC_URL`'s), which behind a proxy that
    /// terminates TLS is `https://` while the relay itself speaks plain HTTP.
    pub fn is_own(&self, tls: bool, authority: Option<&str>, published: Option<&Origin>) -> bool {
        published == Some(self)
            || authority
                .and_then(|authority| Origin::served(tls, authority))
                .as_ref()
                == Some(self)
    }
}

/// A block of addresses, `10.0.0.0/8` or `2001:db8::/32`; a bare address
/// is a block of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub fn parse(raw: &str) -> Option<Cidr> {
        let (address, prefix) = match raw.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix.parse::<u8>().ok()?)),
            None => (raw, None),
        };
        let network: IpAddr = address.trim().parse().ok()?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(bits);
        (prefix <= bits).then_some(Cidr { network, prefix })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Whether `ip` is on the public internet: not loopback, private,
/// link-local, shared (CGNAT), multicast, reserved or for documentation.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let [first, second, ..] = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || first & 0xfe00 == 0xfc00 // unique local
                || first & 0xffc0 == 0xfe80 // link-local
                || first & 0xffc0 == 0xfec0 // site-local, deprecated
                || (first == 0x2001 && second == 0x0db8) // documentation
                || (first == 0x0064 && second == 0xff9b) // NAT64: an IPv4 address behind it
                || first == 0x2002) // 6to4: likewise
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && b & 0xc0 == 64) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && b & 0xfe == 18) // benchmarking
        || a >= 240) // reserved
}

/// Why the relay makes no request to an address someone chose. Each names
/// the address's host only: a path is often the destination's secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{0} is not https://")]
    NotHttps(String),
    #[error("{0} is a private, loopback or link-local address")]
    Private(String),
    #[error("{0} resolves only to private, loopback or link-local addresses")]
    ResolvesPrivate(String),
    #[error("{0} has no host")]
    NoHost(String),
    /// The WHATWG parser's words: what an HTTP client would make of it.
    #[error("is not a URL an HTTP client reads: {0}")]
    Malformed(String),
    #[error("{0} carries a user name or password")]
    Credentials(String),
    /// An address written in a form other than its plain one (a decimal,
    /// octal or hexadecimal IPv4 address, a trailing dot, an IPv4 address
    /// mapped into IPv6): what it means is not what it looks like.
    #[error("{given} is the address {plain} written another way: write {plain}")]
    OddAddress { given: String, plain: String },
}

/// Whether a request may go to `url`, by what can be known without
/// resolving it: the scheme (`https`; `http` too where private
/// destinations are allowed), no credentials, and a host that is a name or
/// a public address written plainly, not `localhost` (RFC 6761). A name
/// is checked again once it is resolved (`outbound`).
pub fn check_url(url: &Url, allow_private: bool) -> Result<(), Refused> {
    let shown = || unbracketed(url.host_str().unwrap_or_default()).to_owned();
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        _ => return Err(Refused::NotHttps(shown())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refused::Credentials(shown()));
    }
    let private = match url.host().ok_or_else(|| Refused::NoHost(shown()))? {
        url::Host::Ipv4(ip) => !is_public(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) if is_public(IpAddr::V4(v4)) => {
                return Err(Refused::OddAddress {
                    given: shown(),
                    plain: v4.to_string(),
                });
            }
            _ => !is_public(IpAddr::V6(ip)),
        },
        url::Host::Domain(name) => {
            let name = name.strip_suffix('.').unwrap_or(name);
            name == "localhost" || name.ends_with(".localhost")
        }
    };
    match private && !allow_private {
        true => Err(Refused::Private(shown())),
        false => Ok(()),
    }
}

/// An address someone gave, read as an HTTP client reads it (WHATWG) and
/// held to [`check_url`]; an IP address must be written as the client
/// would write it, so what is stored is what is reached.
pub fn destination(raw: &str, allow_private: bool) -> Result<Url, Refused> {
    let url = Url::parse(raw).map_err(|e| Refused::Malformed(e.to_string()))?;
    check_url(&url, allow_private)?;
    if let Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) = url.host() {
        let plain = unbracketed(url.host_str().unwrap_or_default());
        let given = unbracketed(written_host(raw));
        if !given.eq_ignore_ascii_case(plain) {
            return Err(Refused::OddAddress {
                given: given.to_owned(),
                plain: plain.to_owned(),
            });
        }
    }
    Ok(url)
}

/// An IPv6 host without its brackets, as this module gives hosts.
fn unbracketed(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// The host of `raw` as written: after the scheme and any credentials,
/// before the port and the path (`\` ends it too, as WHATWG reads it).
fn written_host(raw: &str) -> &str {
    let rest = raw.split_once("://").map_or(raw, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    match host.strip_prefix('[') {
        Some(v6) => v6
            .split_once(']')
            .map_or(host, |(inside, _)| &host[..inside.len() + 2]),
        None => host.split(':').next().unwrap_or_default(),
    }
}

/// The client a connection or request is counted as: an IPv4 address as
/// it is, an IPv6 one by its /64, which one client usually holds whole
/// (an IPv4-mapped IPv6 address is its IPv4 address).
pub fn client_group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

/// The network a registration is counted as: an IPv4 /24, an IPv6 /48
/// (an IPv4-mapped IPv6 address by its IPv4 /24). Wider than
/// [`client_group`], so a flood from neighbouring addresses shares one
/// budget, as a site or a small hosting block usually does.
pub fn network_group(ip: IpAddr) -> IpAddr {
    match client_group(ip) {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(v4.to_bits() & 0xffff_ff00)),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(v6.to_bits() & !(u128::MAX >> 48))),
    }
}

/// The client address a request counts against, as the layers found it
/// (through trusted proxies) and hand it to the edges beside the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

#[cfg(test)]
mod tests;
