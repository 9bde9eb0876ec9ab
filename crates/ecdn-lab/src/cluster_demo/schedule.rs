//! The demo's failure schedule: which nodes are killed (`--kill NODE@FRACTION`) and which of
//! them come back (`--restart NODE@FRACTION`, `--restart-empty NODE@FRACTION`), each before
//! request ⌊FRACTION × requests⌋, checked before anything starts.

/// `--kill NODE@FRACTION` as given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KillSpec {
    pub node: usize,
    pub fraction: f64,
}

impl KillSpec {
    pub fn parse(s: &str) -> Result<KillSpec, String> {
        let (node, fraction) = node_at("--kill", s)?;
        Ok(KillSpec { node, fraction })
    }
}

/// `NODE@FRACTION` of option `flag` (`--kill`, `--restart`, ...): a node id and a fraction of
/// the requests in [0, 1).
pub fn node_at(flag: &str, s: &str) -> Result<(usize, f64), String> {
    let bad = |why: &str| format!("{flag} {s:?}: {why}; expected NODE@FRACTION, e.g. 2@0.5");
    let (node, fraction) = s.trim().split_once('@').ok_or_else(|| bad("no '@'"))?;
    let node: usize = node
        .trim()
        .parse()
        .map_err(|_| bad("the node is not a number"))?;
    let fraction: f64 = fraction
        .trim()
        .parse()
        .map_err(|_| bad("the fraction is not a number"))?;
    if !(0.0..1.0).contains(&fraction) {
        return Err(bad("the fraction must be at least 0 and below 1"));
    }
    Ok((node, fraction))
}

/// A scheduled kill: `node` dies before request `at` is issued.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kill {
    pub node: usize,
    pub fraction: f64,
    /// ⌊fraction × requests⌋: the requests issued before the kill.
    pub at: u64,
}

/// The kills of `specs` for a run of `requests` over `nodes` nodes, in the order they happen.
/// Every node must exist, be killed at most once, and one node must survive.
pub fn kills(specs: &[KillSpec], nodes: usize, requests: u64) -> Result<Vec<Kill>, String> {
    let mut kills: Vec<Kill> = Vec::with_capacity(specs.len());
    for s in specs {
        if s.node >= nodes {
            return Err(format!(
                "--kill {}@{}: node {} does not exist (nodes are 0..{})",
                s.node,
                s.fraction,
                s.node,
                nodes.saturating_sub(1)
            ));
        }
        if kills.iter().any(|k| k.node == s.node) {
            return Err(format!("--kill: node {} is killed twice", s.node));
        }
        kills.push(Kill {
            node: s.node,
            fraction: s.fraction,
            at: (s.fraction * requests as f64).floor() as u64,
        });
    }
    if !kills.is_empty() && kills.len() >= nodes {
        return Err(format!(
            "--kill would kill all {nodes} nodes; at least one must survive"
        ));
    }
    kills.sort_by_key(|k| (k.at, k.node));
    Ok(kills)
}

/// `--restart NODE@FRACTION` or `--restart-empty NODE@FRACTION` as given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RestartSpec {
    pub node: usize,
    pub fraction: f64,
    /// `--restart-empty`: the node's disk file is wiped before it starts.
    pub empty: bool,
}

impl RestartSpec {
    pub fn parse(s: &str, empty: bool) -> Result<RestartSpec, String> {
        let (node, fraction) = node_at(RestartSpec::flag(empty), s)?;
        Ok(RestartSpec {
            node,
            fraction,
            empty,
        })
    }

    fn flag(empty: bool) -> &'static str {
        if empty {
            "--restart-empty"
        } else {
            "--restart"
        }
    }
}

/// A scheduled restart: `node`, killed earlier, is started again (same id, ports and disk
/// file) and is back in the coordinator's map before request `at` is issued — C2DN's server
/// return (App. 10.3, "Server addition").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Restart {
    pub node: usize,
    pub fraction: f64,
    /// ⌊fraction × requests⌋: the requests issued before the return.
    pub at: u64,
    /// Its disk file is wiped first: it returns without what it held (a replaced disk).
    pub empty: bool,
}

