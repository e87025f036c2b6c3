//! Transparent huge pages, which hakmem asks for in every profile (these tests run in the
//! default, `fast`): over the whole 2 MiB stretches a large block covers, and over
//! superslabs of single slabs once hakmem's mappings pass 32 MiB (not over superslabs of
//! spans).
//!
//! A large block's advice covers only its whole stretches: the kernel shows the advice as
//! the `hg` flag of the mapping in `/proc/self/smaps`. The tail of the block past its
//! last whole stretch is a mapping of its own without the flag (the advice splits the
//! kernel's mapping there), so a sparsely written tail is not made resident in 2 MiB
//! pieces. A mapping of 4 MiB or more is advised whole, its header's stretch and its
//! tail included: a buffer that big is mostly written through.

use hakmem_core::{alloc, free, realloc, trim};
use std::sync::{Mutex, MutexGuard};

const MIB: usize = 1 << 20;

/// One test at a time, each starting with the large cache empty: a block reused from an
/// extent another test freed carries that extent's advice. The 9 MiB extent that
/// `a_block_with_an_unadvised_tail_grows_without_a_copy` frees is advised whole, and the
/// block of `large_blocks_ask_for_huge_pages_over_whole_stretches` taken from it had its
/// tail advised: every time with `--test-threads=1`, once in CI.
fn alone() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    trim();
    guard
}

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

/// Whether the advice can be seen here. A kernel built without transparent huge pages
/// refuses it (in CI that is a failure, not a pass); under qemu-user (the AArch64 run of
/// .ci/run) it is not passed on to the host's kernel, so only the allocation is checked.
fn advice_visible() -> bool {
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    if !thp && std::env::var_os("CI").is_some() {
        panic!("this kernel has no transparent huge pages: the advice cannot be checked");
    }
    thp && std::env::var_os("HAKMEM_TEST_RUNNER").is_none()
}

/// A fresh 3 MiB block (under the 4 MiB that are advised whole): one whole 2 MiB
/// stretch, then a tail.
fn block_with_a_tail() -> (*mut u8, usize) {
    let n = 3 * MIB;
    let p = alloc(n, 16);
    assert!(!p.is_null());
    (p, n)
}

#[test]
fn large_blocks_ask_for_huge_pages_over_whole_stretches() {
    let _alone = alone();
    let (p, n) = block_with_a_tail();
    let base = p as usize;
    if advice_visible() {
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

#[test]
fn big_blocks_ask_for_huge_pages_over_their_whole_mapping() {
    let _alone = alone();
    let n = 9 * MIB;
    let p = alloc(n, 16);
    assert!(!p.is_null());
    let chunk = p as usize & !(hakmem_core::CHUNK_SIZE - 1);
    if advice_visible() {
        assert!(advised_huge(chunk), "the header's stretch is not advised");
        assert!(
            advised_huge(p as usize + n - 1),
            "the block's tail is not advised"
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
    let _alone = alone();
    // Past `HUGE_PAGES_FROM` (32 MiB) of hakmem's mappings.
    let big = alloc(40 * MIB, 16);
    assert!(!big.is_null());
    // 10 MiB of 64-byte blocks: the last ones lie in a superslab taken after that.
    let small: Vec<*mut u8> = (0..160_000).map(|_| alloc(64, 16)).collect();
    // 8 MiB of 40,000-byte blocks (spans of slabs): the last ones in a superslab of spans.
    let spans: Vec<*mut u8> = (0..200).map(|_| alloc(40_000, 16)).collect();
    assert!(small.iter().chain(&spans).all(|p| !p.is_null()));
    if advice_visible() {
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

/// Whether the page holding `addr` is resident (`mincore`).
fn resident(addr: usize) -> bool {
    let page = addr & !4095;
    let mut v = 0u8;
    // SAFETY: one page of a live mapping of ours; `v` receives one byte.
    let r = unsafe { libc::mincore(page as *mut libc::c_void, 4096, &mut v) };
    assert_eq!(r, 0, "mincore");
    v & 1 == 1
}

/// A block whose tail is a kernel mapping of its own (see the first test) still grows by
/// moving its pages with `mremap`, which takes one kernel mapping only: hakmem advises the
/// whole range alike first. A page the block never wrote is still absent after the
/// move; a copy would have written it.
#[test]
fn a_block_with_an_unadvised_tail_grows_without_a_copy() {
    let _alone = alone();
    let (p, n) = block_with_a_tail();
    let base = p as usize;
    // A page in the tail, past the block's last whole 2 MiB stretch.
    let hole = (base + 2 * MIB + 256 * 1024) & !4095;
    let mut written = 0u64;
    for page in (base..base + n).step_by(4096) {
        if page & !4095 != hole {
            // SAFETY: inside the live block.
            unsafe { *(page as *mut u64) = page as u64 };
            written += 1;
        }
    }
    if advice_visible() {
        assert!(!advised_huge(hole), "no split: the tail is advised");
    }
    assert!(!resident(hole));
    // SAFETY: a live block of `n` bytes, given up for the new one.
    let q = unsafe { realloc(p, n, 16, 3 * n) };
    assert!(!q.is_null());
    let moved = q as usize;
    let mut kept = 0u64;
    for page in (base..base + n).step_by(4096) {
        if page & !4095 != hole {
            // SAFETY: inside the live block, which kept its first `n` bytes.
            let v = unsafe { *((moved + (page - base)) as *const u64) };
            assert_eq!(v, page as u64, "the block lost its content");
            kept += 1;
        }
    }
    assert_eq!(kept, written);
    assert!(
        !resident(moved + (hole - base)),
        "the block was copied, not moved: the page it never wrote is resident"
    );
    // SAFETY: a live block, given up.
    unsafe { free(q) };
}
