use super::*;
use crate::loadgen::LoadStats;
use crate::workload::PROCEDURES_MAX;

#[test]
fn hex_round_trips_and_refuses_what_is_not_hex() {
    let bytes: Vec<u8> = (0..=255).collect();
    assert_eq!(from_hex(&to_hex(&bytes)).unwrap(), bytes);
    assert_eq!(to_hex(&[0x0f, 0xa0]), "0fa0");
    assert_eq!(from_hex(""), Some(Vec::new()));
    assert_eq!(from_hex("abc"), None);
    assert_eq!(from_hex("zz"), None);
}

#[test]
fn the_api_travels_only_when_not_shipped_and_old_specs_decode_as_shipped() {
    let old = serde_json::json!({"kind": "smallbank", "accounts": 10, "hot_accounts": null});
    let spec: WorkloadSpec = serde_json::from_value(old.clone()).unwrap();
    let WorkloadSpec::Smallbank { api, .. } = spec else {
        panic!("smallbank");
    };
    assert_eq!(api, TxApi::Shipped);
    assert_eq!(
        serde_json::to_value(spec).unwrap(),
        old,
        "shipped: no field"
    );
    let txn = WorkloadSpec::Register {
        keys: 4,
        shape: ShapeSpec::Mixed,
        api: TxApi::Txn,
    };
    let v = serde_json::to_value(txn).unwrap();
    assert_eq!(v["api"], "txn");
    assert_eq!(serde_json::from_value::<WorkloadSpec>(v).unwrap(), txn);
    let Ok(BuiltWorkload::History(h)) = txn.build() else {
        panic!("register");
    };
    assert_eq!(h.api(), TxApi::Txn);
    let la = WorkloadSpec::ListAppend {
        keys: 8,
        clients: 3,
        transactions_per_client: 10,
        shape: ShapeSpec::Mixed,
        api: TxApi::Txn,
    };
    assert_eq!(
        la.build().unwrap_err(),
        SpecError::Api(ApiError::ListAppendTxn)
    );
    let interactive = WorkloadSpec::Smallbank {
        accounts: 10,
        hot_accounts: None,
        api: TxApi::Interactive,
    };
    assert!(interactive.build().is_err());
}

#[test]
fn bodies_round_trip_and_unknown_fields_are_refused() {
    let spec = WorkloadSpec::ListAppend {
        keys: 8,
        clients: 3,
        transactions_per_client: 100,
        shape: ShapeSpec::WriteSkew,
        api: TxApi::Shipped,
    };
    let req = LoadRequest {
        version: PROTOCOL_VERSION,
        workload: spec,
        rejoin: false,
    };
    let v = serde_json::to_value(&req).unwrap();
    assert_eq!(v["workload"]["kind"], "list-append");
    assert_eq!(serde_json::from_value::<LoadRequest>(v).unwrap(), req);
    let extra = serde_json::json!({"version": 1, "workload": {"kind": "register", "keys": 4, "shape": "mixed", "colour": 1}});
    assert!(serde_json::from_value::<LoadRequest>(extra).is_err());
    assert!(matches!(spec.build(), Ok(BuiltWorkload::History(_))));
    let bad = WorkloadSpec::Register {
        keys: 1,
        shape: ShapeSpec::Mixed,
        api: TxApi::Shipped,
    };
    assert!(bad.build().is_err(), "fewer than 2 keys");
    let stats = LoadStats {
        committed: 5,
        committed_by_procedure: [1; PROCEDURES_MAX],
        ..LoadStats::default()
    };
    assert_eq!(LoadStats::from(&LoadCounters::from(stats)), stats);
}
