//! Single-thread encode and decode throughput of `ReedSolomonCodec`, and (with `--features isal`)
//! of ISA-L on the same buffers through the same `Codec` trait.
//!
//! ```sh
//! cargo bench -p ecdn-codec                    # ours only
//! cargo bench -p ecdn-codec --features isal    # ours and ISA-L, with the ours/ISA-L ratio
//! cargo bench -p ecdn-codec --features isal -- k10p4   # one shape (criterion id regex)
//! ECDN_CODEC_PAIRED=21 cargo bench -p ecdn-codec --features isal -- hot   # paired batches
//! ```
//!
//! Throughput is **object bytes per second** (decimal GB/s = 10^9 B/s) on one core: an encode of
//! a 1 MiB object counts 1 MiB however many parity bytes it writes, and so does a decode that
//! rebuilds one missing data chunk of it (decode = rebuild data chunk 0 from the other K − 1 data
//! chunks and parity chunk 0).
//!
//! Shapes: (3, 1) with 64 KiB chunks (192 KiB objects), (10, 4) with 1 MiB objects
//! (104 858-byte chunks), and (10, 1) and (6, 3) with 4 MiB objects (EC-Cache, C2DN n6k3).
//! `ECDN_GF_KERNEL=avx2|portable` forces our kernels' path (default: the best the CPU has).
//! "hot" reuses one object's buffers (in L2 up to the (10, 4) shape; the 4 MiB shapes' 4.4–6
//! MiB exceed this machine's 2 MiB of L2 per core, so they stream from L3); "cold" cycles through
//! ≥ 1 GiB of distinct objects (this machine's L3 is 260 MiB), each object's parity and rebuilt
//! chunk written into its own buffers.
//!
//! `ECDN_CODEC_PAIRED=ROUNDS` replaces criterion by paired batches (see [`paired`]): the ratio
//! to ISA-L from batches timed side by side, for machines whose speed drifts.
//!
//! `codec/…` benchmarks call `Codec::encode` / `Codec::reconstruct_shards` on K + P chunk
//! buffers — the same call for both implementations. `object/…` benchmarks (ours only) add the
//! object layout with 32 KiB sub-chunks: `encode_parity_into` straight from the object, and
//! `decode_object_into` of the whole object into an output buffer (copying the K − 1 present
//! data chunks and rebuilding chunk 0 stripe by stripe straight into the output).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use ecdn_codec::{
    decode_object_into, encode_object_into, encode_parity_into, Codec, ObjectLayout,
    ReedSolomonCodec, Shard, DEFAULT_SUB_CHUNK,
};

const SAMPLES: usize = 10;
const COLD_BYTES: u64 = 1 << 30;

/// Per benchmark id, ns per iteration of every criterion call (warm-up first, then exactly
/// SAMPLES measurement calls).
static RECORDS: Mutex<BTreeMap<String, (u64, Vec<f64>)>> = Mutex::new(BTreeMap::new());

fn record(id: &str, bytes: u64, iters: u64, elapsed: Duration) {
    let mut r = RECORDS.lock().unwrap();
    let e = r.entry(id.to_string()).or_insert((bytes, Vec::new()));
    e.1.push(elapsed.as_nanos() as f64 / iters as f64);
}

struct Shape {
    name: &'static str,
    k: usize,
    p: usize,
    size: u64,
}

const SHAPES: [Shape; 4] = [
    Shape {
        name: "k3p1-64KiB-chunks",
        k: 3,
        p: 1,
        size: 3 * 64 * 1024,
    },
    Shape {
        name: "k10p4-1MiB-objects",
        k: 10,
        p: 4,
        size: 1 << 20,
    },
    // EC-Cache's (10, 1) and C2DN's n6k3, on 4 MiB objects.
    Shape {
        name: "k10p1-4MiB-objects",
        k: 10,
        p: 1,
        size: 4 << 20,
    },
    Shape {
        name: "k6p3-4MiB-objects",
        k: 6,
        p: 3,
        size: 4 << 20,
    },
];

/// `n` objects: the objects themselves (size bytes each), their data chunks (K · chunk bytes:
/// chunk i is bytes [i·chunk, (i+1)·chunk) of the region, laid out by `encode_object_into`),
/// parity regions (P · chunk) and decode outputs (size bytes).
struct Objects {
    n: usize,
    k: usize,
    p: usize,
    chunk: usize,
    size: usize,
    objects: Vec<u8>,
    data: Vec<u8>,
    parity: Vec<u8>,
    out: Vec<u8>,
    next: usize,
}

