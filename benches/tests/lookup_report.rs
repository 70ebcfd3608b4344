//! Xenic Table 2's shape holds on a small table: every key is found; a larger
//! D_m reads more objects and needs fewer round trips; with no limit and warm
//! hints every lookup takes exactly one DMA read.

use splitkv_bench::lookup_report::{run, LookupRow, LookupSpec, D_MAX_UNLIMITED};

fn row(d_max: usize, warm: bool) -> LookupRow {
    run(
        &LookupSpec {
            keys: 100_000,
            d_max,
            segment_slots: 16,
            warm,
            seed: 3,
        },
        |_, _, _| {},
    )
    .expect("every key found")
}

#[test]
fn table_2_shape() {
    let rows: Vec<_> = [8, 16, 32, D_MAX_UNLIMITED]
        .iter()
        .map(|&d| row(d, true))
        .collect();
    for r in &rows {
        assert!((0.89..0.91).contains(&r.occupancy), "{r:?}");
        assert!(r.round_trips >= 1.0 && r.objects_read >= 1.0, "{r:?}");
    }
    for w in rows.windows(2) {
        assert!(
            w[1].round_trips <= w[0].round_trips,
            "round trips fall as D_m grows: {w:?}"
        );
        assert!(
            w[1].objects_read >= w[0].objects_read - 0.05,
            "objects read grow with D_m: {w:?}"
        );
        assert!(w[1].overflow_keys <= w[0].overflow_keys, "{w:?}");
    }
    assert!(
        rows[0].overflow_keys > 0 && rows[0].round_trips > 1.0,
        "D_m = 8 overflows at 90%: {:?}",
        rows[0]
    );
    assert_eq!(rows[3].overflow_keys, 0);
    assert_eq!(
        rows[3].round_trips, 1.0,
        "warm hints, no limit: one read per lookup"
    );
}

#[test]
fn cold_hints_cost_extra_reads_but_find_everything() {
    let warm = row(16, true);
    let cold = row(16, false);
    assert!(cold.round_trips > warm.round_trips, "{cold:?} vs {warm:?}");
    assert!(
        cold.d_known_mean <= warm.d_known_mean + 1e-9,
        "hints learned on the fly never exceed the truth"
    );
}