/// The restarts of `specs` for a run of `requests` whose kills are `kills`, in the order they
/// happen. Each brings back a node killed earlier: one of `kills`, at most one restart per
/// kill (a node is killed at most once), at a later request than its kill.
pub fn restarts(
    specs: &[RestartSpec],
    kills: &[Kill],
    requests: u64,
) -> Result<Vec<Restart>, String> {
    let mut out: Vec<Restart> = Vec::with_capacity(specs.len());
    for s in specs {
        let given = format!("{} {}@{}", RestartSpec::flag(s.empty), s.node, s.fraction);
        let Some(kill) = kills.iter().find(|k| k.node == s.node) else {
            return Err(format!(
                "{given}: node {} is not killed; a restart brings back a node that --kill {}@FRACTION \
                 killed earlier",
                s.node, s.node
            ));
        };
        if out.iter().any(|r| r.node == s.node) {
            return Err(format!(
                "{given}: node {} is restarted twice; it is killed once, and a kill has at most \
                 one restart",
                s.node
            ));
        }
        let at = (s.fraction * requests as f64).floor() as u64;
        if s.fraction <= kill.fraction || at <= kill.at {
            return Err(format!(
                "{given}: node {} is killed at {} (before request {}); its restart must come \
                 later (here before request {at})",
                s.node, kill.fraction, kill.at
            ));
        }
        out.push(Restart {
            node: s.node,
            fraction: s.fraction,
            at,
            empty: s.empty,
        });
    }
    out.sort_by_key(|r| (r.at, r.node));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_specs_parse_and_refuse_nonsense() {
        assert_eq!(
            KillSpec::parse("2@0.5").unwrap(),
            KillSpec {
                node: 2,
                fraction: 0.5
            }
        );
        assert_eq!(KillSpec::parse(" 0@0 ").unwrap().fraction, 0.0);
        for (s, want) in [
            ("2", "no '@'"),
            ("x@0.5", "node is not a number"),
            ("2@half", "fraction is not a number"),
            ("2@1", "below 1"),
            ("2@-0.1", "at least 0"),
            ("2@NaN", "at least 0"),
        ] {
            let e = KillSpec::parse(s).unwrap_err();
            assert!(e.contains(want) && e.contains("NODE@FRACTION"), "{s}: {e}");
        }
    }

    #[test]
    fn kills_are_ordered_and_their_nodes_checked() {
        let spec = |node, fraction| KillSpec { node, fraction };
        let k = kills(&[spec(4, 0.75), spec(1, 0.5)], 6, 1001).unwrap();
        assert_eq!(
            k.iter().map(|k| (k.node, k.at)).collect::<Vec<_>>(),
            vec![(1, 500), (4, 750)]
        );
        assert!(kills(&[spec(6, 0.5)], 6, 10)
            .unwrap_err()
            .contains("does not exist"));
        assert!(kills(&[spec(1, 0.5), spec(1, 0.6)], 6, 10)
            .unwrap_err()
            .contains("twice"));
        assert!(kills(&[spec(0, 0.5), spec(1, 0.6)], 2, 10)
            .unwrap_err()
            .contains("survive"));
        assert!(kills(&[], 1, 10).unwrap().is_empty());
    }

    #[test]
    fn restart_specs_parse_like_kills() {
        assert_eq!(
            RestartSpec::parse("1@0.6", true).unwrap(),
            RestartSpec {
                node: 1,
                fraction: 0.6,
                empty: true
            }
        );
        let e = RestartSpec::parse("1@1.0", false).unwrap_err();
        assert!(
            e.starts_with("--restart \"1@1.0\"") && e.contains("below 1"),
            "{e}"
        );
        let e = RestartSpec::parse("1", true).unwrap_err();
        assert!(
            e.starts_with("--restart-empty") && e.contains("NODE@FRACTION"),
            "{e}"
        );
    }

    #[test]
    fn restarts_need_an_earlier_kill_of_their_node() {
        let kill = |node, fraction| KillSpec { node, fraction };
        let ks = kills(&[kill(1, 0.3), kill(4, 0.5)], 6, 1000).unwrap();
        let spec = |node, fraction, empty| RestartSpec {
            node,
            fraction,
            empty,
        };
        let r = restarts(&[spec(4, 0.9, true), spec(1, 0.6, false)], &ks, 1000).unwrap();
        assert_eq!(
            r.iter()
                .map(|r| (r.node, r.at, r.empty))
                .collect::<Vec<_>>(),
            vec![(1, 600, false), (4, 900, true)]
        );
        assert!(restarts(&[], &ks, 1000).unwrap().is_empty());
        for (specs, want) in [
            (vec![spec(2, 0.6, false)], "node 2 is not killed"),
            (
                vec![spec(1, 0.6, false), spec(1, 0.7, true)],
                "restarted twice",
            ),
            (vec![spec(1, 0.3, false)], "must come"),
            (vec![spec(1, 0.2, true)], "must come"),
        ] {
            let e = restarts(&specs, &ks, 1000).unwrap_err();
            assert!(e.contains(want), "{specs:?}: {e}");
        }
        // A later fraction that falls on the kill's request (10 requests: 0.31 and 0.35 are
        // both request 3) is no later.
        let ks = kills(&[kill(1, 0.31)], 6, 10).unwrap();
        let e = restarts(&[spec(1, 0.35, false)], &ks, 10).unwrap_err();
        assert!(e.contains("before request 3"), "{e}");
    }
}