impl Objects {
    fn new(shape: &Shape, n: usize, codec: &dyn Codec) -> Self {
        let layout = ObjectLayout::new(shape.size, shape.k, shape.p, DEFAULT_SUB_CHUNK).unwrap();
        let chunk = layout.chunk_size() as usize;
        let size = shape.size as usize;
        let stride = shape.k * chunk;
        let mut objects = vec![0u8; n * size];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for w in objects.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
        }
        let mut data = vec![0u8; n * stride];
        let mut parity = vec![0u8; n * shape.p * chunk];
        for ((obj, d), par) in objects
            .chunks(size)
            .zip(data.chunks_mut(stride))
            .zip(parity.chunks_mut(shape.p * chunk))
        {
            let mut chunks: Vec<&mut [u8]> =
                d.chunks_mut(chunk).chain(par.chunks_mut(chunk)).collect();
            encode_object_into(codec, &layout, obj, &mut chunks).unwrap();
        }
        Objects {
            n,
            k: shape.k,
            p: shape.p,
            chunk,
            size,
            objects,
            data,
            parity,
            // Written now so no page is first touched (faulted in) inside a measurement.
            out: vec![0xA5u8; n * size],
            next: 0,
        }
    }

    fn cycle(&mut self) -> usize {
        let i = self.next;
        self.next = (i + 1) % self.n;
        i
    }

    fn encode(&mut self, codec: &dyn Codec, i: usize) {
        let (k, p, c) = (self.k, self.p, self.chunk);
        let data: Vec<&[u8]> = self.data[i * k * c..(i + 1) * k * c].chunks(c).collect();
        let mut parity: Vec<&mut [u8]> = self.parity[i * p * c..(i + 1) * p * c]
            .chunks_mut(c)
            .collect();
        codec.encode(&data, &mut parity).unwrap();
    }

    /// Rebuilds data chunk 0 of object i in place from data chunks 1 .. K−1 and parity 0.
    fn decode(&mut self, codec: &dyn Codec, i: usize) {
        let (k, p, c) = (self.k, self.p, self.chunk);
        let (first, rest) = self.data[i * k * c..(i + 1) * k * c].split_at_mut(c);
        let mut slots: Vec<Shard<'_>> = Vec::with_capacity(k + p);
        slots.push(Shard::Rebuild(first));
        slots.extend(rest.chunks(c).map(Shard::Present));
        for (r, par) in self.parity[i * p * c..(i + 1) * p * c]
            .chunks(c)
            .enumerate()
        {
            slots.push(if r == 0 {
                Shard::Present(par)
            } else {
                Shard::Absent
            });
        }
        codec.reconstruct_shards(&mut slots).unwrap();
    }

    fn object_encode(&mut self, codec: &dyn Codec, layout: &ObjectLayout, i: usize) {
        let (p, c) = (self.p, self.chunk);
        let object = &self.objects[i * self.size..(i + 1) * self.size];
        let mut parity: Vec<&mut [u8]> = self.parity[i * p * c..(i + 1) * p * c]
            .chunks_mut(c)
            .collect();
        encode_parity_into(codec, layout, object, &mut parity).unwrap();
    }

    fn object_decode(&mut self, codec: &dyn Codec, layout: &ObjectLayout, i: usize) {
        let (k, p, c) = (self.k, self.p, self.chunk);
        let mut chunks: Vec<Option<&[u8]>> = self.data[i * k * c..(i + 1) * k * c]
            .chunks(c)
            .map(Some)
            .collect();
        chunks[0] = None;
        chunks.extend(self.parity[i * p * c..(i + 1) * p * c].chunks(c).map(Some));
        let out = &mut self.out[i * self.size..(i + 1) * self.size];
        decode_object_into(codec, layout, &chunks, out).unwrap();
    }

    /// Checks that object i decodes to its own bytes (the benchmark measured real work).
    fn check(&mut self, codec: &dyn Codec, layout: &ObjectLayout, i: usize) {
        let (k, c) = (self.k, self.chunk);
        let original = self.data[i * k * c..(i + 1) * k * c].to_vec();
        self.data[i * k * c..i * k * c + c].fill(0);
        self.decode(codec, i);
        assert_eq!(&self.data[i * k * c..(i + 1) * k * c], &original[..]);
        self.object_decode(codec, layout, i);
        assert_eq!(
            &self.out[i * self.size..(i + 1) * self.size],
            &self.objects[i * self.size..(i + 1) * self.size]
        );
    }
}

