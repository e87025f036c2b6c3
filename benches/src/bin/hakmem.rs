//! The benchmark workloads with hakmem as the global allocator; reports its OS calls and
//! bytes in use (thread caches included) too, and trims for `phases-trim`.

#[global_allocator]
static GLOBAL: hakmem::HakMem = hakmem::HakMem;

fn main() {
    hakmem_benches::main(hakmem_benches::Hooks {
        os_calls: Some(|| hakmem::stats().os_calls()),
        trim: Some(hakmem::trim),
        in_use: Some(|| hakmem::stats().allocated),
    });
}
