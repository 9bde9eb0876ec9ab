//! Prometheus text expositions as the cluster tests read them, and the check of the Grafana
//! dashboard (`docs/grafana/ecdn-cluster.json`) against what nodes export.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeSet;

/// One sample line: its metric name, labels and value.
#[derive(Clone, Debug)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// The samples of one `/_ecdn/metrics` answer.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// Parses the exposition (our own: no escaped quotes in label values); panics on a line it
    /// cannot read, so a malformed exposition fails the test.
    pub fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text.lines() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
            let value = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v
                    .parse()
                    .unwrap_or_else(|_| panic!("bad value in {line:?}")),
            };
            let (name, labels) = match series.split_once('{') {
                None => (series.to_string(), Vec::new()),
                Some((name, rest)) => {
                    let inner = rest.strip_suffix('}').expect("labels end with }");
                    let labels = inner
                        .split(',')
                        .map(|kv| {
                            let (k, v) = kv.split_once('=').expect("label = value");
                            let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
                            (k.to_string(), v.expect("quoted label value").to_string())
                        })
                        .collect();
                    (name.to_string(), labels)
                }
            };
            samples.push(Sample {
                name,
                labels,
                value,
            });
        }
        Scrape { samples }
    }

    /// The samples of `name` whose labels include every pair of `with`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        with: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| {
            s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v))
        })
    }

    /// The sum of the samples of `name` with labels `with` (0 if none).
    pub fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.matching(name, with).map(|s| s.value).sum()
    }

    /// The one sample of `name` with labels `with`; panics unless there is exactly one.
    pub fn one(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        let found: Vec<_> = self.matching(name, with).collect();
        assert_eq!(found.len(), 1, "{name} {with:?}: {found:?}");
        found[0].value
    }

    /// The values label `label` takes on samples of `name`.
    pub fn label_values(&self, name: &str, label: &str) -> BTreeSet<String> {
        self.matching(name, &[])
            .flat_map(|s| s.labels.iter().filter(|(k, _)| k == label))
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn has_label(&self, name: &str, label: &str) -> bool {
        self.matching(name, &[])
            .any(|s| s.labels.iter().any(|(k, _)| k == label))
    }
}

/// Labels Prometheus adds to every scraped series, and the histogram bucket bound.
const TARGET_LABELS: [&str; 3] = ["job", "instance", "le"];

/// The metrics the dashboard must chart (the C2DN figures and the operator's basics).
pub const REQUIRED: [&str; 11] = [
    "ecdn_cluster_served_total",
    "ecdn_cluster_origin_bytes_total",
    "ecdn_cluster_served_bytes_total",
    "ecdn_cluster_written_bytes_total",
    "ecdn_cluster_cached_reads_total",
    "ecdn_cluster_decodes_total",
    "ecdn_cluster_parity_fetches_total",
    "ecdn_cluster_peer_fetch_duration_seconds_bucket",
    "ecdn_cluster_peer_errors_total",
    "ecdn_cluster_epoch",
    "ecdn_cluster_control_reachable",
];

/// A label matcher of a selector: key, operator, value.
type Matcher = (String, String, String);

/// The identifiers of a PromQL expression that start with `ecdn_`, each with the label
/// matchers written right after it.
fn selectors(expr: &str) -> Vec<(String, Vec<Matcher>)> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !ident(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ident(b[i]) {
            i += 1;
        }
        let word = &expr[start..i];
        if !word.starts_with("ecdn_") {
            continue;
        }
        let mut matchers = Vec::new();
        if b.get(i) == Some(&b'{') {
            let end = expr[i..].find('}').map_or(b.len(), |e| i + e);
            for m in expr[i + 1..end].split(',').filter(|m| !m.trim().is_empty()) {
                let op = ["=~", "!~", "!=", "="]
                    .into_iter()
                    .find(|op| m.contains(op))
                    .unwrap_or("?");
                let (k, v) = m.split_once(op).unwrap_or((m, ""));
                let v = v.trim().trim_matches('"');
                matchers.push((k.trim().to_string(), op.to_string(), v.to_string()));
            }
            i = end;
        }
        out.push((word.to_string(), matchers));
    }
    out
}

/// The label names of the `by (...)` / `without (...)` clauses of `expr`.
fn grouping_labels(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for kw in ["by (", "without ("] {
        for (at, _) in expr.match_indices(kw) {
            let rest = &expr[at + kw.len()..];
            let inner = &rest[..rest.find(')').unwrap_or(rest.len())];
            out.extend(inner.split(',').map(|l| l.trim().to_string()));
        }
    }
    out
}

