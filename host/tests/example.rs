//! Runs the top-level example (`examples/minimal.rs`) as a test, so the
//! embedding API's 30-line application keeps working.

#[allow(dead_code)] // its `main`
mod minimal {
    include!("../../examples/minimal.rs");
}

#[test]
fn the_minimal_example_counts_every_increment() {
    assert_eq!(minimal::run().expect("example runs"), 200);
}
