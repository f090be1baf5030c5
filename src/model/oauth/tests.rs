use super::*;

/// RFC 7636 appendix B's example.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

#[test]
fn pkce_takes_s256_and_the_right_verifier_only() {
    let challenge = CodeChallenge::parse(CHALLENGE, Some("S256")).unwrap();
    assert!(challenge.verifies(VERIFIER));
    assert!(!challenge.verifies(&VERIFIER.replace('d', "e")));
    assert!(
        !challenge.verifies(CHALLENGE),
        "the challenge is no verifier"
    );
    assert!(!challenge.verifies(""));
    assert!(!challenge.verifies(&format!("{VERIFIER} ")));
    for (method, says) in [
        (Some("plain"), "\"plain\" is not supported"),
        (None, "is required"),
    ] {
        let refused = CodeChallenge::parse(CHALLENGE, method).unwrap_err();
        assert!(refused.0.contains(says), "{refused}");
    }
    for bad in [
        "",
        "short",
        &format!("{CHALLENGE}A"),
        &CHALLENGE.replace('-', "+"),
    ] {
        assert!(CodeChallenge::parse(bad, Some("S256")).is_err(), "{bad}");
    }
}

#[test]
fn redirect_uris_are_https_or_loopback_and_matched_exactly() {
    for good in [
        "https://claude.ai/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "http://127.0.0.1:33418/callback",
        "http://localhost:5173/oauth/callback?x=1",
        "http://[::1]:8080/cb",
    ] {
        assert_eq!(RedirectUri::parse(good).unwrap().as_str(), good);
    }
    for (bad, says) in [
        (
            "http://example.com/cb",
            "must be https://, or http:// on a loopback",
        ),
        ("https://claude.ai/cb#frag", "must not have a fragment"),
        ("https://user:pw@claude.ai/cb", "user name or password"),
        ("https://claude.ai/a/../cb", "plain form"),
        ("https://Claude.AI/cb", "plain form"),
        ("https://claude.ai:443/cb", "plain form"),
        ("javascript:alert(1)", "no host"),
        ("cursor://anysphere/cb", "scheme is not accepted"),
        ("/cb", "not an absolute URL"),
    ] {
        let refused = RedirectUri::parse(bad).unwrap_err();
        assert!(refused.0.contains(says), "{bad}: {refused}");
    }
    // Shown whole on the consent page, the host set apart.
    for (uri, parts) in [
        (
            "https://claude.ai/api/mcp/auth_callback",
            ("https", "claude.ai", "/api/mcp/auth_callback"),
        ),
        (
            "http://[::1]:8080/cb?a=1&b=2",
            ("http", "[::1]", ":8080/cb?a=1&b=2"),
        ),
    ] {
        assert_eq!(RedirectUri::parse(uri).unwrap().parts(), parts, "{uri}");
    }
    let registered = RedirectUri::parse("https://claude.ai/api/mcp/auth_callback").unwrap();
    let asked = |uri: &str| registered.admits(&RedirectUri::parse(uri).unwrap());
    assert!(asked("https://claude.ai/api/mcp/auth_callback"));
    assert!(!asked("https://claude.ai/api/mcp/auth_callback/"));
    assert!(!asked("https://claude.ai/api/mcp/auth_callback?next=evil"));
    assert!(!asked("https://claude.ai:8443/api/mcp/auth_callback"));
    assert!(!asked("https://claude.ai.evil.com/api/mcp/auth_callback"));
    let loopback = RedirectUri::parse("http://127.0.0.1:33418/callback").unwrap();
    let asked = |uri: &str| loopback.admits(&RedirectUri::parse(uri).unwrap());
    assert!(
        asked("http://127.0.0.1:40001/callback"),
        "any port on loopback"
    );
    assert!(!asked("http://127.0.0.1:40001/other"));
    assert!(
        !asked("http://localhost:33418/callback"),
        "the host as registered"
    );
}

