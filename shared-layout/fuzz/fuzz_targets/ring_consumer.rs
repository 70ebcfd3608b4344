//! The ring consumer against a producer and an adversary that scribbles over
//! shared memory, driven by the fuzz input as a little program:
//!
//! - byte 0 picks the capacity (64 B .. 2 KiB);
//! - then ops: `0 len` push, `1` pop, `2 word b0..b7` overwrite one word of the
//!   region, `3` re-attach the consumer, `4` is_empty / free_bytes.
//!
//! Until the first scribble, pops must return exactly the pushed payloads in
//! order; after it, every pop is an error or a payload within bounds, and an
//! error is sticky. Nothing may panic.
#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use splitkv_layout::ring::{
    init_ring, ring_payload_bytes_max, ring_region_bytes, RingConsumer, RingError, RingProducer,
};
use splitkv_layout::Region;

/// Bound on executed ops, so one input cannot run long.
const OPS_MAX: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut ops)) = data.split_first() else {
        return;
    };
    let capacity = 64usize << (first % 6);
    let region = Region::new(ring_region_bytes(capacity));
    init_ring(&region, 0, capacity).unwrap();
    let mut producer = RingProducer::attach(region.clone(), 0).unwrap();
    let mut consumer = Some(RingConsumer::attach(region.clone(), 0).unwrap());
    let mut model: VecDeque<Vec<u8>> = VecDeque::new();
    let mut scribbled = false;
    let mut failed = false;
    let mut out = Vec::new();
    let mut seq = 0u8;
    for _ in 0..OPS_MAX {
        let Some((&op, rest)) = ops.split_first() else {
            break;
        };
        ops = rest;
        match op % 5 {
            0 => {
                let Some((&len, rest)) = ops.split_first() else {
                    break;
                };
                ops = rest;
                let len = len as usize * capacity / 200;
                seq = seq.wrapping_add(1);
                let payload: Vec<u8> = (0..len).map(|i| seq ^ i as u8).collect();
                match producer.try_push(&payload) {
                    Ok(_) => model.push_back(payload),
                    Err(RingError::Full) | Err(RingError::Corrupt(_)) => {}
                    Err(RingError::TooLarge { len: l, max }) => {
                        assert!(l > max && max == ring_payload_bytes_max(capacity))
                    }
                    Err(e) => panic!("push: {e}"),
                }
            }
            1 => {
                let Some(c) = consumer.as_mut() else { continue };
                match c.try_pop(&mut out) {
                    Ok(got) => {
                        assert!(!failed, "consumer error was not sticky");
                        assert!(got || out.is_empty());
                        assert!(out.len() <= ring_payload_bytes_max(c.capacity_bytes()));
                        if !scribbled {
                            assert_eq!(model.pop_front().as_ref(), got.then_some(&out));
                        }
                    }
                    Err(e) => {
                        assert!(scribbled, "error without corruption: {e}");
                        assert!(matches!(e, RingError::Corrupt(_)));
                        failed = true;
                    }
                }
            }
            2 => {
                if ops.len() < 9 {
                    break;
                }
                let words = region.len_bytes() / 8;
                let offset = (ops[0] as usize % words) * 8;
                region.write_bytes(offset, &ops[1..9]).unwrap();
                ops = &ops[9..];
                scribbled = true;
            }
            3 => {
                consumer = RingConsumer::attach(region.clone(), 0).ok();
                assert!(consumer.is_some() || scribbled);
                // A re-attached consumer continues from the shared head, where
                // the old one stopped.
                failed = false;
            }
            _ => {
                if let Some(c) = consumer.as_mut() {
                    let empty = c.is_empty();
                    if !scribbled {
                        assert_eq!(empty, model.is_empty());
                    }
                }
                let free = producer.free_bytes();
                assert!(free <= capacity);
            }
        }
    }
});
