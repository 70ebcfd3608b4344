//! The validated key, item and version lists message bodies borrow from
//! the packet bytes, with their iterators and decoders.

use super::ITEMS_PER_MESSAGE_MAX;
use crate::error::{DecodeError, Reader};
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::VALUE_BYTES_MAX;

/// A validated list of keys inside a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyList<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> KeyList<'a> {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.bytes.len() / KEY_BYTES
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The keys in order.
    pub fn iter(&self) -> impl Iterator<Item = Key> + 'a {
        self.bytes
            .chunks_exact(KEY_BYTES)
            .map(|c| Key::decode(c).expect("validated"))
    }
}

/// One item: a key with metadata and a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// The key.
    pub key: Key,
    /// Version and flags.
    pub meta: ObjectMeta,
    /// The value bytes (≤ [`VALUE_BYTES_MAX`]).
    pub value: &'a [u8],
}

/// A validated list of items inside a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemList<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) count: usize,
}

impl<'a> ItemList<'a> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.count
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The items in order.
    pub fn iter(&self) -> ItemIter<'a> {
        ItemIter {
            r: Reader::new(self.bytes, "item"),
            left: self.count,
        }
    }
}

/// Iterator over an [`ItemList`].
#[derive(Debug, Clone)]
pub struct ItemIter<'a> {
    r: Reader<'a>,
    left: usize,
}

impl<'a> Iterator for ItemIter<'a> {
    type Item = Item<'a>;
    fn next(&mut self) -> Option<Item<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(read_item(&mut self.r).expect("validated at decode"))
    }
}

fn read_item<'a>(r: &mut Reader<'a>) -> Result<Item<'a>, DecodeError> {
    let key = r.key()?;
    let meta = ObjectMeta(r.u64()?);
    let len = r.u16()? as usize;
    if len > VALUE_BYTES_MAX {
        return Err(DecodeError::TooLarge {
            what: "item value",
            len,
            max: VALUE_BYTES_MAX,
        });
    }
    let value = r.take(len)?;
    Ok(Item { key, meta, value })
}

/// A validated list of `(key, version)` pairs (VALIDATE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionList<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> VersionList<'a> {
    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.bytes.len() / (KEY_BYTES + 8)
    }
    /// Whether empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    /// The pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (Key, u64)> + 'a {
        self.bytes.chunks_exact(KEY_BYTES + 8).map(|c| {
            let key = Key::decode(c).expect("validated");
            let v = u64::from_le_bytes(c[KEY_BYTES..].try_into().expect("validated"));
            (key, v)
        })
    }
}

pub(super) fn check_count(n: usize) -> Result<(), DecodeError> {
    if n > ITEMS_PER_MESSAGE_MAX {
        Err(DecodeError::TooLarge {
            what: "item count",
            len: n,
            max: ITEMS_PER_MESSAGE_MAX,
        })
    } else {
        Ok(())
    }
}

pub(super) fn read_items<'a>(r: &mut Reader<'a>) -> Result<ItemList<'a>, DecodeError> {
    let n = r.u16()? as usize;
    check_count(n)?;
    read_n_items(r, n)
}

/// `n` items (a count already read and checked).
pub(super) fn read_n_items<'a>(r: &mut Reader<'a>, n: usize) -> Result<ItemList<'a>, DecodeError> {
    let start = r.position();
    let mut probe = r.clone();
    for _ in 0..n {
        read_item(&mut probe)?;
    }
    let len = probe.position() - start;
    Ok(ItemList {
        bytes: r.take(len)?,
        count: n,
    })
}
