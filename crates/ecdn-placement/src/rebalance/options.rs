//! What parity rebalance weighs and how it trades balance for stability ([`RebalanceOptions`]),
//! and a cluster's defaults ([`RebalanceOptions::CLUSTER`], [`REBALANCE_EVERY_S`],
//! [`FIRST_REBALANCE_AFTER`]).

/// How much Algorithm 1 favours leaving parity buckets where they are.
///
/// Measured by `stability_trade_off` in `tests/rebalance.rs` (`--nocapture` prints the table):
/// 20 periodic rebalances, bucket popularity lognormal(0, 1) with lognormal(0, 0.3) noise per
/// period; parity buckets moved per rebalance, and the worst distance of any server's predicted
/// load from the water level (the best a divisible assignment could reach):
///
/// | cluster (servers × buckets, K, P) | `Off` | `KeepCurrent` | `SteerFlow` |
/// |---|---|---|---|
/// | 10 × 100, 3, 1 (100 parity buckets) | 79.8 moved, 0.2% | 78.5, 0.3% | 29.3, 1.8% |
/// | 10 × 100, 3, 2 (200) | 167.7, 0.2% | 166.3, 0.2% | 46.5, 6.8% |
/// | 50 × 1000, 3, 1 (1,000) | 968.5, 0.1% | 967.7, 0.1% | 329.2, 0.2% |
///
/// (with [`Budget::WaterFill`] and [`Weigh::Loads`], starting from the placement by chunk-bucket
/// count; the worst deviation of `SteerFlow` is that of the first load-based rebalance, which
/// keeps as much of that placement as fits). Pure Algorithm 1 reshuffles almost every parity bucket at every
/// rebalance because the loads drift; steering the flow toward current servers moves 3–6× fewer
/// for a balance cost of a few percent at most. `KeepCurrent` alone changes little, because the
/// flow this solver finds gives most parity buckets a single candidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Stability {
    /// Pure Algorithm 1: every bucket goes to its least loaded candidate.
    Off,
    /// A bucket whose current server has positive flow from it (and is feasible) stays there.
    KeepCurrent,
    /// `KeepCurrent`, and the initial flow first sends each bucket's whole load to its current
    /// server when it fits in that server's remaining budget (largest buckets first), so the
    /// maximum flow itself prefers the current assignment. The default.
    #[default]
    SteerFlow,
}

/// How the server → sink capacities (write budgets) are computed.
///
/// Measured by `stability_trade_off` (see [`Stability`]): with `SteerFlow`, the paper's budgets
/// leave servers up to 11% from the water level on 10 × 100 (the current assignments fill the
/// over-generous budgets first); water-filling keeps them within 1.4%. With `Off` both are the
/// same within 0.1%.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Budget {
    /// The paper's, `max(⌈W·q_i/Σq⌉ − l_i, 0)`.
    Paper,
    /// The paper's whenever every server's fixed load is within its share `W·q_i/Σq`. When some
    /// server's fixed load alone exceeds its share, the paper's budgets add up to more than the
    /// parity load, and a maximum flow may fill some servers to the share and leave others
    /// short. Water-filling instead finds the level `λ` (load per unit weight) with
    /// `Σ max(λ·q_i − l_i, 0) = Σ s_n` and uses `max(⌈λ·q_i⌉ − l_i, 0)`, so the servers parity can
    /// help end level with each other. The default.
    #[default]
    WaterFill,
}

/// What Algorithm 1 weighs: bytes written, or chunk buckets.
///
/// C2DN's authors give every chunk bucket weight 1 in both their simulator
/// (`cacheCluster::find_parity_mapping`) and their prototype's load balancer (`rebalanceParity`):
/// each server's data chunk buckets are counted and the maximum flow fills it with parity buckets
/// up to `⌈(K + P) · buckets / |A|⌉` in total, at construction and at every availability change.
/// With 100–200 buckets on 10 servers a bucket carries about the same write load as any other,
/// so equal chunk-bucket counts are equal write loads without measuring anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Weigh {
    /// Every data chunk bucket and every parity bucket counts 1, whatever was recorded.
    #[default]
    Counts,
    /// The write loads recorded since the last rebalance (Algorithm 1 as §4.2 states it), and
    /// chunk bucket counts while nothing has been recorded.
    Loads,
}

impl std::str::FromStr for Weigh {
    type Err = String;

    /// Parses `counts` or `loads`.
    fn from_str(s: &str) -> Result<Weigh, String> {
        match s.trim() {
            "counts" => Ok(Weigh::Counts),
            "loads" => Ok(Weigh::Loads),
            _ => Err(format!("unknown weighing {s:?} (counts, loads)")),
        }
    }
}

impl std::str::FromStr for Stability {
    type Err = String;

    /// Parses `off`, `keep` or `steer`.
    fn from_str(s: &str) -> Result<Stability, String> {
        match s.trim() {
            "off" => Ok(Stability::Off),
            "keep" => Ok(Stability::KeepCurrent),
            "steer" => Ok(Stability::SteerFlow),
            _ => Err(format!("unknown stability {s:?} (off, keep, steer)")),
        }
    }
}

