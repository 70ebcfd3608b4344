//! Values: inline in the slot's value word (up to 8 bytes) or out of line in a
//! separate, immutable record the value word points to (Dandelion §6).
//!
//! A record is one heap allocation: `len: u64` (little endian) then the bytes,
//! as `splitkv_layout::dlht_layout::decode_out_of_line` reads it. Records are
//! written once, before the slot that points to them is published, and never
//! changed; a record is freed through the epoch reclaimer after the slot that
//! held it stops being valid (a Put replaced it, or a delete), so a reader that
//! found the address while pinned can still copy the bytes.

use splitkv_layout::dlht_layout::{
    DLHT_VALUE_INLINE_BYTES_MAX, LEN_CODE_OUT_OF_LINE, OUT_OF_LINE_HEADER_BYTES,
};

/// A value ready to be written into a slot. An out-of-line record belongs to
/// the `Staged` until [`Staged::published`]; dropping an unpublished one frees it.
pub(crate) struct Staged {
    /// The slot's value word: inline bytes or the record address.
    pub(crate) word: u64,
    /// Bytes of the out-of-line record (0 for inline values).
    pub(crate) record_bytes: usize,
    owns_record: bool,
}

impl Staged {
    /// Stages `value` (the caller checked its length bound). Allocates only for
    /// values longer than 8 bytes.
    pub(crate) fn new(value: &[u8]) -> Staged {
        if value.len() <= DLHT_VALUE_INLINE_BYTES_MAX {
            return Staged {
                word: inline_word(value),
                record_bytes: 0,
                owns_record: false,
            };
        }
        let mut rec = Vec::with_capacity(OUT_OF_LINE_HEADER_BYTES + value.len());
        rec.extend_from_slice(&(value.len() as u64).to_le_bytes());
        rec.extend_from_slice(value);
        let record_bytes = rec.len();
        let p = Box::into_raw(rec.into_boxed_slice()) as *mut u8;
        Staged {
            word: p as u64,
            record_bytes,
            owns_record: true,
        }
    }

    /// The record (if any) now belongs to a published slot.
    pub(crate) fn published(&mut self) {
        self.owns_record = false;
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.owns_record {
            // SAFETY: we allocated the record in `new` and never published its
            // address in a valid slot, so no reader can dereference it.
            unsafe { free_record(self.word) };
        }
    }
}

/// The tag's length code of a value of `len` bytes.
#[inline(always)]
pub(crate) fn len_code(len: usize) -> u8 {
    if len <= DLHT_VALUE_INLINE_BYTES_MAX {
        len as u8
    } else {
        LEN_CODE_OUT_OF_LINE
    }
}

/// The value word of an inline value: its bytes, little endian, zero padded.
#[inline]
pub(crate) fn inline_word(value: &[u8]) -> u64 {
    debug_assert!(value.len() <= DLHT_VALUE_INLINE_BYTES_MAX);
    let mut b = [0u8; 8];
    b[..value.len()].copy_from_slice(value);
    u64::from_le_bytes(b)
}

/// Writes the value a slot holds (`len_code`, `word`) into the empty `out`.
///
/// # Safety
/// For an out-of-line value, `word` must be the address of a live record: read
/// from a slot that was valid while the caller was pinned, with the caller still
/// pinned.
#[inline(always)]
pub(crate) unsafe fn copy_value(len_code: u8, word: u64, out: &mut Vec<u8>) {
    debug_assert!(out.is_empty());
    if len_code == LEN_CODE_OUT_OF_LINE {
        // SAFETY: forwarded from the caller.
        out.extend_from_slice(unsafe { record_bytes(word) });
        return;
    }
    let len = (len_code as usize).min(DLHT_VALUE_INLINE_BYTES_MAX);
    if out.capacity() >= DLHT_VALUE_INLINE_BYTES_MAX {
        // One 8-byte store instead of a variable-length copy (a `memcpy` call).
        // SAFETY: the buffer has room for 8 bytes, of which the first `len`
        // (≤ 8) are initialised by this store.
        unsafe {
            out.as_mut_ptr()
                .cast::<[u8; DLHT_VALUE_INLINE_BYTES_MAX]>()
                .write_unaligned(word.to_le_bytes());
            out.set_len(len);
        }
    } else {
        out.extend_from_slice(&word.to_le_bytes()[..len]);
    }
}

/// The value bytes of the record at `addr`.
///
/// # Safety
/// `addr` must point to a live record made by [`Staged::new`], which nobody
/// frees while the returned slice is in use.
#[inline]
pub(crate) unsafe fn record_bytes<'a>(addr: u64) -> &'a [u8] {
    let p = addr as *const u8;
    // SAFETY: the record starts with its 8-byte length, then that many bytes,
    // all initialised and never written after publication.
    unsafe {
        let len = u64::from_le_bytes(*(p as *const [u8; 8])) as usize;
        std::slice::from_raw_parts(p.add(OUT_OF_LINE_HEADER_BYTES), len)
    }
}

/// Total bytes of the record at `addr` (length prefix included).
///
/// # Safety
/// As [`record_bytes`].
pub(crate) unsafe fn record_total_bytes(addr: u64) -> usize {
    // SAFETY: forwarded from the caller.
    OUT_OF_LINE_HEADER_BYTES + unsafe { record_bytes(addr) }.len()
}

/// Frees the record at `addr`.
///
/// # Safety
/// `addr` came from [`Staged::new`], is freed once, and no thread can read it
/// any more.
pub(crate) unsafe fn free_record(addr: u64) {
    // SAFETY: forwarded from the caller; the box was `[u8]` of exactly
    // `record_total_bytes` bytes.
    unsafe {
        let total = record_total_bytes(addr);
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            addr as *mut u8,
            total,
        )));
    }
}