#[test]
fn a_registration_is_a_public_client_with_checked_redirects() {
    let taken = ClientMetadata::registration(
        br#"{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],
             "grant_types":["authorization_code","refresh_token"],"response_types":["code"],
             "token_endpoint_auth_method":"none","logo_uri":"https://claude.ai/logo.png"}"#,
    )
    .unwrap();
    assert_eq!(taken.name.as_deref(), Some("Claude"));
    assert!(taken.refreshes);
    assert_eq!(taken.redirect_uris[0].host(), "claude.ai");
    // Asking to be confidential, as claude.ai's connectors are reported to:
    // taken as a public client.
    for method in ["client_secret_post", "client_secret_basic"] {
        let body = format!(
            r#"{{"redirect_uris":["https://claude.ai/api/mcp/auth_callback"],
                 "token_endpoint_auth_method":"{method}"}}"#
        );
        assert!(
            ClientMetadata::registration(body.as_bytes()).is_ok(),
            "{method}"
        );
        let document = ClientIdUrl::parse("https://c.example/client.json").unwrap();
        let body = format!(
            r#"{{"client_id":"https://c.example/client.json",
                 "redirect_uris":["https://c.example/cb"],
                 "token_endpoint_auth_method":"{method}"}}"#
        );
        assert!(
            ClientMetadata::document(&document, body.as_bytes()).is_err(),
            "a metadata document has no secret to keep: {method}"
        );
    }
    for (body, code, says) in [
        (
            r#"{"redirect_uris":["http://evil.example/cb"]}"#,
            "invalid_redirect_uri",
            "loopback",
        ),
        (
            r#"{"redirect_uris":[]}"#,
            "invalid_redirect_uri",
            "at least one",
        ),
        (r#"{}"#, "invalid_redirect_uri", "at least one"),
        (
            r#"{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}"#,
            "invalid_client_metadata",
            "public clients",
        ),
        (
            r#"{"redirect_uris":["https://a.example/cb"],"grant_types":["client_credentials"]}"#,
            "invalid_client_metadata",
            "\"client_credentials\" is not supported",
        ),
        (
            r#"{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}"#,
            "invalid_client_metadata",
            "response_types",
        ),
        (
            r#"{"redirect_uris":["https://a.example/cb"],"client_id":"mine"}"#,
            "invalid_client_metadata",
            "assigned by the server",
        ),
        (
            r#"{"redirect_uris":["https://a.example/cb"],"client_name":"a\u0007b"}"#,
            "invalid_client_metadata",
            "control characters",
        ),
        (
            r#"["not", "an object"]"#,
            "invalid_client_metadata",
            "JSON object",
        ),
    ] {
        let refused = ClientMetadata::registration(body.as_bytes()).unwrap_err();
        assert_eq!(refused.code(), code, "{body}");
        assert!(refused.description().contains(says), "{body}: {refused:?}");
    }
}

#[test]
fn a_metadata_document_names_its_own_url() {
    let url = ClientIdUrl::parse("https://claude.ai/oauth/claude-code-client-metadata").unwrap();
    let document = |id: &str| {
        format!(
            r#"{{"client_id":"{id}","client_name":"Claude Code","redirect_uris":["http://localhost:5173/callback"]}}"#
        )
    };
    let taken = ClientMetadata::document(&url, document(url.as_str()).as_bytes()).unwrap();
    assert_eq!(taken.name.as_deref(), Some("Claude Code"));
    let refused = ClientMetadata::document(
        &url,
        document("https://evil.example/oauth/claude-code-client-metadata").as_bytes(),
    )
    .unwrap_err();
    assert!(
        refused.description().contains("is not its URL"),
        "{refused:?}"
    );
    for (bad, says) in [
        ("http://claude.ai/meta", "https://"),
        ("https://claude.ai/", "must have a path"),
        ("https://claude.ai", "plain form"),
        ("https://claude.ai/meta#x", "fragment"),
        ("https://claude.ai/a/./meta", "plain form"),
    ] {
        let refused = ClientIdUrl::parse(bad).unwrap_err();
        assert!(refused.0.contains(says), "{bad}: {refused}");
    }
}

