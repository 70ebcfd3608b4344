//! The control endpoint (splitkv_host::deploy::control) over real TCP on
//! 127.0.0.1 with an OS-chosen port, and the Prometheus metrics it serves
//! (splitkv_host::deploy::metrics).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use splitkv_host::deploy::control::{CONTROL_BODY_BYTES_MAX, CONTROL_SHUTDOWN_MS_MAX};
use splitkv_host::deploy::metrics::outcome_label;
use splitkv_host::deploy::{
    CallError, ControlError, ControlHandler, ControlServer, NodeMetrics, Route, SessionCounters,
};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::NicStats;

const TOKEN: &str = "sekrit-42";
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Records every call; answers from `answer`.
struct Recorder {
    calls: Mutex<Vec<(Route, Value)>>,
    metrics: NodeMetrics,
    answer: fn(Route) -> Result<Value, CallError>,
}

impl ControlHandler for Recorder {
    fn status(&self) -> Value {
        json!({ "node": 1, "state": "running" })
    }

    fn metrics(&self, out: &mut String) {
        self.metrics.encode(out).expect("encoding into a String");
    }

    fn call(&self, route: Route, body: &Value) -> Result<Value, CallError> {
        self.calls.lock().unwrap().push((route, body.clone()));
        (self.answer)(route)
    }
}

fn echo_route(route: Route) -> Result<Value, CallError> {
    Ok(json!({ "route": route.path() }))
}

fn start(answer: fn(Route) -> Result<Value, CallError>) -> (ControlServer, Arc<Recorder>) {
    let handler = Arc::new(Recorder {
        calls: Mutex::new(Vec::new()),
        metrics: NodeMetrics::new(3, 1),
        answer,
    });
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = ControlServer::start(addr, TOKEN, handler.clone()).expect("control server starts");
    assert_ne!(server.local_addr().port(), 0);
    (server, handler)
}

/// One HTTP/1.1 request on a fresh connection; returns status code and body.
fn http(addr: SocketAddr, head: &str, body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let request = format!(
        "{head}\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    read_response(stream)
}

fn read_response(mut stream: TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn authorized(method_path: &str) -> String {
    format!("{method_path} HTTP/1.1\r\nAuthorization: Bearer {TOKEN}")
}

fn error_of(body: &str) -> String {
    let value: Value = serde_json::from_str(body).expect("a JSON error body");
    value["error"].as_str().expect("an error field").to_string()
}

fn method(route: Route) -> &'static str {
    if route.is_post() {
        "POST"
    } else {
        "GET"
    }
}

#[test]
fn metrics_scrape_over_tcp_parses() {
    let (server, handler) = start(echo_route);
    let mut stats = NicStats::default();
    stats.clients.outcomes[TxStatus::Committed as usize] = 5;
    stats.clients.outcomes[TxStatus::LockConflict as usize] = 2;
    stats.net.batch.packets = 10;
    stats.cache.hits = 7;
    handler.metrics.update_from(&stats);
    // Cumulative snapshots: the counters advance by the difference.
    stats.clients.outcomes[TxStatus::Committed as usize] = 8;
    stats.net.batch.packets = 25;
    handler.metrics.update_from(&stats);
    handler.metrics.update_sessions(&SessionCounters {
        packets_received: 30,
        retransmissions: 4,
        duplicates_dropped: 1,
        sessions_failed: 0,
    });
    handler.metrics.observe_latency_us(3);
    handler.metrics.observe_latency_us(900);
    assert_eq!(handler.metrics.transactions(TxStatus::Committed), 8);

    let (status, text) = http(server.local_addr(), "GET /metrics HTTP/1.1", b"");
    assert_eq!(status, 200);
    let value_of = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix} in\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let labels = "cluster=\"3\",node=\"1\"";
    let committed = format!("splitkv_transactions_total{{{labels},outcome=\"committed\"}}");
    assert_eq!(value_of(&committed), 8.0);
    let conflicts = format!("splitkv_transactions_total{{{labels},outcome=\"lock_conflict\"}}");
    assert_eq!(value_of(&conflicts), 2.0);
    let unavailable = format!("splitkv_transactions_total{{{labels},outcome=\"unavailable\"}}");
    assert_eq!(
        value_of(&unavailable),
        0.0,
        "every outcome is exposed from the start"
    );
    assert_eq!(
        value_of(&format!("splitkv_packets_sent_total{{{labels}}}")),
        25.0
    );
    assert_eq!(
        value_of(&format!("splitkv_cache_hits_total{{{labels}}}")),
        7.0
    );
    assert_eq!(
        value_of(&format!("splitkv_retransmissions_total{{{labels}}}")),
        4.0
    );
    assert_eq!(
        value_of(&format!("splitkv_packets_received_total{{{labels}}}")),
        30.0
    );
    assert_eq!(
        value_of(&format!("splitkv_transaction_latency_us_count{{{labels}}}")),
        2.0
    );
    assert_eq!(
        value_of(&format!("splitkv_transaction_latency_us_sum{{{labels}}}")),
        903.0
    );
    let le4 = format!("splitkv_transaction_latency_us_bucket{{{labels},le=\"4.0\"}}");
    assert_eq!(value_of(&le4), 1.0);
    assert!(text.contains("# TYPE splitkv_transaction_latency_us histogram"));
    assert!(text.trim_end().ends_with("# EOF"));
    server.shutdown().unwrap();
}

