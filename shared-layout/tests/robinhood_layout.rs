//! Host table layout: arithmetic, slot and header codecs, torn-read detection.

use proptest::prelude::*;
use splitkv_layout::robinhood_layout::*;
use splitkv_layout::{DecodeError, Key, ObjectMeta, Region};

fn layout(capacity_keys: usize, value_bytes_max: usize) -> TableLayout {
    TableLayout::new(&TableConfig::new(capacity_keys, value_bytes_max)).unwrap()
}

fn slot_image(l: &TableLayout, seq: u64, object: Option<(Key, ObjectMeta, &[u8])>) -> Vec<u8> {
    let mut out = vec![0u8; l.slot_bytes()];
    encode_slot(
        l,
        seq,
        object.map(|(k, m, v)| (k, m, SlotValue::Inline(v))),
        &mut out,
    );
    out
}

fn set_word(bytes: &mut [u8], offset: usize, word: u64) {
    bytes[offset..offset + 8].copy_from_slice(&word.to_le_bytes());
}

#[test]
fn default_sizing() {
    let l = layout(1000, 8);
    // 1000 · 10 / 9 = 1111 → 2048 home slots.
    assert_eq!(l.home_slots(), 2048);
    assert_eq!(l.d_max(), 16);
    assert_eq!(l.main_slots(), 2048 + 16);
    assert_eq!(l.slot_bytes(), 8 * (4 + 1 + 1));
    assert_eq!(l.segment_slots(), 16);
    assert_eq!(l.segments(), 128);
    // ⌈2048 · 10%⌉ = 205 overflow slots → 26 buckets of 8.
    assert_eq!(l.buckets(), 26);
    assert_eq!(l.bucket_bytes(), 64 + 8 * 48);
    // 57 keys fill 64 slots to 89%; 58 · 10 / 9 = 64 still fits; 59 keys need 128.
    assert_eq!(layout(57, 0).home_slots(), 64);
    assert_eq!(layout(58, 0).home_slots(), 64);
    assert_eq!(layout(59, 0).home_slots(), 128);
    assert_eq!(layout(1, 0).home_slots(), 1);
    // Tables smaller than one segment get one segment.
    let tiny = layout(3, 0);
    assert_eq!(tiny.home_slots(), 4);
    assert_eq!((tiny.segment_slots(), tiny.segments()), (4, 1));
    // Values over 256 B go out of line: the slot keeps 256 B inline, and a
    // heap of capacity + capacity/8 blocks holds up to value_bytes_max each.
    let big = layout(10, 4096);
    assert_eq!(big.slot_bytes(), 8 * (4 + 32 + 1));
    assert_eq!(
        big.value_inline_bytes_max(),
        ROBINHOOD_VALUE_INLINE_BYTES_MAX
    );
    assert_eq!(big.value_block_bytes(), 8 * (4 + 512 + 1));
    assert_eq!(big.value_blocks(), 10 + 2);
    assert_eq!(big.value_heap_offset() % 64, 0);
    assert_eq!(
        big.region_bytes(),
        big.value_heap_offset() + 12 * big.value_block_bytes()
    );
    // Up to 256 B nothing changes: no heap, same slot size.
    let small = layout(10, 256);
    assert_eq!(small.slot_bytes(), 8 * (4 + 32 + 1));
    assert_eq!(small.value_blocks(), 0);
    assert_eq!(small.value_heap_offset(), small.region_bytes());
    let mut sized = TableConfig::new(10, 1024);
    sized.value_blocks = Some(3);
    assert_eq!(TableLayout::new(&sized).unwrap().value_blocks(), 3);
}

