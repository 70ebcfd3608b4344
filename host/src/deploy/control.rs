//! A node's control endpoint: HTTP on the node's control address, served by
//! `tiny_http` from a thread of its own (never a polling thread), so a slow
//! scrape or a long call never stalls the protocol.
//!
//! | method | path | token | handler |
//! |---|---|---|---|
//! | GET | `/status` | no | [`ControlHandler::status`] |
//! | GET | `/metrics` | no | [`ControlHandler::metrics`] (Prometheus text exposition) |
//! | POST | `/load` | yes | [`ControlHandler::call`] with [`Route::Load`] |
//! | POST | `/workload/start` | yes | … [`Route::WorkloadStart`] |
//! | POST | `/workload/stop` | yes | … [`Route::WorkloadStop`] |
//! | GET | `/results` | yes | … [`Route::Results`] |
//! | GET | `/workload` | yes | … [`Route::Workload`] |
//! | POST | `/drain` | yes | … [`Route::Drain`] |
//! | POST | `/fault/nic-restart` | yes | … [`Route::NicRestart`] |
//!
//! Every call of [`ControlHandler::call`] needs `Authorization: Bearer
//! <token>`; without it the answer is 401 and the handler is not called (so
//! nothing changes). `/results` needs it too: collecting results may consume
//! them. The request body is JSON (empty means `null`), at most
//! [`CONTROL_BODY_BYTES_MAX`] bytes (413 above), and must parse (400 with a
//! one-line reason). Answers are JSON: the handler's value with 200, or
//! `{"error": "<one line>"}` with the status of the [`CallError`]. Unknown
//! paths get 404, a known path with the wrong method 405. A handler that
//! panics answers 500 and the endpoint goes on serving.
//!
//! Requests are answered one at a time on the endpoint's thread; tiny_http
//! reads request heads on threads of its own, and a body is read only after
//! the token check, so only a token holder can hold the thread (with a slow
//! body or a long call). The endpoint is loopback-only unless the cluster
//! file says `control_public = true`.
//!
//! Out of file descriptors, tiny_http 0.12's accept thread stops in one of
//! two ways: a failed `accept` it reports (the endpoint then serves the same
//! socket again once descriptors are free, see `Serving::serve_again`), or a
//! panic of its own on the failed duplication of an accepted socket, which
//! nothing outside it can observe: the endpoint then accepts no more
//! connections (the node itself runs on; SIGTERM still drains it).

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use thiserror::Error;
use tiny_http::{Header, Method, Request, Response, Server};

/// Largest request body the endpoint reads (bytes); larger ones get 413.
pub const CONTROL_BODY_BYTES_MAX: usize = 1 << 20;
/// How long the serving thread waits for a request before checking whether
/// it should stop (ms): bounds how late a shutdown is noticed, and the pause
/// before accepting again after a failed accept.
pub const CONTROL_POLL_MS: u64 = 50;
/// Longest [`ControlServer::shutdown`] waits for the serving thread (ms).
pub const CONTROL_SHUTDOWN_MS_MAX: u64 = 2_000;

/// A mutating or collecting control call, routed to [`ControlHandler::call`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /load`: load a workload's data (body: the workload and its size).
    Load,
    /// `POST /workload/start`: start the node's clients of a workload.
    WorkloadStart,
    /// `POST /workload/stop`: stop them.
    WorkloadStop,
    /// `GET /results`: collect the run's results and the checkers' inputs.
    Results,
    /// `POST /drain`: stop taking transactions, finish those in flight.
    Drain,
    /// `POST /fault/nic-restart`: an injected NIC-runtime-only crash (the
    /// NIC restart): the node's NIC runtime restarts and rebuilds from its
    /// peers while its host, data and client live on.
    NicRestart,
    /// `GET /workload`: the workload this node was loaded with (the body
    /// of its `/load`), so a restarted peer loads the same one by itself.
    Workload,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 7] = [
        Route::Load,
        Route::WorkloadStart,
        Route::WorkloadStop,
        Route::Results,
        Route::Drain,
        Route::NicRestart,
        Route::Workload,
    ];

    /// The URL path of the route.
    pub fn path(self) -> &'static str {
        match self {
            Route::Load => "/load",
            Route::WorkloadStart => "/workload/start",
            Route::WorkloadStop => "/workload/stop",
            Route::Results => "/results",
            Route::Drain => "/drain",
            Route::NicRestart => "/fault/nic-restart",
            Route::Workload => "/workload",
        }
    }

    /// Whether the route is called with POST (else GET).
    pub fn is_post(self) -> bool {
        !matches!(self, Route::Results | Route::Workload)
    }

    /// The route of a URL path (without query).
    pub fn from_path(path: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|r| r.path() == path)
    }
}

