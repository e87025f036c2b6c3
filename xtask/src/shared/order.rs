//! The order in which a round runs the allocators it compares.
//!
//! A run can leave the machine in a state that the next run pays for, whatever it is: on
//! this project's KVM host, a run after one that used hundreds of MiB in small pages
//! drew its huge pages cold. A C program that allocates 10M blocks of 16..128 B and frees
//! them, twice (870 MB), run by hand with the 512 MiB warm-up before each run, 5 rounds:
//! in the order hakmem, mimalloc 3, jemalloc, tcmalloc, hakmem (after tcmalloc) took
//! 1.38 s and mimalloc 3 0.49; in the order mimalloc 3, hakmem, jemalloc, tcmalloc,
//! mimalloc 3 (after tcmalloc) took 1.51 s and hakmem 0.52. With a fixed order, or one
//! only rotated from round to round, each allocator always follows the same one, and such
//! a carry-over falls on one allocator every time.
//!
//! So a round's order is a row of a Williams design: over a cycle of rounds (`n` rounds
//! for `n` allocators, `2n` when `n` is odd), each allocator goes first equally often and
//! runs right after each other one equally often.

/// The indices `0..n` in the order round `round` (from 0) runs them.
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    let row = round % cycle(n);
    let mut order: Vec<usize> = (0..n).map(|k| (first_row(n, k) + row) % n).collect();
    if row >= n {
        order.reverse();
    }
    order
}

/// Rounds in a cycle of the design for `n` allocators: `n`, or `2n` when `n` is odd.
fn cycle(n: usize) -> usize {
    if n % 2 == 0 {
        n
    } else {
        2 * n
    }
}

/// Position `k` of the design's first row: 0, 1, n-1, 2, n-2, 3, ... The steps between
/// neighbours (1, -2, 3, -4, ... modulo `n`) are all different when `n` is even, so that the
/// `n` shifts of the row put every pair side by side once; when `n` is odd each step comes
/// twice, and the reversed rows supply the pairs the others miss.
fn first_row(n: usize, k: usize) -> usize {
    match k {
        0 => 0,
        k if k % 2 == 1 => k.div_ceil(2),
        k => n - k / 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over a whole cycle every round is a permutation, every index goes first as often
    /// as every other, and every ordered pair `(a, b)`, `a != b`, is side by side (`b`
    /// right after `a`) as often as every other.
    #[test]
    fn a_cycle_balances_first_places_and_neighbours() {
        for n in 1..=9 {
            let rows = cycle(n);
            let mut first = vec![0; n];
            let mut after = vec![vec![0; n]; n];
            for round in 0..rows {
                let order = round_order(n, round);
                let mut seen = order.clone();
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n} round {round}");
                first[order[0]] += 1;
                for pair in order.windows(2) {
                    after[pair[0]][pair[1]] += 1;
                }
            }
            assert!(first.iter().all(|&f| f == rows / n), "n {n}: {first:?}");
            let want = if n % 2 == 0 { 1 } else { 2 };
            for (a, row) in after.iter().enumerate() {
                for (b, &count) in row.iter().enumerate() {
                    assert_eq!(count, if a == b { 0 } else { want }, "n {n}: {a} then {b}");
                }
            }
        }
    }

    /// The cycle repeats: round `rows + r` runs in round `r`'s order.
    #[test]
    fn the_cycle_repeats() {
        assert_eq!(round_order(6, 1), round_order(6, 7));
        assert_eq!(round_order(5, 3), round_order(5, 13));
        assert_ne!(round_order(6, 0), round_order(6, 1));
        assert!(round_order(0, 4).is_empty());
    }
}
