//! Property tests: format roundtrips and next-access computation.

use ecdn_trace::oracle::{self, OracleReader, OracleWriter};
use ecdn_trace::text::{self, TextReader};
use ecdn_trace::{compute_next_access, read_all, Request, RequestWriter};
use proptest::prelude::*;

/// Requests whose fields fit the oracleGeneral record (u32 time and size), with ids drawn from a
/// small pool so objects repeat.
fn requests(max_len: usize) -> impl Strategy<Value = Vec<Request>> {
    prop::collection::vec(
        (
            any::<u32>(),
            prop_oneof![0u64..20, any::<u64>()],
            any::<u32>(),
        )
            .prop_map(|(time, id, size)| Request {
                time: time as u64,
                id,
                size: size as u64,
                next_access: -1,
            }),
        0..max_len,
    )
}

/// O(n²) reference: the index of the next request to the same id, or -1.
fn naive_next_access(reqs: &[Request]) -> Vec<i64> {
    (0..reqs.len())
        .map(|i| {
            (i + 1..reqs.len())
                .find(|&j| reqs[j].id == reqs[i].id)
                .map_or(-1, |j| j as i64)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn oracle_roundtrip(mut reqs in requests(300), zstd in any::<bool>()) {
        compute_next_access(&mut reqs);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        oracle::write(&path, &reqs, zstd).unwrap();
        let back = read_all(&mut OracleReader::open(&path, zstd).unwrap()).unwrap();
        prop_assert_eq!(back, reqs);
    }

    #[test]
    fn oracle_streaming_writer_roundtrip(reqs in requests(300), zstd in any::<bool>(), split in 0usize..300) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.bin");
        let mut w = Box::new(OracleWriter::create(&path, zstd).unwrap());
        let split = split.min(reqs.len());
        w.write_batch(&reqs[..split]).unwrap();
        w.write_batch(&reqs[split..]).unwrap();
        prop_assert_eq!(w.finish().unwrap(), reqs.len() as u64);
        let mut want = reqs.clone();
        compute_next_access(&mut want);
        let back = read_all(&mut OracleReader::open(&path, zstd).unwrap()).unwrap();
        prop_assert_eq!(back, want);
    }

    #[test]
    fn text_roundtrip(reqs in prop::collection::vec(
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(time, id, size)| Request {
            time, id, size, next_access: -1,
        }),
        0..300,
    ), zstd in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        text::write(&path, &reqs, zstd).unwrap();
        let back = read_all(&mut TextReader::open(&path, zstd).unwrap()).unwrap();
        prop_assert_eq!(back, reqs);
    }

    #[test]
    fn next_access_matches_naive(ids in prop::collection::vec(0u64..12, 0..200)) {
        let mut reqs: Vec<Request> = ids
            .iter()
            .map(|&id| Request { id, ..Request::default() })
            .collect();
        compute_next_access(&mut reqs);
        let got: Vec<i64> = reqs.iter().map(|r| r.next_access).collect();
        prop_assert_eq!(got, naive_next_access(&reqs));
    }

    #[test]
    fn text_reader_never_panics(data in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut r = TextReader::from_reader(Box::new(std::io::Cursor::new(data)), std::path::Path::new("fuzz"));
        let _ = read_all(&mut r);
    }

    #[test]
    fn csv_reader_never_panics(data in prop::collection::vec(
        prop_oneof![Just(b','), Just(b'"'), Just(b'\n'), Just(b'1'), Just(b'-'), Just(b' '), any::<u8>()],
        0..400,
    )) {
        let mut r = ecdn_trace::csv::CsvReader::from_reader(
            Box::new(std::io::Cursor::new(data)),
            std::path::Path::new("fuzz"),
            ecdn_trace::csv::CsvSpec::default(),
        ).unwrap();
        let _ = read_all(&mut r);
    }
}
