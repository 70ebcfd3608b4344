// An application in its own process: connect to a running `splitkv node`
// through splitkv-client (shared-memory rings, L5 §III), load a few counters
// with puts, then increment them from two threads — each with its own
// connection — by compare-and-swap transactions on their versions, retrying
// a failed compare or a conflict, and print the final values and the counts.
//
//   cargo run --release -p splitkv-client --example cas -- /tmp/splitkv-1/node-0.sock
//   cargo run --release -p splitkv-client --example cas -- --cluster examples/cluster-3-udp.toml --node 0
//
// With --cluster the socket is `<socket_dir>/node-<N>.sock` of the file's
// `[clients]` section (socket_dir defaults to /tmp/splitkv-<cluster_id>).
use splitkv_client::{Client, Cmp, ConnectError, ConnectOptions, KvClient, Txn, TxnOp};
use splitkv_layout::Key;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The table of the example's counters.
const TABLE: u32 = 90;
/// Counters loaded and incremented.
const COUNTERS: u64 = 4;
/// Increments each thread commits.
const INCREMENTS_PER_THREAD: u64 = 200;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What one thread did.
#[derive(Debug, Default)]
struct Counts {
    committed: u64,
    compare_failed: u64,
    conflicts: u64,
}

/// The node's socket, from `SOCKET` or `--cluster FILE [--node N]`.
fn socket_path() -> Result<PathBuf, Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: cas SOCKET | cas --cluster FILE [--node N]";
    match args.as_slice() {
        [path] if !path.starts_with("--") => Ok(PathBuf::from(path)),
        [flag, file, rest @ ..] if flag == "--cluster" => {
            let node: u16 = match rest {
                [] => 0,
                [n, id] if n == "--node" => id.parse()?,
                _ => return Err(usage.into()),
            };
            let text = std::fs::read_to_string(file)?;
            let config: toml::Table = toml::from_str(&text)?;
            let cluster_id = config
                .get("cluster_id")
                .and_then(toml::Value::as_integer)
                .ok_or("the cluster file has no cluster_id")?;
            let dir = config
                .get("clients")
                .and_then(|c| c.get("socket_dir"))
                .and_then(toml::Value::as_str)
                .map_or_else(
                    || PathBuf::from(format!("/tmp/splitkv-{cluster_id}")),
                    PathBuf::from,
                );
            Ok(dir.join(format!("node-{node}.sock")))
        }
        _ => Err(usage.into()),
    }
}

/// Tries of one load `put` that ends in a retryable error before the
/// program gives up.
const LOAD_TRIES_MAX: u32 = 50;
/// How long the program waits for a node that is still starting (its socket
/// not there yet, or not accepting), in seconds.
const NODE_START_WAIT_S: u64 = 20;

/// Connects, waiting up to [`NODE_START_WAIT_S`] for a node started just
/// before this program (as the README runs it: nodes in the background, then
/// this program) to create its socket.
fn connect(path: &Path, options: &ConnectOptions) -> Result<Client, Error> {
    let deadline = Instant::now() + Duration::from_secs(NODE_START_WAIT_S);
    let mut said = false;
    loop {
        match Client::connect(path, options) {
            Err(ConnectError::Connect { source, .. })
                if matches!(
                    source.kind(),
                    ErrorKind::NotFound | ErrorKind::ConnectionRefused
                ) && Instant::now() < deadline =>
            {
                if !said {
                    println!("waiting for the node to open {}", path.display());
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            other => return Ok(other?),
        }
    }
}

fn counter(i: u64) -> Key {
    Key::new(TABLE, i)
}

fn read_u64(value: &[u8]) -> Result<u64, Error> {
    Ok(u64::from_le_bytes(value.try_into()?))
}

/// Increments counter `i % COUNTERS` for `i` in `0..INCREMENTS_PER_THREAD`,
/// each by a compare-and-swap on the version read, retried until it commits.
fn increment(client: &mut Client) -> Result<Counts, Error> {
    let mut counts = Counts::default();
    for i in 0..INCREMENTS_PER_THREAD {
        let key = counter(i % COUNTERS);
        loop {
            let current = match client.get(key) {
                Ok(v) => v,
                Err(e) if e.is_retryable() => {
                    counts.conflicts += 1;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let next = read_u64(&current.value)? + 1;
            let cas = Txn::new()
                .when([Cmp::version_eq(key, current.version)])
                .then([TxnOp::put(key, next.to_le_bytes())]);
            match client.txn(&cas) {
                Ok(out) if out.succeeded() => break,
                Ok(_) => counts.compare_failed += 1,
                Err(e) if e.is_retryable() => counts.conflicts += 1,
                Err(e) => return Err(e.into()),
            }
        }
        counts.committed += 1;
    }
    Ok(counts)
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cas: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let path = socket_path()?;
    let options = ConnectOptions::default();
    let mut loader = connect(&path, &options)?;
    println!(
        "connected to node {} at {} (in flight: {})",
        loader.node_id(),
        path.display(),
        loader.limits().in_flight_max
    );
    for i in 0..COUNTERS {
        // A node that has just started may answer `Unavailable` while its
        // peers' sessions come up: a retryable error, retried a few times.
        let mut tries = 0;
        loop {
            match loader.put(counter(i), &0u64.to_le_bytes()) {
                Ok(_) => break,
                Err(e) if e.is_retryable() && tries < LOAD_TRIES_MAX => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    let (mut a, mut b) = (connect(&path, &options)?, connect(&path, &options)?);
    let (ca, cb) = std::thread::scope(|s| {
        let t = s.spawn(|| increment(&mut a));
        let cb = increment(&mut b);
        (t.join().expect("worker thread"), cb)
    });
    let (ca, cb) = (ca?, cb?);
    let mut total = 0;
    for i in 0..COUNTERS {
        let v = loader.get(counter(i))?;
        let n = read_u64(&v.value)?;
        total += n;
        println!("counter {i} = {n} (version {})", v.version);
    }
    for (name, c) in [("thread a", &ca), ("thread b", &cb)] {
        println!(
            "{name}: {} committed, {} failed compares retried, {} conflicts retried",
            c.committed, c.compare_failed, c.conflicts
        );
    }
    let expected = ca.committed + cb.committed;
    if total != expected {
        return Err(format!("counters sum to {total}, {expected} increments committed").into());
    }
    println!("sum = {total}: no increment lost");
    Ok(())
}
