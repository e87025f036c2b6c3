//! What to run: the selected workloads, each with one target per allocator (a command
//! line, or why it is skipped), and the operation counts.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

use super::build::Built;
use super::{musl, preload, BenchArgs};
use crate::shared::Allocator;

/// How to start one run.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub preload: Option<PathBuf>,
}

#[derive(Clone)]
pub struct Target {
    pub allocator: Allocator,
    /// The command line, or why this pair is skipped.
    pub setup: Result<Invocation, String>,
}

pub struct WorkloadPlan {
    pub name: String,
    pub ops: u64,
    pub targets: Vec<Target>,
}

pub struct Plan {
    pub workloads: Vec<WorkloadPlan>,
    /// Why rows or whole suites are skipped.
    pub notes: Vec<String>,
    /// The `LD_PRELOAD` library of each allocator in the C rows.
    pub preloads: Vec<(Allocator, Result<Option<PathBuf>, String>)>,
}

/// `--ops` gives random-mixed's count; the other workloads scale by the same factor.
const REFERENCE_WORKLOAD: &str = "random-mixed";

/// A workload program's `--list`: (name, default operation count).
type Listing = Vec<(String, u64)>;

pub fn plan(args: &BenchArgs, allocators: &[Allocator], built: &Built) -> Result<Plan> {
    let rust = list(&built.rust_bins.join("bench-system"))?;
    let scale = scale(args.ops, &rust)?;
    // The baseline's own workloads: one this commit added is no row of it. A baseline
    // whose binary cannot list them runs every row, as before.
    let baseline_listing = built
        .baseline
        .as_ref()
        .and_then(|b| list(&b.rust_program).ok());
    let baseline_lacks = |workload: &str| {
        baseline_listing
            .as_ref()
            .is_some_and(|l| !l.iter().any(|(n, _)| n == workload))
    };
    let rust_setup = |a: Allocator, workload: &str| match (a, &built.baseline) {
        (Allocator::Baseline, Some(_)) if baseline_lacks(workload) => {
            Err("the baseline has no such workload".to_string())
        }
        (Allocator::Baseline, Some(b)) => Ok((b.rust_program.clone(), None)),
        _ => Ok((
            built
                .rust_bins
                .join(format!("bench-{}", a.program().name())),
            None,
        )),
    };
    // The allocators with only a C library have no row in the Rust workloads.
    let rust_allocators: Vec<Allocator> = allocators
        .iter()
        .copied()
        .filter(|a| a.has_rust_program())
        .collect();
    let mut plan = Plan {
        workloads: suite(&rust, "", rust_setup, args, &rust_allocators, scale),
        notes: Vec::new(),
        preloads: Vec::new(),
    };
    if built.baseline.is_some() {
        let missing: Vec<&str> = plan
            .workloads
            .iter()
            .map(|w| w.name.as_str())
            .filter(|w| baseline_lacks(w))
            .collect();
        if !missing.is_empty() {
            plan.notes.push(format!(
                "baseline rows of {} skipped: the baseline has no such workload",
                missing.join(", ")
            ));
        }
    }
    let c = match &built.c_program {
        Ok(program) => plan_c(&mut plan, program, args, allocators, built, scale)?,
        Err(why) if args.wants_c() => {
            plan.notes.push(format!("C workloads skipped: {why}"));
            Vec::new()
        }
        Err(_) => Vec::new(),
    };
    let musl_names = plan_musl(&mut plan, &rust, args, allocators, built, scale);
    check_names(
        &args.workload,
        &rust,
        &c,
        built.c_program.is_ok(),
        &musl_names,
    )?;
    Ok(plan)
}

/// Add the musl workloads (the Rust ones, renamed `musl-*`), or the note of why they are
/// skipped; their names.
fn plan_musl(
    plan: &mut Plan,
    rust: &Listing,
    args: &BenchArgs,
    allocators: &[Allocator],
    built: &Built,
    scale: f64,
) -> Listing {
    let names: Listing = rust
        .iter()
        .map(|(name, ops)| (format!("{}{name}", musl::PREFIX), *ops))
        .collect();
    match &built.musl {
        Ok(bins) => {
            for (a, program) in &bins.programs {
                if let Err(why) = program {
                    plan.notes
                        .push(format!("musl rows of {} skipped: {why}", a.name()));
                }
            }
            let setup = |a: Allocator, _: &str| bins.program(a).map(|p| (p, None));
            let workloads = suite(rust, musl::PREFIX, setup, args, allocators, scale);
            plan.workloads.extend(workloads);
        }
        Err(why) if args.wants_musl() => plan.notes.push(format!("musl workloads skipped: {why}")),
        Err(_) => {}
    }
    names
}

