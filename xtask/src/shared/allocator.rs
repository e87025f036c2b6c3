//! The allocators compared, and hakmem's memory profiles.

use clap::ValueEnum;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    Hakmem,
    Mimalloc,
    Jemalloc,
    System,
}

impl Allocator {
    pub const ALL: [Allocator; 4] = [Self::Hakmem, Self::Mimalloc, Self::Jemalloc, Self::System];

    pub fn name(self) -> &'static str {
        match self {
            Self::Hakmem => "hakmem",
            Self::Mimalloc => "mimalloc",
            Self::Jemalloc => "jemalloc",
            Self::System => "system",
        }
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