impl std::str::FromStr for Budget {
    type Err = String;

    /// Parses `paper` or `water`.
    fn from_str(s: &str) -> Result<Budget, String> {
        match s.trim() {
            "paper" => Ok(Budget::Paper),
            "water" => Ok(Budget::WaterFill),
            _ => Err(format!("unknown budget {s:?} (paper, water)")),
        }
    }
}

/// Knobs of [`parity_rebalance`](super::parity_rebalance), and of what [`crate::Placement::rebalance`] feeds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RebalanceOptions {
    /// Bytes written or chunk buckets (see [`Weigh`]).
    pub weigh: Weigh,
    pub stability: Stability,
    pub budget: Budget,
    /// Carry the imbalance so far into the next period (periodic rebalances, water-filled
    /// budgets only), in parts per million: each available server's fixed load is raised by
    /// how far its bytes written since it became available exceed the least-written server's,
    /// capped at this share of one period's mean per-server load. Algorithm 1 as published
    /// balances each period's predicted load on its own, so the prediction errors of
    /// successive periods add up; a carry makes later periods pay them back, at the price of
    /// more parity moves. 0 (the default) is the paper's inputs. Measured on d-2 in
    /// BENCHMARKS.md (issue 3): 5,000 ppm (0.5%) brings 100 buckets' write imbalance from
    /// 1.011–1.026 to 1.011–1.019 with the unprotected fraction unchanged; larger carries
    /// balance better still and unprotect more.
    pub carry_ppm: u32,
    /// Periodic rebalances move nothing while the write imbalance so far (the most bytes
    /// written by an available server over the least, since it became available) is at most
    /// 1 + this, in parts per million; their loads keep adding up until one is due. Each
    /// parity move changes the write rates of the servers it moves between, so their FIFOs'
    /// characteristic times part and the chunks already cached there leave before or after
    /// their objects' other chunks (C2DN App. 10.2's argument run backwards). 0 rebalances
    /// every period. Availability changes re-place parity whatever it says.
    pub hold_ppm: u32,
}

impl RebalanceOptions {
    /// What a cluster uses unless told otherwise, simulated (`ecdn sim cluster`) or live (the
    /// cluster file's `weigh` and `carry`): Algorithm 1 on the bytes written since the last
    /// rebalance ([`Weigh::Loads`], as §4.2 states it) with the imbalance so far carried up to
    /// one period's mean load per server (`carry_ppm` 1,000,000), run every
    /// [`REBALANCE_EVERY_S`] and on every availability change. `Default` is the authors'
    /// count rule, which balances only where every bucket writes alike: measured on 2M-request
    /// traces of four Akamai classes at 10 / 30 / 60% of their unique bytes (BENCHMARKS.md,
    /// issue 63), counts leave eu-7 at 1.20–1.32 and tc-0 at 1.04–1.06 (with 1 MiB slices)
    /// where these options give 1.003–1.016 on every class and size.
    pub const CLUSTER: RebalanceOptions = RebalanceOptions {
        weigh: Weigh::Loads,
        stability: Stability::SteerFlow,
        budget: Budget::WaterFill,
        carry_ppm: 1_000_000,
        hold_ppm: HOLD_PPM,
    };
}

/// [`RebalanceOptions::CLUSTER`]'s `hold_ppm`: periodic rebalances move nothing while the write
/// imbalance so far is at most 1.02. With reinsertion and whole-object eviction (the defaults,
/// `ecdn_placement::pieces`), every hourly parity move leaves the objects read next without
/// their parity on its new server: on 37 days of d-1 that was 0.42% of the reads unprotected at
/// 60% of the unique bytes and 3% more bytes missed; with the hold none, while tc-0 and eu-7 still
/// write within 1.012–1.027, which without periodic moves they do not (1.05–1.98; BENCHMARKS.md,
/// issue 63).
pub const HOLD_PPM: u32 = 20_000;

/// Seconds between a cluster's periodic parity rebalances unless told otherwise (trace time in
/// the simulator, wall-clock time on the coordinator), with [`RebalanceOptions::CLUSTER`]. An
/// hour: on tc-0 and eu-7 (BENCHMARKS.md, issue 63) 10 minutes balanced a little better and
/// missed more bytes (a moved parity bucket strands its cached chunks: eu-7 at 60%, 0.0250
/// against 0.0216), four hours left eu-7 at up to 1.05 and a day tc-0 at 1.10–1.21.
pub const REBALANCE_EVERY_S: f64 = 3600.0;

/// When the first periodic parity rebalance comes, as a fraction of the period: once the first
/// write loads are known (App. 10.3's Phase 2 of the initial assignment), before it the parity
/// buckets are placed by chunk-bucket count. The simulator (trace time) and the coordinator
/// (since its start) alike.
pub const FIRST_REBALANCE_AFTER: f64 = 0.1;
