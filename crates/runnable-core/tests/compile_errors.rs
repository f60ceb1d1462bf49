//! Compile-time diagnostics: mistakes a first program makes get a hint, not a wall of trait errors.
#![allow(missing_docs)]

#[test]
fn an_async_closure_given_to_new_points_at_new_async() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/async_closure_in_new.rs");
}
