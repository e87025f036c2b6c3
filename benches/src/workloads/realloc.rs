//! Growth by reallocation: a `Vec<u8>` and then a `String` grow by appends of 1..256 bytes
//! to 1 MiB, are dropped, and the next one starts. One operation is one append.

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
