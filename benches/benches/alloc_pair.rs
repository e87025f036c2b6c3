//! One `alloc` + `dealloc` pair per size class, for each allocator, called through its
//! `GlobalAlloc` impl directly (the `#[global_allocator]` of this binary stays the system
//! one). Run with `cargo bench -p hakmem-benches`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};

/// Small classes up to the largest mid class, and one large (mapped) block.
const SIZES: &[usize] = &[
    16,
    32,
    64,
    128,
    256,
    512,
    1024,
    4096,
    16 << 10,
    64 << 10,
    1 << 20,
];

/// One group per size, so criterion compares the allocators side by side.
fn pairs(c: &mut Criterion) {
    for &size in SIZES {
        let layout = Layout::from_size_align(size, 8).expect("layout");
        let mut group = c.benchmark_group(format!("alloc_dealloc/{size}"));
        group.throughput(Throughput::Elements(1));
        pair(&mut group, "hakmem", &hakmem::HakMem, layout);
        pair(&mut group, "mimalloc", &mimalloc::MiMalloc, layout);
        pair(&mut group, "jemalloc", &tikv_jemallocator::Jemalloc, layout);
        pair(&mut group, "system", &System, layout);
        group.finish();
    }
}

/// Generic rather than `dyn`, so each allocator's fast path can be inlined as it would be.
fn pair<A: GlobalAlloc>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    a: &A,
    layout: Layout,
) {
    group.bench_function(name, |b| {
        b.iter(|| {
            // SAFETY: the layout is non-zero; the block is freed once, with the same layout.
            unsafe {
                let p = a.alloc(black_box(layout));
                assert!(!p.is_null());
                p.write(1);
                a.dealloc(black_box(p), layout);
            }
        })
    });
}

criterion_group!(benches, pairs);
criterion_main!(benches);
