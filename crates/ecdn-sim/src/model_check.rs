//! Checks AdaptSize's model against measurement: for each c of a grid, the OHR the model predicts
//! from the trace's requests (their rates, or their reuse gaps: [`Estimator`]) and sizes, next to
//! the OHR an LRU cache with fixed e^(−size/c) admission actually reaches on the same trace
//! (AdaptSize Fig. 9).

use std::collections::HashMap;

pub use ecdn_policy::admission::adaptsize::Estimator;
use ecdn_policy::admission::model::Model;
use ecdn_policy::admission::reuse::{ReuseModel, ReuseObject};
use ecdn_policy::spec::{AdmissionSpec, EvictionKind};
use ecdn_policy::PolicySpec;
use ecdn_trace::{Request, SliceReader};
use serde::Serialize;

use crate::{simulate, SimConfig, SimError};

/// Predicted and measured OHR at one c.
#[derive(Clone, Debug, Serialize)]
pub struct ModelPoint {
    pub c: f64,
    pub predicted_ohr: f64,
    pub measured_ohr: f64,
}

/// The model of the measured part of `reqs` (after `warmup`): rate = requests in that part.
pub fn model_of(reqs: &[Request], warmup: usize, capacity: u64) -> Model {
    let objs = count_objects(&reqs[warmup.min(reqs.len())..]);
    Model::new(objs.into_iter().map(|(n, s)| (n as f64, s)), capacity)
}

/// The reuse-gap model of the measured part of `reqs` (after `warmup`): each of its requests
/// with its gap since the object's previous request (which may lie in the warm-up), the measured
/// part as the window.
pub fn reuse_model_of(reqs: &[Request], warmup: usize, capacity: u64) -> ReuseModel {
    let warmup = warmup.min(reqs.len());
    let mut last: HashMap<u64, usize> = HashMap::with_capacity(reqs.len() / 4);
    // Per object of the measured part: (size, gaps).
    let mut objects: HashMap<u64, (u64, Vec<f64>)> = HashMap::new();
    for (t, r) in reqs.iter().enumerate() {
        let prev = last.insert(r.id, t);
        if t >= warmup {
            let gap = prev.map_or(f64::INFINITY, |p| (t - p) as f64);
            let e = objects.entry(r.id).or_insert((r.size, Vec::new()));
            e.0 = r.size;
            e.1.push(gap);
        }
    }
    ReuseModel::new(
        objects.values().map(|(size, gaps)| ReuseObject {
            size: *size,
            gaps,
            p_in: 0.0,
        }),
        capacity,
        (reqs.len() - warmup) as u64,
    )
}

/// The OHR the model (built with `estimator` from the measured part) predicts at each c.
pub fn predicted_curve(
    reqs: &[Request],
    warmup: usize,
    capacity: u64,
    cs: &[f64],
    estimator: Estimator,
) -> Vec<(f64, f64)> {
    match estimator {
        Estimator::Rates => model_of(reqs, warmup, capacity).curve(cs),
        Estimator::Reuse => reuse_model_of(reqs, warmup, capacity).curve(cs),
    }
}

/// For each c in `cs`: the model's OHR and the OHR measured by simulating LRU + e^(−size/c) on
/// `reqs` (the first `warmup` requests warm the cache). Runs on up to `threads` threads.
pub fn model_vs_measured(
    reqs: &[Request],
    warmup: usize,
    capacity: u64,
    cs: &[f64],
    seed: u64,
    threads: usize,
    estimator: Estimator,
) -> Result<Vec<ModelPoint>, SimError> {
    let predicted = predicted_curve(reqs, warmup, capacity, cs, estimator);
    let cfg = SimConfig {
        warmup: warmup as u64,
        seed,
        ..SimConfig::default()
    };
    let measured = crate::pool::run_jobs(cs, threads, &|_| {}, |&c, _| {
        let spec = PolicySpec {
            label: format!("lru+exp:{c}"),
            eviction: EvictionKind::Lru,
            admission: Some(AdmissionSpec::Exp { c }),
        };
        simulate(&mut SliceReader::new(reqs), &spec, capacity, &cfg, &|_| {})
            .map(|r| r.object_hit_ratio)
    });
    predicted
        .into_iter()
        .zip(measured)
        .map(|((c, p), m)| {
            Ok(ModelPoint {
                c,
                predicted_ohr: p,
                measured_ohr: m?,
            })
        })
        .collect()
}

/// `(requests, last size)` per object.
fn count_objects(reqs: &[Request]) -> Vec<(u64, u64)> {
    let mut m: HashMap<u64, (u64, u64)> = HashMap::with_capacity(reqs.len() / 4);
    for r in reqs {
        let e = m.entry(r.id).or_insert((0, r.size));
        e.0 += 1;
        e.1 = r.size;
    }
    m.into_values().collect()
}
