//! The order a release build links its functions in
//! (`link/symbol-order.txt`, build.rs) names them as this Cargo.lock's
//! build does: their mangled names carry hashes of every crate's version,
//! so a file made for another Cargo.lock matches few of them, and the
//! relay starts with its code spread over twice the memory.

use sha2::Digest;

#[test]
fn the_symbol_order_was_made_for_this_cargo_lock() {
    let root = env!("CARGO_MANIFEST_DIR");
    let order = std::fs::read_to_string(format!("{root}/link/symbol-order.txt")).unwrap();
    let lock = std::fs::read(format!("{root}/Cargo.lock")).unwrap();
    let digest: String = sha2::Sha256::digest(&lock)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let made_for = order
        .lines()
        .find_map(|line| line.strip_prefix("# for Cargo.lock sha256 "))
        .expect("the file says which Cargo.lock it was made for");
    assert_eq!(
        made_for, digest,
        "link/symbol-order.txt was made for another Cargo.lock: write it again with \
         `python3 bench/symbol_order.py` (it needs valgrind)"
    );
    let functions = order.lines().filter(|line| !line.starts_with('#')).count();
    assert!(functions > 1_000, "{functions} functions");
}
