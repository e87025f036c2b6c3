//! Where and how a benchmark ran, stored with its results.

use std::collections::BTreeMap;

use serde::Serialize;

use super::build::Built;
use super::plan::Plan;
use super::BenchArgs;
use crate::shared::machine::{first_line, Machine};
use crate::shared::Profile;

#[derive(Serialize)]
pub struct Meta {
    #[serde(flatten)]
    pub machine: Machine,
    pub runs: usize,
    /// MiB warmed before each run (`--warm`, `bench/warm.rs`).
    pub warm_mib: usize,
    pub gcc: String,
    /// The profile hakmem ran with.
    pub hakmem_profile: String,
    /// The `LD_PRELOAD` library of each allocator in the C rows (or why none).
    pub preloads: BTreeMap<String, String>,
    /// The sources the C rows' mimalloc (mimalloc 3) was built from, if it was.
    pub mimalloc3_sources: Option<String>,
    /// The revision and commit of the `baseline` rows, if any.
    pub baseline: Option<String>,
}

impl Meta {
    pub fn now(args: &BenchArgs, plan: &Plan, built: &Built) -> Meta {
        let preloads = plan.preloads.iter().map(|(a, lib)| {
            let lib = match lib {
                Ok(Some(path)) => path.display().to_string(),
                Ok(None) => "none".to_string(),
                Err(why) => format!("skipped: {why}"),
            };
            (a.name().to_string(), lib)
        });
        Meta {
            machine: Machine::now(),
            runs: args.runs(),
            warm_mib: args.warm,
            gcc: first_line("gcc", &["--version"]),
            hakmem_profile: Profile::describe(args.profile),
            preloads: preloads.collect(),
            mimalloc3_sources: built
                .mimalloc3
                .as_ref()
                .ok()
                .map(|m| m.sources.display().to_string()),
            baseline: built
                .baseline
                .as_ref()
                .map(|b| format!("{} ({})", b.rev, b.commit)),
        }
    }
}
