//! What `cargo xtask bench` and `cargo xtask soak` share: where things are, the
//! allocators and profiles, starting a workload program, statistics, the terminal table,
//! the machine description, the order of a round's runs, the sections of the docs they
//! write, the output directory, the progress bar and chart colours.

pub mod allocator;
pub mod build;
pub mod child;
pub mod docs;
pub mod machine;
pub mod order;
pub mod output;
pub mod paths;
pub mod plot;
pub mod progress;
pub mod stats;
pub mod table;

pub use allocator::{Allocator, Profile};
pub use paths::Paths;

/// The items of `list` in their order, each once; `all` when `list` is empty.
pub fn unique_or_all<T: Copy + PartialEq>(list: &[T], all: &[T]) -> Vec<T> {
    let mut unique = Vec::new();
    for &x in if list.is_empty() { all } else { list } {
        if !unique.contains(&x) {
            unique.push(x);
        }
    }
    unique
}

#[cfg(test)]
mod tests {
    use super::unique_or_all;

    #[test]
    fn unique_keeps_the_first_of_each() {
        assert_eq!(unique_or_all(&[3, 1, 3, 2, 1], &[9]), [3, 1, 2]);
        assert_eq!(unique_or_all(&[], &[9, 8]), [9, 8]);
    }
}