fn implementations(k: usize, p: usize) -> Vec<(&'static str, Box<dyn Codec>)> {
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, Box<dyn Codec>)> =
        vec![("ours", Box::new(ReedSolomonCodec::new(k, p).unwrap()))];
    #[cfg(feature = "isal")]
    v.push((
        "isal",
        Box::new(ecdn_codec::isal::IsalCodec::new(k, p).unwrap()),
    ));
    v
}

fn bench_shape(c: &mut Criterion, shape: &Shape) {
    let layout = ObjectLayout::new(shape.size, shape.k, shape.p, DEFAULT_SUB_CHUNK).unwrap();
    let impls = implementations(shape.k, shape.p);
    let ours: &dyn Codec = &*impls[0].1;
    let stride = shape.size.div_ceil(shape.k as u64) * (shape.k + shape.p) as u64 + shape.size;
    for temp in ["hot", "cold"] {
        let n = if temp == "hot" {
            1
        } else {
            COLD_BYTES.div_ceil(shape.size) as usize
        };
        // Allocated (≈ n · stride bytes) only if some benchmark of this (shape, temp) runs.
        let mut objects: Option<Objects> = None;
        let mut group = c.benchmark_group(format!("{}/{temp}", shape.name));
        group.throughput(Throughput::BytesDecimal(shape.size));
        let mut run = |id: String, f: &mut dyn FnMut(&mut Objects, usize)| {
            group.bench_function(BenchmarkId::from_parameter(&id), |b| {
                let objs = objects.get_or_insert_with(|| {
                    let t = Instant::now();
                    let o = Objects::new(shape, n, ours);
                    eprintln!(
                        "  ({} objects, {:.2} GiB of buffers, set up in {:.1?})",
                        n,
                        (n as u64 * stride) as f64 / (1u64 << 30) as f64,
                        t.elapsed()
                    );
                    o
                });
                b.iter_custom(|iters| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let i = objs.cycle();
                        f(objs, i);
                    }
                    let e = t.elapsed();
                    record(&format!("{}/{temp}/{id}", shape.name), shape.size, iters, e);
                    e
                });
            });
        };
        for (name, codec) in &impls {
            let codec: &dyn Codec = &**codec;
            run(format!("codec-encode-{name}"), &mut |o, i| {
                o.encode(codec, i)
            });
            run(format!("codec-decode-{name}"), &mut |o, i| {
                o.decode(codec, i)
            });
        }
        run("object-encode-ours".into(), &mut |o, i| {
            o.object_encode(ours, &layout, i)
        });
        run("object-decode-ours".into(), &mut |o, i| {
            o.object_decode(ours, &layout, i)
        });
        group.finish();
        if let Some(mut objs) = objects.take() {
            let last = (objs.next + objs.n - 1) % objs.n;
            objs.check(ours, &layout, last);
        }
    }
}

fn summary() {
    let r = RECORDS.lock().unwrap();
    let gbps = |id: &str| -> Option<f64> {
        let (bytes, v) = r.get(id)?;
        let mut m: Vec<f64> = v[v.len().saturating_sub(SAMPLES)..].to_vec();
        m.sort_by(f64::total_cmp);
        let median = m[m.len() / 2];
        Some(*bytes as f64 / median)
    };
    let fmt = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    println!();
    println!("GB/s = object bytes / s (10^9), one core, median of {SAMPLES} criterion samples");
    println!(
        "{:<18} {:<5} {:<7} {:>8} {:>8} {:>10} {:>12}",
        "shape", "temp", "op", "ours", "ISA-L", "ours/ISA-L", "ours object"
    );
    for shape in &SHAPES {
        for temp in ["hot", "cold"] {
            for op in ["encode", "decode"] {
                let base = format!("{}/{temp}", shape.name);
                let ours = gbps(&format!("{base}/codec-{op}-ours"));
                let isal = gbps(&format!("{base}/codec-{op}-isal"));
                let object = gbps(&format!("{base}/object-{op}-ours"));
                if ours.is_none() && isal.is_none() && object.is_none() {
                    continue;
                }
                let ratio = ours.zip(isal).map(|(o, i)| o / i);
                println!(
                    "{:<18} {:<5} {:<7} {:>8} {:>8} {:>10} {:>12}",
                    shape.name,
                    temp,
                    op,
                    fmt(ours),
                    fmt(isal),
                    fmt(ratio),
                    fmt(object)
                );
            }
        }
    }
}