/// What is wrong with the dashboard `d`, checked against the scrapes of live nodes: its shape
/// (a `DS_PROMETHEUS` input, the schema version, panels with unique ids, a title, a
/// description, the input's datasource, a grid position and queries), every metric name in its
/// PromQL exported by some node, every label matcher and grouping label one those metrics
/// carry (an exact value one they take), every `$variable` defined, and every
/// [`REQUIRED`] metric charted. Empty when nothing is.
pub fn dashboard_problems(d: &serde_json::Value, nodes: &[Scrape]) -> Vec<String> {
    let mut bad = Vec::new();
    let inputs = d["__inputs"].as_array().cloned().unwrap_or_default();
    if !inputs
        .iter()
        .any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus")
    {
        bad.push("no DS_PROMETHEUS datasource input".to_string());
    }
    if d["schemaVersion"].as_u64().is_none_or(|v| v < 36) {
        bad.push(format!("schemaVersion {}", d["schemaVersion"]));
    }
    let vars: BTreeSet<String> = d["templating"]["list"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|v| v["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let exported = |name: &str| nodes.iter().any(|n| n.matching(name, &[]).next().is_some());
    let labelled = |name: &str, label: &str| nodes.iter().any(|n| n.has_label(name, label));
    let takes = |name: &str, label: &str, value: &str| {
        nodes
            .iter()
            .any(|n| n.label_values(name, label).contains(value))
    };
    let mut ids = BTreeSet::new();
    let mut used = BTreeSet::new();
    let panels = d["panels"].as_array().cloned().unwrap_or_default();
    if panels.is_empty() {
        bad.push("no panels".to_string());
    }
    for p in &panels {
        let title = p["title"].as_str().unwrap_or("").to_string();
        if !ids.insert(p["id"].as_u64().unwrap_or(0)) {
            bad.push(format!("panel {title:?}: id {} not unique", p["id"]));
        }
        let (x, w) = (p["gridPos"]["x"].as_u64(), p["gridPos"]["w"].as_u64());
        if !matches!((x, w), (Some(x), Some(w)) if w >= 1 && x + w <= 24) {
            bad.push(format!("panel {title:?}: gridPos {}", p["gridPos"]));
        }
        if p["type"] == "row" {
            continue;
        }
        if title.is_empty() || p["description"].as_str().is_none_or(str::is_empty) {
            bad.push(format!("panel {}: a title and a description", p["id"]));
        }
        if p["datasource"]["uid"] != "${DS_PROMETHEUS}" {
            bad.push(format!("panel {title:?}: datasource {}", p["datasource"]));
        }
        let targets = p["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            bad.push(format!("panel {title:?}: no queries"));
        }
        for t in &targets {
            let expr = t["expr"].as_str().unwrap_or("");
            let sels = selectors(expr);
            if sels.is_empty() {
                bad.push(format!("panel {title:?}: no ecdn metric in {expr:?}"));
            }
            for (name, matchers) in &sels {
                used.insert(name.clone());
                if !exported(name) {
                    bad.push(format!("panel {title:?}: no node exports {name}"));
                    continue;
                }
                for (k, op, v) in matchers {
                    if TARGET_LABELS.contains(&k.as_str()) {
                        continue;
                    }
                    if !labelled(name, k) {
                        bad.push(format!("panel {title:?}: {name} has no label {k}"));
                    } else if op == "=" && !takes(name, k, v) {
                        bad.push(format!("panel {title:?}: {name}{{{k}}} is never {v:?}"));
                    }
                }
            }
            for l in grouping_labels(expr) {
                let on_some = sels.iter().any(|(name, _)| labelled(name, &l));
                if !TARGET_LABELS.contains(&l.as_str()) && !on_some {
                    bad.push(format!("panel {title:?}: grouping label {l} on no metric"));
                }
            }
            for (at, _) in expr.match_indices('$') {
                let name: String = expr[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.starts_with("__") && !vars.contains(&name) {
                    bad.push(format!("panel {title:?}: undefined variable ${name}"));
                }
            }
        }
    }
    for r in REQUIRED {
        if !used.contains(r) {
            bad.push(format!("the dashboard does not chart {r}"));
        }
    }
    bad
}

/// Checks a node's `ecdn_cluster_*` metrics against its `/_ecdn/stats` `cluster` object (taken
/// with no request in flight): the epoch, the bytes written (by kind, summed), the counters
/// both show (the per-peer ones summed), and each peer's latency histogram (cumulative, its
/// `+Inf` bucket its count, at most one per fetch).
pub fn agrees_with_stats(m: &Scrape, cluster: &serde_json::Value) {
    let stat = |k: &str| {
        cluster[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {cluster}")) as f64
    };
    let id = cluster["id"].to_string();
    assert_eq!(m.one("ecdn_cluster_epoch", &[]), stat("epoch"));
    for (metric, with, key) in [
        ("ecdn_cluster_written_bytes_total", &[][..], "bytes_written"),
        ("ecdn_cluster_relayed_total", &[], "relayed"),
        ("ecdn_cluster_relay_failovers_total", &[], "relay_failovers"),
        ("ecdn_cluster_peer_errors_total", &[], "peer_errors"),
        (
            "ecdn_cluster_hits_total",
            &[("object", "coded")],
            "coded_hits",
        ),
        (
            "ecdn_cluster_hits_total",
            &[("object", "replicated")],
            "replicated_hits",
        ),
        ("ecdn_cluster_decodes_total", &[], "decodes"),
        ("ecdn_cluster_partial_hits_total", &[], "partial_hits"),
        (
            "ecdn_cluster_peer_received_bytes_total",
            &[],
            "peer_bytes_received",
        ),
        ("ecdn_cluster_peer_sent_bytes_total", &[], "peer_bytes_sent"),
        ("ecdn_cluster_link_sent_bytes_total", &[], "link_bytes_sent"),
        (
            "ecdn_cluster_link_background_bytes_total",
            &[],
            "background_bytes_sent",
        ),
    ] {
        assert_eq!(
            m.sum(metric, with),
            stat(key),
            "node {id}: {metric} {with:?}"
        );
    }
    let h = "ecdn_cluster_peer_fetch_duration_seconds";
    for peer in m.label_values("ecdn_cluster_peer_fetches_total", "peer") {
        let p = [("peer", peer.as_str())];
        let buckets: Vec<f64> = m
            .matching(&format!("{h}_bucket"), &p)
            .map(|s| s.value)
            .collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        let count = m.one(&format!("{h}_count"), &p);
        assert_eq!(
            buckets.last().copied(),
            Some(count),
            "node {id} peer {peer}"
        );
        assert!(count <= m.one("ecdn_cluster_peer_fetches_total", &p));
    }
}
