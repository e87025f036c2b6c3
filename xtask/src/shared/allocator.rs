//! The allocators compared, and hakmem's memory profiles.

use clap::ValueEnum;
use serde::Serialize;

/// An allocator under comparison. `mimalloc` is mimalloc 3 on both sides: the `mimalloc`
/// crate in the Rust rows, the same C sources built into a shared object for the C rows.
/// `mimalloc2` (Debian's mimalloc 2.0.9) and `tcmalloc` have C rows only. `baseline` is
/// hakmem built at another revision (`cargo xtask bench --baseline REV`);
/// `hakmem-balanced` and `hakmem-lean` are hakmem's programs run in that memory profile,
/// rows beside `hakmem` (its default, fast) so that a run measures what a profile costs.
/// These three are not in [`Allocator::ALL`] and not competitors for "the best".
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    Hakmem,
    Mimalloc,
    Mimalloc2,
    Jemalloc,
    Tcmalloc,
    System,
    Baseline,
    #[value(name = "hakmem-balanced")]
    #[serde(rename = "hakmem-balanced")]
    HakmemBalanced,
    #[value(name = "hakmem-lean")]
    #[serde(rename = "hakmem-lean")]
    HakmemLean,
}

impl Allocator {
    pub const ALL: [Allocator; 6] = [
        Self::Hakmem,
        Self::Mimalloc,
        Self::Mimalloc2,
        Self::Jemalloc,
        Self::Tcmalloc,
        Self::System,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Hakmem => "hakmem",
            Self::Mimalloc => "mimalloc",
            Self::Mimalloc2 => "mimalloc2",
            Self::Jemalloc => "jemalloc",
            Self::Tcmalloc => "tcmalloc",
            Self::System => "system",
            Self::Baseline => "baseline",
            Self::HakmemBalanced => "hakmem-balanced",
            Self::HakmemLean => "hakmem-lean",
        }
    }

    /// The allocator whose programs and library it runs (itself, but hakmem's for the
    /// profile rows).
    pub fn program(self) -> Allocator {
        match self {
            Self::HakmemBalanced | Self::HakmemLean => Self::Hakmem,
            a => a,
        }
    }

    /// The memory profile its runs are given (the profile rows'; the others take
    /// `--profile` or the environment's).
    pub fn profile(self) -> Option<Profile> {
        match self {
            Self::HakmemBalanced => Some(Profile::Balanced),
            Self::HakmemLean => Some(Profile::Lean),
            _ => None,
        }
    }

    /// Whether it is another allocator that hakmem is measured against (not hakmem at
    /// another revision or in another profile).
    pub fn is_competitor(self) -> bool {
        !matches!(
            self,
            Self::Baseline | Self::HakmemBalanced | Self::HakmemLean
        )
    }

    /// Whether it has a Rust workload program (`bench-NAME`); the others run C rows only.
    pub fn has_rust_program(self) -> bool {
        !matches!(self, Self::Mimalloc2 | Self::Tcmalloc)
    }
}

/// hakmem's memory profile; it reaches a workload program through [`Profile::ENV`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    Fast,
    Balanced,
    Lean,
}

impl Profile {
    /// The environment variable hakmem reads its profile from at start-up.
    pub const ENV: &'static str = "HAKMEM_PROFILE";

    pub fn name(self) -> &'static str {
        match self {
            Self::Fast => "fast",
            Self::Balanced => "balanced",
            Self::Lean => "lean",
        }
    }

    /// What the children will run with: `profile` if given, else what the environment
    /// passes on to them, else hakmem's default.
    pub fn describe(profile: Option<Profile>) -> String {
        match (profile, std::env::var(Self::ENV)) {
            (Some(p), _) => p.name().to_string(),
            (None, Ok(v)) => format!("{v} (from {})", Self::ENV),
            (None, Err(_)) => "fast (hakmem's default)".to_string(),
        }
    }
}
