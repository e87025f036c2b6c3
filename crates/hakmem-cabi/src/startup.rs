//! One-time set-up at load: a constructor in `.init_array`, which runs after libc's and
//! before the program's, so every allocation the program makes sees the settings from
//! the environment ([`crate::env`]): the mode, counting, the core's profile, the heap
//! profiler, and the `HAKMEM_VERBOSE` announcement. It sits above every other module,
//! which therefore never calls up into it.

use crate::fmt::Message;
use crate::{env, heap_profile, mode, stats};

extern "C" fn init() {
    // Fix the mode now if no allocation did yet (and warn about a bad value).
    mode::decide();
    let verbose = env::flag(c"HAKMEM_VERBOSE");
    env::set_verbose(verbose);
    if env::flag(c"HAKMEM_STATS") {
        stats::enable();
    }
    // Let hakmem-core read HAKMEM_PROFILE now (and warn about a bad value) if no
    // allocation did so yet, so that the profile is known before the program starts.
    hakmem_core::init();
    heap_profile::init_from_env();
    if verbose {
        announce();
    }
}

fn announce() {
    use core::fmt::Write;
    let mut m = Message::<256>::new();
    let _ = writeln!(
        m,
        "hakmem: loaded (profile {}, statistics {}, checks {})",
        hakmem_core::profile().name(),
        if stats::enabled() { "on" } else { "off" },
        if mode::checked() { "on" } else { "off" }
    );
    m.emit();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
