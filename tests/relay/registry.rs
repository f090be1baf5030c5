//! `server.json`, the MCP Registry's entry for a team's relay, held to the
//! registry's schema (2025-12-11) by `tests/clients/server_json.py` and to
//! what this build is.

use serde_json::Value;
use std::path::PathBuf;

#[test]
#[ignore = "needs the registry's schema from PyPI in tests/clients/.venv (.ci/run installs it)"]
fn the_registry_entry_fits_the_schema_and_this_build() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("tests/clients/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing (.ci/run makes it)",
        python.display()
    );
    let output = std::process::Command::new(python)
        .arg(root.join("tests/clients/server_json.py"))
        .arg(root.join("server.json"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let checked: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(checked["problems"], serde_json::json!([]), "{checked}");
    // The check can fail: a misspelt key and a missing field are caught.
    assert_ne!(checked["misspelt"], serde_json::json!([]), "{checked}");
    assert_ne!(checked["undescribed"], serde_json::json!([]), "{checked}");

    let entry: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("server.json")).unwrap()).unwrap();
    assert_eq!(entry["version"], env!("CARGO_PKG_VERSION"));
    let remote = &entry["remotes"][0];
    assert_eq!(remote["type"], "streamable-http");
    assert_eq!(remote["url"], "https://{relay_host}/mcp");
    assert_eq!(remote["variables"]["relay_host"]["isRequired"], true);
    let authorization = &remote["headers"][0];
    assert_eq!(authorization["name"], "Authorization");
    assert_eq!(authorization["isSecret"], true);
    assert_eq!(authorization["variables"]["token"]["isSecret"], true);
}
