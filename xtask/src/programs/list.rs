//! The programs `cargo xtask programs` runs: common tools from the distribution, none of
//! them written for this project, each given a fixed input (a script in
//! `benches/programs/`, a C file of this repository, or the text [`write_text`] makes).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// One argument of a program's command line.
#[derive(Clone, Copy)]
pub enum Arg {
    Literal(&'static str),
    /// A file of this repository, relative to its root.
    Repo(&'static str),
    /// The generated text ([`write_text`]).
    Text,
}

pub struct Program {
    pub name: &'static str,
    /// What it does, for the docs.
    pub what: &'static str,
    /// Looked up in `PATH`.
    pub executable: &'static str,
    pub args: &'static [Arg],
    /// A file of this repository fed to stdin (else stdin is empty).
    pub stdin: Option<&'static str>,
    /// Set for this program only (`LC_ALL=C` is set for all).
    pub env: &'static [(&'static str, &'static str)],
}

/// jq's program, on no input: 100,000 objects of a number, a string and an array of up to 6
/// numbers, grouped by a key into 1000 groups (a sort), each group folded into a new
/// object. jq's values are reference-counted blocks of `malloc`, its arrays and strings
/// grown by `realloc`.
const JQ_GROUPS: &str = "[range(0; 100000) | {id: ., name: (\"item\" + tostring), \
     tags: [range(0; . % 7)]}] | group_by(.id % 1000) \
     | map({k: .[0].id, n: length, t: (map(.tags | length) | add)}) | length";

/// awk's program: the words of the text counted in an associative array.
const AWK_WORDS: &str =
    "{ for (i = 1; i <= NF; i++) c[$i]++ } END { n = 0; for (w in c) n++; print n }";

/// The shell's script: 500 pipelines of `echo` into `sed`, each a fork of the shell and
/// a `sed` started and gone, and the last line printed.
const SH_PIPELINES: &str = "i=0; while [ $i -lt 500 ]; do echo \"line $i\" | sed -e s/line/row/; \
     i=$((i + 1)); done | tail -n 1";

/// A compiler's arguments: `file` of this repository compiled at `-O2`, the object thrown
/// away.
const fn compile(file: &'static str) -> [Arg; 6] {
    [
        Arg::Literal("-O2"),
        Arg::Literal("-c"),
        Arg::Literal("-w"),
        Arg::Literal("-o"),
        Arg::Literal("/dev/null"),
        Arg::Repo(file),
    ]
}

pub const PROGRAMS: [Program; 11] = [
    Program {
        name: "python-json",
        what: "CPython builds a tree of dicts, lists and strings, writes it as JSON, parses \
               it back, counts keys (objects of 512 B or less come from its own pools)",
        executable: "python3",
        args: &[Arg::Repo("benches/programs/tree.py")],
        stdin: None,
        env: &[],
    },
    Program {
        name: "python-malloc",
        what: "the same with `PYTHONMALLOC=malloc`: every object from `malloc`",
        executable: "python3",
        args: &[Arg::Repo("benches/programs/tree.py")],
        stdin: None,
        env: &[("PYTHONMALLOC", "malloc")],
    },
    Program {
        name: "sqlite",
        what: "an in-memory SQLite table of 150,000 rows filled, indexed, sorted, grouped, \
               deleted from and updated",
        executable: "sqlite3",
        args: &[Arg::Literal(":memory:")],
        stdin: Some("benches/programs/table.sql"),
        env: &[],
    },
    Program {
        name: "perl",
        what: "Perl counts the text's words in a hash, sorts them, builds strings and a \
               hash of arrays",
        executable: "perl",
        args: &[Arg::Repo("benches/programs/words.pl"), Arg::Text],
        stdin: None,
        env: &[],
    },
    Program {
        name: "awk",
        what: "awk (mawk on Debian) counts the text's words in an associative array",
        executable: "awk",
        args: &[Arg::Literal(AWK_WORDS), Arg::Text],
        stdin: None,
        env: &[],
    },
    Program {
        name: "jq",
        what: "jq builds 100,000 small JSON objects, groups them by a key (a sort) and folds \
               each group into a new object",
        executable: "jq",
        args: &[Arg::Literal("-n"), Arg::Literal(JQ_GROUPS)],
        stdin: None,
        env: &[],
    },
    Program {
        name: "sort",
        what: "GNU sort sorts the text's lines",
        executable: "sort",
        args: &[Arg::Text],
        stdin: None,
        env: &[],
    },
    Program {
        name: "gcc",
        what: "gcc -O2 compiles benches/c/workloads.c (the compiler proper, `cc1`, is a \
               child of `gcc` and inherits the preload)",
        executable: "gcc",
        args: &compile("benches/c/workloads.c"),
        stdin: None,
        env: &[],
    },
    Program {
        name: "g++",
        what: "g++ -O2 compiles benches/programs/templates.cpp, nested standard containers, \
               `<regex>` and `<variant>` (the compiler proper, `cc1plus`, inherits the \
               preload)",
        executable: "g++",
        args: &compile("benches/programs/templates.cpp"),
        stdin: None,
        env: &[],
    },
    Program {
        name: "tcl",
        what: "Tcl fills a dict of 300,000 keys, sorts its keys and removes half; its own \
               allocator cuts its objects from large blocks of `malloc` (8,253 calls for \
               190 MB at the peak, `heaptrack tclsh benches/programs/dict.tcl`): a runtime \
               with an allocator of its own on top",
        executable: "tclsh",
        args: &[Arg::Repo("benches/programs/dict.tcl")],
        stdin: None,
        env: &[],
    },
    Program {
        name: "sh",
        what: "the shell (dash on Debian) runs 500 pipelines of `echo` into `sed`: a \
               thousand short processes, each loading the preloaded library, as a shell \
               script, `make` or `configure` starts them",
        executable: "sh",
        args: &[Arg::Literal("-c"), Arg::Literal(SH_PIPELINES)],
        stdin: None,
        env: &[],
    },
];

/// The programs named (all when none is), in the list's order.
pub fn select(names: &[String]) -> Result<Vec<&'static Program>> {
    if let Some(unknown) = names
        .iter()
        .find(|n| !PROGRAMS.iter().any(|p| p.name == n.as_str()))
    {
        let known: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
        bail!("no program {unknown}; there are {}", known.join(", "));
    }
    Ok(PROGRAMS
        .iter()
        .filter(|p| names.is_empty() || names.iter().any(|n| n == p.name))
        .collect())
}

/// Where `executable` is in `PATH`, or why it is not there.
pub fn find_executable(executable: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(executable))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{executable} is not installed"))
}