#[test]
fn rejects_bad_configs() {
    let ok = TableConfig::new(100, 8);
    let with = |f: &dyn Fn(&mut TableConfig)| {
        let mut c = ok;
        f(&mut c);
        TableLayout::new(&c).unwrap_err()
    };
    assert_eq!(with(&|c| c.capacity_keys = 0), LayoutError::ZeroCapacity);
    assert!(matches!(
        with(&|c| c.d_max = 0),
        LayoutError::DisplacementOutOfRange { d_max: 0, .. }
    ));
    assert!(matches!(
        with(&|c| c.d_max = D_MAX_LIMIT + 1),
        LayoutError::DisplacementOutOfRange { .. }
    ));
    assert!(matches!(
        with(&|c| c.value_bytes_max = ROBINHOOD_VALUE_BYTES_MAX + 1),
        LayoutError::ValueTooLarge { .. }
    ));
    assert!(matches!(
        with(&|c| c.segment_slots = 12),
        LayoutError::BadSegmentSlots {
            segment_slots: 12,
            ..
        }
    ));
    assert!(matches!(
        with(&|c| c.segment_slots = 0),
        LayoutError::BadSegmentSlots { .. }
    ));
    assert!(matches!(
        with(&|c| c.bucket_slots = 0),
        LayoutError::BadBucketSlots { .. }
    ));
    assert!(matches!(
        with(&|c| c.bucket_slots = BUCKET_SLOTS_LIMIT + 1),
        LayoutError::BadBucketSlots { .. }
    ));
    assert_eq!(
        with(&|c| c.overflow_fraction_pct = 101),
        LayoutError::BadOverflowFraction { pct: 101 }
    );
    assert!(matches!(
        with(&|c| c.capacity_keys = usize::MAX / 2),
        LayoutError::TooLarge { .. }
    ));
    assert!(matches!(
        with(&|c| c.capacity_keys = 1 << 40),
        LayoutError::TooLarge { .. }
    ));
    // Limits themselves are accepted; an empty overflow pool is allowed.
    let mut edge = ok;
    edge.d_max = D_MAX_LIMIT;
    edge.value_bytes_max = ROBINHOOD_VALUE_BYTES_MAX;
    edge.overflow_fraction_pct = 0;
    let l = TableLayout::new(&edge).unwrap();
    assert_eq!(l.buckets(), 0);
    assert_eq!(l.value_heap_offset(), l.overflow_offset());
    assert_eq!(
        l.region_bytes(),
        l.value_heap_offset() + l.value_blocks() * l.value_block_bytes()
    );
    edge.value_bytes_max = 8;
    let l = TableLayout::new(&edge).unwrap();
    assert_eq!(l.region_bytes(), l.overflow_offset());
    assert!(matches!(
        with(&|c| {
            c.value_bytes_max = 1024;
            c.value_blocks = Some(VALUE_BLOCKS_LIMIT + 1)
        }),
        LayoutError::TooManyValueBlocks { .. }
    ));
    assert!(matches!(
        with(&|c| {
            c.value_bytes_max = 1024;
            c.value_blocks = Some(1 << 31)
        }),
        LayoutError::TooLarge { .. }
    ));
}

fn config_strategy() -> impl Strategy<Value = TableConfig> {
    (
        1usize..300,
        1usize..40,
        prop_oneof![0usize..70, 200usize..600],
        0u32..7,
        0usize..=100,
        1usize..10,
        prop::option::of(0usize..20),
    )
        .prop_map(
            |(capacity_keys, d_max, value_bytes_max, seg_log2, pct, bucket_slots, value_blocks)| {
                TableConfig {
                    capacity_keys,
                    d_max,
                    value_bytes_max,
                    segment_slots: 1 << seg_log2,
                    overflow_fraction_pct: pct,
                    bucket_slots,
                    value_blocks,
                }
            },
        )
}

