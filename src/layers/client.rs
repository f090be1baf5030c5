//! The client's address: the TCP peer's, or, when the peer is a trusted
//! proxy (`RELAY_TRUSTED_PROXIES`), the one its forwarding header names.
//!
//! Forwarding headers are believed only from trusted proxies: anyone else
//! could write any address into them. Only the header the proxies append
//! to is read (`RELAY_FORWARDED_HEADER`: `X-Forwarded-For` by default, or
//! RFC 7239 `Forwarded`): the other one a client can send through the
//! proxy untouched, and so could choose its own address. Walking the
//! header from the right, each trusted proxy's entry is skipped; the first
//! address that is not a trusted proxy is the client.

use crate::host::{Cidr, ForwardedHeader};
use axum::{
    extract::{ConnectInfo, Request},
    http::HeaderMap,
};
use std::net::{IpAddr, SocketAddr};

/// The address a request counts against.
pub fn address(request: &Request, trusted: &[Cidr], header: ForwardedHeader) -> IpAddr {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |info| info.0.ip());
    resolve(peer, request.headers(), trusted, header)
}

fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &[Cidr], header: ForwardedHeader) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|cidr| cidr.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::to_owned)
            .collect()
    };
    let hops: Vec<IpAddr> = match header {
        ForwardedHeader::XForwardedFor => values("x-forwarded-for")
            .iter()
            .filter_map(|hop| parse_hop(hop))
            .collect(),
        ForwardedHeader::Forwarded => values("forwarded")
            .iter()
            .filter_map(|element| {
                element.split(';').find_map(|pair| {
                    let (name, value) = pair.trim().split_once('=')?;
                    name.eq_ignore_ascii_case("for").then(|| parse_hop(value))?
                })
            })
            .collect(),
    };
    hops.into_iter()
        .rev()
        .find(|hop| !is_trusted(*hop))
        .unwrap_or(peer)
}

/// One hop of a forwarding header: `192.0.2.1`, `"[2001:db8::1]:4711"`,
/// `192.0.2.1:4711`; `unknown` and obfuscated names are no address.
fn parse_hop(raw: &str) -> Option<IpAddr> {
    let hop = raw.trim().trim_matches('"');
    if let Ok(ip) = hop.parse() {
        return Some(ip);
    }
    if let Some(bracketed) = hop.strip_prefix('[') {
        return bracketed.split(']').next()?.parse().ok();
    }
    hop.parse::<SocketAddr>().ok().map(|s| s.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_proxies() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let stranger: IpAddr = "198.51.100.9".parse().unwrap();
        let trusted = [Cidr::parse("10.0.0.0/8").unwrap()];
        let forwarded = headers(&[("x-forwarded-for", "203.0.113.7, 10.0.0.4")]);
        assert_eq!(
            resolve(proxy, &forwarded, &trusted, XFF),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        // Anyone else's header is ignored.
        assert_eq!(resolve(stranger, &forwarded, &trusted, XFF), stranger);
        // A client cannot hide behind a forged leftmost entry.
        let forged = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.7")]);
        assert_eq!(
            resolve(proxy, &forged, &trusted, XFF),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        let rfc = headers(&[("forwarded", "for=\"[2001:db8::1]:4711\";proto=https")]);
        assert_eq!(
            resolve(proxy, &rfc, &trusted, ForwardedHeader::Forwarded),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
        // No header: the proxy itself.
        assert_eq!(resolve(proxy, &HeaderMap::new(), &trusted, XFF), proxy);
    }

    #[test]
    fn only_the_header_the_proxy_appends_is_read() {
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let trusted = [Cidr::parse("10.0.0.0/8").unwrap()];
        // A proxy that appends Forwarded passes the client's own XFF on.
        let through = headers(&[
            ("x-forwarded-for", "192.0.2.99"),
            ("forwarded", "for=203.0.113.7"),
        ]);
        assert_eq!(
            resolve(proxy, &through, &trusted, ForwardedHeader::Forwarded),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        // And the other way round.
        let through = headers(&[
            ("forwarded", "for=192.0.2.99"),
            ("x-forwarded-for", "203.0.113.7"),
        ]);
        assert_eq!(
            resolve(proxy, &through, &trusted, XFF),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
    }
}