/// Add the C workloads, run under each allocator's `LD_PRELOAD` library; their listing.
fn plan_c(
    plan: &mut Plan,
    program: &Path,
    args: &BenchArgs,
    allocators: &[Allocator],
    built: &Built,
    scale: f64,
) -> Result<Listing> {
    let c = list(program)?;
    for &a in allocators {
        let lib = preload::preload(a, built, program);
        if let Err(why) = &lib {
            plan.notes
                .push(format!("C rows of {} skipped: {why}", a.name()));
        }
        plan.preloads.push((a, lib));
    }
    let preloads = &plan.preloads;
    let c_setup = |a: Allocator, _: &str| {
        let (_, lib) = preloads
            .iter()
            .find(|(p, _)| *p == a)
            .expect("every allocator checked");
        lib.clone().map(|lib| (program.to_path_buf(), lib))
    };
    let workloads = suite(&c, "", c_setup, args, allocators, scale);
    plan.workloads.extend(workloads);
    Ok(c)
}

/// The selected workloads of one program listing, each with a target per allocator; each
/// is named `prefix` + its name in the listing (which is what the program is told).
fn suite(
    listing: &Listing,
    prefix: &str,
    setup: impl Fn(Allocator, &str) -> Result<(PathBuf, Option<PathBuf>), String>,
    args: &BenchArgs,
    allocators: &[Allocator],
    scale: f64,
) -> Vec<WorkloadPlan> {
    let selected = |name: &str| args.workload.is_empty() || args.workload.iter().any(|w| w == name);
    if allocators.is_empty() {
        return Vec::new();
    }
    listing
        .iter()
        .map(|(name, ops)| (format!("{prefix}{name}"), name, ops))
        .filter(|(shown, _, _)| selected(shown))
        .map(|(shown, name, default_ops)| {
            let ops = ((*default_ops as f64 * scale).round() as u64).max(1);
            let targets = allocators
                .iter()
                .map(|&allocator| Target {
                    allocator,
                    setup: setup(allocator, name).map(|(program, preload)| Invocation {
                        program,
                        args: vec![name.clone(), ops.to_string()],
                        preload,
                    }),
                })
                .collect();
            WorkloadPlan {
                name: shown,
                ops,
                targets,
            }
        })
        .collect()
}

fn scale(ops: Option<u64>, rust: &Listing) -> Result<f64> {
    let Some(ops) = ops else { return Ok(1.0) };
    ensure!(ops > 0, "--ops must be at least 1");
    let reference = rust
        .iter()
        .find(|(name, _)| name == REFERENCE_WORKLOAD)
        .context("the workload binaries do not list random-mixed")?;
    Ok(ops as f64 / reference.1 as f64)
}

fn check_names(
    wanted: &[String],
    rust: &Listing,
    c: &Listing,
    c_known: bool,
    musl: &Listing,
) -> Result<()> {
    let all = || rust.iter().chain(c).chain(musl);
    let known = |name: &str| all().any(|(n, _)| n == name);
    // Without the C program its names are unknown: those requests become the note.
    let unknown: Vec<&String> = wanted
        .iter()
        .filter(|w| !known(w) && (c_known || !w.starts_with("c-")))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = all().map(|(n, _)| n.as_str()).collect();
        bail!(
            "unknown workload(s) {unknown:?}; known: {}",
            names.join(", ")
        );
    }
    Ok(())
}

/// Run `program --list`.
fn list(program: &Path) -> Result<Listing> {
    let out = Command::new(program)
        .arg("--list")
        .output()
        .with_context(|| format!("running {} --list", program.display()))?;
    ensure!(out.status.success(), "{} --list failed", program.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                ["workload", name, ops] => Ok((name.to_string(), ops.parse()?)),
                _ => bail!(
                    "unexpected line from {} --list: {line:?}",
                    program.display()
                ),
            },
        )
        .collect()
}
