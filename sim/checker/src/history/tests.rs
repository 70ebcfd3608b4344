use super::*;

fn sample() -> History {
    let mut h = History::new();
    let inv = vec![
        MicroOp::Append {
            key: 5,
            element: 17,
        },
        MicroOp::Read {
            key: 5,
            value: None,
        },
        MicroOp::Write { key: 2, value: 9 },
    ];
    h.push(Op {
        index: 0,
        process: 3,
        kind: OpType::Invoke,
        value: inv.clone(),
        time_ns: 100,
        error: None,
    });
    let mut done = inv;
    done[1] = MicroOp::Read {
        key: 5,
        value: Some(ReadValue::List(vec![9, 17])),
    };
    h.push(Op {
        index: 0,
        process: 3,
        kind: OpType::Ok,
        value: done,
        time_ns: 250,
        error: None,
    });
    h.push(Op {
        index: 0,
        process: 4,
        kind: OpType::Fail,
        value: vec![MicroOp::Read {
            key: 2,
            value: Some(ReadValue::Register(9)),
        }],
        time_ns: 300,
        error: Some("lock conflict".into()),
    });
    h
}

#[test]
fn jsonl_round_trip_in_jepsen_field_names() {
    let h = sample();
    assert_eq!(h.ops.iter().map(|o| o.index).collect::<Vec<_>>(), [0, 1, 2]);
    let mut bytes = Vec::new();
    h.write_jsonl(&mut bytes).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        r#"{"f":"txn","index":0,"process":3,"time":100,"type":"invoke","value":[["append",5,17],["r",5,null],["w",2,9]]}"#
    );
    assert!(text.contains(r#"["r",5,[9,17]]"#));
    assert!(text.contains(r#""error":"lock conflict""#));
    assert_eq!(History::read_jsonl(&bytes[..]).unwrap(), h);
}

#[test]
fn malformed_lines_name_the_line() {
    let cases = [
        "not json",
        r#"{"index":0,"type":"nope","process":1,"f":"txn","value":[],"time":1}"#,
        r#"{"index":0,"type":"ok","process":1,"f":"read","value":[],"time":1}"#,
        r#"{"index":0,"type":"ok","process":1,"f":"txn","value":[["x",1,2]],"time":1}"#,
        r#"{"index":0,"type":"ok","process":1,"f":"txn","value":[["r",-1,2]],"time":1}"#,
        r#"{"index":0,"type":"ok","process":1,"f":"txn","value":[["append",1]],"time":1}"#,
        r#"{"index":0,"type":"ok","process":1,"f":"txn","value":[],"time":-5}"#,
    ];
    for c in cases {
        let text = format!("\n{c}\n");
        match History::read_jsonl(text.as_bytes()) {
            Err(HistoryError::Malformed { line: 2, .. }) => {}
            other => panic!("{c}: expected a malformed line 2, got {other:?}"),
        }
    }
}

#[test]
fn merge_orders_by_time_and_renumbers() {
    let op = |process, kind, time_ns| Op {
        index: 99,
        process,
        kind,
        value: vec![],
        time_ns,
        error: None,
    };
    let a = vec![op(1, OpType::Invoke, 10), op(1, OpType::Ok, 40)];
    let b = vec![op(2, OpType::Invoke, 20), op(2, OpType::Info, 40)];
    let h = History::merge([a, b]);
    let seen: Vec<_> = h
        .ops
        .iter()
        .map(|o| (o.index, o.process, o.time_ns))
        .collect();
    assert_eq!(seen, [(0, 1, 10), (1, 2, 20), (2, 1, 40), (3, 2, 40)]);
}
