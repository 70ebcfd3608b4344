//! Shared pieces of the Robinhood table's model-based tests (`robinhood.rs`,
//! `robinhood_long_values.rs`): the `HashMap` model and the read-API checks
//! both files make against it.

use splitkv_host::table::RobinhoodTable;
use splitkv_layout::{Key, ObjectMeta};
use std::collections::HashMap;

/// Key → (raw metadata, value): what the table should hold.
pub type Model = HashMap<Key, (u64, Vec<u8>)>;

/// Key `id`, spread over three table ids.
pub fn key(id: u64) -> Key {
    Key::new((id % 3) as u32, id)
}

/// Every model key is found by `get` with its metadata and value.
pub fn assert_gets_agree(table: &RobinhoodTable, model: &Model) {
    let mut value = Vec::new();
    for (k, (meta, v)) in model {
        assert_eq!(table.get(k, &mut value), Some(ObjectMeta(*meta)), "{k:?}");
        assert_eq!(&value, v, "{k:?}");
    }
}

/// `for_each` visits exactly the model's objects, each once.
pub fn assert_for_each_agrees(table: &RobinhoodTable, model: &Model) {
    let mut seen = Model::new();
    table.for_each(|k, meta, v| {
        assert!(
            seen.insert(k, (meta.0, v.to_vec())).is_none(),
            "{k:?} twice"
        )
    });
    assert_eq!(&seen, model);
}
