//! Link flags of `libhakmem.so`.
fn main() {
    // The soname, so that programs linked with `-lhakmem` record `libhakmem.so`.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhakmem.so");
    // Never unload: blocks handed out must outlive any dlclose of the library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
