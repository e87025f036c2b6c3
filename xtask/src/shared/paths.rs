//! Where things are: the workspace and its target directory.

use std::path::PathBuf;

pub struct Paths {
    pub root: PathBuf,
    pub target: PathBuf,
}

impl Paths {
    pub fn new() -> Paths {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = root.canonicalize().unwrap_or(root);
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        Paths { root, target }
    }

    /// The release build, where the workload programs are.
    pub fn release(&self) -> PathBuf {
        self.target.join("release")
    }

    /// The results of `cargo xtask bench`.
    pub fn bench(&self) -> PathBuf {
        self.target.join("bench")
    }

    /// The results of `cargo xtask soak`.
    pub fn soak(&self) -> PathBuf {
        self.target.join("soak")
    }
}
