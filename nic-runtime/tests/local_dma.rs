//! The local DMA engine (`nic-runtime/src/dma/local.rs`): read vectors
//! complete with the bytes of their elements back to back, whether or not the
//! engine prefetches them at submission (`LocalDma::set_prefetch`), and
//! prefetch hints outside the host memory are ignored.

use splitkv_layout::ring::ring_pair;
use splitkv_layout::Region;
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::dma::{DmaCompletion, DmaDone, DmaEngine, DmaRead, HostMemory};
use std::sync::Arc;

fn region() -> Region {
    let r = Region::new(4096);
    for i in 0..4096 / 8 {
        r.store(
            8 * i,
            i as u64 * 3 + 1,
            splitkv_layout::sync::Ordering::Relaxed,
        );
    }
    r
}

/// Submits `vectors`, polls once, and returns each completion's bytes.
fn run(prefetch: bool, vectors: &[Vec<DmaRead>]) -> Vec<Vec<u8>> {
    let (log_tx, _log_rx) = ring_pair(4096).unwrap();
    let mut dma = LocalDma::new(Arc::new(region()), log_tx, 0);
    dma.set_prefetch(prefetch);
    for (token, v) in vectors.iter().enumerate() {
        dma.submit_read(0, token as u64, v).unwrap();
    }
    let mut out: Vec<DmaCompletion> = Vec::new();
    dma.poll(0, &mut out);
    assert_eq!(
        out.len(),
        vectors.len(),
        "every vector completes at the poll"
    );
    out.iter()
        .enumerate()
        .map(|(i, c)| {
            assert_eq!(c.token, i as u64, "completions in submission order");
            let Ok(DmaDone::Read { start, len }) = c.result else {
                panic!("read failed: {:?}", c.result)
            };
            dma.data()[start..start + len].to_vec()
        })
        .collect()
}

#[test]
fn prefetching_changes_no_completed_byte() {
    let vectors = vec![
        vec![DmaRead { offset: 0, len: 64 }],
        vec![
            DmaRead {
                offset: 2048,
                len: 8,
            },
            DmaRead {
                offset: 64,
                len: 1024,
            },
        ],
        vec![DmaRead {
            offset: 4088,
            len: 8,
        }],
    ];
    let with = run(true, &vectors);
    assert_eq!(with, run(false, &vectors));
    // And the bytes are the region's, elements back to back.
    let r = region();
    let mut expect = vec![0u8; 8 + 1024];
    r.read_bytes(2048, &mut expect[..8]).unwrap();
    r.read_bytes(64, &mut expect[8..]).unwrap();
    assert_eq!(with[1], expect);
}

#[test]
fn prefetch_hints_outside_the_region_are_ignored() {
    let r = region();
    // Past the end, straddling it, huge lengths: hints only, never a panic.
    HostMemory::prefetch(&r, 4096, 64);
    HostMemory::prefetch(&r, 4090, 1 << 20);
    HostMemory::prefetch(&r, usize::MAX - 3, usize::MAX);
    let mut b = [0u8; 8];
    HostMemory::read(&r, 0, &mut b).unwrap();
    assert_eq!(u64::from_le_bytes(b), 1);
}

/// Log appends of full-size entries (16 records of 4 KiB, 66 KiB each) land
/// in the host log in order; the buffers the engine keeps for reuse stay
/// within `APPEND_SPARE_BYTES_MAX`, and small entries reuse them.
#[test]
fn full_size_log_appends_keep_bounded_spares() {
    use splitkv_layout::log_record::LOG_ENTRY_BYTES_MAX;
    use splitkv_nic::dma::local::APPEND_SPARE_BYTES_MAX;
    let (log_tx, mut log_rx) = ring_pair(8 << 20).unwrap();
    let mut dma = LocalDma::new(Arc::new(region()), log_tx, 0);
    let mut out = Vec::new();
    let entry = |i: usize| vec![i as u8; LOG_ENTRY_BYTES_MAX];
    for i in 0..64 {
        dma.submit_log_append(0, i as u64, &entry(i)).unwrap();
    }
    dma.poll(0, &mut out);
    assert_eq!(out.len(), 64);
    assert!(out
        .iter()
        .all(|c| matches!(c.result, Ok(DmaDone::Appended { .. }))));
    assert!(dma.spare_bytes() <= APPEND_SPARE_BYTES_MAX);
    assert!(dma.spare_bytes() >= LOG_ENTRY_BYTES_MAX, "some are kept");
    let mut got = Vec::new();
    for i in 0..64 {
        assert!(log_rx.try_pop(&mut got).unwrap());
        assert!(got == entry(i), "entry {i}");
    }
    // Small appends take kept buffers and give them back.
    let before = dma.spare_bytes();
    dma.submit_log_append(0, 99, b"small").unwrap();
    assert!(dma.spare_bytes() < before);
    out.clear();
    dma.poll(0, &mut out);
    assert_eq!(dma.spare_bytes(), before);
}