#[test]
fn the_client_policy_admits_whom_it_lists_and_no_one_else() {
    let uris = |list: &[&str]| -> Vec<RedirectUri> {
        list.iter()
            .map(|u| RedirectUri::parse(u).unwrap())
            .collect()
    };
    let default = ClientPolicy::parse(ClientPolicy::DEFAULT).unwrap();
    for admitted in [
        "https://claude.ai/api/mcp/auth_callback",
        "https://claude.com/api/mcp/auth_callback",
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "https://chatgpt.com/connector/oauth/eaQ3VyiNzLuI",
        "http://127.0.0.1:33418/callback",
        "http://localhost:8080/cb",
    ] {
        assert!(default.admits(None, &uris(&[admitted])), "{admitted}");
    }
    for refused in [
        "https://evil.example/cb",
        "https://claude.ai.evil.example/cb",
        "https://evilclaude.ai/cb",
        // The default names callbacks, not hosts: another path, a port,
        // a query or a longer path on the same hosts is not one.
        "https://claude.ai/cb",
        "https://claude.ai/api/mcp/auth_callback/",
        "https://claude.ai/api/mcp/auth_callback?next=evil",
        "https://claude.ai/api/mcp/auth_callback2",
        "https://claude.ai:8443/api/mcp/auth_callback",
        "https://claude.com/oauth/callback",
        "https://chatgpt.com/",
        "https://chatgpt.com/connector/oauth/",
        "https://chatgpt.com/connector/oauth/a/b",
        "https://chatgpt.com/connector/oauth/a?b=c",
        "https://chatgpt.com/connector/oauth/a%20b",
        "https://chatgpt.com:8443/connector_platform_oauth_redirect",
        "https://chat.openai.com/aip/g-123/oauth/callback",
        "https://chatgpt.com/aip/g-123/oauth/callback",
    ] {
        assert!(!default.admits(None, &uris(&[refused])), "{refused}");
    }
    // Every redirect URI must be admitted, and a client with none is not.
    assert!(!default.admits(
        None,
        &uris(&[
            "https://claude.ai/api/mcp/auth_callback",
            "https://evil.example/cb"
        ])
    ));
    assert!(!default.admits(None, &[]));
    // A listed metadata document is admitted whatever its redirects.
    let claude_code = "https://claude.ai/oauth/claude-code-client-metadata";
    assert!(default.admits(Some(claude_code), &uris(&["https://evil.example/cb"])));
    assert!(!default.admits(
        Some("https://evil.example/client.json"),
        &uris(&["https://evil.example/cb"])
    ));

    // An operator's own list: only what it names. A host name still
    // means any path on it (at its default port, or the one named).
    let own = ClientPolicy::parse(
        " apps.example.org , https://tools.example/client.json, Cb.Example/oauth/done, \
         tools.example:8443, many.example/c/*",
    )
    .unwrap();
    for admitted in [
        "https://apps.example.org/cb",
        "https://apps.example.org/any/path?at=all",
        "https://cb.example/oauth/done",
        "https://tools.example:8443/cb",
        "https://many.example/c/one",
    ] {
        assert!(own.admits(None, &uris(&[admitted])), "{admitted}");
    }
    for refused in [
        "https://apps.example.org:8443/cb",
        "https://cb.example/oauth/done/",
        "https://cb.example/oauth",
        "https://tools.example/cb",
        "https://many.example/c/",
        "https://many.example/d/one",
        "https://claude.ai/api/mcp/auth_callback",
        "http://127.0.0.1:4567/callback",
    ] {
        assert!(!own.admits(None, &uris(&[refused])), "{refused}");
    }
    assert!(own.admits(
        Some("https://tools.example/client.json"),
        &uris(&["https://elsewhere.example/cb"])
    ));
    assert!(
        !ClientPolicy::parse("")
            .unwrap()
            .admits(None, &uris(&["http://127.0.0.1:1/cb"]))
    );
    assert!(
        ClientPolicy::parse("any")
            .unwrap()
            .admits(None, &uris(&["https://evil.example/cb"]))
    );

    for (junk, says) in [
        ("not a host!", "is neither"),
        ("*", "is neither"),
        ("*.example.org", "is neither"),
        ("apps.example/*/cb", "is neither"),
        ("/cb", "is neither"),
        ("apps.example:443/cb", "plain form"),
        ("apps.example/a/../cb", "plain form"),
        ("user@apps.example/cb", "plain form"),
        ("apps.example/cb#x", "plain form"),
        ("apps.example/c?x=1/*", "plain form"),
        ("http://tools.example/client.json", "https://"),
        ("https://tools.example", "plain form"),
    ] {
        let refused = ClientPolicy::parse(junk).unwrap_err();
        assert!(refused.contains(says), "{junk}: {refused}");
    }
}

#[test]
fn a_client_name_holds_nothing_invisible() {
    let named = |name: &str| {
        let body = serde_json::json!({
            "client_name": name,
            "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        });
        ClientMetadata::registration(body.to_string().as_bytes())
    };
    assert_eq!(named(" Claude ").unwrap().name.as_deref(), Some("Claude"));
    assert_eq!(
        named("Clau\u{301}de — 日本").unwrap().name.as_deref(),
        Some("Clau\u{301}de — 日本"),
        "combining marks and other scripts are letters, not hidden"
    );
    for (class, hidden) in [
        ("bidirectional embedding and override", '\u{202A}'),
        ("bidirectional override", '\u{202E}'),
        ("bidirectional isolate", '\u{2066}'),
        ("bidirectional isolate end", '\u{2069}'),
        ("left-to-right mark", '\u{200E}'),
        ("right-to-left mark", '\u{200F}'),
        ("Arabic letter mark", '\u{061C}'),
        ("zero-width space", '\u{200B}'),
        ("zero-width non-joiner", '\u{200C}'),
        ("zero-width joiner", '\u{200D}'),
        ("word joiner", '\u{2060}'),
        ("byte-order mark", '\u{FEFF}'),
        ("other format: soft hyphen", '\u{00AD}'),
        ("other format: tag character", '\u{E0041}'),
        ("other format: interlinear annotation", '\u{FFF9}'),
        ("control", '\u{0007}'),
        ("control: C1", '\u{0085}'),
        ("line separator", '\u{2028}'),
    ] {
        let refused = named(&format!("Claude{hidden}Desktop")).unwrap_err();
        assert_eq!(refused.code(), "invalid_client_metadata", "{class}");
        let code_point = format!("U+{:04X}", u32::from(hidden));
        assert!(
            refused.description().contains(&code_point)
                && refused
                    .description()
                    .contains("must not hold invisible or control characters"),
            "{class}: {refused:?}"
        );
        // A metadata document's name is held to the same rule.
        let url = ClientIdUrl::parse("https://c.example/client.json").unwrap();
        let document = serde_json::json!({
            "client_id": url.as_str(),
            "client_name": format!("Claude{hidden}"),
            "redirect_uris": ["https://c.example/cb"],
        });
        let refused = ClientMetadata::document(&url, document.to_string().as_bytes()).unwrap_err();
        assert!(refused.description().contains(&code_point), "{class}");
    }
}
