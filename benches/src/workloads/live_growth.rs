//! A growing live set: blocks of mixed sizes pile up to 200 MiB with frees scattered
//! through them (a cache filling, a parser building its tree), then mostly go again
//! (the cache evicting, the tree dropped piece by piece), and the cycle repeats. One
//! operation is one block allocated (each is freed later).

use super::batch::mixed_size;
use crate::{Block, Rng};

/// The live bytes at which the set starts to shrink, and at which it grows again.
const HIGH: usize = 200 << 20;
const LOW: usize = HIGH / 16;

pub fn live_growth(ops: u64) -> u64 {
    let mut rng = Rng::new(31);
    let mut live: Vec<Block> = Vec::new();
    let (mut bytes, mut growing) = (0, true);
    let mut done = 0;
    while done < ops {
        // Growing: allocate, and free a random block one time in four. Shrinking: free
        // a random block, and allocate one time in four.
        if growing || rng.below(4) == 0 {
            let block = Block::new(mixed_size(&mut rng));
            bytes += block.size();
            live.push(block);
            done += 1;
        }
        if (!growing || rng.below(4) == 0) && !live.is_empty() {
            bytes -= live.swap_remove(rng.below(live.len())).size();
        }
        if growing && bytes >= HIGH || !growing && bytes <= LOW {
            growing = !growing;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_its_operations() {
        assert_eq!(super::live_growth(20_000), 20_000);
    }
}