/// Why a handler refused a call; `Display` is one line, sent to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CallError {
    /// The body does not describe a valid call (HTTP 400).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// The call does not fit the node's state, e.g. a workload is already
    /// running (HTTP 409).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The node cannot serve the call now, e.g. it is draining (HTTP 503).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The node failed (HTTP 500).
    #[error("internal error: {0}")]
    Internal(String),
}

impl CallError {
    /// The HTTP status code of the error.
    pub fn status_code(&self) -> u16 {
        match self {
            CallError::BadRequest(_) => 400,
            CallError::Conflict(_) => 409,
            CallError::Unavailable(_) => 503,
            CallError::Internal(_) => 500,
        }
    }
}

/// What the node process implements to be driven through its control
/// endpoint. Called from the endpoint's thread, one request at a time.
pub trait ControlHandler: Send + Sync {
    /// `GET /status`: the node's state as JSON (id, epoch, running workload, …).
    fn status(&self) -> Value;

    /// `GET /metrics`: appends the Prometheus text exposition to `out` (see
    /// [`super::NodeMetrics::encode`]).
    fn metrics(&self, out: &mut String);

    /// A call behind the token: `body` is the request's JSON (`null` when
    /// empty); the answer is sent with 200.
    ///
    /// # Errors
    /// A [`CallError`], sent with its status code and one-line message.
    fn call(&self, route: Route, body: &Value) -> Result<Value, CallError>;
}

/// Why the control endpoint could not start or stop.
#[derive(Debug, Error)]
pub enum ControlError {
    /// The control address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server could not be set up on the bound socket.
    #[error("cannot serve HTTP on {addr}: {reason}")]
    Serve {
        /// The address.
        addr: SocketAddr,
        /// The server's reason.
        reason: String,
    },
    /// The serving thread could not be spawned.
    #[error("cannot start the control thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The serving thread did not stop within [`CONTROL_SHUTDOWN_MS_MAX`]
    /// (a handler call still running); it is left to finish on its own.
    #[error("the control thread did not stop within {CONTROL_SHUTDOWN_MS_MAX} ms")]
    ShutdownTimeout,
}

