#![allow(clippy::unwrap_used, missing_docs)]

/// `#[derive(State)]` on what it cannot handle fails with an error pointing at the culprit.
#[test]
fn derive_state_rejects_bad_input_with_spanned_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
