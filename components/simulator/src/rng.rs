//! A tiny deterministic PRNG (SplitMix64) and hash mixer.
//!
//! The handler seeds it from WASI random; tests seed it with constants, so every script,
//! affect step and admin event is reproducible from its seed.

/// SplitMix64: small, fast, good enough for simulated data (not for secrets).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// Uniform in `lo..hi` (half-open); returns `lo` when the range is empty.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[-amp, amp)`.
    pub fn jitter(&mut self, amp: f64) -> f64 {
        (self.unit() * 2.0 - 1.0) * amp
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }

    /// `n` random bytes as lowercase hex (2n characters).
    /// Each `next_u64` gives the next 8 bytes, least significant first.
    pub fn hex(&mut self, n: usize) -> String {
        let mut bytes = Vec::with_capacity(n);
        while bytes.len() < n {
            let word = self.next_u64().to_le_bytes();
            bytes.extend_from_slice(&word[..(n - bytes.len()).min(8)]);
        }
        hex::encode(bytes)
    }
}

fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Deterministic hash of two words (used to derive admin events from their slot).
pub fn mix(a: u64, b: u64) -> u64 {
    finalize(a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ finalize(b.wrapping_add(0x632B_E59B_D9B4_E019)))
}

/// FNV-1a of a string, for deriving stable values from ids.
pub fn hash_str(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.range(10, 20);
            assert_eq!(x, b.range(10, 20));
            assert!((10..20).contains(&x));
            let u = a.unit();
            b.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(a.range(5, 5), 5);
    }

    #[test]
    fn hex_has_requested_length_and_alphabet() {
        let mut r = Rng::new(1);
        for n in [0, 1, 7, 8, 9, 12, 16] {
            let h = r.hex(n);
            assert_eq!(h.len(), n * 2);
            assert!(h.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        }
    }

    #[test]
    fn mix_spreads() {
        assert_ne!(mix(1, 2), mix(2, 1));
        assert_ne!(mix(0, 0), mix(0, 1));
    }
}
