//! FORMAT.md's test vectors and its generator-matrix construction, checked against an
//! independent GF(2^8) reference written here from the format text alone (bit-serial
//! multiplication into a full 256 × 256 table, Gauss–Jordan inversion) — it shares no code
//! with `ecdn_codec::gf`. Both `reed-solomon-erasure`'s own encoder and `ReedSolomonCodec` must
//! produce the reference's parity.

use ecdn_codec::{
    decode_object, encode_object, gf, ChunkHeader, Codec, ObjectLayout, ReedSolomonCodec,
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

/// FORMAT.md §5's whole-object vector: "ecdn-codec!" (11 bytes), (3, 2), sub-chunk 2.
#[test]
fn object_vector_matches_format_md() {
    let object = b"ecdn-codec!";
    let layout = ObjectLayout::new(11, 3, 2, 2).unwrap();
    assert_eq!(layout.chunk_size(), 4);
    assert_eq!(layout.sub_chunks_per_chunk(), 2);
    let codec = ReedSolomonCodec::new(3, 2).unwrap();
    let chunks = encode_object(&codec, &layout, object).unwrap();
    let got: Vec<String> = chunks.iter().map(|c| hex(c)).collect();
    assert_eq!(
        got,
        ["6563646e", "2d636f64", "65632100", "2d632a0a", "1f63bf47"]
    );
    // The reference agrees, and data chunk 2 is "ec!" plus one zero byte of padding.
    let gf_ref = Gf::new();
    let parity = gf_ref.parity(&gf_ref.generator(3, 2), &chunks[..3]);
    assert_eq!(&chunks[3..], &parity[..]);
    let avail = [
        None,
        Some(&chunks[1][..]),
        None,
        Some(&chunks[3][..]),
        Some(&chunks[4][..]),
    ];
    assert_eq!(decode_object(&codec, &layout, &avail).unwrap(), object);

    // §5: bytes [5, 10) and the stripes to decode without chunk 1.
    let spans: Vec<(usize, u64, std::ops::Range<u64>)> = layout
        .sub_chunks_for_range(5..10)
        .unwrap()
        .map(|s| (s.chunk, s.sub_chunk, s.range))
        .collect();
    assert_eq!(spans, vec![(1, 0, 1..2), (1, 1, 0..2), (2, 0, 0..2)]);
    let present = [true, false, true, true, true];
    assert_eq!(
        layout.stripes_to_decode(5..10, &present).unwrap(),
        vec![0, 1]
    );

    let header = ChunkHeader::new(layout, 3).unwrap().to_bytes();
    assert_eq!(
        hex(&header),
        "454352530100030002000300020000000b00000000000000"
    );
}
