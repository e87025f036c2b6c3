//! Results regenerated into the docs, never pasted: a run's section replaces what stands
//! between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in a page (`cargo xtask bench`,
//! `pair-count`, `soak` and `disasm` with `--write-docs`), stamped by [`machine_line`].

use anyhow::{bail, Context, Result};

use super::machine::Machine;
use super::Paths;

/// The begin and end markers of the section `name`.
pub fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    )
}

/// Replace what stands between the markers of `name` in `page` (relative to the workspace
/// root) by `section`.
pub fn write_marked(paths: &Paths, page: &str, name: &str, section: &str) -> Result<()> {
    let path = paths.root.join(page);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {page}"))?;
    let text = replace_section(&text, name, section).with_context(|| page.to_string())?;
    std::fs::write(&path, text).with_context(|| format!("writing {page}"))
}

/// What stands between the markers of `name` in `page` (relative to the workspace root).
pub fn read_marked(paths: &Paths, page: &str, name: &str) -> Result<String> {
    let path = paths.root.join(page);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {page}"))?;
    let (begin, end) = find(&text, name).with_context(|| page.to_string())?;
    Ok(text[begin..end].trim_start_matches('\n').to_string())
}

/// `text` with what lies between the markers of `name` replaced by `section`.
fn replace_section(text: &str, name: &str, section: &str) -> Result<String> {
    let (begin, end) = find(text, name)?;
    Ok(format!("{}\n{section}{}", &text[..begin], &text[end..]))
}

/// The byte range between the markers of `name`: just past the begin marker, up to the
/// end marker.
fn find(text: &str, name: &str) -> Result<(usize, usize)> {
    let (begin_mark, end_mark) = markers(name);
    let (Some(begin), Some(end)) = (text.find(&begin_mark), text.find(&end_mark)) else {
        bail!("the markers {begin_mark} and {end_mark} are missing");
    };
    if end < begin {
        bail!("{end_mark} comes before {begin_mark}");
    }
    Ok((begin + begin_mark.len(), end))
}

/// "Machine: cores, CPU, memory, OS, kernel, compilers; load average at the start."
/// `tools` are the versions of what else the run used (gcc, valgrind), after rustc's.
pub fn machine_line(m: &Machine, tools: &[&str]) -> String {
    let compilers: Vec<&str> = std::iter::once(m.rustc.as_str())
        .chain(tools.iter().copied())
        .collect();
    format!(
        "Machine: {} cores of `{}`, {:.1} GiB, {}, kernel {}; {}; load average at the \
         start: {}.",
        m.cores,
        m.cpu,
        m.memory_kb as f64 / (1024.0 * 1024.0),
        m.os,
        m.kernel,
        compilers.join(", "),
        m.load
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_marked_section_is_replaced() {
        let (begin, end) = markers("bench");
        assert_eq!(begin, "<!-- bench:begin -->");
        let page = format!("# Title\n\nbefore\n{begin}\nold table\n{end}\nafter\n");
        let new = replace_section(&page, "bench", "new table\n").unwrap();
        assert_eq!(
            new,
            format!("# Title\n\nbefore\n{begin}\nnew table\n{end}\nafter\n")
        );
        // Writing twice gives the same page.
        assert_eq!(replace_section(&new, "bench", "new table\n").unwrap(), new);
        assert!(replace_section("no markers", "bench", "x").is_err());
        assert!(replace_section(&format!("{end} {begin}"), "bench", "x").is_err());
        // Another section's markers do not count.
        assert!(replace_section(&page, "soak", "x").is_err());
    }
}
