//! Tables on the terminal and in the docs.

use std::fmt::Write as _;

/// `123.4M`-style numbers.
pub fn si(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.1}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

/// KiB as `12.3 MiB`.
pub fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

/// Columns padded to their widest cell: the first `text` columns left-aligned, the rest
/// right-aligned.
pub fn align<const N: usize>(rows: &[[String; N]], text: usize) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            let _ = if c < text {
                write!(out, "{cell:<w$}  ")
            } else {
                write!(out, "{cell:>w$}  ")
            };
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}

/// A Markdown table: the first row is the header.
pub fn markdown<const N: usize>(rows: &[[String; N]]) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let mut out = String::new();
    if let Some((header, body)) = rows.split_first() {
        out.push_str(&line(header));
        out.push_str(&line(
            &[const { String::new() }; N].map(|_| "---".to_string()),
        ));
        for row in body {
            out.push_str(&line(row));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = [
            ["name", "n"].map(String::from),
            ["ab", "1234"].map(String::from),
        ];
        assert_eq!(align(&rows, 1), "name     n\nab    1234\n");
        assert_eq!(si(1234.0), "1.2k");
        assert_eq!(si(2.5e9), "2.50G");
        assert_eq!(mib(1536), "1.5 MiB");
        assert_eq!(
            markdown(&rows),
            "| name | n |\n| --- | --- |\n| ab | 1234 |\n"
        );
    }
}