/// `ECDN_CODEC_PAIRED=ROUNDS`: instead of criterion, ours and ISA-L in alternating batches of
/// about 10 ms each (who goes first alternates too), ROUNDS pairs per shape, temperature and
/// operation; prints the median and range of the per-pair ratios. Slow drift of the machine
/// (a virtual machine's neighbours, turbo) then moves both sides of each ratio together, where
/// criterion measures all of one implementation's samples before the other's.
fn paired(rounds: usize, filter: Option<&str>) {
    println!("paired batches, {rounds} rounds: ours / ISA-L = ISA-L time / our time per pair");
    println!(
        "{:<18} {:<5} {:<7} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "shape", "temp", "op", "ours", "ISA-L", "median", "min", "max"
    );
    for shape in &SHAPES {
        for temp in ["hot", "cold"] {
            let name = format!("{}/{temp}", shape.name);
            if filter.is_some_and(|f| !name.contains(f)) {
                continue;
            }
            let impls = implementations(shape.k, shape.p);
            if impls.len() < 2 {
                println!("paired mode needs --features isal");
                return;
            }
            let n = if temp == "hot" {
                1
            } else {
                COLD_BYTES.div_ceil(shape.size) as usize
            };
            let mut objs = Objects::new(shape, n, &*impls[0].1);
            for op in ["encode", "decode"] {
                let mut batch = |codec: &dyn Codec, iters: usize| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        let i = objs.cycle();
                        if op == "encode" {
                            objs.encode(codec, i)
                        } else {
                            objs.decode(codec, i)
                        }
                    }
                    t.elapsed().as_secs_f64() / iters as f64
                };
                let (ours, isal) = (&*impls[0].1, &*impls[1].1);
                batch(ours, 20);
                let iters = ((0.01 / batch(ours, 20)) as usize).max(1);
                let mut ratios = Vec::with_capacity(rounds);
                let (mut t_ours, mut t_isal) = (Vec::new(), Vec::new());
                for r in 0..rounds {
                    let (a, b) = if r % 2 == 0 {
                        let a = batch(ours, iters);
                        (a, batch(isal, iters))
                    } else {
                        let b = batch(isal, iters);
                        (batch(ours, iters), b)
                    };
                    ratios.push(b / a);
                    t_ours.push(a);
                    t_isal.push(b);
                }
                let median = |v: &mut Vec<f64>| {
                    v.sort_by(f64::total_cmp);
                    v[v.len() / 2]
                };
                let gbps = |t: f64| shape.size as f64 / t / 1e9;
                let (lo, hi) = (
                    ratios.iter().copied().fold(f64::INFINITY, f64::min),
                    ratios.iter().copied().fold(0.0, f64::max),
                );
                println!(
                    "{:<18} {:<5} {:<7} {:>8.2} {:>8.2} {:>8.3} {:>8.3} {:>8.3}",
                    shape.name,
                    temp,
                    op,
                    gbps(median(&mut t_ours)),
                    gbps(median(&mut t_isal)),
                    median(&mut ratios),
                    lo,
                    hi
                );
            }
        }
    }
}

fn main() {
    if let Ok(rounds) = std::env::var("ECDN_CODEC_PAIRED") {
        let rounds = rounds.parse().expect("ECDN_CODEC_PAIRED=ROUNDS");
        // The first free argument, as criterion's filter would be (a substring here).
        let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
        paired(rounds, filter.as_deref());
        return;
    }
    let mut c = Criterion::default()
        .sample_size(SAMPLES)
        .warm_up_time(Duration::from_millis(700))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    for shape in &SHAPES {
        bench_shape(&mut c, shape);
    }
    c.final_summary();
    summary();
}
