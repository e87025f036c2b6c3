//! What to run: one series per (workload, allocator, hakmem profile), each a process of
//! its own. A workload an allocator's program cannot soak (`phases-trim` needs a trim) is
//! skipped with a note.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use serde::Serialize;

use super::SoakArgs;
use crate::shared::{Allocator, Profile};

/// One run: a workload, an allocator, and for hakmem the profile it is given (`None`: the
/// environment's).
#[derive(Clone, Debug, Serialize)]
pub struct Series {
    pub workload: String,
    pub allocator: Allocator,
    pub profile: Option<Profile>,
}

impl Series {
    /// `hakmem-lean`, or `mimalloc`.
    pub fn label(&self) -> String {
        match self.profile {
            Some(p) => format!("{}-{}", self.allocator.name(), p.name()),
            None => self.allocator.name().to_string(),
        }
    }

    /// `phases hakmem-lean`.
    pub fn name(&self) -> String {
        format!("{} {}", self.workload, self.label())
    }
}

pub struct Plan {
    pub series: Vec<Series>,
    /// Why series are skipped.
    pub notes: Vec<String>,
}

pub fn plan(args: &SoakArgs, programs: &Path) -> Result<Plan> {
    let allocators = args.allocators();
    let mut listings = Vec::new();
    for &a in &allocators {
        ensure!(
            a.has_rust_program(),
            "{} has C rows in `cargo xtask bench` only; soak runs the Rust programs",
            a.name()
        );
        listings.push((a, list(&programs.join(format!("bench-{}", a.name())))?));
    }
    let mut plan = Plan {
        series: Vec::new(),
        notes: Vec::new(),
    };
    for workload in args.workloads() {
        let known = listings.iter().any(|(_, names)| names.contains(&workload));
        if !known {
            let mut all: Vec<&String> = listings.iter().flat_map(|(_, n)| n).collect();
            all.sort();
            all.dedup();
            bail!("unknown soak workload {workload:?}; known: {all:?}");
        }
        for (a, names) in &listings {
            if !names.contains(&workload) {
                plan.notes.push(format!(
                    "{workload} skipped for {}: it needs a trim",
                    a.name()
                ));
                continue;
            }
            let profiles = match a {
                Allocator::Hakmem => args.profiles(),
                _ => vec![None],
            };
            for profile in profiles {
                plan.series.push(Series {
                    workload: workload.clone(),
                    allocator: *a,
                    profile,
                });
            }
        }
    }
    Ok(plan)
}

/// The workloads a program can soak (`PROGRAM soak --list`).
fn list(program: &Path) -> Result<Vec<String>> {
    let out = Command::new(program)
        .args(["soak", "--list"])
        .output()
        .with_context(|| format!("running {} soak --list", program.display()))?;
    ensure!(
        out.status.success(),
        "{} soak --list failed",
        program.display()
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| match line.strip_prefix("soak-workload ") {
            Some(name) => Ok(name.to_string()),
            None => bail!(
                "unexpected line from {} --list: {line:?}",
                program.display()
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_named_by_allocator_and_profile() {
        let s = Series {
            workload: "phases".into(),
            allocator: Allocator::Hakmem,
            profile: Some(Profile::Lean),
        };
        assert_eq!(s.name(), "phases hakmem-lean");
        let m = Series {
            allocator: Allocator::Mimalloc,
            profile: None,
            ..s
        };
        assert_eq!(m.label(), "mimalloc");
    }
}