#[test]
fn status_needs_no_token() {
    let (server, handler) = start(echo_route);
    let (status, body) = http(server.local_addr(), "GET /status HTTP/1.1", b"");
    assert_eq!(status, 200);
    let value: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(value, json!({ "node": 1, "state": "running" }));
    assert!(handler.calls.lock().unwrap().is_empty());
}

#[test]
fn calls_without_the_token_get_401_and_reach_nothing() {
    let (server, handler) = start(echo_route);
    let addr = server.local_addr();
    for route in Route::ALL {
        let line = format!("{} {} HTTP/1.1", method(route), route.path());
        assert_eq!(http(addr, &line, b"{}").0, 401, "{route:?} without a token");
        let wrong = format!("{line}\r\nAuthorization: Bearer {TOKEN}x");
        assert_eq!(
            http(addr, &wrong, b"{}").0,
            401,
            "{route:?} with a wrong token"
        );
        let basic = format!("{line}\r\nAuthorization: Basic {TOKEN}");
        assert_eq!(
            http(addr, &basic, b"{}").0,
            401,
            "{route:?} with another scheme"
        );
    }
    assert!(
        handler.calls.lock().unwrap().is_empty(),
        "the handler saw a call"
    );
}

#[test]
fn calls_with_the_token_reach_the_handler_with_their_body() {
    let (server, handler) = start(echo_route);
    let addr = server.local_addr();
    for route in Route::ALL {
        let head = authorized(&format!("{} {}", method(route), route.path()));
        let (status, body) = http(addr, &head, br#"{"accounts": 1000}"#);
        assert_eq!(status, 200, "{route:?}: {body}");
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["route"], route.path());
    }
    let (status, _) = http(addr, &authorized("POST /drain"), b"");
    assert_eq!(status, 200, "an empty body is null");
    let calls = handler.calls.lock().unwrap();
    assert_eq!(calls.len(), Route::ALL.len() + 1);
    assert_eq!(calls[0], (Route::Load, json!({ "accounts": 1000 })));
    assert_eq!(calls[Route::ALL.len()], (Route::Drain, Value::Null));
}

#[test]
fn unknown_paths_404_and_wrong_methods_405() {
    let (server, handler) = start(echo_route);
    let addr = server.local_addr();
    assert_eq!(http(addr, &authorized("POST /nuke"), b"{}").0, 404);
    assert_eq!(http(addr, "GET /status/extra HTTP/1.1", b"").0, 404);
    assert_eq!(http(addr, &authorized("GET /load"), b"").0, 405);
    assert_eq!(http(addr, &authorized("POST /results"), b"{}").0, 405);
    assert_eq!(http(addr, "DELETE /metrics HTTP/1.1", b"").0, 405);
    assert!(handler.calls.lock().unwrap().is_empty());
}

#[test]
fn bad_json_is_400_with_one_line_reason() {
    let (server, handler) = start(echo_route);
    let (status, body) = http(server.local_addr(), &authorized("POST /load"), b"{\"a\":\n");
    assert_eq!(status, 400);
    let reason = error_of(&body);
    assert!(reason.starts_with("bad JSON body"), "{reason}");
    assert!(!reason.contains('\n'), "{reason:?}");
    assert!(handler.calls.lock().unwrap().is_empty());
}