/// Lines of the generated text, and the words of its vocabulary.
const LINES: usize = 400_000;
const VOCABULARY: usize = 50_000;

/// Write the text the `perl`, `awk` and `sort` rows read into `dir/text.txt`: 400,000
/// lines of 3..15 words drawn from 50,000 words of 2..12 lowercase letters, the same
/// bytes on every machine (about 28 MB).
pub fn write_text(dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("text.txt");
    let file = std::fs::File::create(&path).with_context(|| path.display().to_string())?;
    let mut out = BufWriter::new(file);
    text(&mut out).with_context(|| format!("writing {}", path.display()))?;
    out.flush()?;
    Ok(path)
}

fn text(out: &mut impl Write) -> std::io::Result<()> {
    let mut rng = SplitMix(2026);
    let words: Vec<Vec<u8>> = (0..VOCABULARY)
        .map(|_| {
            let len = rng.between(2, 12);
            (0..len).map(|_| b'a' + rng.between(0, 25) as u8).collect()
        })
        .collect();
    for _ in 0..LINES {
        let n = rng.between(3, 15);
        for i in 0..n {
            if i > 0 {
                out.write_all(b" ")?;
            }
            out.write_all(&words[rng.between(0, VOCABULARY - 1)])?;
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// SplitMix64: a fixed sequence from its seed, so the text is the same everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (up to a negligible modulo bias).
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_same_bytes_every_time() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        text(&mut a).unwrap();
        text(&mut b).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.iter().filter(|&&c| c == b'\n').count(), LINES);
        // Fixed by the seed: a change of generator shows here (and changes the rows).
        assert_eq!(a.len(), 28_717_779);
        assert!(a
            .iter()
            .all(|&c| c.is_ascii_lowercase() || c == b' ' || c == b'\n'));
    }

    #[test]
    fn programs_are_selected_by_name_in_list_order() {
        let names = |v: Vec<&Program>| v.iter().map(|p| p.name).collect::<Vec<_>>();
        let all = select(&[]).unwrap();
        assert_eq!(all.len(), PROGRAMS.len());
        let two = select(&["sort".to_string(), "sqlite".to_string()]).unwrap();
        assert_eq!(names(two), ["sqlite", "sort"]);
        assert!(select(&["nope".to_string()]).is_err());
    }

    #[test]
    fn the_inputs_named_are_in_the_repository() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for p in &PROGRAMS {
            let repo_args = p.args.iter().filter_map(|a| match a {
                Arg::Repo(path) => Some(*path),
                _ => None,
            });
            for path in repo_args.chain(p.stdin) {
                assert!(root.join(path).is_file(), "{}: {path}", p.name);
            }
        }
    }
}
