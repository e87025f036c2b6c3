//! The slab map (C `free`'s class lookup) forgets a superslab before it is unmapped: a
//! pointer into memory that another mapping took over afterwards is that mapping's, and
//! `free` hands it back as foreign instead of taking it for a block of the class its
//! slab once served. Its own process: the superslab must go back to the OS here.

use hakmem_core::{alloc, free_or_else, owner, trim, NotFreed, Owner, CHUNK_SIZE};

const SIZE: usize = 64;

#[test]
fn free_of_a_pointer_into_a_remapped_superslab_is_foreign() {
    // A thread fills a few superslabs' worth of blocks of one class, frees them and
    // exits, so that its superslabs are empty and nobody's.
    let kept = std::thread::spawn(|| {
        let blocks: Vec<usize> = (0..200_000)
            .map(|_| {
                let p = alloc(SIZE, 16);
                assert!(!p.is_null());
                p as usize
            })
            .collect();
        for &p in &blocks {
            // SAFETY: a live block of this allocator, given up once.
            unsafe { free_or_else(p as *mut u8, |_, _| panic!("a live block")) };
        }
        blocks[blocks.len() / 2]
    })
    .join()
    .unwrap();
    trim();
    assert_eq!(
        owner(kept as *const u8),
        Owner::Foreign,
        "the superslab went back to the OS"
    );

    // Someone else maps the chunk; a block start of the old class now lies in their memory.
    let base = kept & !(CHUNK_SIZE - 1);
    // SAFETY: MAP_FIXED_NOREPLACE maps only where nothing is mapped.
    let q = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            CHUNK_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(q as usize, base, "the chunk's addresses are free again");
    let mut why = None;
    // SAFETY: a pointer hakmem never handed out (in this mapping), which the callback
    // receives.
    unsafe { free_or_else(kept as *mut u8, |_, w| why = Some(w)) };
    assert_eq!(why, Some(NotFreed::Foreign));
    // SAFETY: the mapping made above, unused now.
    unsafe { libc::munmap(q, CHUNK_SIZE) };
}
