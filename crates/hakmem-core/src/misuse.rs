//! Reporting the program's misuse of the allocator: a message on stderr naming the
//! pointer and the kind of misuse (and the size class when known), then abort. Written
//! into a fixed buffer: reporting never allocates, since the heap may be what is broken.

use crate::os;
use crate::size_class::{block_size, Class};

/// Kinds of misuse hakmem reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misuse {
    /// `free` of a pointer outside every chunk hakmem mapped.
    ForeignFree,
    /// `realloc` of a pointer outside every chunk hakmem mapped.
    ForeignRealloc,
    /// `free` of a pointer in hakmem's memory that starts no live block.
    InvalidFree,
    /// `free` of a pointer inside a block of a known class (checked mode).
    InteriorFree,
    /// A block freed twice.
    DoubleFree,
    /// The canary after a block's usable bytes changed (checked mode).
    Overflow,
    /// `dealloc` with a layout of another class than the allocation's (checked mode).
    WrongLayout,
}

/// Report misuse of the allocator on stderr, naming the pointer, then abort. Never
/// allocates.
#[cold]
pub fn report_misuse(p: *const u8, kind: Misuse, class: Option<Class>) -> ! {
    let what: &[u8] = match kind {
        Misuse::ForeignFree => b"free of a pointer hakmem never handed out",
        Misuse::ForeignRealloc => b"realloc of a pointer hakmem never handed out",
        Misuse::InvalidFree => {
            b"free of a pointer that is not the start of a live block (invalid or interior pointer)"
        }
        Misuse::InteriorFree => b"free of an interior pointer (not the start of its block)",
        Misuse::DoubleFree => b"double free",
        Misuse::Overflow => b"write past the end of a block (canary overwritten)",
        Misuse::WrongLayout => b"dealloc with a layout other than the allocation's",
    };
    let mut buf = [0u8; 256];
    let mut w = Writer {
        buf: &mut buf,
        len: 0,
    };
    w.put(b"hakmem: ");
    w.put(what);
    w.put(b": pointer 0x");
    w.hex(p as usize);
    if let Some(c) = class {
        w.put(b" (size class ");
        w.dec(c.index());
        w.put(b", block ");
        w.dec(block_size(c));
        w.put(b" bytes)");
    }
    w.put(b"\n");
    let len = w.len;
    os::write_stderr(&buf[..len]);
    os::abort()
}

/// A fixed buffer to format messages into without allocating.
struct Writer<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Writer<'_> {
    fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    fn hex(&mut self, mut v: usize) {
        let mut tmp = [0u8; 16];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b"0123456789abcdef"[v & 15];
            v >>= 4;
            if v == 0 {
                break;
            }
        }
        self.put(&tmp[i..]);
    }

    fn dec(&mut self, mut v: usize) {
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&tmp[i..]);
    }
}
