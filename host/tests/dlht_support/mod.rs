//! What the DLHT test files share: a `HashMap` model of a table's contents
//! and checksummed values that expose torn (meta, value) pairs.

use splitkv_host::table::dlht::Dlht;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, VERSION_MAX};
use std::collections::HashMap;

/// What a table should hold: key → (meta, value).
pub type Model = HashMap<Key, (ObjectMeta, Vec<u8>)>;

/// A checksum of a value that writers put in the version, so readers can tell
/// a torn (meta, value) pair.
pub fn sum(v: &[u8]) -> u64 {
    v.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) & VERSION_MAX
}

/// The meta a writer gives value `v`: its checksum as the version.
pub fn meta_for(v: &[u8]) -> ObjectMeta {
    ObjectMeta::new(sum(v), ObjectFlags::READABLE)
}

/// Every (key, meta, value) of `t`, via `iter` and via `for_each`, checked
/// against each other and for duplicates.
pub fn contents(t: &Dlht) -> Model {
    let mut a = Model::new();
    for (k, m, v) in t.iter() {
        assert!(a.insert(k, (m, v)).is_none(), "iter yielded {k:?} twice");
    }
    let mut b = Model::new();
    t.for_each(|k, m, v| {
        assert!(
            b.insert(k, (m, v.to_vec())).is_none(),
            "for_each yielded {k:?} twice"
        );
    });
    assert_eq!(a, b, "iter and for_each disagree");
    a
}
