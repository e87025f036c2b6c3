//! The CPU time and page faults the kernel counts for this process (`getrusage`), so that
//! a run's result says where its time went: a run many times slower than its others with
//! the same page faults, its extra time in the kernel, waited on the memory it faulted in,
//! not on the allocator's code.

use std::time::Duration;

/// What the kernel counted for this process (all its threads, ended ones included) up to
/// one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    pub user: Duration,
    pub system: Duration,
    /// Page faults served without I/O (a fresh page, or one in the page cache).
    pub minor_faults: u64,
}

impl Usage {
    /// This process's usage so far (zero if the kernel refuses, which it does not for
    /// `RUSAGE_SELF`).
    pub fn now() -> Usage {
        // SAFETY: `rusage` is plain data, for which all zeroes is a valid value.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid `rusage` for the kernel to fill.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Usage::default();
        }
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Usage {
            user: time(ru.ru_utime),
            system: time(ru.ru_stime),
            minor_faults: ru.ru_minflt.max(0) as u64,
        }
    }

    /// What was counted between `earlier` and `self`.
    pub fn since(self, earlier: Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_counted_and_subtracted() {
        let before = Usage::now();
        // Fault in 64 fresh pages (a zeroed request this large is a fresh mapping).
        let mut v = vec![0u8; 64 << 12];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let spent = Usage::now().since(before);
        assert!(spent.minor_faults >= 1, "{spent:?}");
        assert_eq!(Usage::default().since(spent), Usage::default());
    }
}
