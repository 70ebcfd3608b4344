//! Reading and writing histories as JSON lines in Jepsen's field names (see the
//! module docs of [`crate::history`] for the shape). Reading never panics: a
//! malformed line gives a [`HistoryError`] naming the line.

use super::{History, MicroOp, Op, OpType, ReadValue};
use serde_json::{json, Map, Value};
use std::io::{BufRead, Write};

/// Why a history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// Reading or writing the file failed.
    #[error("history I/O: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not a well-formed operation.
    #[error("history line {line}: {why}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl Op {
    /// This operation as one JSON object in Jepsen's field names.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("index".into(), json!(self.index));
        m.insert("type".into(), json!(self.kind.name()));
        m.insert("process".into(), json!(self.process));
        m.insert("f".into(), json!("txn"));
        let value: Vec<Value> = self.value.iter().map(micro_to_json).collect();
        m.insert("value".into(), Value::Array(value));
        m.insert("time".into(), json!(self.time_ns));
        if let Some(e) = &self.error {
            m.insert("error".into(), json!(e));
        }
        Value::Object(m)
    }

    /// The operation a JSON object describes; `why` names the first problem.
    pub fn from_json(v: &Value) -> Result<Op, String> {
        let o = v.as_object().ok_or("not a JSON object")?;
        let uint = |name: &str| -> Result<u64, String> {
            o.get(name)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("`{name}` missing or not a non-negative integer"))
        };
        let kind = o
            .get("type")
            .and_then(Value::as_str)
            .and_then(OpType::from_name)
            .ok_or("`type` missing or not one of invoke/ok/fail/info")?;
        match o.get("f").and_then(Value::as_str) {
            Some("txn") => {}
            _ => return Err("`f` missing or not \"txn\"".into()),
        }
        let value = o
            .get("value")
            .and_then(Value::as_array)
            .ok_or("`value` missing or not a list of micro-ops")?
            .iter()
            .map(micro_from_json)
            .collect::<Result<Vec<_>, _>>()?;
        let error = match o.get("error") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        };
        Ok(Op {
            index: uint("index")?,
            process: uint("process")?,
            kind,
            value,
            time_ns: uint("time")?,
            error,
        })
    }
}

fn micro_to_json(m: &MicroOp) -> Value {
    match m {
        MicroOp::Append { key, element } => json!(["append", key, element]),
        MicroOp::Write { key, value } => json!(["w", key, value]),
        MicroOp::Read { key, value } => match value {
            None => json!(["r", key, null]),
            Some(ReadValue::List(l)) => json!(["r", key, l]),
            Some(ReadValue::Register(r)) => json!(["r", key, r]),
        },
    }
}

fn micro_from_json(v: &Value) -> Result<MicroOp, String> {
    let a = v
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or_else(|| format!("micro-op {v} is not a [f, key, value] triple"))?;
    let key = a[1]
        .as_u64()
        .ok_or_else(|| format!("micro-op {v}: key is not a non-negative integer"))?;
    let int = |x: &Value| {
        x.as_u64()
            .ok_or_else(|| format!("micro-op {v}: value is not a non-negative integer"))
    };
    match a[0].as_str() {
        Some("append") => Ok(MicroOp::Append {
            key,
            element: int(&a[2])?,
        }),
        Some("w") => Ok(MicroOp::Write {
            key,
            value: int(&a[2])?,
        }),
        Some("r") => {
            let value = match &a[2] {
                Value::Null => None,
                Value::Array(l) => Some(ReadValue::List(
                    l.iter().map(int).collect::<Result<Vec<_>, _>>()?,
                )),
                x => Some(ReadValue::Register(int(x)?)),
            };
            Ok(MicroOp::Read { key, value })
        }
        _ => Err(format!(
            "micro-op {v}: function is not \"append\", \"w\" or \"r\""
        )),
    }
}

impl History {
    /// Writes one JSON line per operation.
    pub fn write_jsonl(&self, mut w: impl Write) -> Result<(), HistoryError> {
        for op in &self.ops {
            serde_json::to_writer(&mut w, &op.to_json()).map_err(std::io::Error::from)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        Ok(())
    }

    /// Reads a history written as JSON lines (blank lines are skipped). The
    /// operations keep the file's order; `index` fields are taken as written.
    pub fn read_jsonl(r: impl BufRead) -> Result<History, HistoryError> {
        let mut ops = Vec::new();
        for (i, line) in r.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let malformed = |why: String| HistoryError::Malformed { line: i + 1, why };
            let v: Value = serde_json::from_str(&line).map_err(|e| malformed(e.to_string()))?;
            ops.push(Op::from_json(&v).map_err(malformed)?);
        }
        Ok(History { ops })
    }
}
