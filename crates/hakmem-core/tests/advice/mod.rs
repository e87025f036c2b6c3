//! The huge-page advice of a mapping as the kernel shows it, for the tests of huge pages.

/// The `VmFlags` of the mapping of `/proc/self/smaps` that holds `addr`.
pub fn vm_flags(addr: usize) -> String {
    smaps_field(addr, "VmFlags:")
}

/// What follows `field` in the entry of `/proc/self/smaps` for the mapping holding `addr`.
pub fn smaps_field(addr: usize, field: &str) -> String {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("/proc/self/smaps");
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = lo <= addr && addr < hi;
                continue;
            }
        }
        if inside {
            if let Some(value) = line.strip_prefix(field) {
                return value.to_string();
            }
        }
    }
    panic!("no mapping holds {addr:#x} or it shows no {field}");
}

/// Whether the advice can be seen here. A kernel built without transparent huge pages
/// refuses it (in CI that is a failure, not a pass); under qemu-user (the AArch64 run of
/// .ci/run) it is not passed on to the host's kernel, so only the allocation is checked.
pub fn advice_visible() -> bool {
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    if !thp && std::env::var_os("CI").is_some() {
        panic!("this kernel has no transparent huge pages: the advice cannot be checked");
    }
    thp && std::env::var_os("HAKMEM_TEST_RUNNER").is_none()
}

/// Whether the mapping holding `addr` carries the huge-page advice.
pub fn advised_huge(addr: usize) -> bool {
    vm_flags(addr).split_whitespace().any(|f| f == "hg")
}
