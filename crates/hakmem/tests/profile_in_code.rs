//! A profile chosen in code, for a `static` global allocator, wins over the environment.

#[global_allocator]
static GLOBAL: hakmem::HakMemWith = hakmem::HakMemWith::new(hakmem::Profile::Lean);

#[test]
fn the_profile_from_code_is_applied_on_the_first_allocation() {
    // The test harness has allocated long before this runs.
    let v = std::hint::black_box(vec![1u8; 100].into_boxed_slice());
    assert_eq!(v.len(), 100);
    assert_eq!(hakmem_core::config::profile(), hakmem::Profile::Lean);
}
