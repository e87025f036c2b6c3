//! The entry points of hakmem-core from outside: what `owner` and `usable_size` say about
//! pointers of every kind, alignments up to the 2 MiB limit, large blocks grown with
//! `mremap` to 64 MiB and shrunk back, and requests too large to serve.
//!
//! This binary's global allocator is the system's; hakmem is only called directly.

#[path = "../../hakmem/tests/common/mod.rs"]
mod common;

use hakmem_core::{alloc, alloc_zeroed, dealloc, owner, realloc, realloc_unsized, usable_size};
use hakmem_core::{block_size, class_of_size, Class, MAX_SMALL_SIZE};
use hakmem_core::{realloc_cached, stays_in_place};
use hakmem_core::{Owner, MAX_ALIGN};

const MIB: usize = 1 << 20;

/// A block from `alloc(size, align)` filled with `id`'s pattern.
fn filled(size: usize, align: usize, id: u64) -> *mut u8 {
    let p = alloc(size, align);
    assert!(!p.is_null(), "alloc({size}, {align}) failed");
    assert_eq!(p as usize % align, 0, "alloc({size}, {align}) = {p:p}");
    // SAFETY: a fresh block of `size` bytes.
    unsafe { common::fill(p, 0, size, id) };
    p
}

/// Check `id`'s pattern over `size` bytes of `p`, then free it as `(size, align)`.
fn check_and_free(p: *mut u8, size: usize, align: usize, id: u64) {
    // SAFETY: a live block of `size` bytes made with `(size, align)`.
    unsafe {
        common::check(p, 0, size, id, "before free");
        dealloc(p, size, align);
    }
}

#[test]
fn foreign_pointers_are_foreign() {
    let on_stack = 0u64;
    let boxed = Box::new([0u8; 64]);
    let system_big = vec![0u8; 8 * MIB];
    for p in [
        std::ptr::null(),
        &on_stack as *const u64 as *const u8,
        boxed.as_ptr(),
        system_big.as_ptr(),
        // SAFETY: only the address is computed.
        unsafe { system_big.as_ptr().add(5 * MIB) },
        foreign_fn as *const u8,
        std::ptr::without_provenance(16),
        (1usize << 47) as *const u8,
        usize::MAX as *const u8,
    ] {
        assert_eq!(owner(p), Owner::Foreign, "{p:p}");
        assert_eq!(usable_size(p), 0, "{p:p}");
    }
}

fn foreign_fn() {}

#[test]
fn blocks_and_their_surroundings_are_classified() {
    let small = filled(64, 16, 1);
    let mid = filled(5000, 16, 2);
    let big = filled(2 * MIB, 16, 3);
    assert!(matches!(owner(small), Owner::Small { usable: 64, .. }));
    match owner(mid) {
        Owner::Small { class, usable } => {
            assert_eq!(usable, block_size(class));
            assert!(usable >= 5000);
        }
        o => panic!("mid block is {o:?}"),
    }
    match owner(big) {
        Owner::Large { usable } => assert!(usable >= 2 * MIB),
        o => panic!("large block is {o:?}"),
    }
    assert_eq!(usable_size(small), 64);
    // The superslab header is not a block, nor is anything in a large block but its start.
    let chunk = |p: *mut u8| (p as usize & !(hakmem_core::CHUNK_SIZE - 1)) as *const u8;
    assert_eq!(owner(chunk(small)), Owner::Invalid);
    assert_eq!(owner(chunk(big)), Owner::Invalid);
    for off in [1, 16, 4096, MIB / 2] {
        // SAFETY: only the address is computed, inside the block.
        let inside = unsafe { big.add(off) };
        assert_eq!(owner(inside), Owner::Invalid, "large block + {off}");
        assert_eq!(usable_size(inside), 0);
    }
    check_and_free(small, 64, 16, 1);
    check_and_free(mid, 5000, 16, 2);
    check_and_free(big, 2 * MIB, 16, 3);
    // A freed large block is cached (not a block any more) or unmapped (foreign).
    assert!(
        matches!(owner(big), Owner::Invalid | Owner::Foreign),
        "freed large block is {:?}",
        owner(big)
    );
}

