//! Names the commit and the date of the build, for `crosstalk --version`,
//! packs the binary's relocations where the C library reads them packed,
//! and has the linker put first the functions a relay runs first.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    // SOURCE_DATE_EPOCH, when set, makes the build reproducible.
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64)
        });
    println!("cargo:rustc-env=CROSSTALK_COMMIT={commit}");
    println!(
        "cargo:rustc-env=CROSSTALK_BUILD_DATE={}",
        civil_date(seconds.div_euclid(86_400))
    );
    pack_relative_relocations();
    order_symbols();
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}

/// Links the binary with its relative relocations packed (`DT_RELR`):
/// the usual table is about 1 MB here, which the loader reads whole at
/// every start and which then stays resident (bench/README.md). Only where
/// the binary is built for the machine it is built on, and that machine's
/// glibc reads packed relocations (2.36 and later). Such a binary needs
/// glibc 2.36 wherever it runs (the linker records it); one meant for an
/// older machine is built with `CROSSTALK_PACK_RELOCATIONS=0`
/// (docs/deploy.md).
fn pack_relative_relocations() {
    println!("cargo:rerun-if-env-changed=CROSSTALK_PACK_RELOCATIONS");
    let native_gnu = var("TARGET") == var("HOST")
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let wanted = var("CROSSTALK_PACK_RELOCATIONS") != "0";
    if wanted && native_gnu && glibc_version().is_some_and(|version| version >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Links a release build with the functions a relay runs as it starts
/// and serves (`link/symbol-order.txt`, made by `bench/symbol_order.py`)
/// first and together: starting then touches them where they lie side by
/// side instead of in pages spread over all of the code, each of which
/// maps its neighbours as well (of 18.9 MB of code, 11.9 MB were resident
/// at idle, and 3.5 MB in this order: bench/README.md). Only with lld,
/// which Rust links x86-64 Linux with from 1.90 on (other linkers know no
/// such file); a build set to link otherwise turns it off with
/// `CROSSTALK_SYMBOL_ORDER=0`. A name the file lists that the build does
/// not have is skipped.
fn order_symbols() {
    const ORDER: &str = "link/symbol-order.txt";
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=CROSSTALK_SYMBOL_ORDER");
    let lld = var("TARGET") == "x86_64-unknown-linux-gnu"
        && rustc_version().is_some_and(|version| version >= (1, 90));
    let wanted = var("CROSSTALK_SYMBOL_ORDER") != "0" && var("PROFILE") == "release";
    let path = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join(ORDER);
    if lld && wanted && path.exists() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// A variable cargo gives the build script; empty when unset.
fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// The compiler's version, as `rustc -V` says it ("rustc 1.95.0 (…)";
/// a nightly's "1.96.0-nightly" reads as 1.96).
fn rustc_version() -> Option<(u32, u32)> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    version_printed(&rustc, "-V", |text| text.split(' ').nth(1))
}

/// This machine's glibc version, as `ldd --version` says it at the end of
/// its first line ("ldd (Debian GLIBC 2.36-9+deb12u14) 2.36"; a
/// development version's "2.40.9000" reads as 2.40).
fn glibc_version() -> Option<(u32, u32)> {
    version_printed("ldd", "--version", |text| {
        text.lines().next()?.rsplit(' ').next()
    })
}

/// The major and minor number of the version `program arg` prints, which
/// `version` finds in what it printed.
fn version_printed(
    program: &str,
    arg: &str,
    version: impl Fn(&str) -> Option<&str>,
) -> Option<(u32, u32)> {
    let out = Command::new(program).arg(arg).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut numbers = version(&text)?.split(['.', '-']);
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next()?.parse().ok()?;
    Some((major, minor))
}

/// `YYYY-MM-DD` of a count of days since 1970-01-01 (Howard Hinnant's
/// civil_from_days).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
