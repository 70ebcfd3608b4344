//! End-to-end single-key `get`s per second through the client API (the
//! second half of the ring-API measurement): the same loop of gets over the
//! `KvClient` calls, run by an in-process `splitkv_host::Client` (a NIC
//! client port of node 0) and by a `splitkv_client::Client` in a child
//! process attached to node 0's application socket (shared-memory rings,
//! L5 §III; the gateway relays to a NIC client port of its own), side by
//! side and alternating, on one three-node in-process cluster (replication
//! 3). Each case runs synchronously (one get in flight) and pipelined
//! ([`DEPTH`] in flight), over [`KEYS`] loaded keys read in a random order.
//!
//! `cargo bench -p splitkv-bench --bench app_gets`; `SPLITKV_GETS_SECS`
//! (default 2) sets the seconds per case, `SPLITKV_GETS_ROUNDS` (default 2)
//! the alternating rounds. Prints gets/s, p50 and p99 latency (µs) per case
//! and the ratio out-of-process / in-process.

use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_client::{Call, CallError, ConnectOptions, KvClient};
use splitkv_host::cluster::Cluster;
use splitkv_host::deploy::config::ClientSettings;
use splitkv_layout::Key;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Keys loaded and read.
const KEYS: u64 = 10_000;
/// Value size, bytes.
const VALUE_BYTES: usize = 64;
/// Gets in flight in the pipelined cases.
const DEPTH: usize = 16;
/// The table of the keys.
const TABLE: u32 = 7;
const ENV_SOCKET: &str = "SPLITKV_GETS_SOCKET";
const ENV_DEPTH: &str = "SPLITKV_GETS_DEPTH";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one case measured.
struct Figures {
    gets: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.gets as f64 / self.secs
    }
}

/// Gets of random loaded keys for `secs`, `depth` in flight; every get must
/// find its key (a lock conflict is retried: nothing writes, so none comes).
fn pump<C: KvClient>(client: &mut C, depth: usize, secs: f64) -> Figures {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(depth as u64);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let mut started = std::collections::HashMap::new();
    let mut done = Vec::new();
    let begin = Instant::now();
    let end = begin + Duration::from_secs_f64(secs);
    let mut gets = 0;
    loop {
        let now = Instant::now();
        if now < end {
            while client.in_flight() < depth {
                let key = Key::new(TABLE, rng.gen_range(0..KEYS));
                match client.submit(Call::Get(key)) {
                    Ok(t) => {
                        started.insert(t, Instant::now());
                    }
                    Err(CallError::Busy | CallError::InFlightFull { .. }) => break,
                    Err(e) => panic!("get submission failed: {e}"),
                }
            }
        } else if client.in_flight() == 0 {
            break;
        }
        done.clear();
        client.poll_all(&mut done).expect("poll");
        for c in &done {
            let t0 = started.remove(&c.ticket).expect("a ticket of ours");
            if let Err(e) = &c.result {
                panic!("get failed: {e}");
            }
            latency.saturating_record(t0.elapsed().as_nanos() as u64);
            gets += 1;
        }
    }
    Figures {
        gets,
        secs: begin.elapsed().as_secs_f64(),
        p50_us: latency.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: latency.value_at_quantile(0.99) as f64 / 1e3,
    }
}

/// The child process: connects to the socket in [`ENV_SOCKET`], pumps, and
/// prints `gets secs p50_us p99_us`.
fn child(socket: &str) {
    let depth = env_or(ENV_DEPTH, 1) as usize;
    let secs = env_or("SPLITKV_GETS_SECS", 2) as f64;
    let options = ConnectOptions {
        in_flight_max: DEPTH as u32,
        ..ConnectOptions::default()
    };
    let mut client = splitkv_client::Client::connect(socket, &options).expect("connect");
    let f = pump(&mut client, depth, secs);
    println!("{} {} {} {}", f.gets, f.secs, f.p50_us, f.p99_us);
}

fn out_of_process(socket: &std::path::Path, depth: usize) -> Figures {
    let out = Command::new(std::env::current_exe().unwrap())
        .env(ENV_SOCKET, socket)
        .env(ENV_DEPTH, depth.to_string())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the child");
    assert!(out.status.success(), "the child failed");
    let line = String::from_utf8(out.stdout).unwrap();
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    Figures {
        gets: v[0] as u64,
        secs: v[1],
        p50_us: v[2],
        p99_us: v[3],
    }
}

fn main() {
    if let Ok(socket) = std::env::var(ENV_SOCKET) {
        return child(&socket);
    }
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for the list of benchmarks
    }
    let secs = env_or("SPLITKV_GETS_SECS", 2) as f64;
    let rounds = env_or("SPLITKV_GETS_ROUNDS", 2);
    let dir = tempfile::Builder::new()
        .prefix("splitkv-gets-")
        .tempdir_in("/tmp")
        .unwrap();
    let settings = ClientSettings {
        in_flight_max: DEPTH,
        ..ClientSettings::new(dir.path().join("s"))
    };
    let cluster = Cluster::builder()
        .capacity_keys(4 * KEYS as usize)
        .value_bytes_max(VALUE_BYTES)
        .clients_per_node(2)
        .serve_applications(settings.clone())
        .build()
        .expect("cluster");
    let mut local = cluster.client(0).expect("a client port of node 0");
    let value = vec![0xab; VALUE_BYTES];
    for k in 0..KEYS {
        local.put(Key::new(TABLE, k), &value).expect("load");
    }
    let socket = settings.socket_path(0);
    println!("end-to-end gets, 3 nodes, replication 3, {KEYS} keys of {VALUE_BYTES} B, {secs} s per case, {rounds} rounds");
    println!("| round | in flight | in-process gets/s | p50/p99 µs | client process gets/s | p50/p99 µs | process / in-process |");
    println!("|---|---|---|---|---|---|---|");
    for round in 1..=rounds {
        for depth in [1, DEPTH] {
            let a = pump(&mut local, depth, secs);
            let b = out_of_process(&socket, depth);
            println!(
                "| {round} | {depth} | {:.0} | {:.1}/{:.1} | {:.0} | {:.1}/{:.1} | {:.2}× |",
                a.rate(),
                a.p50_us,
                a.p99_us,
                b.rate(),
                b.p50_us,
                b.p99_us,
                b.rate() / a.rate()
            );
        }
    }
    drop(local);
    cluster.shutdown().expect("clean shutdown");
}
