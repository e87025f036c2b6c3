//! A linked list rebuilt: a list of small records is built, walked a few times, and freed
//! in random order, round after round. Where the allocator places the next round's
//! records decides how fast the walks are: in address order after a shuffled free (a
//! slab emptied and carved again, or blocks taken lowest address first), they stream
//! through the caches; in the order the last round freed them, every step of a walk
//! waits on memory. A program that frees a big structure and builds another, a parser's
//! tree per document or a solver's list per step, has this shape. One operation is one
//! record allocated, walked [`WALKS`] times and freed.

use crate::Rng;

/// Records per round: 3.2 MiB of them, which fits the last-level cache of the machines
/// we run on, so that the walks measure placement, not memory bandwidth.
const ROUND: u64 = 100_000;
/// Walks of each round's list.
pub const WALKS: usize = 4;

/// A record: a link and three words, 32 bytes.
struct Record {
    next: *const Record,
    value: u64,
    _payload: [u64; 2],
}

pub fn list_rebuild(ops: u64) -> u64 {
    let mut rng = Rng::new(31);
    // Each record once, from `Box::into_raw`, each freed once by `Box::from_raw` below.
    let mut records: Vec<*mut Record> = Vec::with_capacity(ROUND as usize);
    let mut left = ops;
    let mut sum = 0u64;
    while left > 0 {
        let n = ROUND.min(left);
        left -= n;
        let mut head: *const Record = std::ptr::null();
        for i in 0..n {
            head = Box::into_raw(Box::new(Record {
                next: head,
                value: i,
                _payload: [i; 2],
            }));
            records.push(head.cast_mut());
        }
        for _ in 0..WALKS {
            sum = sum.wrapping_add(walk(head));
        }
        super::batch::shuffle(&mut records, &mut rng);
        for r in records.drain(..) {
            // SAFETY: from `Box::into_raw`, and in `records` once: freed once, after the
            // last walk.
            drop(unsafe { Box::from_raw(r) });
        }
    }
    std::hint::black_box(sum);
    ops
}

/// The sum of the values of the list that starts at `head`.
fn walk(mut p: *const Record) -> u64 {
    let mut sum = 0u64;
    while !p.is_null() {
        // SAFETY: every record of the list is live (`list_rebuild` frees them after the
        // walks) and nothing writes one while the list is walked.
        let r = unsafe { &*p };
        sum = sum.wrapping_add(r.value);
        p = r.next;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_add_up_to_the_operations() {
        assert_eq!(list_rebuild(250_001), 250_001);
        assert_eq!(list_rebuild(0), 0);
    }
}
