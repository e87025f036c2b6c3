//! The benchmark workloads with jemalloc as the global allocator.

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    hakmem_benches::main(hakmem_benches::Hooks::default());
}
