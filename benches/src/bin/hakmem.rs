//! The benchmark workloads with hakmem as the global allocator; reports its OS calls too.

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

fn main() {
    hakmem_benches::main(Some(|| hakmem::stats().os_calls()));
}
