//! `cargo xtask disasm [--write-docs]`: the fast paths as compiled, from `objdump -d` of
//! the release build (`__rust_alloc` and `__rust_dealloc` of a program with `HakMem` as its
//! global allocator, `malloc` and `free` of `libhakmem.so`), normalized so that only the
//! code shows: no addresses, no symbol hashes. `--write-docs` puts the listing between the
//! `disasm` markers of docs/ARCHITECTURE.md; `cargo xtask check-disasm` (in `.ci/run`)
//! fails when the page's listing differs from a fresh one.
//!
//! Code generation differs between compiler versions, so the build uses one pinned
//! toolchain ([`TOOLCHAIN`], installed by `.ci/run`) in its own target folder, whatever
//! the default toolchain is: the check compares code, not compilers.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::LazyLock;

use anyhow::{bail, ensure, Context, Result};
use regex::Regex;

use crate::shared::docs::{read_marked, write_marked};
use crate::shared::machine::{first_line, Machine};
use crate::shared::Paths;

/// The toolchain the listing is built with: the stable release CI uses. Bump it with the
/// CI's, then run `cargo xtask disasm --write-docs`.
pub const TOOLCHAIN: &str = "1.95.0";
/// Where the pinned build goes (beside the ordinary release build, which it leaves alone).
const TARGET_DIR: &str = "target/disasm";
const PAGE: &str = "docs/ARCHITECTURE.md";
/// The section's name: its markers are `<!-- disasm:begin -->` and `<!-- disasm:end -->`.
const SECTION: &str = "disasm";

/// A function whose code the docs show: the file (in the pinned release folder), the
/// symbol, and what it is.
struct Function {
    file: &'static str,
    symbol: &'static str,
    what: &'static str,
}

const FUNCTIONS: [Function; 4] = [
    Function {
        file: "bench-hakmem",
        symbol: "__rust_alloc",
        what: "Rust's allocation with `HakMem` as the global allocator (`bench-hakmem`)",
    },
    Function {
        file: "bench-hakmem",
        symbol: "__rust_dealloc",
        what: "Rust's deallocation, the same binary",
    },
    Function {
        file: "libhakmem.so",
        symbol: "malloc",
        what: "C's `malloc` in `libhakmem.so`",
    },
    Function {
        file: "libhakmem.so",
        symbol: "free",
        what: "C's `free` in `libhakmem.so`",
    },
];