/// `Owner::Invalid` is documented as "inside hakmem's memory but not the start of a live
/// block", and `free` promises to report such a pointer rather than corrupt the heap; a
/// pointer into the middle of a small block is the commonest case.
/// `stays_in_place` says yes exactly where `realloc_unsized` keeps the block without a
/// move: a small block resized within its class; no for the next class, for interior,
/// large, foreign and null pointers, which `realloc_unsized` classifies in full.
#[test]
fn a_resize_within_the_class_stays_in_place() {
    let p = alloc(100, 16);
    let usable = usable_size(p);
    assert!(usable >= 100);
    // The classes up to 128 B are 16 B apart.
    for n in [usable - 15, 100, usable] {
        assert!(stays_in_place(p, n), "{n} of {usable}");
    }
    assert!(!stays_in_place(p, usable + 1));
    assert!(!stays_in_place(p, usable - 16));
    // SAFETY: only the address is computed, inside the block.
    assert!(!stays_in_place(unsafe { p.add(16) }, 100));
    let big = alloc(3 * MIB, 16);
    assert!(!stays_in_place(big, 3 * MIB));
    let on_stack = 0u64;
    assert!(!stays_in_place(&on_stack as *const u64 as *const u8, 8));
    assert!(!stays_in_place(std::ptr::null(), 8));
    // SAFETY: live blocks; `realloc_unsized` keeps `p` where `stays_in_place` says so.
    unsafe {
        assert_eq!(realloc_unsized(p, usable), p);
        dealloc(p, usable, 16);
        dealloc(big, 3 * MIB, 16);
    }
}

/// `realloc_cached` resizes exactly the small blocks the slab map knows: in place within
/// the class, moved with their bytes past it (into a class or a large mapping); `None`
/// (the pointer left alone) for interior, large, foreign and null pointers.
#[test]
fn realloc_cached_resizes_small_blocks_only() {
    let p = filled(100, 16, 7);
    let usable = usable_size(p);
    // SAFETY: `p` is live and ours; each move gives the old block up.
    unsafe {
        assert_eq!(realloc_cached(p, usable), Some(p));
        let q = realloc_cached(p, 1000).expect("a small block");
        assert!(q != p && usable_size(q) >= 1000);
        common::check(q, 0, 100, 7, "moved to a class");
        // The old block went back to the thread's cache, the newest of its class.
        let again = alloc(100, 16);
        assert_eq!(again, p, "the moved block was not freed");
        dealloc(again, 100, 16);
        let r = realloc_cached(q, 3 * MIB).expect("a small block");
        assert!(matches!(owner(r), Owner::Large { .. }));
        common::check(r, 0, 100, 7, "moved to a large mapping");
        assert_eq!(realloc_cached(r, 4 * MIB), None);
        let s = alloc(64, 16);
        assert_eq!(realloc_cached(s.add(16), 64), None);
        // Memory refused: null, and the block stays the caller's, whole.
        s.write_bytes(9, 64);
        assert_eq!(
            realloc_cached(s, isize::MAX as usize),
            Some(std::ptr::null_mut())
        );
        assert!(std::slice::from_raw_parts(s, 64).iter().all(|&b| b == 9));
        let on_stack = 0u64;
        assert_eq!(realloc_cached(&on_stack as *const u64 as *mut u8, 8), None);
        assert_eq!(realloc_cached(std::ptr::null_mut(), 8), None);
        dealloc(s, 64, 16);
        dealloc(r, 3 * MIB, 16);
    }
}

#[test]
fn interior_pointers_of_small_blocks_are_not_blocks() {
    for size in [64usize, 4096, 48 * 1024, 300_000, MIB] {
        let p = filled(size, 16, 4);
        for off in [8usize, 16, size / 2] {
            // SAFETY: only the address is computed, inside the block.
            let inside = unsafe { p.add(off) };
            assert!(
                !matches!(owner(inside), Owner::Small { .. }),
                "{off} bytes into a {size}-byte block, owner says {:?}",
                owner(inside)
            );
        }
        check_and_free(p, size, 16, 4);
    }
}

#[test]
fn usable_size_is_the_class_block_and_all_of_it_is_writable() {
    let mut sizes: Vec<usize> = Class::all()
        .flat_map(|c| {
            let b = block_size(c);
            [b - 1, b, b + 1]
        })
        .filter(|&s| s <= MAX_SMALL_SIZE)
        .collect();
    sizes.push(0);
    // Two of each, so that neighbours would show a write past a block's end.
    let blocks: Vec<(*mut u8, usize, u64)> = sizes
        .iter()
        .flat_map(|&s| [s, s])
        .enumerate()
        .map(|(i, s)| {
            let p = alloc(s, 16);
            assert!(!p.is_null());
            let u = usable_size(p);
            assert_eq!(u, block_size(class_of_size(s).unwrap()), "size {s}");
            assert!(u >= s && u % 16 == 0);
            // SAFETY: the whole usable size is the caller's.
            unsafe { common::fill(p, 0, u, i as u64) };
            (p, u, i as u64)
        })
        .collect();
    for (p, u, id) in blocks {
        // SAFETY: a live block of `u` usable bytes.
        unsafe {
            common::check(p, 0, u, id, "usable bytes");
            hakmem_core::free(p);
        }
    }
    // Large blocks: at least the request (up to `max_mapping` of what it needs, when a
    // cached extent is reused), and the tail is writable too.
    for size in [MAX_SMALL_SIZE + 1, 2 * MIB, 3 * MIB + 5] {
        let p = alloc(size, 16);
        let u = usable_size(p);
        assert!(
            u >= size && u <= hakmem_core::testing::max_mapping(size + 4096 + 128),
            "size {size}: usable {u}"
        );
        // SAFETY: the whole usable size is the caller's.
        unsafe {
            common::fill(p, 0, u, 9);
            common::check(p, 0, u, 9, "large usable bytes");
            hakmem_core::free(p);
        }
    }
}

