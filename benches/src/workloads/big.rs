//! Big buffers, every page of them written: a program's I/O buffers, images, matrices.
//! One operation is one buffer allocated, written and freed.

use std::collections::VecDeque;
use std::sync::mpsc::sync_channel;

use super::churn::empty_slots;
use crate::{Block, Rng};

const MIB: usize = 1 << 20;

/// Groups of 4 buffers of 1..32 MiB: allocated and written one after the other, then
/// freed together.
pub fn big_buffers(ops: u64) -> u64 {
    const GROUP: u64 = 4;
    let mut rng = Rng::new(21);
    let mut group = Vec::with_capacity(GROUP as usize);
    for done in 0..ops {
        let mut buffer = Block::new(rng.between((MIB, 32 * MIB)));
        buffer.write_pages();
        group.push(buffer);
        if (done + 1) % GROUP == 0 || done + 1 == ops {
            group.clear();
        }
    }
    ops
}

/// 16 slots of 64 KiB..4 MiB, as `large`, but every page of each buffer written: a
/// program whose buffers of many sizes are filled (files read whole, decoded images,
/// scratch matrices), where what an allocator keeps resident is what was written.
pub fn large_written(ops: u64) -> u64 {
    let mut rng = Rng::new(23);
    let mut slots = empty_slots(16);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(16)];
        drop(slot.take());
        let mut buffer = Block::new(rng.between((64 << 10, 4 * MIB)));
        buffer.write_pages();
        *slot = Some(buffer);
    }
    ops
}

/// A ring of 64 buffers of 64 KiB..1 MiB, every page written: each operation frees the
/// oldest and allocates a new one in its place (the frames of a decoding pipeline, the
/// messages of a send queue, the chunks of a log being shipped). Blocks of sizes that
/// follow no pattern freed in the order they came, so where a new one goes decides how
/// much of what the freed ones left resident it reuses.
pub fn buffer_ring(ops: u64) -> u64 {
    const RING: usize = 64;
    let mut rng = Rng::new(24);
    let mut ring = empty_slots(RING);
    for done in 0..ops as usize {
        let slot = &mut ring[done % RING];
        drop(slot.take());
        let mut buffer = Block::new(rng.between((64 << 10, MIB)));
        buffer.write_pages();
        *slot = Some(buffer);
    }
    ops
}

/// Buffers of 64 KiB..1 MiB, every page written, made by one thread and handed in batches
/// of 16 to another, which keeps the last three batches it received and frees the batch
/// that leaves them (a decoder's frames, of which the thread that shows them keeps the
/// last few): every free is a cross-thread free of a medium block. The maker waits for
/// the free of the batch four before the one it makes, so 64 buffers are live at most
/// however the threads are scheduled. One operation is one buffer.
pub fn buffer_pipeline(ops: u64) -> u64 {
    const BATCH: usize = 16;
    const KEPT: usize = 3;
    let batches = (ops as usize / BATCH).max(KEPT + 1);
    let (tx, rx) = sync_channel::<Vec<Block>>(1);
    // Freed batches, one message each.
    let (freed_tx, freed_rx) = sync_channel::<()>(KEPT + 1);
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut kept = VecDeque::with_capacity(KEPT + 1);
            for batch in rx {
                kept.push_back(batch);
                if kept.len() > KEPT {
                    drop(kept.pop_front());
                    // Never blocks (the maker leaves at most two unread) and never fails
                    // (the receiver outlives this thread); the last one stays unread.
                    let _ = freed_tx.send(());
                }
            }
        });
        let mut rng = Rng::new(25);
        for k in 0..batches {
            if k > KEPT {
                freed_rx.recv().expect("the freeing thread lives");
            }
            let batch = (0..BATCH)
                .map(|_| {
                    let mut buffer = Block::new(rng.between((64 << 10, MIB)));
                    buffer.write_pages();
                    buffer
                })
                .collect();
            tx.send(batch).expect("the freeing thread lives");
        }
        drop(tx);
    });
    (batches * BATCH) as u64
}

/// 32 slots of buffers of 4 KiB..8 MiB, each sized for the largest message it may get, of
/// which a message of 1..64 KiB is written from the start (a reader's buffer, a vector
/// reserved ahead): one replaced at random at each operation. What an allocator makes
/// resident beyond the pages written, or faults in whole, is waste.
pub fn big_sparse(ops: u64) -> u64 {
    const SLOTS: usize = 32;
    let mut rng = Rng::new(26);
    let mut slots = empty_slots(SLOTS);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(SLOTS)];
        drop(slot.take());
        let size = rng.between((4 << 10, 8 * MIB));
        *slot = Some(Block::new_front(size, rng.between((1 << 10, 64 << 10))));
    }
    ops
}

