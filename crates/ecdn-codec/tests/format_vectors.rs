//! FORMAT.md's test vectors, its generator-matrix construction and its version-2 (stripe-major)
//! layout, checked against an independent reference written here from the format text alone: a
//! GF(2^8) (bit-serial multiplication into a full 256 × 256 table, Gauss–Jordan inversion) that
//! shares no code with `ecdn_codec::gf`, and §3's stripes and §4's byte-location formulas,
//! computed with none of `ObjectLayout`'s methods. `reed-solomon-erasure`'s own encoder,
//! `ReedSolomonCodec`, `encode_object` and `StripeEncoder` must all produce the reference's
//! bytes.

use ecdn_codec::{
    decode_object, decode_range, decode_stripe, encode_object, gf, ChunkHeader, Codec, CodecError,
    ObjectLayout, ReedSolomonCodec, StripeEncoder,
};

/// The reference field: GF(2)[x] / (x^8 + x^4 + x^3 + x^2 + 1).
struct Gf {
    mul: Vec<[u8; 256]>,
}

impl Gf {
    fn new() -> Self {
        // Shift-and-add multiplication, reducing by 0x11D whenever bit 8 appears.
        let slow = |mut a: u16, mut b: u16| -> u8 {
            let mut r = 0u16;
            while b != 0 {
                if b & 1 != 0 {
                    r ^= a;
                }
                b >>= 1;
                a <<= 1;
                if a & 0x100 != 0 {
                    a ^= 0x11D;
                }
            }
            r as u8
        };
        let mut mul = vec![[0u8; 256]; 256];
        for (a, row) in mul.iter_mut().enumerate() {
            for (b, v) in row.iter_mut().enumerate() {
                *v = slow(a as u16, b as u16);
            }
        }
        Gf { mul }
    }

    fn m(&self, a: u8, b: u8) -> u8 {
        self.mul[a as usize][b as usize]
    }

    fn inv(&self, a: u8) -> u8 {
        (1..=255u8).find(|&b| self.m(a, b) == 1).expect("non-zero")
    }

    fn pow(&self, a: u8, n: usize) -> u8 {
        (0..n).fold(1u8, |acc, _| self.m(acc, a))
    }

    /// Gauss–Jordan on [A | I].
    fn invert(&self, a: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let n = a.len();
        let mut m: Vec<Vec<u8>> = a
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut r = row.clone();
                r.extend((0..n).map(|j| u8::from(i == j)));
                r
            })
            .collect();
        for col in 0..n {
            let piv = (col..n).find(|&r| m[r][col] != 0).expect("invertible");
            m.swap(col, piv);
            let f = self.inv(m[col][col]);
            for v in m[col].iter_mut() {
                *v = self.m(*v, f);
            }
            for r in 0..n {
                if r != col && m[r][col] != 0 {
                    let g = m[r][col];
                    let pivot_row = m[col].clone();
                    for (v, p) in m[r].iter_mut().zip(pivot_row) {
                        *v ^= self.m(g, p);
                    }
                }
            }
        }
        m.into_iter().map(|r| r[n..].to_vec()).collect()
    }

    /// FORMAT.md §2: G = V · (top K × K of V)⁻¹ with V[r][c] = r^c.
    fn generator(&self, k: usize, p: usize) -> Vec<Vec<u8>> {
        let v: Vec<Vec<u8>> = (0..k + p)
            .map(|r| (0..k).map(|c| self.pow(r as u8, c)).collect())
            .collect();
        let t = self.invert(&v[..k]);
        v.iter()
            .map(|row| {
                (0..k)
                    .map(|c| (0..k).fold(0u8, |acc, t_i| acc ^ self.m(row[t_i], t[t_i][c])))
                    .collect()
            })
            .collect()
    }

    /// Parity shards of `data` under `g`, byte by byte.
    fn parity(&self, g: &[Vec<u8>], data: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let k = data.len();
        let len = data[0].len();
        g[k..]
            .iter()
            .map(|row| {
                (0..len)
                    .map(|x| (0..k).fold(0u8, |acc, c| acc ^ self.m(row[c], data[c][x])))
                    .collect()
            })
            .collect()
    }
}

fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|v| format!("{v:02x}")).collect()
}

