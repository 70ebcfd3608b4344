//! Calls to a node's control endpoint (the bench, `splitkv status`, a restarted
//! node asking its peers for their workload): one HTTP/1.0 request
//! per connection (the endpoint answers with a plain body and closes), JSON
//! in and out, the bearer token on every call. Every wait is bounded.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Longest a connection to a control endpoint may take to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest a control call may take to answer (a load of a large table).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest answer read (bytes): a node's rows at test sizes fit well within.
pub const ANSWER_BYTES_MAX: u64 = 1 << 30;

/// Why a control call failed; `Display` is one line.
#[derive(Debug, thiserror::Error)]
pub enum CallFailed {
    /// The endpoint could not be reached or the connection broke.
    #[error("{addr} unreachable: {reason}")]
    Unreachable {
        /// The endpoint.
        addr: SocketAddr,
        /// The system's reason.
        reason: String,
    },
    /// The endpoint answered with an error status.
    #[error("{addr} answered {status}: {message}")]
    Status {
        /// The endpoint.
        addr: SocketAddr,
        /// HTTP status.
        status: u16,
        /// The `error` of its body (or the body).
        message: String,
    },
    /// The answer is not HTTP or not JSON.
    #[error("{addr}: malformed answer: {reason}")]
    Malformed {
        /// The endpoint.
        addr: SocketAddr,
        /// What is wrong.
        reason: String,
    },
}

/// Calls `method path` at `addr` with `body` (JSON, or none) and the bearer
/// `token`; returns the JSON answer of a 200 (`null` for an empty one).
///
/// # Errors
/// [`CallFailed`].
pub fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Result<Value, CallFailed> {
    let unreachable = |e: std::io::Error| CallFailed::Unreachable {
        addr,
        reason: e.to_string(),
    };
    let malformed = |reason: String| CallFailed::Malformed { addr, reason };
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(unreachable)?;
    stream
        .set_read_timeout(Some(CALL_TIMEOUT))
        .map_err(unreachable)?;
    stream
        .set_write_timeout(Some(CALL_TIMEOUT))
        .map_err(unreachable)?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).map_err(unreachable)?;
    stream.write_all(body.as_bytes()).map_err(unreachable)?;
    let mut answer = Vec::new();
    stream
        .take(ANSWER_BYTES_MAX)
        .read_to_end(&mut answer)
        .map_err(unreachable)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| malformed("no end of headers".into()))?;
    let head = String::from_utf8_lossy(&answer[..split]);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| malformed(format!("status line {:?}", head.lines().next())))?;
    let text = &answer[split + 4..];
    let value: Value = if text.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(text).map_err(|e| malformed(e.to_string()))?
    };
    if status != 200 {
        let message = value
            .get("error")
            .and_then(Value::as_str)
            .map_or_else(|| value.to_string(), str::to_string);
        return Err(CallFailed::Status {
            addr,
            status,
            message,
        });
    }
    Ok(value)
}
