//! Link flags of `libhakmem.so`.
fn main() {
    // The versioned soname: programs linked with `-lhakmem` record `libhakmem.so.0`, which
    // `cargo xtask install` makes a link to `libhakmem.so.<version>`. The 0 changes when
    // the C ABI breaks.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhakmem.so.0");
    // Never unload: blocks handed out must outlive any dlclose of the library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
