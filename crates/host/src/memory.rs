//! Guest memory accounting: how much linear memory an instance had at most.
//!
//! Every store gets a [`MemoryGauge`] as its wasmtime `ResourceLimiter`. It
//! refuses nothing (the pooling allocator's `max_memory_size` is the limit, as
//! before); it follows the store's total linear memory (every memory's
//! creation and each `memory.grow`) and raises its component's high-water mark
//! ([`MemoryPeak`]), which benchmarks and tests read through
//! [`crate::App::take_memory_peak`]. A wasm memory never shrinks, so an
//! instance's peak is its size at its end; the peak of a component is the
//! largest of its instances since the last read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A component's high-water mark of linear memory, in bytes, over its instances.
#[derive(Clone, Default, Debug)]
pub struct MemoryPeak(Arc<AtomicUsize>);

impl MemoryPeak {
    /// The largest instance since the last call (0 if none ran), and a fresh start.
    pub fn take(&self) -> usize {
        self.0.swap(0, Ordering::Relaxed)
    }

    fn raise(&self, bytes: usize) {
        self.0.fetch_max(bytes, Ordering::Relaxed);
    }
}

/// One store's linear memory, reported to its component's [`MemoryPeak`].
#[derive(Debug)]
pub struct MemoryGauge {
    peak: MemoryPeak,
    /// All of the store's memories together, in bytes.
    total: usize,
    /// The growth last allowed, taken back if it then failed.
    last_growth: usize,
}

impl MemoryGauge {
    pub fn new(peak: MemoryPeak) -> Self {
        MemoryGauge { peak, total: 0, last_growth: 0 }
    }

    /// The store's linear memory now, in bytes.
    pub fn total(&self) -> usize {
        self.total
    }
}

impl wasmtime::ResourceLimiter for MemoryGauge {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        // wasmtime refuses growth past the maximum itself; it never happens, so it never counts.
        if maximum.is_some_and(|max| desired > max) {
            self.last_growth = 0;
            return Ok(true);
        }
        self.last_growth = desired.saturating_sub(current);
        self.total += self.last_growth;
        self.peak.raise(self.total);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        // The peak may keep a growth that failed (the memory was asked for); the total does not.
        self.total -= self.last_growth;
        self.last_growth = 0;
        Ok(())
    }

    fn table_growing(&mut self, _current: usize, _desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    const PAGE: usize = 64 << 10;

    #[test]
    fn the_peak_is_the_largest_instance_since_the_last_read() {
        let peak = MemoryPeak::default();
        let mut a = MemoryGauge::new(peak.clone());
        // Creation (from 0), then two growths.
        assert!(a.memory_growing(0, 17 * PAGE, Some(4096 * PAGE)).unwrap());
        assert!(a.memory_growing(17 * PAGE, 20 * PAGE, Some(4096 * PAGE)).unwrap());
        assert_eq!(a.total(), 20 * PAGE);
        // A second memory of the same store adds to it.
        assert!(a.memory_growing(0, PAGE, None).unwrap());
        assert_eq!(a.total(), 21 * PAGE);
        // Past the maximum: wasmtime refuses it, nothing counts.
        assert!(a.memory_growing(21 * PAGE, 5000 * PAGE, Some(4096 * PAGE)).unwrap());
        assert_eq!(a.total(), 21 * PAGE);
        // A growth that fails after it was allowed is taken back from the total.
        assert!(a.memory_growing(21 * PAGE, 30 * PAGE, None).unwrap());
        a.memory_grow_failed(wasmtime::format_err!("no memory")).unwrap();
        assert_eq!(a.total(), 21 * PAGE);
        let mut b = MemoryGauge::new(peak.clone());
        assert!(b.memory_growing(0, 18 * PAGE, None).unwrap());
        assert_eq!(peak.take(), 30 * PAGE, "the failed growth was asked for");
        assert_eq!(peak.take(), 0, "read and reset");
        assert!(b.memory_growing(18 * PAGE, 19 * PAGE, None).unwrap());
        assert_eq!(peak.take(), 19 * PAGE);
    }
}