#[test]
fn alignments_up_to_2_mib_are_honoured() {
    for log2 in 0..=21 {
        let align = 1usize << log2;
        for size in [0, 1, align / 2, align, align + 1, 3 * align] {
            let size = size.min(8 * MIB);
            let p = filled(size, align, log2 as u64);
            // Realloc keeps the alignment, and the content up to the smaller size.
            let grown = size + 70_000;
            // SAFETY: a live block made with `(size, align)`.
            let q = unsafe { realloc(p, size, align, grown) };
            assert!(!q.is_null(), "realloc({size} -> {grown}, align {align})");
            assert_eq!(
                q as usize % align,
                0,
                "realloc({size} -> {grown}, align {align})"
            );
            // SAFETY: `q` holds `grown >= size` bytes.
            unsafe { common::check(q, 0, size, log2 as u64, "after realloc") };
            // SAFETY: a live block made with `(grown, align)`.
            unsafe { dealloc(q, grown, align) };
            let z = alloc_zeroed(size, align);
            assert_eq!(z as usize % align, 0);
            // SAFETY: a fresh block of `size` bytes.
            let dirty = unsafe { common::nonzero(z, size) };
            assert_eq!(dirty, None, "alloc_zeroed({size}, {align})");
            check_and_free(filled_in(z, size, 5), size, align, 5);
        }
    }
    assert!(
        alloc(1, 2 * MAX_ALIGN).is_null(),
        "alignment over MAX_ALIGN"
    );
}

/// A block aligned to more than a chunk (4 MiB) starts a chunk of its own mapping, one
/// chunk past its header: every entry point finds it there, by its layout or by the
/// pointer alone, and no pointer a chunk away passes for it.
#[test]
fn alignments_over_a_chunk_are_honoured() {
    let chunk = hakmem_core::CHUNK_SIZE;
    for (i, align) in [chunk, 2 * chunk, 16 * chunk, 1 << 30]
        .into_iter()
        .enumerate()
    {
        for size in [1, 4096, 5 * MIB] {
            let id = 40 + i as u64;
            let p = filled(size, align, id);
            let usable = usable_size(p);
            assert!(usable >= size, "usable_size of ({size}, {align}): {usable}");
            assert_eq!(owner(p), Owner::Large { usable });
            assert!(hakmem_core::in_heap(p));
            // Its header a chunk below, and the chunk past its start, are no blocks. Past
            // a block shorter than a chunk lies whatever the other tests (run beside this
            // one) left there: a cached extent's free header reads as `Invalid`.
            assert_eq!(owner(p.wrapping_sub(chunk)), Owner::Invalid);
            let past = owner(p.wrapping_add(chunk));
            if size >= chunk {
                assert_eq!(past, Owner::Foreign, "inside the block");
            } else {
                assert!(matches!(past, Owner::Foreign | Owner::Invalid), "{past:?}");
            }
            // Grown by its layout, it keeps its alignment and its bytes.
            let grown = size + 70_000;
            // SAFETY: a live block made with `(size, align)`.
            let q = unsafe { realloc(p, size, align, grown) };
            assert!(
                !q.is_null() && q as usize % align == 0,
                "realloc to {grown}"
            );
            check_and_free(q, size, align, id);
            // Freed and resized by the pointer alone.
            let p = filled(size, align, id);
            // SAFETY: a live block; `realloc_unsized` keeps 16 bytes' alignment only.
            let q = unsafe { realloc_unsized(p, size + MIB) };
            assert!(!q.is_null());
            // SAFETY: `q` holds at least `size` of the old bytes.
            unsafe { common::check(q, 0, size, id, "after realloc_unsized") };
            // SAFETY: a live block.
            unsafe { hakmem_core::free(q) };
        }
    }
}

/// A zeroed block of up to a few dozen bytes, which the allocation zeroes with stores of
/// its own, is zero in every byte asked for when it is a block just freed dirty (the
/// bin hands it back first).
#[test]
fn small_zeroed_blocks_reused_dirty_are_zero() {
    for size in 0..=100 {
        let p = alloc(size, 16);
        assert!(!p.is_null());
        // SAFETY: a live block of `usable_size(p)` bytes.
        unsafe { core::ptr::write_bytes(p, 0xa5, usable_size(p)) };
        // SAFETY: a live block made with `(size, 16)`.
        unsafe { dealloc(p, size, 16) };
        let z = alloc_zeroed(size, 16);
        assert_eq!(z, p, "the block just freed comes back ({size})");
        // SAFETY: a fresh block of `size` bytes.
        let dirty = unsafe { common::nonzero(z, size) };
        assert_eq!(dirty, None, "alloc_zeroed({size}, 16)");
        // SAFETY: a live block made with `(size, 16)`.
        unsafe { dealloc(z, size, 16) };
    }
}