proptest! {
    #[test]
    fn offsets_disjoint_aligned_and_inside_region(config in config_strategy(), ids in prop::collection::vec(any::<u64>(), 16)) {
        let l = TableLayout::new(&config).unwrap();
        prop_assert!(l.home_slots().is_power_of_two());
        prop_assert!(config.capacity_keys * 10 / 9 <= l.home_slots(), "more than ~90% full at capacity");
        prop_assert_eq!(l.segments() * l.segment_slots(), l.home_slots());
        prop_assert_eq!(l.slot_bytes() % 8, 0);
        prop_assert!(l.slot_bytes() >= 40 + l.value_inline_bytes_max());
        prop_assert_eq!(l.value_inline_bytes_max(), l.value_bytes_max().min(ROBINHOOD_VALUE_INLINE_BYTES_MAX));
        prop_assert_eq!(l.value_blocks() > 0, l.value_bytes_max() > ROBINHOOD_VALUE_INLINE_BYTES_MAX && config.value_blocks != Some(0));
        prop_assert!(l.value_block_bytes() >= 40 + l.value_bytes_max());
        prop_assert_eq!(l.main_offset() % 64, 0);
        prop_assert_eq!(l.overflow_offset() % 64, 0);
        prop_assert!(l.buckets() * l.bucket_slots() * 100 >= l.home_slots() * config.overflow_fraction_pct);

        let mut spans = Vec::new();
        for s in 0..l.segments() {
            spans.push((l.segment_header_offset(s), HEADER_BYTES));
        }
        for slot in 0..l.main_slots() {
            spans.push((l.slot_offset(slot), l.slot_bytes()));
        }
        for b in 0..l.buckets() {
            let header = l.bucket_header_offset(b);
            spans.push((header, HEADER_BYTES));
            for i in 0..l.bucket_slots() {
                prop_assert_eq!(l.bucket_slot_offset(b, i), header + HEADER_BYTES + i * l.slot_bytes());
                spans.push((l.bucket_slot_offset(b, i), l.slot_bytes()));
            }
            prop_assert_eq!(header + l.bucket_bytes(), header + HEADER_BYTES + l.bucket_slots() * l.slot_bytes());
        }
        for b in 0..l.value_blocks() {
            prop_assert_eq!(l.value_block_offset(b), l.value_heap_offset() + b * l.value_block_bytes());
            spans.push((l.value_block_offset(b), l.value_block_bytes()));
        }
        spans.sort();
        let mut end = 0;
        for &(offset, len) in &spans {
            prop_assert_eq!(offset % 8, 0);
            prop_assert!(offset >= end, "overlap at {}", offset);
            end = offset + len;
        }
        prop_assert!(end <= l.region_bytes());
        prop_assert!(Region::new(l.region_bytes()).check(0, end).is_ok());

        let main_end = l.main_offset() + l.main_slots() * l.slot_bytes();
        for id in ids {
            let key = Key::new((id >> 60) as u32, id);
            let home = l.home_slot(&key);
            prop_assert!(home < l.home_slots());
            prop_assert!(l.segment_of(home) < l.segments());
            let (offset, len) = l.probe_range(&key);
            prop_assert_eq!(offset, l.slot_offset(home));
            prop_assert_eq!(len, (l.d_max() + 1) * l.slot_bytes());
            prop_assert!(offset >= l.main_offset() && offset + len <= main_end);
        }
    }

    #[test]
    fn slot_round_trip(
        value_bytes_max in 0usize..40,
        table in any::<u32>(),
        id in any::<u64>(),
        meta in any::<u64>(),
        value in prop::collection::vec(any::<u8>(), 0..40),
        seq in any::<u64>(),
    ) {
        let l = layout(10, value_bytes_max);
        let value = &value[..value.len().min(value_bytes_max)];
        let seq = seq & !1;
        let key = Key::new(table, id);
        let image = slot_image(&l, seq, Some((key, ObjectMeta(meta), value)));
        prop_assert_eq!(decode_slot(&l, &image), Ok(SlotRead::Object { key, meta: ObjectMeta(meta), value: SlotValue::Inline(value) }));
        let empty = slot_image(&l, seq, None);
        prop_assert_eq!(decode_slot(&l, &empty), Ok(SlotRead::Empty));
    }

    #[test]
    fn out_of_line_slot_and_block_round_trip(
        value_bytes_max in 257usize..=4096,
        key_id in any::<u64>(),
        meta in any::<u64>(),
        value in prop::collection::vec(any::<u8>(), 257..=4096),
        block in 0usize..12,
        seq in 1u64..u64::MAX / 4,
        cut in any::<prop::sample::Index>(),
    ) {
        let l = layout(10, value_bytes_max);
        let value = &value[..value.len().min(value_bytes_max)];
        let key = Key::new(7, key_id);
        let meta = ObjectMeta(meta);
        let vref = ValueRef { block, seq: seq * 2 };
        let sv = SlotValue::OutOfLine { block: vref, len: value.len() };
        let mut slot = vec![0u8; l.slot_bytes()];
        encode_slot(&l, 4, Some((key, meta, sv)), &mut slot);
        prop_assert_eq!(decode_slot(&l, &slot), Ok(SlotRead::Object { key, meta, value: sv }));
        let mut image = vec![0u8; l.value_block_bytes()];
        encode_value_block(&l, vref.seq, key, meta, value, &mut image);
        prop_assert_eq!(decode_value_block(&l, &image, &key, meta, value.len(), vref), Ok(BlockRead::Value(value)));
        // Any mismatch with what the slot said makes the copy stale.
        let other_seq = ValueRef { seq: vref.seq + 2, ..vref };
        prop_assert_eq!(decode_value_block(&l, &image, &key, meta, value.len(), other_seq), Ok(BlockRead::Stale));
        prop_assert_eq!(decode_value_block(&l, &image, &Key::new(8, key_id), meta, value.len(), vref), Ok(BlockRead::Stale));
        prop_assert_eq!(decode_value_block(&l, &image, &key, ObjectMeta(meta.0 ^ 1), value.len(), vref), Ok(BlockRead::Stale));
        prop_assert_eq!(decode_value_block(&l, &image, &key, meta, value.len() - 1, vref), Ok(BlockRead::Stale));
        // A write in progress (odd tail, or tail ahead of head) is torn.
        let tail = l.value_block_seq_tail_offset();
        let mut torn = image.clone();
        set_word(&mut torn, tail, vref.seq + 1);
        prop_assert_eq!(decode_value_block(&l, &torn, &key, meta, value.len(), vref), Ok(BlockRead::Torn));
        // Truncated or longer images are typed errors.
        let n = cut.index(image.len());
        prop_assert!(decode_value_block(&l, &image[..n], &key, meta, value.len(), vref).is_err());
        let mut longer = image.clone();
        longer.push(0);
        prop_assert!(decode_value_block(&l, &longer, &key, meta, value.len(), vref).is_err());
        let n = cut.index(slot.len());
        prop_assert!(decode_slot(&l, &slot[..n]).is_err());
    }

    /// The partial copy of a block (its head up to the end of the value, then
    /// its tail word) decodes to the value, for values up to 4 KiB; it is a
    /// few bytes more than the value, never the whole block; a torn, stale,
    /// truncated or longer copy is reported as such.
    #[test]
    fn partial_block_copy_round_trip(
        value_bytes_max in prop::sample::select(vec![300usize, 1024, 4095, 4096]),
        len in 257usize..=4096,
        fill in any::<u8>(),
        block in 0usize..12,
        seq in 1u64..u64::MAX / 4,
        cut in any::<prop::sample::Index>(),
    ) {
        let l = layout(10, value_bytes_max);
        let len = len.min(value_bytes_max);
        let value: Vec<u8> = (0..len).map(|i| fill ^ i as u8).collect();
        let key = Key::new(3, 99);
        let meta = ObjectMeta(5 << 3);
        let vref = ValueRef { block, seq: seq * 2 };
        let mut image = vec![0u8; l.value_block_bytes()];
        encode_value_block(&l, vref.seq, key, meta, &value, &mut image);
        let [(at, n), (tail_at, tail_n)] = l.value_block_reads(block, len);
        let base = l.value_block_offset(block);
        prop_assert_eq!(at, base);
        prop_assert_eq!(tail_at, base + l.value_block_seq_tail_offset());
        prop_assert_eq!(tail_n, 8);
        prop_assert!(n + tail_n <= l.value_block_bytes());
        prop_assert_eq!(n + tail_n, l.value_block_copy_bytes(len));
        prop_assert!(n >= 32 + len && n < 32 + len + 8);
        let mut copy = image[..n].to_vec();
        copy.extend_from_slice(&image[l.value_block_seq_tail_offset()..]);
        prop_assert_eq!(decode_value_block_copy(&l, &copy, &key, meta, len, vref), Ok(BlockRead::Value(&value[..])));
        let other = ValueRef { seq: vref.seq + 2, ..vref };
        prop_assert_eq!(decode_value_block_copy(&l, &copy, &key, meta, len, other), Ok(BlockRead::Stale));
        // A slot that says another length reads another prefix: stale too.
        let [(_, n1), _] = l.value_block_reads(block, len - 1);
        let mut shorter = image[..n1].to_vec();
        shorter.extend_from_slice(&image[l.value_block_seq_tail_offset()..]);
        prop_assert_eq!(decode_value_block_copy(&l, &shorter, &key, meta, len - 1, vref), Ok(BlockRead::Stale));
        let mut torn = copy.clone();
        let last = torn.len() - 8;
        set_word(&mut torn, last, vref.seq + 1);
        prop_assert_eq!(decode_value_block_copy(&l, &torn, &key, meta, len, vref), Ok(BlockRead::Torn));
        let cut = cut.index(copy.len());
        prop_assert!(decode_value_block_copy(&l, &copy[..cut], &key, meta, len, vref).is_err());
        let mut longer = copy.clone();
        longer.push(0);
        prop_assert!(decode_value_block_copy(&l, &longer, &key, meta, len, vref).is_err());
        let over = decode_value_block_copy(&l, &copy, &key, meta, value_bytes_max + 1, vref);
        prop_assert!(matches!(over, Err(DecodeError::TooLarge { .. })), "{:?}", over);
    }

    /// Over random block images (intact or not, any sequence, any claimed
    /// length), the partial copy decodes exactly as the whole block does.
    #[test]
    fn partial_copy_decodes_as_the_whole_block(
        words in prop::collection::vec(any::<u64>(), 4 + 4096 / 8 + 1),
        same_seq in any::<bool>(),
        intact_info in any::<bool>(),
        len in 0usize..=4096,
        value_bytes_max in prop::sample::select(vec![300usize, 4096]),
    ) {
        let l = layout(10, value_bytes_max);
        let len = len.min(value_bytes_max);
        let mut image: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        image.truncate(l.value_block_bytes());
        let key = Key::new(3, 99);
        let meta = ObjectMeta(77);
        let vref = ValueRef { block: 0, seq: 42 };
        if same_seq {
            set_word(&mut image, 0, 42);
            set_word(&mut image, l.value_block_seq_tail_offset(), 42);
        }
        if intact_info {
            let info = encode_slot_info(3, len as u16, BLOCK_STATE_USED);
            set_word(&mut image, 8, info);
            set_word(&mut image, 16, 99);
            set_word(&mut image, 24, 77);
        }
        let [(_, n), _] = l.value_block_reads(0, len);
        let mut copy = image[..n].to_vec();
        copy.extend_from_slice(&image[l.value_block_seq_tail_offset()..]);
        prop_assert_eq!(
            decode_value_block_copy(&l, &copy, &key, meta, len, vref),
            decode_value_block(&l, &image, &key, meta, len, vref)
        );
    }

    #[test]
    fn random_block_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..700), force_seq in any::<bool>(), len in 0usize..1000) {
        let l = layout(10, 500);
        let mut bytes = bytes;
        let vref = ValueRef { block: 1, seq: 42 };
        if force_seq && bytes.len() >= l.value_block_bytes() {
            set_word(&mut bytes, 0, 42);
            set_word(&mut bytes, l.value_block_seq_tail_offset(), 42);
        }
        let key = Key::new(1, 2);
        let _ = decode_value_block(&l, &bytes, &key, ObjectMeta(0), len, vref);
        let _ = decode_value_block(&l, &bytes[..bytes.len().min(l.value_block_bytes())], &key, ObjectMeta(0), len, vref);
        let _ = decode_value_block_copy(&l, &bytes, &key, ObjectMeta(0), len, vref);
        if force_seq && bytes.len() >= l.slot_bytes() {
            set_word(&mut bytes, 0, 42);
            set_word(&mut bytes, l.slot_seq_tail_offset(), 42);
        }
        let _ = decode_slot(&l, &bytes[..bytes.len().min(l.slot_bytes())]);
        let whole = bytes.len() / l.slot_bytes() * l.slot_bytes();
        let _ = find_in_slots(&l, &bytes[..whole], &key);
    }

    #[test]
    fn header_round_trip(link in prop::option::of(0usize..26), count in 0u32..=8, moves in any::<u64>()) {
        let l = layout(1000, 8);
        let seg = SegmentHeader { overflow_head: link, overflow_count: count * 20, moves };
        prop_assert_eq!(SegmentHeader::decode(&l, &seg.encode()), Ok(seg));
        let bucket = BucketHeader { next: link, occupied: count };
        prop_assert_eq!(BucketHeader::decode(&l, &bucket.encode()), Ok(bucket));
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..700), force_seq in any::<bool>()) {
        let l = layout(100, 20);
        let mut bytes = bytes;
        // Half the cases get matching even sequence words so field checks run.
        if force_seq && bytes.len() >= l.slot_bytes() {
            let tail = l.slot_seq_tail_offset();
            set_word(&mut bytes, 0, 42);
            set_word(&mut bytes, tail, 42);
        }
        let key = Key::new(1, 2);
        let _ = decode_slot(&l, &bytes);
        let _ = decode_slot(&l, &bytes[..bytes.len().min(l.slot_bytes())]);
        let _ = find_in_slots(&l, &bytes, &key);
        let whole = bytes.len() / l.slot_bytes() * l.slot_bytes();
        let _ = find_in_slots(&l, &bytes[..whole], &key);
        let _ = SegmentHeader::decode(&l, &bytes[..bytes.len().min(64)]);
        let _ = BucketHeader::decode(&l, &bytes[..bytes.len().min(64)]);
        let _ = find_in_bucket(&l, &bytes, &key);
        let _ = find_in_bucket(&l, &bytes[..bytes.len().min(l.bucket_bytes())], &key);
    }
}