/// 64 slots of buffers of 1..16 MiB, each sized for the largest input, every page written
/// (a file read whole, a block decompressed into a buffer of its worst case), then shrunk
/// by `realloc` to the 1/32..1/2 of it the input held (`shrink_to_fit`): one replaced at
/// random at each operation. What the allocator does with the tail decides whether the
/// next buffer finds its pages resident or faults them in afresh.
pub fn shrunk_buffers(ops: u64) -> u64 {
    const SLOTS: usize = 64;
    let mut rng = Rng::new(28);
    let mut slots = empty_slots(SLOTS);
    for _ in 0..ops {
        let slot = &mut slots[rng.below(SLOTS)];
        drop(slot.take());
        let size = rng.between((MIB, 16 * MIB));
        let mut buffer = Block::new(size);
        buffer.write_pages();
        buffer.resize(rng.between((size / 32, size / 2)));
        *slot = Some(buffer);
    }
    ops
}

/// A ring of 4 zero-filled tables (`alloc_zeroed`, C's `calloc`) of 4..64 MiB, each sized
/// for the worst case and written at 64 places at random, each checked to be zero first
/// (a hash table or a bitmap mostly empty): each operation replaces the oldest. What
/// clearing a table costs the allocator when the program writes little of it.
pub fn sparse_zeroed(ops: u64) -> u64 {
    const RING: usize = 4;
    let mut rng = Rng::new(27);
    let mut ring = empty_slots(RING);
    for done in 0..ops as usize {
        let slot = &mut ring[done % RING];
        drop(slot.take());
        let size = rng.between((4 * MIB, 64 * MIB));
        let mut table = Block::new_zeroed(size);
        for _ in 0..64 {
            // Within the block's inner bytes: its ends are written already.
            table.set_zero_byte(1 + rng.below(size - 2), 1);
        }
        *slot = Some(table);
    }
    ops
}

/// A ring of 20 zero-filled buffers (`alloc_zeroed`, C's `calloc`) of 5..25 MiB: each
/// operation replaces the oldest by a new one and writes its pages.
pub fn big_zeroed(ops: u64) -> u64 {
    let mut rng = Rng::new(22);
    let mut ring = empty_slots(20);
    for done in 0..ops as usize {
        let slot = &mut ring[done % 20];
        drop(slot.take());
        let mut buffer = Block::new_zeroed(rng.between((5 * MIB, 25 * MIB)));
        buffer.write_pages();
        *slot = Some(buffer);
    }
    ops
}

/// A program in phases, round after round: 16 buffers of 1..4 MiB read in (every page
/// written) and freed, then objects of 16..256 B built of as many bytes (what a parser
/// makes of its input), and freed: the memory one phase gives back is what the next one
/// needs, in blocks of the other kind. One operation is one round of both phases.
pub fn phase_change(ops: u64) -> u64 {
    const BUFFERS: usize = 16;
    let mut rng = Rng::new(24);
    for _ in 0..ops {
        let buffers: Vec<Block> = (0..BUFFERS)
            .map(|_| {
                let mut buffer = Block::new(rng.between((MIB, 4 * MIB)));
                buffer.write_pages();
                buffer
            })
            .collect();
        let bytes: usize = buffers.iter().map(Block::size).sum();
        drop(buffers);
        let mut objects = Vec::new();
        let mut built = 0;
        while built < bytes {
            let size = rng.between((16, 256));
            objects.push(Block::new(size));
            built += size;
        }
    }
    ops
}

/// Buffers grown by `realloc` to twice their size, 4 KiB to 64 MiB, each page written as
/// the growth adds it, then freed, and the next one built: a vector filled by appends, a
/// file or a response read whole into a buffer that grows. One operation is one doubling
/// (14 a buffer).
pub fn buffer_doubling(ops: u64) -> u64 {
    const START: usize = 4096;
    const END: usize = 64 * MIB;
    let mut done = 0;
    while done < ops {
        let mut buffer = Block::new(START);
        buffer.write_pages();
        while buffer.size() < END && done < ops {
            let old = buffer.size();
            buffer.resize(2 * old);
            buffer.write_pages_from(old);
            done += 1;
        }
    }
    done
}
