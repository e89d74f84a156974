//! Link settings for the `parley` binary that keep a fresh server small in
//! memory (docs/research/idle-memory.md has the measurements):
//!
//! - **Start-up code laid out together** (`startup.order`, an lld symbol
//!   ordering file written by `scripts/order-file`): the functions a start
//!   and its first requests run are otherwise spread over most of the 55 MB
//!   of code, and the kernel maps 64 KiB around every page touched. A name
//!   the build no longer has is skipped, so a stale file costs memory,
//!   never correctness.
//! - **Packed relative relocations** (`-z pack-relative-relocs`, DT_RELR):
//!   the loader reads ~40 KB instead of 3 MB of relocations at each start.
//!   Only where the C library building it is glibc 2.36 or newer, the first
//!   with a loader that applies them (a binary built so needs one too).
//!
//! Both are for x86_64 Linux with the linker rustup's Rust uses there by
//! default since 1.90 (this workspace's `rust-version`): its own lld, found
//! in the toolchain. A toolchain without it (some distributions' packages),
//! a build that chose another linker (`linker` in .cargo/config, `-fuse-ld`,
//! `-Zlinker-features` or `-Clink-self-contained` in its RUSTFLAGS) or
//! `PARLEY_PLAIN_LINK=1` links as Rust would by default.

use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-env-changed=PARLEY_PLAIN_LINK");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let target = env::var("TARGET").unwrap_or_default();
    let rustflags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    // A linker set in .cargo/config reaches build scripts as RUSTC_LINKER.
    let other_linker = env::var_os("RUSTC_LINKER").is_some()
        || ["fuse-ld", "linker-features", "link-self-contained", "linker="].iter().any(|flag| rustflags.contains(flag));
    if target != "x86_64-unknown-linux-gnu"
        || other_linker
        || env::var_os("PARLEY_PLAIN_LINK").is_some()
        || !toolchain_has_lld(&target)
    {
        return;
    }
    let order = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("startup.order");
    if order.exists() {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
    if glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the compiling toolchain ships the lld it links with by default
/// (`<sysroot>/lib/rustlib/<target>/bin/gcc-ld/ld.lld`, as rustup's do).
fn toolchain_has_lld(target: &str) -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Path::new(&sysroot).join("lib/rustlib").join(target).join("bin/gcc-ld/ld.lld").exists()
}

/// The building machine's glibc version (`getconf GNU_LIBC_VERSION` prints
/// "glibc 2.36"), compared with `major.minor`; false when it cannot tell.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}
