//! The loom tests' explorer, shared by `loom_protocol.rs` and `loom_kept.rs`.

/// Explore `f` under loom and print how many executions it took.
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let b = loom::model::Builder::new();
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    let n = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom explored {n} executions");
    // A model whose threads loom never interleaves explores one execution and proves
    // nothing (as happened while the owner ran on loom's main thread).
    assert!(
        n >= 100,
        "loom explored only {n} executions: no race was modelled"
    );
}
