//! A reader of TLC's error traces: the `State N: <Action ...>` headers and
//! the `/\ var = value` blocks under them (values span lines), with values
//! parsed as TLA+ data: strings, integers, booleans, sets `{..}`, sequences
//! `<<..>>` and records / functions `[a |-> v, ..]`. Only what the checked-in
//! traces use; anything else is an error naming the text.

use std::collections::BTreeMap;

/// A TLA+ value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Value {
    /// `"s"`.
    Str(String),
    /// `12`.
    Int(i64),
    /// `TRUE` / `FALSE`.
    Bool(bool),
    /// `{a, b}`, in the order printed.
    Set(Vec<Value>),
    /// `<<a, b>>`.
    Seq(Vec<Value>),
    /// `[f |-> v, ..]`, by field (a record, or a function over names).
    Rec(BTreeMap<String, Value>),
}

impl Value {
    /// Field (or function application) `f`.
    ///
    /// # Panics
    /// If this is not a record holding `f` (the trace is not the one the
    /// test was written for).
    pub fn at(&self, f: &str) -> &Value {
        match self {
            Value::Rec(m) => m
                .get(f)
                .unwrap_or_else(|| panic!("no field {f} in {self:?}")),
            _ => panic!("{self:?} is not a record (looking for {f})"),
        }
    }

    /// The string inside.
    ///
    /// # Panics
    /// If this is not a string.
    pub fn str(&self) -> &str {
        match self {
            Value::Str(s) => s,
            _ => panic!("{self:?} is not a string"),
        }
    }

    /// The elements of a set.
    ///
    /// # Panics
    /// If this is not a set.
    pub fn set(&self) -> &[Value] {
        match self {
            Value::Set(v) => v,
            _ => panic!("{self:?} is not a set"),
        }
    }
}

/// One state of a behaviour: the action that produced it (`Initial
/// predicate` for the first) and every variable.
#[derive(Debug, Clone)]
pub struct State {
    /// 1-based position in the trace.
    pub number: usize,
    /// The action's name (`Start`, `Log`, ...).
    pub action: String,
    /// Variables by name.
    pub vars: BTreeMap<String, Value>,
}

impl State {
    /// Variable `v`.
    ///
    /// # Panics
    /// If the state has no such variable.
    pub fn var(&self, v: &str) -> &Value {
        self.vars
            .get(v)
            .unwrap_or_else(|| panic!("state {} has no variable {v}", self.number))
    }
}

/// Why a trace does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// No `State 1:` line.
    #[error("no states in the TLC output")]
    Empty,
    /// A line under a state that is neither `/\ var = value` nor its
    /// continuation.
    #[error("state {state}: unexpected line {line:?}")]
    Line {
        /// The state being read.
        state: usize,
        /// The line.
        line: String,
    },
    /// A value that does not parse.
    #[error("state {state}, variable {var}: {why} at {rest:?}")]
    Value {
        /// The state being read.
        state: usize,
        /// The variable.
        var: String,
        /// What was expected.
        why: &'static str,
        /// The text from there on (at most 40 characters).
        rest: String,
    },
}

/// The states of the first error trace in TLC output `text`.
///
/// # Errors
/// [`TraceError`] for output without states or with a line or value this
/// reader does not know.
pub fn parse_trace(text: &str) -> Result<Vec<State>, TraceError> {
    let mut states: Vec<State> = Vec::new();
    let mut pending: Option<(String, String)> = None; // variable, its text so far
    let mut in_trace = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("State ") {
            flush(&mut states, &mut pending)?;
            let (num, action) = rest.split_once(": <").ok_or_else(|| TraceError::Line {
                state: states.len(),
                line: line.to_string(),
            })?;
            let number = num.trim().parse().map_err(|_| TraceError::Line {
                state: states.len(),
                line: line.to_string(),
            })?;
            let action = action.split([' ', '>']).next().unwrap_or("").to_string();
            states.push(State {
                number,
                action,
                vars: BTreeMap::new(),
            });
            in_trace = true;
            continue;
        }
        if !in_trace {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut states, &mut pending)?;
            in_trace = false;
        } else if let Some(rest) = line.strip_prefix("/\\ ") {
            flush(&mut states, &mut pending)?;
            let (var, value) = rest.split_once(" = ").ok_or_else(|| TraceError::Line {
                state: states.len(),
                line: line.to_string(),
            })?;
            pending = Some((var.trim().to_string(), value.to_string()));
        } else if let Some((_, text)) = pending.as_mut() {
            text.push(' ');
            text.push_str(line.trim());
        } else {
            return Err(TraceError::Line {
                state: states.len(),
                line: line.to_string(),
            });
        }
    }
    flush(&mut states, &mut pending)?;
    if states.is_empty() {
        return Err(TraceError::Empty);
    }
    Ok(states)
}

fn flush(states: &mut [State], pending: &mut Option<(String, String)>) -> Result<(), TraceError> {
    let Some((var, text)) = pending.take() else {
        return Ok(());
    };
    let state = states.last_mut().expect("a variable follows a state line");
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value().and_then(|v| {
        p.ws();
        if p.i == p.s.len() {
            Ok(v)
        } else {
            Err("end of value")
        }
    });
    match v {
        Ok(v) => {
            state.vars.insert(var, v);
            Ok(())
        }
        Err(why) => Err(TraceError::Value {
            state: state.number,
            var,
            why,
            rest: text[p.i.min(text.len())..].chars().take(40).collect(),
        }),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Value, &'static str> {
        self.ws();
        if self.eat("<<") {
            return self.list(">>").map(Value::Seq);
        }
        if self.eat("{") {
            return self.list("}").map(Value::Set);
        }
        if self.eat("[") {
            return self.record();
        }
        if self.eat("\"") {
            let start = self.i;
            while self.i < self.s.len() && self.s[self.i] != b'"' {
                self.i += 1;
            }
            let s = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "UTF-8")?;
            self.i += 1;
            return Ok(Value::Str(s.to_string()));
        }
        if self.eat("TRUE") {
            return Ok(Value::Bool(true));
        }
        if self.eat("FALSE") {
            return Ok(Value::Bool(false));
        }
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_digit() || self.s[self.i] == b'-') {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()
            .and_then(|t| t.parse().ok())
            .map(Value::Int)
            .ok_or("a value")
    }

    fn list(&mut self, close: &str) -> Result<Vec<Value>, &'static str> {
        let mut out = Vec::new();
        if self.eat(close) {
            return Ok(out);
        }
        loop {
            out.push(self.value()?);
            if self.eat(close) {
                return Ok(out);
            }
            if !self.eat(",") {
                return Err("',' or the list's end");
            }
        }
    }

    fn record(&mut self) -> Result<Value, &'static str> {
        let mut m = BTreeMap::new();
        loop {
            self.ws();
            let start = self.i;
            while self.i < self.s.len()
                && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
            {
                self.i += 1;
            }
            let field = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| "UTF-8")?;
            if field.is_empty() || !self.eat("|->") {
                return Err("a field and |->");
            }
            let field = field.to_string();
            m.insert(field, self.value()?);
            if self.eat("]") {
                return Ok(Value::Rec(m));
            }
            if !self.eat(",") {
                return Err("',' or ']'");
            }
        }
    }
}
