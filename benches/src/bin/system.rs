//! The benchmark workloads with the system allocator (glibc's malloc, or musl's in a
//! musl build).

fn main() {
    hakmem_benches::main(hakmem_benches::Hooks::default());
}