/// A running control endpoint. Stops on [`ControlServer::shutdown`] or drop.
#[derive(Debug)]
pub struct ControlServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `addr` (port 0: one the OS picks; see [`ControlServer::local_addr`])
    /// and serves the endpoint from a new thread, checking mutating calls
    /// against `token`.
    ///
    /// # Errors
    /// [`ControlError::Bind`] if the address cannot be bound,
    /// [`ControlError::Serve`] or [`ControlError::Thread`] if serving cannot start.
    pub fn start(
        addr: SocketAddr,
        token: &str,
        handler: Arc<dyn ControlHandler>,
    ) -> Result<ControlServer, ControlError> {
        let listener =
            TcpListener::bind(addr).map_err(|source| ControlError::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ControlError::Bind { addr, source })?;
        let serve_error = |reason: String| ControlError::Serve {
            addr: local,
            reason,
        };
        let kept = listener
            .try_clone()
            .map_err(|e| serve_error(e.to_string()))?;
        let server =
            Server::from_listener(listener, None).map_err(|e| serve_error(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let serving = Serving {
            listener: kept,
            server,
            stop: Arc::clone(&stop),
            token: token.to_string(),
            handler,
        };
        let thread = std::thread::Builder::new()
            .name(format!("control-{}", local.port()))
            .spawn(move || serving.run())
            .map_err(ControlError::Thread)?;
        Ok(ControlServer {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The address the endpoint listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and joins the thread, waiting at most
    /// [`CONTROL_SHUTDOWN_MS_MAX`].
    ///
    /// # Errors
    /// [`ControlError::ShutdownTimeout`] if the thread is still in a call then.
    pub fn shutdown(mut self) -> Result<(), ControlError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ControlError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.stop.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_millis(CONTROL_SHUTDOWN_MS_MAX);
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                return Err(ControlError::ShutdownTimeout);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // A panic escaping `run` is impossible (handler calls are caught).
        let _ = thread.join();
        Ok(())
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// The serving thread's state.
struct Serving {
    /// A handle on the listening socket, to serve it again if the server's
    /// accept thread stops (tiny_http stops accepting after one failed
    /// accept, e.g. when the process is out of file descriptors).
    listener: TcpListener,
    server: Server,
    stop: Arc<AtomicBool>,
    token: String,
    handler: Arc<dyn ControlHandler>,
}

/// An answer: status code, body, and whether the body is JSON (else text).
struct Reply {
    status: u16,
    body: String,
    json: bool,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            body: value.to_string(),
            json: true,
        }
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({ "error": message }))
    }
}

impl Serving {
    fn run(mut self) {
        let poll = Duration::from_millis(CONTROL_POLL_MS);
        while !self.stop.load(Ordering::Acquire) {
            match self.server.recv_timeout(poll) {
                Ok(Some(request)) => self.serve(request),
                Ok(None) => {}
                // A failed accept, after which tiny_http's accept thread has
                // stopped.
                Err(_) => self.serve_again(poll),
            }
        }
    }

    /// Serves the same socket with a new server, retrying every `pause`
    /// until that works or the endpoint is stopped.
    fn serve_again(&mut self, pause: Duration) {
        while !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(pause);
            let restarted = self
                .listener
                .try_clone()
                .ok()
                .and_then(|listener| Server::from_listener(listener, None).ok());
            if let Some(server) = restarted {
                self.server = server;
                return;
            }
        }
    }

    fn serve(&self, mut request: Request) {
        let reply = catch_unwind(AssertUnwindSafe(|| self.route(&mut request)))
            .unwrap_or_else(|_| Reply::error(500, "the control handler panicked"));
        let content_type = if reply.json {
            "application/json"
        } else {
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        };
        let mut response = Response::from_string(reply.body).with_status_code(reply.status);
        if let Ok(header) = Header::from_bytes("Content-Type", content_type) {
            response.add_header(header);
        }
        if reply.status == 401 {
            if let Ok(header) = Header::from_bytes("WWW-Authenticate", "Bearer") {
                response.add_header(header);
            }
        }
        // A client that went away is not the endpoint's problem.
        let _ = request.respond(response);
    }

    fn route(&self, request: &mut Request) -> Reply {
        let path = request.url().split('?').next().unwrap_or("");
        let get = *request.method() == Method::Get;
        let post = *request.method() == Method::Post;
        match path {
            "/status" if get => Reply::json(200, &self.handler.status()),
            "/metrics" if get => {
                let mut body = String::new();
                self.handler.metrics(&mut body);
                Reply {
                    status: 200,
                    body,
                    json: false,
                }
            }
            "/status" | "/metrics" => Reply::error(405, "method not allowed"),
            _ => match Route::from_path(path) {
                None => Reply::error(404, &format!("no such path: {path}")),
                Some(route) if route.is_post() != post || (!route.is_post() && !get) => {
                    Reply::error(405, "method not allowed")
                }
                Some(route) => self.call(route, request),
            },
        }
    }

    fn call(&self, route: Route, request: &mut Request) -> Reply {
        if !authorized(request, &self.token) {
            return Reply::error(401, "missing or wrong bearer token");
        }
        let body = match read_body(request) {
            Ok(body) => body,
            Err(reply) => return reply,
        };
        let value = if body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            match serde_json::from_slice(&body) {
                Ok(value) => value,
                Err(e) => return Reply::error(400, &format!("bad JSON body: {e}")),
            }
        };
        match self.handler.call(route, &value) {
            Ok(answer) => Reply::json(200, &answer),
            Err(e) => Reply::error(e.status_code(), &e.to_string()),
        }
    }
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn authorized(request: &Request, token: &str) -> bool {
    request
        .headers()
        .iter()
        .filter(|h| h.field.equiv("Authorization"))
        .filter_map(|h| h.value.as_str().strip_prefix("Bearer "))
        .any(|given| same_bytes(given.trim().as_bytes(), token.as_bytes()))
}

/// Compares without stopping at the first difference (no timing hint).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request body, at most [`CONTROL_BODY_BYTES_MAX`] bytes.
fn read_body(request: &mut Request) -> Result<Vec<u8>, Reply> {
    let too_large = || {
        Reply::error(
            413,
            &format!("body larger than {CONTROL_BODY_BYTES_MAX} bytes"),
        )
    };
    if request
        .body_length()
        .is_some_and(|n| n > CONTROL_BODY_BYTES_MAX)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let limit = CONTROL_BODY_BYTES_MAX as u64 + 1;
    if let Err(e) = request.as_reader().take(limit).read_to_end(&mut body) {
        return Err(Reply::error(400, &format!("cannot read the body: {e}")));
    }
    if body.len() > CONTROL_BODY_BYTES_MAX {
        return Err(too_large());
    }
    Ok(body)
}