#[test]
fn oversized_bodies_are_refused() {
    let (server, handler) = start(echo_route);
    let addr = server.local_addr();
    // A declared length over the limit is refused before any body is read.
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let head = format!(
        "{}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        authorized("POST /load"),
        CONTROL_BODY_BYTES_MAX + 1
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (status, body) = read_response(stream);
    assert_eq!(status, 413);
    assert!(error_of(&body).contains(&CONTROL_BODY_BYTES_MAX.to_string()));
    // A body of exactly the limit is read (and here is not JSON).
    let body = vec![b'x'; CONTROL_BODY_BYTES_MAX];
    assert_eq!(http(addr, &authorized("POST /load"), &body).0, 400);
    assert!(handler.calls.lock().unwrap().is_empty());
}

#[test]
fn handler_errors_keep_their_status_and_a_panic_is_500() {
    fn refuse(route: Route) -> Result<Value, CallError> {
        match route {
            Route::WorkloadStart => Err(CallError::Conflict("a workload is running".into())),
            Route::Drain => Err(CallError::Unavailable("draining".into())),
            Route::Load => panic!("handler bug"),
            _ => Err(CallError::BadRequest("no such workload".into())),
        }
    }
    let (server, _handler) = start(refuse);
    let addr = server.local_addr();
    let (status, body) = http(addr, &authorized("POST /workload/start"), b"{}");
    assert_eq!(
        (status, error_of(&body)),
        (409, "conflict: a workload is running".into())
    );
    assert_eq!(http(addr, &authorized("POST /drain"), b"").0, 503);
    assert_eq!(http(addr, &authorized("POST /workload/stop"), b"").0, 400);
    assert_eq!(http(addr, &authorized("POST /load"), b"{}").0, 500);
    // The endpoint survives the panic.
    assert_eq!(http(addr, "GET /status HTTP/1.1", b"").0, 200);
}

#[test]
fn a_taken_address_is_a_typed_bind_error() {
    let (server, handler) = start(echo_route);
    let err = ControlServer::start(server.local_addr(), TOKEN, handler).unwrap_err();
    assert!(
        matches!(err, ControlError::Bind { addr, .. } if addr == server.local_addr()),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("cannot listen on 127.0.0.1:"),
        "{err}"
    );
}

#[test]
fn shutdown_is_bounded_and_releases_the_port() {
    let (server, handler) = start(echo_route);
    let addr = server.local_addr();
    assert_eq!(http(addr, "GET /status HTTP/1.1", b"").0, 200);
    let began = std::time::Instant::now();
    server.shutdown().unwrap();
    assert!(began.elapsed() < Duration::from_millis(CONTROL_SHUTDOWN_MS_MAX));
    // The address can be served again (tiny_http's accept thread closes the
    // listener on its own, just after the shutdown).
    let again = (0..200)
        .find_map(|_| {
            let started = ControlServer::start(addr, TOKEN, handler.clone()).ok();
            if started.is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            started
        })
        .expect("the port was released within 2 s");
    assert_eq!(http(again.local_addr(), "GET /status HTTP/1.1", b"").0, 200);
    // Dropping the endpoint stops it too: connections are soon refused.
    drop(again);
    let refused = (0..200).any(|_| {
        let gone = TcpStream::connect_timeout(&addr, IO_TIMEOUT).is_err();
        if !gone {
            std::thread::sleep(Duration::from_millis(10));
        }
        gone
    });
    assert!(refused, "the endpoint still accepts 2 s after its drop");
}

#[test]
fn metric_counters_never_go_backwards() {
    let metrics = NodeMetrics::new(1, 0);
    let mut stats = NicStats::default();
    stats.clients.outcomes[TxStatus::ValidationFailed as usize] = 4;
    metrics.update_from(&stats);
    metrics.update_from(&stats);
    assert_eq!(
        metrics.transactions(TxStatus::ValidationFailed),
        4,
        "a repeated snapshot adds nothing"
    );
    // A source that restarted from zero is counted from zero again.
    stats.clients.outcomes[TxStatus::ValidationFailed as usize] = 3;
    metrics.update_from(&stats);
    assert_eq!(metrics.transactions(TxStatus::ValidationFailed), 7);
    let mut text = String::new();
    metrics.encode(&mut text).unwrap();
    for status in TxStatus::ALL {
        let label = format!("outcome=\"{}\"", outcome_label(status));
        assert_eq!(text.matches(&label).count(), 1, "{label} exposed once");
    }
}

/// Blocks `/drain` until released, telling the test when a call has begun.
struct Blocking {
    entered: Mutex<std::sync::mpsc::Sender<()>>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl ControlHandler for Blocking {
    fn status(&self) -> Value {
        Value::Null
    }

    fn metrics(&self, _out: &mut String) {}

    fn call(&self, _route: Route, _body: &Value) -> Result<Value, CallError> {
        self.entered.lock().unwrap().send(()).unwrap();
        // Bounded: the test releases it, or it gives up after IO_TIMEOUT.
        let _ = self.release.lock().unwrap().recv_timeout(IO_TIMEOUT);
        Ok(json!("drained"))
    }
}

#[test]
fn shutdown_during_a_long_call_times_out_at_its_bound() {
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    let handler = Arc::new(Blocking {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    });
    let server = ControlServer::start("127.0.0.1:0".parse().unwrap(), TOKEN, handler).unwrap();
    let addr = server.local_addr();
    let client = std::thread::spawn(move || http(addr, &authorized("POST /drain"), b""));
    entered_rx.recv_timeout(IO_TIMEOUT).expect("the call began");
    let began = std::time::Instant::now();
    let err = server.shutdown().unwrap_err();
    let waited = began.elapsed();
    assert!(matches!(err, ControlError::ShutdownTimeout), "{err}");
    assert!(
        waited >= Duration::from_millis(CONTROL_SHUTDOWN_MS_MAX),
        "{waited:?}"
    );
    assert!(waited < Duration::from_millis(CONTROL_SHUTDOWN_MS_MAX) + IO_TIMEOUT);
    // The call still completes once the handler returns.
    release_tx.send(()).unwrap();
    let (status, body) = client.join().unwrap();
    assert_eq!((status, body.as_str()), (200, "\"drained\""));
}
