//! `1 - e^(-x)` and its inverse (a sample's probability and weight), and the logarithm
//! that draws the intervals between samples, in plain arithmetic (additions,
//! multiplications and divisions): no libm call. libm's `expm1` is an FMA routine
//! (VEX-encoded), and the free of a sampled block computes the weight where the caller's
//! vector registers are kept only in their SSE halves (`free_asm.rs`); and a `log` was
//! the one symbol that made `libhakmem.so` need `libm.so.6`, a library every process
//! with hakmem preloaded then loaded (docs/ARCHITECTURE.md, "Start-up"). Tests compare
//! each with libm.

/// `1 - e^(-x)` for `x >= 0`, within a few units in the last place of libm's.
pub fn one_minus_exp_neg(x: f64) -> f64 {
    if x < SMALL {
        // x - x^2/2! + ... - x^6/6!: the next term, x^7/7!, is under 2^-56/5040 of x for
        // x < 2^-8, far below the last place. Grouped in pairs (Estrin's scheme), not in
        // Horner's form, so the multiplications do not wait for one another: this code
        // runs cold, once per sample, and its time is its chain of latencies.
        let x2 = x * x;
        let x3 = x2 * x;
        return (x - x2 * I2) + x3 * ((I6 - x * I24) + x2 * (I120 - x * I720));
    }
    if x < 0.5 {
        // The same series further: the terms fall by x/k, so 20 of them leave an error
        // under 0.5^21/21!; no cancellation against 1.
        let (mut term, mut sum) = (x, x);
        for inv in &INVERSES[2..=20] {
            term *= -x * inv;
            sum += term;
        }
        return sum;
    }
    if x > 40.0 {
        // e^(-40) is below half an ulp of 1.
        return 1.0;
    }
    // e^(-x) = 2^(-k) e^(-r), k = x / ln 2 rounded down, 0 <= r < ln 2.
    let k = (x * core::f64::consts::LOG2_E) as u64;
    let r = x - k as f64 * core::f64::consts::LN_2;
    let (mut term, mut e) = (1.0f64, 1.0f64);
    for inv in &INVERSES[1..=22] {
        term *= -r * inv;
        e += term;
    }
    1.0 - e * f64::from_bits((1023 - k) << 52)
}

/// The natural logarithm of a normal `x > 0`, within a few units in the last place of
/// libm's: `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2))`, and `ln m = 2 atanh(s)`,
/// `s = (m - 1) / (m + 1)`, by its odd series: `|s| < 0.172`, so each term is under
/// 0.03 of the one before, and the eleventh under `2^-53` of the first.
pub fn ln(x: f64) -> f64 {
    debug_assert!(x.is_normal() && x > 0.0, "{x}");
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits(bits & ((1 << 52) - 1) | 1023 << 52);
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut sum = 0.0;
    for k in (1..=10).rev() {
        sum = (sum + INVERSES[2 * k + 1]) * s2;
    }
    e as f64 * core::f64::consts::LN_2 + 2.0 * s * (1.0 + sum)
}

/// `1 / (1 - e^(-x))` for `x = size / interval > 0`: the weight of a sample. Below
/// [`SMALL`] by its Laurent series `1/x + 1/2 + x/12 - x^3/720`, whose next term,
/// `x^5/30240`, is under `2^-54` of the sum there: `interval / size` and `size / interval`
/// are independent divisions, which the processor runs side by side, where the general
/// case waits for one division, then the series, then another.
pub fn inverse_one_minus_exp_neg(size: f64, interval: f64) -> f64 {
    let x = size / interval;
    if x < SMALL {
        return interval / size + 0.5 + x * (I12 - x * x * I720);
    }
    1.0 / one_minus_exp_neg(x)
}

/// `1/12`, for the Laurent series.
const I12: f64 = 1.0 / 12.0;

/// Below this, [`one_minus_exp_neg`] sums six terms: blocks under 2 KiB at the default
/// interval of 512 KiB, most samples of most programs.
const SMALL: f64 = 1.0 / 256.0;
/// `1 / k!` for the short series.
const I2: f64 = 1.0 / 2.0;
const I6: f64 = 1.0 / 6.0;
const I24: f64 = 1.0 / 24.0;
const I120: f64 = 1.0 / 120.0;
const I720: f64 = 1.0 / 720.0;

/// `1 / k` for `k` in `0..=22` (entry 0 unused): the series multiply, since a division
/// costs several times a multiplication.
const INVERSES: [f64; 23] = {
    let mut t = [0.0; 23];
    let mut k = 1;
    while k < 23 {
        t[k] = 1.0 / k as f64;
        k += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    #[test]
    fn inverse_agrees_with_libm() {
        let interval = 524_288.0;
        let mut size = 1.0f64;
        while size < 64.0 * interval {
            let (ours, libm) = (
                super::inverse_one_minus_exp_neg(size, interval),
                1.0 / -(-size / interval).exp_m1(),
            );
            assert!(
                (ours - libm).abs() <= 4.0 * f64::EPSILON * libm,
                "size {size}: {ours} against {libm}"
            );
            size = (size * 1.01).ceil();
        }
    }

    #[test]
    fn ln_agrees_with_libm() {
        // The uniform numbers the intervals are drawn from, `k / 2^53`, over their range,
        // and numbers either side of 1 and of the reduction's bound.
        let mut xs: Vec<f64> = Vec::new();
        let mut k = 1u64;
        while k <= 1 << 53 {
            xs.push(k as f64 / (1u64 << 53) as f64);
            k = k + k / 64 + 1;
        }
        for d in 1..2000 {
            let d = d as f64 * f64::EPSILON;
            xs.extend([1.0 - d, 1.0 + d, core::f64::consts::SQRT_2 * (1.0 + d)]);
            xs.extend([core::f64::consts::SQRT_2 * (1.0 - d), 1.0e300 * (1.0 + d)]);
        }
        for x in xs {
            let (ours, libm) = (super::ln(x), x.ln());
            assert!(
                (ours - libm).abs() <= 4.0 * f64::EPSILON * libm.abs(),
                "ln {x}: {ours} against {libm}"
            );
        }
        assert_eq!(super::ln(1.0), 0.0);
    }

    #[test]
    fn one_minus_exp_neg_agrees_with_libm() {
        let mut x = 1e-9;
        while x < 60.0 {
            let (ours, libm) = (super::one_minus_exp_neg(x), -(-x).exp_m1());
            assert!(
                (ours - libm).abs() <= 4.0 * f64::EPSILON * libm,
                "x = {x}: {ours} against {libm}"
            );
            x *= 1.01;
        }
        assert_eq!(super::one_minus_exp_neg(0.0), 0.0);
        // Either side of the short series' bound.
        for x in [super::SMALL * 0.999_999, super::SMALL, 0.499_999, 0.5] {
            let (ours, libm) = (super::one_minus_exp_neg(x), -(-x).exp_m1());
            assert!((ours - libm).abs() <= 4.0 * f64::EPSILON * libm, "x = {x}");
        }
    }
}
