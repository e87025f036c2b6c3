//! Transparent huge pages in the `fast` profile (the default), where hakmem asks for
//! them: over the whole 2 MiB stretches a large block covers, and over superslabs of single
//! slabs once hakmem's mappings pass 32 MiB (not over superslabs of spans).
//!
//! A large block's advice covers only its whole stretches: the kernel shows the advice as
//! the `hg` flag of the mapping in `/proc/self/smaps`. The tail of the block past its
//! last whole stretch is a mapping of its own without the flag (the advice splits the
//! kernel's mapping there), so a sparsely written tail is not made resident in 2 MiB
//! pieces.

use hakmem_core::{alloc, free};

const MIB: usize = 1 << 20;

/// The `VmFlags` of the mapping of `/proc/self/smaps` that holds `addr`.
fn vm_flags(addr: usize) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.to_string();
            }
        }
    }
    panic!("no mapping holds {addr:#x}");
}

#[test]
fn large_blocks_ask_for_huge_pages_over_whole_stretches() {
    // A kernel built without transparent huge pages refuses the advice: nothing to see.
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    if !thp && std::env::var_os("CI").is_some() {
        panic!("this kernel has no transparent huge pages: the advice cannot be checked");
    }
    let n = 5 * MIB;
    let p = alloc(n, 16);
    assert!(!p.is_null());
    let base = p as usize;
    // Under qemu-user (the AArch64 run of .ci/run) `madvise` advice is not passed on to
    // the host's kernel, so only the allocation is checked there.
    let emulated = std::env::var_os("HAKMEM_TEST_RUNNER").is_some();
    if thp && !emulated {
        assert!(
            advised_huge(base),
            "the block's first stretch is not advised"
        );
        assert!(
            !advised_huge(base + n - 1),
            "the block's tail, past its last whole 2 MiB stretch, is advised"
        );
    }
    // SAFETY: a live block, given up.
    unsafe { free(p) };
}

/// Whether the mapping holding `addr` carries the huge-page advice.
fn advised_huge(addr: usize) -> bool {
    vm_flags(addr).split_whitespace().any(|f| f == "hg")
}

#[test]
fn superslabs_of_single_slabs_ask_for_huge_pages_once_the_heap_is_large() {
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    if !thp && std::env::var_os("CI").is_some() {
        panic!("this kernel has no transparent huge pages: the advice cannot be checked");
    }
    // Past `HUGE_PAGES_FROM` (32 MiB) of hakmem's mappings.
    let big = alloc(40 * MIB, 16);
    assert!(!big.is_null());
    // 10 MiB of 64-byte blocks: the last ones lie in a superslab taken after that.
    let small: Vec<*mut u8> = (0..160_000).map(|_| alloc(64, 16)).collect();
    // 8 MiB of 40,000-byte blocks (spans of slabs): the last ones in a superslab of spans.
    let spans: Vec<*mut u8> = (0..200).map(|_| alloc(40_000, 16)).collect();
    assert!(small.iter().chain(&spans).all(|p| !p.is_null()));
    let emulated = std::env::var_os("HAKMEM_TEST_RUNNER").is_some();
    if thp && !emulated {
        assert!(
            advised_huge(*small.last().unwrap() as usize),
            "a superslab of single slabs past 32 MiB is not advised"
        );
        assert!(
            !advised_huge(*spans.last().unwrap() as usize),
            "a superslab of spans is advised"
        );
    }
    // SAFETY: live blocks, given up.
    unsafe {
        for p in small.into_iter().chain(spans) {
            free(p);
        }
        free(big);
    }
}
