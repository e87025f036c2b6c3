//! A hash table torn down: a chained hash table of entries with random keys, grown by
//! doubling from 16 buckets as it fills (a new zeroed table each time), then torn down
//! bucket by bucket, each entry's link read before its value and the entry are freed.
//! The entries of one chain were made at unrelated times, so the frees come in no order
//! of address: the teardown of a symbol table, a cache, a C++ `unordered_map`. Chains are
//! short (under one entry a bucket on average), so the load of the next bucket's entry
//! seldom waits on this one's, and the CPU runs ahead to it as far as the instructions of
//! the frees between leave it room: an allocator whose free does more than a push has
//! fewer of the walk's cache misses under way at once. One operation is one entry
//! inserted (two blocks: the entry and its value of 8..47 bytes) and freed.

use crate::Rng;

/// Entries per round: 200K, 6.4 MiB of entries and about as much of values.
const ROUND: u64 = 200_000;
/// Buckets of a new table, as a power of two.
const FIRST_BITS: u32 = 4;

/// An entry: its chain's link, its key, its value in a block of its own.
#[derive(Clone)]
struct Entry {
    next: Option<Box<Entry>>,
    key: u64,
    value: Box<[u8]>,
}

/// A table of `2^bits` chains; `vec!` of `None` asks for zeroed memory (`calloc` in C).
type Table = Vec<Option<Box<Entry>>>;

pub fn hash_teardown(ops: u64) -> u64 {
    let mut rng = Rng::new(43);
    let mut left = ops;
    let mut sum = 0u64;
    while left > 0 {
        let n = ROUND.min(left);
        left -= n;
        sum = sum.wrapping_add(round(n, &mut rng));
    }
    std::hint::black_box(sum);
    ops
}

/// Build a table of `n` entries, then tear it down; the sum of the keys and of the
/// values' first bytes.
fn round(n: u64, rng: &mut Rng) -> u64 {
    let mut bits = FIRST_BITS;
    let mut table: Table = vec![None; 1 << bits];
    for i in 0..n {
        let key = rng.next_u64();
        let value = vec![key as u8; rng.between((8, 47))].into_boxed_slice();
        insert(&mut table, bits, key, value);
        if i + 1 > 1 << bits {
            table = grow(table, bits);
            bits += 1;
        }
    }
    let mut sum = 0u64;
    for slot in &mut table {
        let mut next = slot.take();
        while let Some(mut e) = next {
            next = e.next.take();
            sum = sum.wrapping_add(e.key).wrapping_add(u64::from(e.value[0]));
            // `e` goes here: its value, then the entry.
        }
    }
    sum
}

/// A new entry of `key` and `value` at the head of its chain in `table` (`2^bits` buckets).
fn insert(table: &mut Table, bits: u32, key: u64, value: Box<[u8]>) {
    let h = bucket(key, bits);
    table[h] = Some(Box::new(Entry {
        next: table[h].take(),
        key,
        value,
    }));
}

/// The chains of `old` (`2^bits` buckets) moved into a table twice as long; `old`'s
/// buffer is freed.
fn grow(old: Table, bits: u32) -> Table {
    let mut table: Table = vec![None; 2 << bits];
    for mut next in old {
        while let Some(mut e) = next {
            next = e.next.take();
            let h = bucket(e.key, bits + 1);
            e.next = table[h].take();
            table[h] = Some(e);
        }
    }
    table
}

/// The bucket of `key` in a table of `2^bits` (Fibonacci hashing: the top bits of the
/// key times the golden ratio).
fn bucket(key: u64, bits: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_add_up_to_the_operations() {
        assert_eq!(hash_teardown(250_001), 250_001);
        assert_eq!(hash_teardown(0), 0);
    }

    #[test]
    fn a_grown_table_keeps_every_entry_in_its_bucket() {
        let mut rng = Rng::new(1);
        let mut table: Table = vec![None; 1 << FIRST_BITS];
        for _ in 0..100 {
            insert(
                &mut table,
                FIRST_BITS,
                rng.next_u64(),
                vec![0; 8].into_boxed_slice(),
            );
        }
        let table = grow(table, FIRST_BITS);
        let mut count = 0;
        for (h, slot) in table.iter().enumerate() {
            let mut e = slot.as_deref();
            while let Some(x) = e {
                assert_eq!(bucket(x.key, FIRST_BITS + 1), h);
                count += 1;
                e = x.next.as_deref();
            }
        }
        assert_eq!(count, 100);
    }
}