/// FORMAT.md §2's matrices, as printed there.
#[test]
fn generator_matrices_match_format_md() {
    let gf_ref = Gf::new();
    assert_eq!(gf_ref.generator(2, 1)[2], vec![0x03, 0x02]);
    let g31 = gf_ref.generator(3, 1);
    assert_eq!(g31[3], vec![0x01, 0x01, 0x01]);
    let g32 = gf_ref.generator(3, 2);
    assert_eq!(g32[3], vec![0x01, 0x01, 0x01]);
    assert_eq!(g32[4], vec![0x0f, 0x08, 0x06]);
    let g42 = gf_ref.generator(4, 2);
    assert_eq!(g42[4], vec![0x1b, 0x1c, 0x12, 0x14]);
    assert_eq!(g42[5], vec![0x1c, 0x1b, 0x14, 0x12]);
    for (k, p) in [(1, 1), (2, 1), (3, 1), (3, 3), (4, 2), (10, 4), (17, 3)] {
        let reference: Vec<u8> = gf_ref.generator(k, p).concat();
        assert_eq!(gf::generator_matrix(k, p).unwrap(), reference, "({k},{p})");
        assert_eq!(
            ReedSolomonCodec::new(k, p).unwrap().generator(),
            reference.as_slice()
        );
    }
}

/// FORMAT.md §2's parity test vectors: data shards "ecdn", "-cod", "ec!!".
#[test]
fn parity_vectors_match_format_md() {
    let gf_ref = Gf::new();
    let data: Vec<Vec<u8>> = vec![b"ecdn".to_vec(), b"-cod".to_vec(), b"ec!!".to_vec()];
    let p2 = gf_ref.parity(&gf_ref.generator(3, 2), &data);
    assert_eq!(hex(&p2[0]), "2d632a2b");
    assert_eq!(hex(&p2[1]), "1f63bf81");
    let p1 = gf_ref.parity(&gf_ref.generator(3, 1), &data);
    assert_eq!(p1[0], p2[0]);

    for (p, expected) in [(1, &p2[..1]), (2, &p2[..])] {
        let codec = ReedSolomonCodec::new(3, p).unwrap();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut out = vec![vec![0u8; 4]; p];
        let mut outs: Vec<&mut [u8]> = out.iter_mut().map(Vec::as_mut_slice).collect();
        codec.encode(&refs, &mut outs).unwrap();
        assert_eq!(out, expected);
        // The library's own encoder.
        let rs = reed_solomon_erasure::galois_8::ReedSolomon::new(3, p).unwrap();
        let mut shards: Vec<Vec<u8>> = data.iter().cloned().chain(vec![vec![0u8; 4]; p]).collect();
        rs.encode(&mut shards).unwrap();
        assert_eq!(&shards[3..], expected);
    }
}

/// The library's parity equals the reference's on random data for every benchmarked shape.
#[test]
fn library_parity_equals_reference_on_random_data() {
    let gf_ref = Gf::new();
    for (k, p) in [(2, 1), (3, 1), (3, 2), (3, 3), (4, 2), (10, 4), (20, 5)] {
        let len = 1000 + k;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| pseudo_random(len, i as u64 * 77 + 5))
            .collect();
        let expected = gf_ref.parity(&gf_ref.generator(k, p), &data);
        let rs = reed_solomon_erasure::galois_8::ReedSolomon::new(k, p).unwrap();
        let mut shards: Vec<Vec<u8>> = data
            .iter()
            .cloned()
            .chain(vec![vec![0u8; len]; p])
            .collect();
        rs.encode(&mut shards).unwrap();
        assert_eq!(&shards[k..], &expected[..], "library ({k},{p})");
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut out = vec![vec![0u8; len]; p];
        let mut outs: Vec<&mut [u8]> = out.iter_mut().map(Vec::as_mut_slice).collect();
        codec.encode(&refs, &mut outs).unwrap();
        assert_eq!(out, expected, "ReedSolomonCodec ({k},{p})");
    }
}

/// FORMAT.md §3, literally: the K + P chunks of `object` coded (K, P) with sub-chunk size `s`.
fn reference_chunks(gf_ref: &Gf, object: &[u8], k: usize, p: usize, s: usize) -> Vec<Vec<u8>> {
    let size = object.len();
    let w = k * s;
    let n = size.div_ceil(w);
    let g = gf_ref.generator(k, p);
    let mut chunks = vec![Vec::new(); k + p];
    for j in 0..n {
        // Data sub-chunk (i, j): full stripes take s bytes each; the last stripe's r bytes are
        // cut into sub-chunks of t = ceil(r / K), zero-padded.
        let (len, base) = if j < n - 1 {
            (s, j * w)
        } else {
            let r = size - (n - 1) * w;
            (r.div_ceil(k), (n - 1) * w)
        };
        let data: Vec<Vec<u8>> = (0..k)
            .map(|i| {
                let from = (base + i * len).min(size);
                let to = (base + (i + 1) * len).min(size);
                let mut sub = object[from..to].to_vec();
                sub.resize(len, 0);
                sub
            })
            .collect();
        let parity = gf_ref.parity(&g, &data);
        for (chunk, sub) in chunks.iter_mut().zip(data.iter().chain(&parity)) {
            chunk.extend_from_slice(sub);
        }
    }
    chunks
}

