//! Finds the system DPDK with `pkg-config libdpdk`, refuses any release but
//! the pinned one, generates allowlisted bindings with bindgen and compiles
//! the C shim with DPDK's own cflags (never `-march=native`: the flags are
//! exactly what DPDK's package says).

#![cfg_attr(not(feature = "system"), allow(dead_code, unused_imports))]

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// The DPDK release this crate accepts: 22.11 LTS (Debian 12's), any
/// patch level. Its ABI (23) and headers are what the shim and bindings
/// are written against; another release needs them reviewed first.
const DPDK_VERSION_MIN: &str = "22.11";
/// The first release not accepted.
const DPDK_VERSION_END: &str = "22.12";

/// Without the feature `system` the crate is empty: nothing to find or build.
#[cfg(not(feature = "system"))]
fn main() {}

#[cfg(feature = "system")]
fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/shim.h");
    println!("cargo:rerun-if-changed=src/wrapper.h");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    let lib = match pkg_config::Config::new()
        .range_version(DPDK_VERSION_MIN..DPDK_VERSION_END)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => {
            let found = Command::new("pkg-config")
                .args(["--modversion", "libdpdk"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
            match found {
                Some(v) => panic!(
                    "dpdk-sys: found DPDK {v}, but this crate is pinned to DPDK \
                     {DPDK_VERSION_MIN}.x (>= {DPDK_VERSION_MIN}, < {DPDK_VERSION_END}); \
                     install Debian 12's libdpdk-dev or point PKG_CONFIG_PATH at a 22.11 build"
                ),
                None => panic!(
                    "dpdk-sys: DPDK not found by `pkg-config libdpdk` ({e}); install it \
                     (Debian: apt-get install libdpdk-dev dpdk-dev librte-net-ring23 \
                     librte-net-memif23 librte-net-af-packet23) or build without the `dpdk` feature"
                ),
            }
        }
    };
    // `rte_eth_from_rings` (two net_ring ports joined by rings, for tests and
    // benchmarks) lives in the net_ring driver, which libdpdk.pc leaves to
    // the plugin loader; link it by name (the same file the loader opens).
    println!("cargo:rustc-link-lib=rte_net_ring");
    println!("cargo:version={}", lib.version);

    let cflags = dpdk_cflags();
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    let mut shim = cc::Build::new();
    shim.file("src/shim.c").include("src").warnings(false);
    for f in &cflags {
        shim.flag(f);
    }
    shim.compile("splitkv_dpdk_shim");

    let bindings = bindgen::Builder::default()
        .header("src/wrapper.h")
        .clang_args(&cflags)
        .clang_arg("-Isrc")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .use_core()
        .layout_tests(false)
        .derive_default(true)
        .prepend_enum_name(false)
        // EAL
        .allowlist_function("rte_eal_init")
        .allowlist_function("rte_eal_cleanup")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_socket_id")
        .allowlist_function("rte_version")
        // ethdev
        .allowlist_function("rte_eth_dev_count_avail")
        .allowlist_function("rte_eth_dev_get_port_by_name")
        .allowlist_function("rte_eth_dev_get_name_by_port")
        .allowlist_function("rte_eth_dev_info_get")
        .allowlist_function("rte_eth_dev_socket_id")
        .allowlist_function("rte_eth_dev_adjust_nb_rx_tx_desc")
        .allowlist_function("rte_eth_dev_configure")
        .allowlist_function("rte_eth_rx_queue_setup")
        .allowlist_function("rte_eth_tx_queue_setup")
        .allowlist_function("rte_eth_dev_start")
        .allowlist_function("rte_eth_dev_stop")
        .allowlist_function("rte_eth_dev_close")
        .allowlist_function("rte_eth_macaddr_get")
        .allowlist_function("rte_eth_stats_get")
        .allowlist_function("rte_eth_from_rings")
        // mbufs, mempools, rings
        .allowlist_function("rte_pktmbuf_pool_create")
        .allowlist_function("rte_pktmbuf_free_bulk")
        .allowlist_function("rte_mempool_avail_count")
        .allowlist_function("rte_mempool_in_use_count")
        .allowlist_function("rte_ring_create")
        .allowlist_function("rte_ring_free")
        // the shim
        .allowlist_function("splitkv_dpdk_.*")
        .allowlist_type("rte_eth_conf")
        .allowlist_type("rte_eth_dev_info")
        .allowlist_type("rte_ether_addr")
        .allowlist_type("rte_eth_stats")
        .allowlist_var("RTE_PKTMBUF_HEADROOM")
        .allowlist_var("RTE_MBUF_DEFAULT_BUF_SIZE")
        .allowlist_var("RTE_MAX_ETHPORTS")
        .allowlist_var("RING_F_SP_ENQ")
        .allowlist_var("RING_F_SC_DEQ")
        .allowlist_var("SOCKET_ID_ANY")
        .allowlist_var("RTE_ETH_NAME_MAX_LEN")
        // Fields of these are never read from Rust: opaque blobs of the
        // right size keep bindgen away from their packed unions.
        .opaque_type("rte_mbuf")
        .opaque_type("rte_mempool")
        .opaque_type("rte_ring")
        .generate()
        .expect("dpdk-sys: bindgen could not read DPDK's headers");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("dpdk-sys: cannot write bindings.rs");
}

/// `pkg-config --cflags libdpdk`, one flag per element: include paths,
/// `-include rte_config.h` and DPDK's own `-march` (its package's choice).
#[cfg(feature = "system")]
fn dpdk_cflags() -> Vec<String> {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(pkg_config)
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("dpdk-sys: cannot run pkg-config");
    assert!(
        out.status.success(),
        "dpdk-sys: `pkg-config --cflags libdpdk` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flags: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(
        !flags.iter().any(|f| f == "-march=native"),
        "dpdk-sys: libdpdk.pc asks for -march=native; refusing (the binary would not run on other CPUs)"
    );
    flags
}
