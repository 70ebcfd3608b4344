//! Writes the seed inputs of this package's fuzz targets (valid encodings
//! made with the codecs, `splitkv_host_fuzz::seed`) into
//! `corpus/<target>/seed-<name>` under the folder given (default: this
//! package's folder). Run from the repository root with
//! `cargo run --manifest-path host/fuzz/Cargo.toml --example seed_corpus`.

use splitkv_host_fuzz::seed;
use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let (robinhood, dlht) = seed::lookup_seeds();
    let sets = [
        ("nic_packet", seed::nic_packet_seeds()),
        ("host_worker", seed::host_worker_seeds()),
        ("robinhood_lookup", robinhood),
        ("dlht_lookup", dlht),
    ];
    for (target, seeds) in sets {
        let dir = root.join("corpus").join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
        println!("{target}: {} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}