/// `cargo xtask disasm`: print the listing; with `write_docs`, write it into the page.
pub fn run(write_docs: bool) -> Result<ExitCode> {
    let paths = Paths::new();
    let section = section(&paths)?;
    print!("{section}");
    if write_docs {
        write_marked(&paths, PAGE, SECTION, &section)?;
        println!("wrote the listing into {PAGE}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `cargo xtask check-disasm`: fail when the page's listing is not a fresh one's.
pub fn check() -> Result<ExitCode> {
    let paths = Paths::new();
    let fresh = code_blocks(&section(&paths)?);
    let page = code_blocks(&read_marked(&paths, PAGE, SECTION)?);
    if fresh == page {
        println!("{PAGE}: the listing matches the code");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("{PAGE}: the listing differs from the code (first difference shown):");
    let (fresh, page): (Vec<&str>, Vec<&str>) = (fresh.lines().collect(), page.lines().collect());
    if let Some(i) = (0..fresh.len().max(page.len())).find(|&i| fresh.get(i) != page.get(i)) {
        eprintln!("  page:  {}", page.get(i).unwrap_or(&"(end)"));
        eprintln!("  fresh: {}", fresh.get(i).unwrap_or(&"(end)"));
    }
    eprintln!("run `cargo xtask disasm --write-docs` and commit the page");
    Ok(ExitCode::FAILURE)
}

/// The docs' section: a stamp, then each function's listing.
fn section(paths: &Paths) -> Result<String> {
    build(paths)?;
    let release = paths.root.join(TARGET_DIR).join("release");
    let machine = Machine::now();
    let objdump = first_line("objdump", &["--version"]);
    let mut out = format!(
        "<!-- Written by `cargo xtask disasm --write-docs`; `cargo xtask check-disasm` \
         (.ci/run) fails when the code blocks differ from a fresh run's. -->\n\n\
         `cargo xtask disasm` at commit `{}`: `rustup run {TOOLCHAIN} cargo build --release`, \
         {objdump}, `objdump -d --no-show-raw-insn -M intel -C`; addresses, address \
         operands and symbol hashes stripped.\n",
        machine.git_commit,
    );
    for f in &FUNCTIONS {
        let listing = disassemble(&release.join(f.file), f.symbol)?;
        out.push_str(&format!("\n{}:\n\n```asm\n{listing}```\n", f.what));
    }
    Ok(out)
}

/// Build the library and the benchmark program with the pinned toolchain.
fn build(paths: &Paths) -> Result<()> {
    let builds: [&[&str]; 2] = [
        &["-p", "hakmem-cabi"],
        &[
            "-p",
            "hakmem-benches",
            "--no-default-features",
            "--bin",
            "bench-hakmem",
        ],
    ];
    for args in builds {
        // `rustup run`: the pinned toolchain whichever cargo runs xtask; and no flags from
        // the environment (a `-C target-cpu=native` would change the code).
        let status = Command::new("rustup")
            .args(["run", TOOLCHAIN, "cargo", "build", "--release", "--quiet"])
            .args(["--target-dir", TARGET_DIR])
            .args(args)
            .current_dir(&paths.root)
            .env_remove("RUSTC")
            .env_remove("CARGO")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .status()
            .context("running rustup")?;
        ensure!(
            status.success(),
            "rustup run {TOOLCHAIN} cargo build {} failed ({status}); `rustup toolchain \
             install {TOOLCHAIN} --profile minimal` if it is missing",
            args.join(" ")
        );
    }
    Ok(())
}

/// `symbol`'s instructions in `file`, normalized, one per line, under a `symbol:` line.
fn disassemble(file: &Path, symbol: &str) -> Result<String> {
    let (start, size) = find_symbol(file, symbol)?;
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-M", "intel", "-C"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={:#x}", start + size))
        .arg(file)
        .output()
        .context("running objdump (binutils)")?;
    ensure!(
        out.status.success(),
        "objdump {} failed: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let listing = normalize(
        &String::from_utf8_lossy(&out.stdout),
        symbol,
        start..start + size,
    );
    if listing.is_empty() {
        bail!("no code for {symbol} in {}", file.display());
    }
    Ok(format!("{symbol}:\n{listing}"))
}

/// The address and size of the function `symbol` in `file`, from `nm`. Rust's allocator
/// shims are mangled under `__rustc::` (with a hash of the compiler), hence `-C`.
fn find_symbol(file: &Path, symbol: &str) -> Result<(u64, u64)> {
    let out = Command::new("nm")
        .args(["-C", "-S", "--defined-only"])
        .arg(file)
        .output()
        .context("running nm (binutils)")?;
    ensure!(out.status.success(), "nm {} failed", file.display());
    let shim = format!("__rustc::{symbol}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| {
            let [address, size, _kind, name] = line.split_whitespace().collect::<Vec<_>>()[..]
            else {
                return None;
            };
            let hex = |v: &str| u64::from_str_radix(v, 16).ok();
            (name == symbol || name == shim).then(|| Some((hex(address)?, hex(size)?)))?
        })
        .with_context(|| format!("no function {symbol} in {}", file.display()))
}

/// The instructions in objdump's output for `symbol` (at `range`): addresses, address
/// operands, offsets into data and symbol hashes stripped; a jump within the function
/// named by `symbol` and offset (objdump would name it by any alias, `free` by
/// `operator delete[]`); spacing made uniform; padding after the last instruction left
/// out.
fn normalize(objdump: &str, symbol: &str, range: std::ops::Range<u64>) -> String {
    static INSN: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^\s*[0-9a-f]+:\s+(\S.*)$").unwrap());
    static TARGET: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"\b([0-9a-f]+) <([^>]+)>").unwrap());
    static DATA_OFFSET: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"# <([^>+]+)\+0x[0-9a-f]+>").unwrap());
    static RIP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\[rip\+0x[0-9a-f]+\]").unwrap());
    static HASH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"::h[0-9a-f]{16}|\.llvm\.[0-9]+").unwrap());
    let mut lines: Vec<String> = objdump
        .lines()
        .filter_map(|l| INSN.captures(l).map(|c| c[1].to_string()))
        .map(|insn| {
            let insn = TARGET.replace_all(&insn, |c: &regex::Captures| {
                match u64::from_str_radix(&c[1], 16) {
                    Ok(a) if range.contains(&a) && a == range.start => format!("<{symbol}>"),
                    Ok(a) if range.contains(&a) => format!("<{symbol}+{:#x}>", a - range.start),
                    _ => format!("<{}>", &c[2]),
                }
            });
            let insn = DATA_OFFSET.replace_all(&insn, "# <$1>");
            let insn = RIP.replace_all(&insn, "[rip+...]");
            let insn = HASH.replace_all(&insn, "");
            let mut words = insn.split_whitespace();
            let mnemonic = words.next().unwrap_or_default();
            let operands = words.collect::<Vec<_>>().join(" ");
            format!("  {mnemonic:<6} {operands}").trim_end().to_string()
        })
        .collect();
    while lines
        .last()
        .is_some_and(|l| l.contains("nop") || l.trim() == "int3")
    {
        lines.pop();
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The contents of the fenced code blocks of a section: what the check compares (the
/// stamp names the commit, which changes with every commit).
fn code_blocks(section: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in section.lines() {
        if line.starts_with("```") {
            inside = !inside;
        } else if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_hashes_are_stripped() {
        let objdump = "\n/x/libhakmem.so:     file format elf64-x86-64\n\n\
            Disassembly of section .text:\n\n\
            0000000000012340 <free>:\n\
            \x20  12340:\tmov    rax,QWORD PTR [rip+0x1f2e9]        # 31630 <SMALL>\n\
            \x20  12347:\tje     12350 <operator delete(void*)+0x10>\n\
            \x20  12349:\tadd    rax,QWORD PTR [rip+0x1000]        # 13349 <_DYNAMIC+0x210>\n\
            \x20  1234d:\tjmp    15a10 <hakmem_core::free_slow::h0123456789abcdef>\n\
            \x20  12352:\tcs nop WORD PTR [rax+rax*1+0x0]\n\n\
            ";
        assert_eq!(
            normalize(objdump, "free", 0x12340..0x12358),
            "  mov    rax,QWORD PTR [rip+...] # <SMALL>\n\
             \x20 je     <free+0x10>\n\
             \x20 add    rax,QWORD PTR [rip+...] # <_DYNAMIC>\n\
             \x20 jmp    <hakmem_core::free_slow>\n"
        );
        assert_eq!(normalize("no code\n", "free", 0..1), "");
    }

    #[test]
    fn only_code_blocks_are_compared() {
        let a = "stamp at commit `abc`\n\n```asm\nfree:\n  ret\n```\n";
        let b = "stamp at commit `def`\n\n```asm\nfree:\n  ret\n```\n";
        assert_eq!(code_blocks(a), code_blocks(b));
        assert_ne!(code_blocks(a), code_blocks(&a.replace("ret", "nop")));
    }
}
