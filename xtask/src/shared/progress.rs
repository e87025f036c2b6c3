//! The progress bar on the terminal while runs go on.

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps; `counter` shows where it stands (an indicatif template piece,
/// e.g. `{pos}/{len} runs`).
pub fn bar(len: u64, counter: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = format!("{{bar:30}} {counter}, {{elapsed}} (eta {{eta}}) {{msg}}");
    bar.set_style(ProgressStyle::with_template(&template).expect("valid template"));
    bar
}
