#[test]
fn only_public_addresses_are_public() {
    for private in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "::1",
        "::",
        "fd00::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
    ] {
        assert!(!is_public(private.parse().unwrap()), "{private}");
    }
    for public in ["1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"] {
        assert!(is_public(public.parse().unwrap()), "{public}");
    }
}

use super::*;

#[test]
fn ipv6_addresses_count_by_their_64() {
    let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
    let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
    let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
    assert_eq!(client_group(a), client_group(b));
    assert_ne!(client_group(a), client_group(c));
    let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
    assert_eq!(client_group(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
}

#[test]
fn registrations_count_by_a_v4_24_and_a_v6_48() {
    let group = |ip: &str| network_group(ip.parse().unwrap());
    assert_eq!(group("203.0.113.7"), group("203.0.113.250"));
    assert_ne!(group("203.0.113.7"), group("203.0.114.7"));
    assert_eq!(
        group("203.0.113.7"),
        "203.0.113.0".parse::<IpAddr>().unwrap()
    );
    assert_eq!(group("::ffff:203.0.113.7"), group("203.0.113.9"));
    assert_eq!(group("2001:db8:1:2::1"), group("2001:db8:1:ffff::1"));
    assert_ne!(group("2001:db8:1::1"), group("2001:db8:2::1"));
    assert_eq!(
        group("2001:db8:1:2::1"),
        "2001:db8:1::".parse::<IpAddr>().unwrap()
    );
}

#[test]
fn a_redirect_or_a_first_request_to_a_private_address_is_refused() {
    let checked =
        |url: &str, allow_private| match check_url(&Url::parse(url).unwrap(), allow_private) {
            Ok(_) => "taken",
            Err(Refused::NotHttps(_)) => "not https",
            Err(Refused::Private(_)) => "private",
            Err(_) => "refused otherwise",
        };
    for (url, allow_private, outcome) in [
        ("http://ntfy.sh/x", false, "not https"),
        ("https://127.0.0.1/x", false, "private"),
        ("https://[::1]:8443/", false, "private"),
        ("https://169.254.169.254/", false, "private"),
        ("https://ntfy.sh/x", false, "taken"),
        ("https://1.1.1.1/", false, "taken"),
        ("http://127.0.0.1:8080/x", true, "taken"),
        ("ftp://127.0.0.1/", true, "not https"),
    ] {
        assert_eq!(checked(url, allow_private), outcome, "{url}");
    }
}

#[test]
fn an_address_is_read_as_an_http_client_reads_it_and_written_plainly() {
    let refused = |raw: &str| destination(raw, false).unwrap_err();
    let private = |host: &str| Refused::Private(host.into());
    for (raw, host) in [
        ("https://2130706433/", "127.0.0.1"),
        ("https://0x7f.1/", "127.0.0.1"),
        ("https://0177.0.0.1/", "127.0.0.1"),
        ("https://127.1/", "127.0.0.1"),
        ("https://127.0.0.1./", "127.0.0.1"),
        ("https://%31%32%37.0.0.1/", "127.0.0.1"),
        ("https://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
        ("https://[0:0:0:0:0:0:0:1]/", "::1"),
        ("https://localhost./", "localhost."),
        ("https://api.localhost/", "api.localhost"),
        ("https://127.0.0.1\\.ntfy.sh/", "127.0.0.1"),
    ] {
        assert_eq!(refused(raw), private(host), "{raw}");
    }
    let odd = |given: &str, plain: &str| Refused::OddAddress {
        given: given.into(),
        plain: plain.into(),
    };
    assert_eq!(refused("https://16843009/"), odd("16843009", "1.1.1.1"));
    assert_eq!(refused("https://1.1.1.1./"), odd("1.1.1.1.", "1.1.1.1"));
    assert_eq!(
        refused("https://[::ffff:1.1.1.1]/"),
        odd("::ffff:101:101", "1.1.1.1")
    );
    assert!(matches!(
        refused("https://[fe80::1%25eth0]/"),
        Refused::Malformed(_)
    ));
    assert_eq!(
        refused("https://user:pw@ntfy.sh/"),
        Refused::Credentials("ntfy.sh".into())
    );
    for fine in [
        "https://ntfy.sh/team-bob",
        "https://ntfy.sh./team-bob",
        "https://1.1.1.1:8443/hook",
        "https://[2606:4700:4700::1111]/hook",
        "https://[2606:4700:4700::ABCD]/hook",
    ] {
        assert!(destination(fine, false).is_ok(), "{fine}");
    }
    assert!(destination("http://127.0.0.1:8080/hook", true).is_ok());
    assert!(destination("http://localhost:8080/hook", true).is_ok());
    assert_eq!(
        refused("https://[2606:4700:4700:0:0:0:0:1111]/"),
        odd("2606:4700:4700:0:0:0:0:1111", "2606:4700:4700::1111")
    );
}

#[test]
fn url_hosts() {
    for (url, host) in [
        ("https://Relay.Example.com/", Some("relay.example.com")),
        ("http://relay.example.com:8787", Some("relay.example.com")),
        ("http://[::1]:8787/x", Some("::1")),
        ("relay.example.com", None),
        ("https://", None),
        ("ftp://relay.example.com", None),
    ] {
        assert_eq!(url_host(url).as_deref(), host, "{url}");
    }
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
    // What follows the host is a port or nothing.
    assert_eq!(authority("127.0.0.1:18787.evil.example"), None);
    assert_eq!(authority("127.0.0.1:"), None);
    assert_eq!(authority("127.0.0.1:99999"), None);
    assert_eq!(authority("user@127.0.0.1:80"), None);
    assert_eq!(authority("[::1]:8787").unwrap().port, Some(8787));
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
    assert_eq!(
        Origin::parse("https://App.Example.com:443/")
            .unwrap()
            .serialized(),
        "https://app.example.com"
    );
    assert_eq!(
        Origin::parse("http://[::1]:8787").unwrap().serialized(),
        "http://[::1]:8787"
    );
    assert_eq!(Origin::parse("null"), None);
    assert_eq!(Origin::parse("file://x"), None);
}

#[test]
fn cidrs() {
    let private = Cidr::parse("10.0.0.0/8").unwrap();
    assert!(private.contains("10.1.2.3".parse().unwrap()));
    assert!(private.contains("::ffff:10.1.2.3".parse().unwrap()));
    assert!(!private.contains("11.0.0.1".parse().unwrap()));
    let one = Cidr::parse("192.0.2.7").unwrap();
    assert!(one.contains("192.0.2.7".parse().unwrap()));
    assert!(!one.contains("192.0.2.8".parse().unwrap()));
    let v6 = Cidr::parse("2001:db8::/32").unwrap();
    assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
    assert!(!v6.contains("2001:db9::1".parse().unwrap()));
    assert!(
        Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap())
    );
    for bad in ["10.0.0.0/33", "not an address", "10.0.0.0/x", ""] {
        assert_eq!(Cidr::parse(bad), None, "{bad:?}");
    }
}

mod properties {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        /// Hosts, origins and address blocks from anyone: parsed or
        /// refused, never a panic.
        #[test]
        fn parsers_never_panic(raw in "\\PC{0,200}") {
            let _ = authority(&raw);
            let _ = url_host(&raw);
            let _ = is_dns_name(&raw);
            let _ = Origin::parse(&raw).map(|o| o.serialized());
            let _ = Cidr::parse(&raw);
        }

        /// An origin that parses serializes to one that parses the same.
        #[test]
        fn origins_round_trip(host in "[a-z][a-z0-9-]{0,20}(\\.[a-z]{2,5}){0,2}", port in 1u16..) {
            let origin = Origin::parse(&format!("https://{host}:{port}")).unwrap();
            prop_assert_eq!(Origin::parse(&origin.serialized()), Some(origin));
        }
    }
}
