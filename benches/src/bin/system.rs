//! The benchmark workloads with the system allocator (glibc malloc).

fn main() {
    hakmem_benches::main(hakmem_benches::Hooks::default());
}