#[test]
fn torn_slots_are_detected() {
    let l = layout(10, 16);
    let key = Key::new(3, 9);
    let good = slot_image(&l, 6, Some((key, ObjectMeta(5), b"0123456789")));
    let tail = l.slot_seq_tail_offset();

    let mut write_in_progress = good.clone();
    set_word(&mut write_in_progress, tail, 7);
    assert_eq!(decode_slot(&l, &write_in_progress), Ok(SlotRead::Torn));

    let mut finished_after_copy = good.clone();
    set_word(&mut finished_after_copy, tail, 8);
    assert_eq!(decode_slot(&l, &finished_after_copy), Ok(SlotRead::Torn));

    let mut odd = good.clone();
    set_word(&mut odd, 0, 7);
    set_word(&mut odd, tail, 7);
    assert_eq!(decode_slot(&l, &odd), Ok(SlotRead::Torn));

    // A torn slot is reported before its (possibly mixed) fields are looked at.
    let mut torn_garbage = good.clone();
    set_word(&mut torn_garbage, SLOT_INFO_OFFSET, u64::MAX);
    set_word(&mut torn_garbage, tail, 8);
    assert_eq!(decode_slot(&l, &torn_garbage), Ok(SlotRead::Torn));
}

#[test]
fn decode_slot_validates_fields_and_length() {
    let l = layout(10, 16);
    let mut bad_state = slot_image(&l, 2, None);
    set_word(&mut bad_state, SLOT_INFO_OFFSET, encode_slot_info(0, 0, 3));
    assert_eq!(
        decode_slot(&l, &bad_state),
        Err(DecodeError::BadTag {
            what: "table slot state",
            tag: 3
        })
    );
    // Out of line in a table without a heap, or a value short enough to be inline.
    let mut ool = slot_image(&l, 2, None);
    set_word(
        &mut ool,
        SLOT_INFO_OFFSET,
        encode_slot_info(0, 10, SLOT_STATE_OUT_OF_LINE),
    );
    assert!(matches!(
        decode_slot(&l, &ool),
        Err(DecodeError::Inconsistent { .. })
    ));
    let big = layout(10, 1024);
    let mut ool = vec![0u8; big.slot_bytes()];
    let long = SlotValue::OutOfLine {
        block: ValueRef { block: 3, seq: 6 },
        len: 1000,
    };
    encode_slot(
        &big,
        2,
        Some((Key::new(0, 1), ObjectMeta(1), long)),
        &mut ool,
    );
    let mut bad = ool.clone();
    set_word(&mut bad, SLOT_VALUE_OFFSET, 12); // 12 blocks: index 12 is outside
    assert!(matches!(
        decode_slot(&big, &bad),
        Err(DecodeError::TooLarge {
            len: 12,
            max: 11,
            ..
        })
    ));
    let mut bad = ool.clone();
    set_word(&mut bad, SLOT_VALUE_OFFSET + 8, 7); // odd block sequence
    assert!(matches!(
        decode_slot(&big, &bad),
        Err(DecodeError::Inconsistent { .. })
    ));
    let mut bad = ool.clone();
    set_word(
        &mut bad,
        SLOT_INFO_OFFSET,
        encode_slot_info(0, 1025, SLOT_STATE_OUT_OF_LINE),
    );
    assert!(matches!(
        decode_slot(&big, &bad),
        Err(DecodeError::TooLarge {
            len: 1025,
            max: 1024,
            ..
        })
    ));
    let mut bad = ool.clone();
    set_word(
        &mut bad,
        SLOT_INFO_OFFSET,
        encode_slot_info(0, 257, SLOT_STATE_OCCUPIED),
    );
    assert!(matches!(
        decode_slot(&big, &bad),
        Err(DecodeError::TooLarge {
            len: 257,
            max: 256,
            ..
        })
    ));

    let mut long_value = slot_image(&l, 2, None);
    set_word(
        &mut long_value,
        SLOT_INFO_OFFSET,
        encode_slot_info(0, 17, SLOT_STATE_OCCUPIED),
    );
    assert!(matches!(
        decode_slot(&l, &long_value),
        Err(DecodeError::TooLarge {
            len: 17,
            max: 16,
            ..
        })
    ));

    let good = slot_image(&l, 2, None);
    assert!(matches!(
        decode_slot(&l, &good[..good.len() - 1]),
        Err(DecodeError::Truncated { .. })
    ));
    let mut longer = good.clone();
    longer.push(0);
    assert!(matches!(
        decode_slot(&l, &longer),
        Err(DecodeError::Inconsistent { .. })
    ));
    assert!(matches!(
        decode_slot(&l, &[]),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn find_in_slots_prefers_intact_hits_and_reports_torn_runs() {
    let l = layout(10, 8);
    let a = Key::new(0, 1);
    let b = Key::new(0, 2);
    let absent = Key::new(0, 3);
    let slot_a = slot_image(&l, 4, Some((a, ObjectMeta(1), b"a")));
    let slot_b = slot_image(&l, 0, Some((b, ObjectMeta(2), b"bb")));
    let mut torn = slot_image(&l, 2, None);
    set_word(&mut torn, l.slot_seq_tail_offset(), 3);

    let run: Vec<u8> = [slot_a.clone(), torn.clone(), slot_b.clone()].concat();
    assert_eq!(
        find_in_slots(&l, &run, &b),
        Ok(Some(SlotRead::Object {
            key: b,
            meta: ObjectMeta(2),
            value: SlotValue::Inline(b"bb")
        }))
    );
    assert_eq!(find_in_slots(&l, &run, &absent), Ok(Some(SlotRead::Torn)));
    let intact: Vec<u8> = [slot_a.clone(), slot_b.clone()].concat();
    assert_eq!(find_in_slots(&l, &intact, &absent), Ok(None));
    assert_eq!(find_in_slots(&l, &[], &absent), Ok(None));
    assert!(matches!(
        find_in_slots(&l, &intact[1..], &a),
        Err(DecodeError::Inconsistent { .. })
    ));

    // The same scan over a whole copied bucket.
    let mut bucket = BucketHeader {
        next: Some(0),
        occupied: 2,
    }
    .encode()
    .to_vec();
    bucket.extend_from_slice(&slot_a);
    bucket.extend_from_slice(&slot_b);
    let l1 = TableLayout::new(&TableConfig {
        bucket_slots: 2,
        value_blocks: None,
        ..TableConfig::new(10, 8)
    })
    .unwrap();
    let (header, hit) = find_in_bucket(&l1, &bucket, &a).unwrap();
    assert_eq!(
        header,
        BucketHeader {
            next: Some(0),
            occupied: 2
        }
    );
    assert_eq!(
        hit,
        Some(SlotRead::Object {
            key: a,
            meta: ObjectMeta(1),
            value: SlotValue::Inline(b"a")
        })
    );
    assert!(find_in_bucket(&l1, &bucket[..bucket.len() - 8], &a).is_err());
}

#[test]
fn headers_validate_links_counts_and_reserved_words() {
    let l = layout(1000, 8); // 26 buckets of 8 slots
    let mut out_of_pool = BucketHeader {
        next: None,
        occupied: 0,
    }
    .encode();
    set_word(&mut out_of_pool, HEADER_LINK_OFFSET, 27);
    assert!(matches!(
        BucketHeader::decode(&l, &out_of_pool),
        Err(DecodeError::TooLarge { len: 26, .. })
    ));
    assert!(SegmentHeader::decode(&l, &out_of_pool).is_err());
    set_word(&mut out_of_pool, HEADER_LINK_OFFSET, u64::MAX);
    assert!(BucketHeader::decode(&l, &out_of_pool).is_err());

    let over_full = BucketHeader {
        next: None,
        occupied: 9,
    }
    .encode();
    assert!(matches!(
        BucketHeader::decode(&l, &over_full),
        Err(DecodeError::TooLarge { len: 9, max: 8, .. })
    ));
    let seg_over = SegmentHeader {
        overflow_head: Some(0),
        overflow_count: 26 * 8 + 1,
        moves: 0,
    }
    .encode();
    assert!(SegmentHeader::decode(&l, &seg_over).is_err());

    let mut reserved = SegmentHeader::default().encode();
    reserved[63] = 1;
    assert!(matches!(
        SegmentHeader::decode(&l, &reserved),
        Err(DecodeError::Inconsistent { .. })
    ));
    // Word 2 is the move sequence in a segment header, reserved in a bucket's.
    let mut moved = SegmentHeader::default().encode();
    moved[16] = 3;
    assert_eq!(SegmentHeader::decode(&l, &moved).unwrap().moves, 3);
    assert!(matches!(
        BucketHeader::decode(&l, &moved),
        Err(DecodeError::Inconsistent { .. })
    ));
    let good = SegmentHeader::default().encode();
    assert!(matches!(
        SegmentHeader::decode(&l, &good[..63]),
        Err(DecodeError::Truncated { .. })
    ));
    assert!(SegmentHeader::decode(&l, &[good.as_slice(), &[0]].concat()).is_err());
}

#[test]
fn read_acquire_matches_read_bytes() {
    let region = Region::new(128);
    let bytes: Vec<u8> = (0..100u8).collect();
    region.write_bytes(8, &bytes).unwrap();
    for len in [0, 1, 8, 13, 100] {
        let mut a = vec![0u8; len];
        let mut b = vec![0u8; len];
        region.read_bytes(8, &mut a).unwrap();
        read_acquire(&region, 8, &mut b).unwrap();
        assert_eq!(a, b);
    }
    assert!(read_acquire(&region, 4, &mut [0u8; 8]).is_err());
    assert!(read_acquire(&region, 120, &mut [0u8; 16]).is_err());
}