/// FORMAT.md §4: (data chunk, chunk offset) of object byte `o`.
fn reference_locate(size: usize, k: usize, s: usize, o: usize) -> (usize, usize) {
    let w = k * s;
    let n = size.div_ceil(w);
    let j = o / w;
    let len = if j < n - 1 {
        s
    } else {
        (size - (n - 1) * w).div_ceil(k)
    };
    let u = o - j * w;
    let i = u / len;
    (i, j * s + (u - i * len))
}

/// FORMAT.md §4: object byte at chunk offset `x` of data chunk `i`, or `None` for padding.
fn reference_object_byte(size: usize, k: usize, s: usize, i: usize, x: usize) -> Option<usize> {
    let w = k * s;
    let n = size.div_ceil(w);
    let j = x / s;
    let len = if j < n - 1 {
        s
    } else {
        (size - (n - 1) * w).div_ceil(k)
    };
    let o = j * w + i * len + (x - j * s);
    (o < size).then_some(o)
}

/// FORMAT.md §5's whole-object vector: "ecdn-codec!" (11 bytes), (3, 2), s = 3.
#[test]
fn object_vector_matches_format_md() {
    let object = b"ecdn-codec!";
    let expected = ["65636463", "6e2d6321", "6f646500", "642a6242", "013b5a1e"];
    let gf_ref = Gf::new();
    let reference = reference_chunks(&gf_ref, object, 3, 2, 3);
    let got: Vec<String> = reference.iter().map(|c| hex(c)).collect();
    assert_eq!(got, expected, "the reference disagrees with FORMAT.md §5");

    let layout = ObjectLayout::new(11, 3, 2, 3).unwrap();
    assert_eq!(layout.stripe_width(), 9);
    assert_eq!(layout.stripe_count(), 2);
    assert_eq!(layout.chunk_size(), 4);
    assert_eq!(layout.sub_chunk_len(1).unwrap(), 1);
    let codec = ReedSolomonCodec::new(3, 2).unwrap();
    let chunks = encode_object(&codec, &layout, object).unwrap();
    assert_eq!(chunks, reference);
    // Stripe 1 is byte 3 of each chunk.
    let stripe1: Vec<u8> = chunks.iter().map(|c| c[3]).collect();
    assert_eq!(hex(&stripe1), "632100421e");
    let avail = [
        None,
        Some(&chunks[1][..]),
        None,
        Some(&chunks[3][..]),
        Some(&chunks[4][..]),
    ];
    assert_eq!(decode_object(&codec, &layout, &avail).unwrap(), object);

    // §5: bytes [5, 10), the stripes to decode without chunk 1 / chunk 0, chunk 0's bytes.
    assert_eq!(layout.stripes_for_range(5..10).unwrap(), 0..2);
    let spans: Vec<(usize, u64, std::ops::Range<u64>)> = layout
        .sub_chunks_for_range(5..10)
        .unwrap()
        .map(|s| (s.chunk, s.sub_chunk, s.range))
        .collect();
    assert_eq!(spans, vec![(1, 0, 2..3), (2, 0, 0..3), (0, 1, 0..1)]);
    let without = |c: usize| -> Vec<bool> { (0..5).map(|i| i != c).collect() };
    assert_eq!(
        layout.stripes_to_decode(5..10, &without(1)).unwrap(),
        vec![0]
    );
    assert_eq!(
        layout.stripes_to_decode(5..10, &without(0)).unwrap(),
        vec![1]
    );
    assert_eq!(layout.data_ranges(0).unwrap(), vec![0..3, 9..10]);
    assert_eq!(layout.data_ranges(1).unwrap(), vec![3..6, 10..11]);
    assert_eq!(layout.data_ranges(2).unwrap(), vec![6..9]);
    assert_eq!(
        decode_stripe(
            &codec,
            &layout,
            1,
            &[
                (2, &chunks[2][3..]),
                (4, &chunks[4][3..]),
                (3, &chunks[3][3..])
            ]
        )
        .unwrap(),
        b"c!"
    );

    let header = ChunkHeader::new(layout, 3).unwrap().to_bytes();
    assert_eq!(
        hex(&header),
        "454352530200030002000300030000000b00000000000000"
    );
    // The same header with version 1 (chunk-major) is refused.
    let mut v1 = header;
    v1[4] = 1;
    assert!(matches!(
        ChunkHeader::parse(&v1),
        Err(CodecError::Header(_))
    ));
}

