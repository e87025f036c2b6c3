//! The benchmark workloads with hakmem as the global allocator; reports its OS calls and
//! bytes in use (thread caches included) too, and trims for `phases-trim`.

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

fn main() {
    // With the `heap-profile` feature, HAKMEM_HEAP_PROFILE_INTERVAL=BYTES samples the run
    // (docs/PROFILING.md, "Costs"); without it the profiler is compiled in but off.
    #[cfg(feature = "heap-profile")]
    if let Some(interval) = std::env::var("HAKMEM_HEAP_PROFILE_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        hakmem::heap_profile::start(hakmem::heap_profile::Options { interval })
            .expect("heap profiling could not start");
    }
    hakmem_benches::main(hakmem_benches::Hooks {
        os_calls: Some(|| hakmem::stats().os_calls()),
        trim: Some(hakmem::trim),
        in_use: Some(|| hakmem::stats().allocated),
        residency: Some(|| {
            let r = hakmem::residency();
            let kinds = [
                ("superslabs", r.superslabs),
                ("large", r.large),
                ("pairs", r.pairs),
                ("cached_large", r.cached_large),
            ];
            kinds
                .iter()
                .map(|(k, v)| (*k, v.mapped, v.resident))
                .collect()
        }),
    });
}
