//! Growth by reallocation: a `Vec<u8>` and then a `String` grow by appends of 1..256 bytes
//! to 1 MiB, are dropped, and the next one starts; or a thousand strings grow at once, each
//! to exactly its length. One operation is one append.

use crate::Rng;

const TARGET: usize = 1 << 20;
/// 256 bytes of ASCII text to append from.
const TEXT: [u8; 256] = {
    let mut text = [0; 256];
    let mut i = 0;
    while i < text.len() {
        text[i] = b'a' + (i % 26) as u8;
        i += 1;
    }
    text
};

/// What grows: `Vec<u8>` and `String`.
trait Grow: Default {
    fn append(&mut self, len: usize);
    fn len(&self) -> usize;
}

impl Grow for Vec<u8> {
    fn append(&mut self, len: usize) {
        self.extend_from_slice(&TEXT[..len]);
    }
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

impl Grow for String {
    fn append(&mut self, len: usize) {
        self.push_str(std::str::from_utf8(&TEXT[..len]).expect("ASCII"));
    }
    fn len(&self) -> usize {
        String::len(self)
    }
}

pub fn realloc_growth(ops: u64) -> u64 {
    let mut rng = Rng::new(7);
    let mut done = 0;
    for build in 0.. {
        if done >= ops {
            break;
        }
        done += match build % 2 {
            0 => grow::<Vec<u8>>(&mut rng, ops - done),
            _ => grow::<String>(&mut rng, ops - done),
        };
    }
    done
}

/// Grow one `G` to `TARGET` bytes (or `budget` appends); the number of appends made.
fn grow<G: Grow>(rng: &mut Rng, budget: u64) -> u64 {
    let mut g = G::default();
    let mut appends = 0;
    while g.len() < TARGET && appends < budget {
        g.append(rng.between((1, 256)));
        appends += 1;
    }
    std::hint::black_box(&g);
    appends
}

/// A thousand strings built at once by appends of 1..64 bytes, one string picked at random
/// for each, every append growing its string to exactly its new length by `realloc` (as C
/// code does that keeps a string's size equal to its length); a string that would pass
/// 64 KiB is dropped and started again. A program building many texts (log lines,
/// messages, documents) at once.
pub fn string_builders(ops: u64) -> u64 {
    const STRINGS: usize = 1000;
    const MAX: usize = 64 << 10;
    let text = std::str::from_utf8(&TEXT).expect("ASCII");
    let mut rng = Rng::new(24);
    let mut strings: Vec<String> = (0..STRINGS).map(|_| String::new()).collect();
    for _ in 0..ops {
        let s = &mut strings[rng.below(STRINGS)];
        let add = rng.between((1, 64));
        if s.len() + add > MAX {
            *s = String::new();
            continue;
        }
        s.reserve_exact(add);
        s.push_str(&text[..add]);
    }
    std::hint::black_box(&strings);
    ops
}