/// The library (`encode_object`, `StripeEncoder`, `ObjectLayout`) equals the reference of §3–§4
/// for many shapes, sub-chunk sizes and object sizes, and chunks are ceil(size / K) bytes.
#[test]
fn library_layout_equals_reference() {
    let gf_ref = Gf::new();
    for (k, p) in [(1, 0), (1, 2), (2, 1), (3, 1), (3, 2), (4, 2), (5, 3)] {
        let codec = ReedSolomonCodec::new(k, p).unwrap();
        for s in [1usize, 2, 3, 5, 8] {
            let w = k * s;
            let mut sizes: Vec<usize> = (0..=2 * w + 2).collect();
            sizes.extend([5 * w - 1, 5 * w, 5 * w + 1, 7 * w + k + 1]);
            for size in sizes {
                let object = pseudo_random(size, (size * 31 + k * 7 + s) as u64);
                let reference = reference_chunks(&gf_ref, &object, k, p, s);
                let layout = ObjectLayout::new(size as u64, k, p, s as u64).unwrap();
                let what = format!("size {size}, ({k},{p}), s = {s}");
                assert_eq!(layout.chunk_size() as usize, size.div_ceil(k), "{what}");
                for c in &reference {
                    assert_eq!(c.len(), size.div_ceil(k), "{what}");
                }
                let chunks = encode_object(&codec, &layout, &object).unwrap();
                assert_eq!(chunks, reference, "{what}");

                let mut enc = StripeEncoder::new(k, p, s as u64, codec_arc(k, p)).unwrap();
                let mut streamed = vec![Vec::new(); k + p];
                let mut stripes = enc.push(&object).unwrap();
                let (last, final_layout) = enc.finish().unwrap();
                stripes.extend(last);
                assert_eq!(final_layout, layout, "{what}");
                for (j, st) in stripes.iter().enumerate() {
                    assert_eq!(st.index(), j as u64);
                    for (c, out) in streamed.iter_mut().enumerate() {
                        out.extend_from_slice(st.shard(c).unwrap());
                    }
                }
                assert_eq!(streamed, reference, "stream: {what}");

                // §4 both ways, and the data chunks' object byte ranges.
                for (o, &byte) in object.iter().enumerate() {
                    let (i, x) = reference_locate(size, k, s, o);
                    assert_eq!(reference[i][x], byte, "{what} byte {o}");
                    assert_eq!(layout.locate(o as u64).unwrap(), (i, x as u64));
                }
                for (i, chunk) in reference.iter().enumerate().take(k) {
                    let mut carried = Vec::new();
                    for (x, &b) in chunk.iter().enumerate() {
                        match reference_object_byte(size, k, s, i, x) {
                            Some(o) => {
                                assert_eq!(object[o], b);
                                carried.push(o as u64);
                            }
                            None => assert_eq!(b, 0, "{what}: padding of chunk {i} at {x}"),
                        }
                    }
                    // data_ranges lists exactly those bytes, in chunk order, merged.
                    let ranges = layout.data_ranges(i).unwrap();
                    let listed: Vec<u64> = ranges.iter().flat_map(|r| r.clone()).collect();
                    assert_eq!(listed, carried, "{what}: chunk {i}");
                    assert!(ranges.iter().all(|r| !r.is_empty()));
                    assert!(ranges.windows(2).all(|r| r[0].end < r[1].start));
                    if k == 1 {
                        assert!(ranges.len() <= 1);
                    }
                }
                // A range decodes from K chunks chosen the hard way (the last K).
                if size > 2 {
                    let avail: Vec<Option<&[u8]>> = (0..k + p)
                        .map(|c| (c >= p).then_some(chunks[c].as_slice()))
                        .collect();
                    let got = decode_range(&codec, &layout, &avail, 1..size as u64 - 1).unwrap();
                    assert_eq!(got, object[1..size - 1], "{what}");
                }
            }
        }
    }
}

fn codec_arc(k: usize, p: usize) -> std::sync::Arc<dyn Codec> {
    std::sync::Arc::new(ReedSolomonCodec::new(k, p).unwrap())
}
