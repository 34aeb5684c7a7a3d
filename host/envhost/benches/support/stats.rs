//! Summary statistics and number formatting for benchmarks, shared by the
//! benches of every crate (included by path where a bench needs it).

#![allow(dead_code)] // each benchmark uses a different part

use std::time::{Duration, Instant};

/// Median, 95th percentile and minimum of a set of timings.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub median: Duration,
    pub p95: Duration,
    pub min: Duration,
}

pub fn summarize(samples: &[Duration]) -> Summary {
    assert!(!samples.is_empty(), "no samples to summarize");
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    Summary {
        median: at(0.5),
        p95: at(0.95),
        min: sorted[0],
    }
}

/// Nanoseconds per call of `f`, after a warm-up of a twentieth as many.
pub fn per_call_ns(calls: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..(calls / 20).max(1) {
        f();
    }
    let started = Instant::now();
    for _ in 0..calls {
        f();
    }
    started.elapsed().as_nanos() as f64 / calls as f64
}

pub fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// `12.3 ms`, or `1.2 s` from a second on.
pub fn fmt_ms(duration: Duration) -> String {
    let ms = millis(duration);
    if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

/// `87 µs`.
pub fn fmt_us(duration: Duration) -> String {
    format!("{:.0} µs", micros(duration))
}

/// The profile the benchmark was built with, for its heading.
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "dev (validation only)"
    } else {
        "release"
    }
}
