//! Starts the component with 1.25 MiB of linear memory instead of the
//! linker's minimum (stack + data, 1.06 MiB), so serving a page read whole
//! (index.html is 93 KB, plus its brotli variant and sidecar) never grows the
//! memory. A grown memory costs twice per request on Spin's pooling allocator
//! and the repo's host alike: the grow, then an `mprotect` back to the
//! initial size when the slot is reused, whose TLB shootdown interrupts the
//! other cores. Measured in BENCHMARKS.md (the static GET's ratios).
fn main() {
    println!("cargo:rustc-link-arg-cdylib=--initial-memory={}", 1280 * 1024);
}