/// A request aligned to more than a slab (64 KiB) gets a block of a medium class, whose
/// blocks start at any slab: one at its alignment, even when the thread's cache holds
/// blocks of the class that lie elsewhere (the one freed last comes first otherwise).
#[test]
fn over_a_slab_aligned_requests_pass_over_cached_blocks_that_lie_elsewhere() {
    for align in [128 << 10, 256 << 10, 512 << 10, MIB] {
        // Plain blocks of the class, each after a 64 KiB one, until one lies off the
        // alignment.
        let mut plain = vec![];
        let mut spacers = vec![];
        while plain
            .last()
            .is_none_or(|&p: &*mut u8| p as usize % align == 0)
        {
            assert!(
                plain.len() < 64,
                "{align}: every plain block at the alignment"
            );
            spacers.push(alloc(64 << 10, 16));
            plain.push(alloc(align, 16));
        }
        // The one off the alignment freed last: the head of its bin.
        for &p in &plain {
            // SAFETY: a live block made with `(align, 16)`.
            unsafe { dealloc(p, align, 16) };
        }
        let q = filled(align / 2, align, 3);
        check_and_free(q, align / 2, align, 3);
        for p in spacers {
            // SAFETY: a live block made with `(64 KiB, 16)`.
            unsafe { dealloc(p, 64 << 10, 16) };
        }
    }
}

/// Fill `p` (a fresh block of `size` bytes) with `id`'s pattern and return it.
fn filled_in(p: *mut u8, size: usize, id: u64) -> *mut u8 {
    // SAFETY: by the caller.
    unsafe { common::fill(p, 0, size, id) };
    p
}

/// Grow a large block step by step to 64 MiB and back (mremap moves pages, never copies);
/// every step keeps the content, with the default alignment and with 1 MiB.
#[test]
fn large_realloc_grows_to_64_mib_and_back_keeping_content() {
    for align in [16, MIB] {
        let mut size = 100 * 1024;
        let mut p = filled(size, align, 77);
        let mut steps = vec![];
        while size < 64 * MIB {
            let next = (size * 2).min(64 * MIB);
            steps.push(next);
            size = next;
        }
        let mut down = size;
        while down > 100 {
            down /= 5;
            steps.push(down);
        }
        size = 100 * 1024;
        for next in steps {
            // SAFETY: a live block made with `(size, align)`.
            let q = unsafe { realloc(p, size, align, next) };
            assert!(!q.is_null(), "realloc {size} -> {next} (align {align})");
            assert_eq!(q as usize % align, 0);
            // SAFETY: `q` holds `next` bytes, the first `min` from the old block.
            unsafe {
                common::check(
                    q,
                    0,
                    size.min(next),
                    77,
                    &format!("realloc {size} -> {next}"),
                );
                common::fill(q, size.min(next), next, 77);
            }
            p = q;
            size = next;
        }
        check_and_free(p, size, align, 77);
    }
}

/// Requests no machine can meet fail cleanly: null, nothing written, and a block being
/// resized stays as it was.
#[test]
fn absurd_sizes_return_null() {
    let absurd = [
        usize::MAX,
        usize::MAX - 4095,
        isize::MAX as usize + 1,
        isize::MAX as usize,
        isize::MAX as usize / 2 + 1,
        1 << 61,
    ];
    let small = filled(100, 16, 11);
    let big = filled(200_000, 16, 12);
    let unsized_small = filled(300, 16, 13);
    for &size in &absurd {
        for align in [1, 16, 4096, 64 * 1024, MIB] {
            assert!(alloc(size, align).is_null(), "alloc({size:#x}, {align})");
            assert!(
                alloc_zeroed(size, align).is_null(),
                "alloc_zeroed({size:#x}, {align})"
            );
        }
        // SAFETY: live blocks with their requests; on failure they stay ours.
        unsafe {
            assert!(
                realloc(small, 100, 16, size).is_null(),
                "realloc small -> {size:#x}"
            );
            assert!(
                realloc(big, 200_000, 16, size).is_null(),
                "realloc big -> {size:#x}"
            );
            assert!(realloc_unsized(unsized_small, size).is_null());
            assert!(realloc_unsized(big, size).is_null());
        }
    }
    check_and_free(small, 100, 16, 11);
    check_and_free(big, 200_000, 16, 12);
    check_and_free(unsized_small, 300, 16, 13);
}
