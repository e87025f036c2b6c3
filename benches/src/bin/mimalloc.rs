//! The benchmark workloads with mimalloc as the global allocator.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    hakmem_benches::main(hakmem_benches::Hooks::default());
}
