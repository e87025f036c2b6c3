//! Messages on stderr without allocating: `core::fmt` into a fixed buffer on the stack.

use core::fmt;

/// A message of at most `N` bytes; longer ones are cut.
pub struct Message<const N: usize = 256> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Message<N> {
    pub const fn new() -> Self {
        Message {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Append raw bytes (a C string from the environment, say).
    pub fn put(&mut self, s: &[u8]) -> &mut Self {
        let n = s.len().min(N - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Write the message to stderr.
    pub fn emit(&self) {
        self.emit_to(2);
    }

    /// Write the message to the file descriptor `fd` (errors ignored).
    pub fn emit_to(&self, fd: i32) {
        let mut rest = self.as_bytes();
        while !rest.is_empty() {
            // SAFETY: `rest` is readable for its length; a bad `fd` only fails.
            let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
            if n <= 0 {
                return;
            }
            rest = &rest[n as usize..];
        }
    }
}

impl<const N: usize> Default for Message<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for Message<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.put(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn formats_and_truncates() {
        let mut m = Message::<16>::new();
        write!(m, "x={} y={:#x}", 42, 255).unwrap();
        assert_eq!(m.as_bytes(), b"x=42 y=0xff");
        m.put(b" and much more");
        assert_eq!(m.as_bytes(), b"x=42 y=0xff and ");
    }
}
