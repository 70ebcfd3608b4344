//! `splitkv node` with a `[clients]` section serves an application in
//! another process (this test) on its Unix socket once a workload is
//! loaded: a put and a get through `splitkv_client::Connection` commit,
//! `/status` counts them under `applications`, and the socket is removed
//! when the node drains; with `start = "empty"` three nodes serve
//! applications with no load from outside. Every wait is bounded.

mod support_deploy;

use splitkv_client::{CallError, Client, Cmp, ConnectOptions, Connection, KvClient, Txn, TxnOp};
use splitkv_layout::app::{GetValue, Outcome, Request, Status};
use splitkv_layout::Key;
use std::path::Path;
use std::time::{Duration, Instant};
use support_deploy::*;

const STARTUP: Duration = Duration::from_secs(15);
const EXIT: Duration = Duration::from_secs(20);

/// Sends `req` until it ends other than retryably (bounded); its outcome.
fn call(c: &mut Connection, req: &Request<'_>) -> (Status, Vec<u8>) {
    let end = Instant::now() + STARTUP;
    let mut entry = Vec::new();
    req.encode(&mut entry).unwrap();
    loop {
        c.send(&entry, Some(end)).expect("send");
        let mut out = Vec::new();
        c.recv(&mut out, Some(end)).expect("an outcome");
        let o = Outcome::decode(&out).expect("a valid outcome");
        assert_eq!(o.req_id, req.req_id());
        if !o.status.is_retryable() || Instant::now() > end {
            return (o.status, o.body.to_vec());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for_socket(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < STARTUP,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_node_serves_an_application_process_and_removes_its_socket_on_drain() {
    let sockets = tempfile::Builder::new()
        .prefix("splitkv-apps-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = sockets.path().join("s");
    let file = cluster_file(
        2,
        2,
        &format!("\n[clients]\nsocket_dir = \"{}\"\n", dir.display()),
    );
    let mut nodes: Vec<NodeProc> = (0..2).map(|id| spawn_node(&file, id)).collect();
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":100,"hot_accounts":null}}"#;
    for &addr in &file.controls {
        wait_status(addr, STARTUP);
        let (code, body) = http(addr, "POST", "/load", Some(TOKEN), load).unwrap();
        assert_eq!(code, 200, "{body}");
    }
    let socket = dir.join("node-0.sock");
    wait_for_socket(&socket);
    let options = ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let mut c = Connection::connect(&socket, &options).expect("connect");
    let key = Key::new(9, 42);
    let put = Request::Put {
        req_id: 1,
        key,
        value: b"from another process",
    };
    assert_eq!(call(&mut c, &put), (Status::Committed, vec![]));
    let (status, body) = call(&mut c, &Request::Get { req_id: 2, key });
    assert_eq!(status, Status::Committed);
    assert_eq!(
        GetValue::decode(&body).unwrap().value,
        b"from another process"
    );

    let apps = &wait_status(file.controls[0], STARTUP)["applications"];
    assert_eq!(apps["attached"], 1, "{apps}");
    assert_eq!(apps["open"], 1, "{apps}");
    assert!(
        apps["outcomes"]["committed"].as_u64().unwrap() >= 2,
        "{apps}"
    );
    let (code, metrics) = http(file.controls[0], "GET", "/metrics", None, "").unwrap();
    assert_eq!(code, 200);
    let requests = metrics
        .lines()
        .find(|l| l.starts_with("splitkv_application_requests_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert!(requests.is_some_and(|n| n >= 2.0), "{metrics}");
    drop(c);

    for node in &mut nodes {
        signal(node, libc::SIGTERM);
        let status = wait_exit(node, EXIT);
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err);
        assert!(status.success(), "{status}: {err}");
    }
    assert!(!socket.exists(), "the socket is removed on drain");
    assert!(!dir.join("node-1.sock").exists());
}

/// Retries `f` while it fails retryably (a node that has just started may
/// answer `Unavailable` while its peers' sessions come up), bounded.
fn retrying<T>(mut f: impl FnMut() -> Result<T, CallError>) -> T {
    let end = Instant::now() + STARTUP;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if e.is_retryable() && Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// `[clients] start = "empty"`: three nodes start serving applications at
/// once from an empty store, with no load from outside; a compare-and-swap
/// transaction through one node reads what another node's client wrote, and
/// a delete through one is seen by the other (a re-insert takes the version
/// after its tombstone);
/// loading a workload on top is refused, and starting a built-in workload
/// too.
#[test]
fn nodes_that_start_empty_serve_applications_without_a_load() {
    let sockets = tempfile::Builder::new()
        .prefix("splitkv-empty-")
        .tempdir_in("/tmp")
        .unwrap();
    let dir = sockets.path().join("s");
    let file = cluster_file(
        3,
        3,
        &format!(
            "\n[clients]\nsocket_dir = \"{}\"\nstart = \"empty\"\n",
            dir.display()
        ),
    );
    let mut nodes: Vec<NodeProc> = (0..3).map(|id| spawn_node(&file, id)).collect();
    for id in 0..3 {
        wait_for_socket(&dir.join(format!("node-{id}.sock")));
    }
    let options = ConnectOptions {
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let mut a = Client::connect(dir.join("node-0.sock"), &options).expect("connect to node 0");
    let mut b = Client::connect(dir.join("node-2.sock"), &options).expect("connect to node 2");
    let key = Key::new(5, 7);
    retrying(|| a.put(key, b"first"));
    let seen = retrying(|| b.get(key));
    assert_eq!(seen.value, b"first");
    let cas = Txn::new()
        .when([Cmp::version_eq(key, seen.version)])
        .then([TxnOp::put(key, b"second".to_vec())]);
    assert!(retrying(|| b.txn(&cas)).succeeded());
    // The same compare again fails: the version moved.
    let again = retrying(|| a.txn(&cas));
    assert!(!again.succeeded());
    let second = retrying(|| a.get(key));
    assert_eq!(second.value, b"second");
    // DeleteOne through another node: the key's tombstone; then an insert
    // over it at the version after the tombstone's.
    retrying(|| b.delete(key));
    assert!(matches!(a.get(key), Err(CallError::KeyNotFound)));
    assert!(matches!(a.delete(key), Err(CallError::KeyNotFound)));
    retrying(|| a.insert(key, b"third"));
    let third = retrying(|| b.get(key));
    assert_eq!(
        (third.value.as_slice(), third.version),
        (&b"third"[..], second.version + 2)
    );

    let status = wait_status(file.controls[1], STARTUP);
    assert_eq!(status["state"], "loaded", "{status}");
    let load =
        r#"{"version":1,"workload":{"kind":"smallbank","accounts":100,"hot_accounts":null}}"#;
    let (code, body) = http(file.controls[1], "POST", "/load", Some(TOKEN), load).unwrap();
    assert_eq!(code, 409, "a second load is refused: {body}");
    let start = r#"{"version":1,"seed":1,"inflight":1,"budget":10,"max_tries":1,"warmup_ms":0,"run_ms":null}"#;
    let (code, body) = http(
        file.controls[1],
        "POST",
        "/workload/start",
        Some(TOKEN),
        start,
    )
    .unwrap();
    assert_eq!(code, 409, "no built-in workload runs: {body}");
    assert!(body.contains("applications only"), "{body}");
    drop((a, b));

    for node in &mut nodes {
        signal(node, libc::SIGTERM);
        let status = wait_exit(node, EXIT);
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(node.stderr.as_mut().unwrap(), &mut err);
        assert!(status.success(), "{status}: {err}");
    }
}
