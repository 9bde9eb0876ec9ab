//! A bed: hosts (network namespaces) on one bridge, their links shaped, and its clean-up.
//!
//! ```text
//!            root namespace                       host namespaces
//!   ┌──────────── bridge ecb<id> ───────────┐
//!   │ ecv<id>00      ecv<id>01      ...     │     each veth: tbf on both ends (rate),
//!   └────┬──────────────┬───────────────────┘     bridge-family nftables (loss, cut,
//!        │ veth         │ veth                     partition), NFQUEUE + delayer (delay)
//!   ┌────┴────┐    ┌────┴────┐
//!   │ eth0    │    │ eth0    │    ecdn-<id>-<host>: 10.99.0.1, 10.99.0.2, ...
//!   │ n0      │    │ n1      │
//!   └─────────┘    └─────────┘
//! ```
//!
//! Everything a bed makes is named after its id (five characters of `[a-z0-9]`), and a state
//! file in `/run/ecdn-testbed/` records the id and the process that owns it, so that
//! [`down`] finds what a crashed run left. A bed made with a guard (see [`BedConfig::guard`])
//! also has a watcher process that tears it down as soon as its owner dies, however it dies.

use std::collections::BTreeSet;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::delay::{self, DelayParams, DelayStats};
use crate::machine::{MachineReport, MachineWatch};
use crate::spec::{HostSpec, LinkSpec};
use crate::sys;
use crate::Error;

/// Raises the kernel's ARP table limits (`net.ipv4.neigh.default.gc_thresh2` and `3`) so
/// that every host of a bed of `hosts` can hold an entry for every other, twice over. The
/// table is one for all namespaces: with the default limit of 1,024 entries, a bed of 33 hosts
/// that all talk to each other fills it, and a host that cannot add an entry cannot reach its
/// peer at all (the kernel logs "neighbor table overflow"). Limits already higher are kept; the raised
/// ones stay after the bed is gone (a limit, not state).
fn make_room_for_neighbours(hosts: usize) -> Result<(), Error> {
    let entries = (hosts * hosts) as u64;
    for (name, want) in [("gc_thresh2", entries), ("gc_thresh3", 2 * entries)] {
        let path = format!("/proc/sys/net/ipv4/neigh/default/{name}");
        let now: u64 = std::fs::read_to_string(&path)?.trim().parse().unwrap_or(0);
        if now < want {
            std::fs::write(&path, want.to_string()).map_err(|e| Error::Missing {
                command: format!("writing {path}"),
                why: format!("{e}: a bed of {hosts} hosts needs {want} ARP entries"),
            })?;
        }
    }
    Ok(())
}

/// Where beds record their owners.
pub const STATE_DIR: &str = "/run/ecdn-testbed";

/// How to build a bed.
#[derive(Clone, Debug)]
pub struct BedConfig {
    /// The hosts, in order; host `i` gets address `10.99.0.(i + 1)`.
    pub hosts: Vec<HostSpec>,
    /// The `ecdn` executable, to start `ecdn testbed guard` as the bed's watcher. Without one,
    /// the bed is torn down when it is dropped (a panic included) but not after its owner is
    /// killed; `ecdn testbed down` cleans up then.
    pub guard: Option<PathBuf>,
}

/// One host of a bed.
#[derive(Debug, Serialize)]
pub struct Host {
    /// Its name in the bed (`n0`, `client`, ...).
    pub name: String,
    /// Its network namespace (`ip netns exec NETNS ...`).
    pub netns: String,
    /// Its address on the bed's bridge.
    pub addr: Ipv4Addr,
    /// The link it was made with.
    pub link: LinkSpec,
    /// The link it has now (a fault verb may have changed it).
    pub now: LinkSpec,
    /// The bridge side of its veth pair, in the root namespace.
    pub port: String,
    #[serde(skip)]
    delayer: Option<Delayer>,
    /// The delay rules last written to its namespace.
    #[serde(skip)]
    delay_rules: String,
}

/// A host's delayer thread: queue `j + 1` holds the packets from host `j`.
#[derive(Debug)]
struct Delayer {
    params: Vec<Arc<DelayParams>>,
    stats: Arc<DelayStats>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Delayer {
    /// Starts the delayer of `host`, with a queue for each of the bed's `n` hosts, and waits
    /// until its queues are bound.
    fn start(host: &Host, n: usize) -> Result<Delayer, Error> {
        let params: Vec<Arc<DelayParams>> =
            (0..n).map(|_| Arc::new(DelayParams::default())).collect();
        let queues: Vec<(u16, Arc<DelayParams>)> = params
            .iter()
            .enumerate()
            .map(|(j, p)| (j as u16 + 1, p.clone()))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(DelayStats::default());
        let file = sys::netns_file(&host.netns)?;
        let s = stop.clone();
        let st = stats.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("delayer-{}", host.name))
            .spawn(move || {
                sys::enter(&file).map_err(std::io::Error::other)?;
                delay::run(queues, s, ready_tx, st)
            })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Delayer {
                params,
                stats,
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(Error::Io(e)),
            Err(_) => {
                let e = thread.join().ok().and_then(Result::err);
                Err(Error::Io(e.unwrap_or_else(|| {
                    std::io::Error::other("the delayer ended before binding its queues")
                })))
            }
        }
    }
}

/// The share of a run's seconds a delayer may have saturated, or the machine been starved
/// ([`machine_kept_up`]), and the run still have measured the system.
pub const SATURATED_SHARE: f64 = 0.1;

/// One host's delayer, as it measured itself ([`DelayStats`]): whether it kept up.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DelayerReport {
    /// The host whose arriving packets it delays.
    pub host: String,
    /// Packets it held and released.
    pub packets: u64,
    /// Packets released more than [`delay::LATE`] after their time.
    pub late: u64,
    /// The latest of them, ms after its time.
    pub max_late_ms: f64,
    /// Kernel queue overflows: packets that went on undelayed.
    pub overflows: u64,
    /// The busiest second's busy fraction of the loop.
    pub max_busy: f64,
    /// Seconds it did not keep up (busy above [`delay::BUSY`], more than
    /// [`delay::LATE_SHARE`] of the second's packets late if it had at least
    /// [`delay::MIN_PACKETS`], or overflows), of those measured.
    pub saturated_seconds: u64,
    /// Seconds measured.
    pub seconds: u64,
    /// Seconds its loop was busy in all (not waiting for packets or their time).
    pub busy_s: f64,
    /// Seconds of CPU its thread took, user and system: the busy seconds, and the kernel's
    /// work for every packet it let go ([`delay::DelayStats::cpu_us`]).
    pub cpu_s: f64,
}

/// Whether a run through delayers measured the system rather than the bed: at most
/// [`SATURATED_SHARE`] of its seconds starved ([`crate::machine`]). The delayers take their
/// CPU first, at a real-time priority; in a starved second, what they took the processes under
/// test waited for.
pub fn machine_kept_up(machine: &MachineReport) -> bool {
    machine.starved_seconds as f64 <= SATURATED_SHARE * machine.seconds.max(1) as f64
}

/// The share of the machine's CPU time (`cores` of them) over the longest-measuring delayer's
/// seconds that the `delayers` took together; 0 without delayers.
pub fn delayers_cpu_share(delayers: &[DelayerReport], cores: usize) -> f64 {
    let seconds = delayers.iter().map(|d| d.seconds).max().unwrap_or(0);
    if seconds == 0 {
        return 0.0;
    }
    let cpu: f64 = delayers.iter().map(|d| d.cpu_s).sum();
    cpu / (seconds as f64 * cores.max(1) as f64)
}

impl DelayerReport {
    /// Whether the delayer kept up: no overflow, and at most [`SATURATED_SHARE`] of the
    /// seconds saturated (a busy second at start or end is the processes' own burst). A run
    /// through one that did not measured the bed.
    pub fn kept_up(&self) -> bool {
        self.overflows == 0
            && self.saturated_seconds as f64 <= SATURATED_SHARE * self.seconds.max(1) as f64
    }
}

/// What the fault verbs have done to the bed, from which its bridge rules are made.
#[derive(Debug, Default, Clone, Serialize)]
struct Faults {
    /// Hosts whose link is cut.
    cut: BTreeSet<usize>,
    /// Host pairs (lower index first) that cannot reach each other.
    parted: BTreeSet<(usize, usize)>,
}

/// A running bed. Dropping it tears it down.
#[derive(Debug)]
pub struct Bed {
    id: String,
    bridge: String,
    hosts: Vec<Host>,
    faults: Faults,
    /// One-way delays between pairs of hosts (lower index first) that replace the sum of
    /// their links' delays: a topology that is not a star ([`Bed::delay_between`]).
    pairs: std::collections::BTreeMap<(usize, usize), Duration>,
    guard: Option<(Child, ChildStdin)>,
    down: bool,
    /// The machine's spare CPU, watched from the first delayer on ([`crate::machine`]).
    machine: Option<MachineWatch>,
}

#[derive(Serialize, serde::Deserialize)]
struct State {
    id: String,
    owner: i32,
}

/// The subnet of every bed's bridge (beds are separate layer-2 domains, so they may share it).
pub const SUBNET: [u8; 3] = [10, 99, 0];

impl Bed {
    /// Builds a bed: namespaces, veths on a bridge, shaped links. On an error everything made
    /// so far is removed again.
    pub fn create(config: &BedConfig) -> Result<Bed, Error> {
        if config.hosts.is_empty() || config.hosts.len() > 99 {
            return Err(Error::Spec("a bed has 1 to 99 hosts".into()));
        }
        let mut names = BTreeSet::new();
        for h in &config.hosts {
            if !names.insert(h.name.as_str()) {
                return Err(Error::Spec(format!("host {:?} is named twice", h.name)));
            }
        }
        preflight()?;
        make_room_for_neighbours(config.hosts.len())?;
        let id = new_id();
        std::fs::create_dir_all(STATE_DIR)?;
        let state = State {
            id: id.clone(),
            owner: std::process::id() as i32,
        };
        std::fs::write(
            state_path(&id),
            serde_json::to_vec(&state).expect("state serializes"),
        )?;
        let mut bed = Bed {
            bridge: format!("ecb{id}"),
            id,
            hosts: Vec::new(),
            faults: Faults::default(),
            pairs: Default::default(),
            guard: None,
            down: false,
            machine: None,
        };
        if let Some(exe) = &config.guard {
            bed.guard = Some(spawn_guard(exe, &bed.id)?);
        }
        // On an error, `bed` is dropped and tears down what exists.
        bed.build(&config.hosts)?;
        Ok(bed)
    }

    fn build(&mut self, hosts: &[HostSpec]) -> Result<(), Error> {
        let br = self.bridge.clone();
        sys::ip(&["link", "add", &br, "type", "bridge"])?;
        sys::ip(&["link", "set", &br, "up"])?;
        for (i, spec) in hosts.iter().enumerate() {
            let netns = format!("ecdn-{}-{}", self.id, spec.name);
            let port = format!("ecv{}{:02}", self.id, i);
            let addr = Ipv4Addr::new(SUBNET[0], SUBNET[1], SUBNET[2], i as u8 + 1);
            sys::ip(&["netns", "add", &netns])?;
            self.hosts.push(Host {
                name: spec.name.clone(),
                netns: netns.clone(),
                addr,
                link: spec.link,
                now: LinkSpec::default(),
                port: port.clone(),
                delayer: None,
                delay_rules: String::new(),
            });
            sys::ip(&[
                "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ])?;
            sys::ip(&["link", "set", &port, "master", &br, "up"])?;
            let cidr = format!("{addr}/24");
            sys::ip(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"])?;
            sys::ip(&["-n", &netns, "link", "set", "eth0", "up"])?;
            sys::ip(&["-n", &netns, "link", "set", "lo", "up"])?;
        }
        for i in 0..self.hosts.len() {
            self.set_link(i, self.hosts[i].link)?;
        }
        self.apply_faults()?;
        Ok(())
    }

    /// The bed's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The hosts, in the order they were given.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The host named `name`.
    pub fn host(&self, name: &str) -> Result<&Host, Error> {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .ok_or_else(|| Error::Spec(format!("no host {name:?} in bed {}", self.id)))
    }

    fn index(&self, name: &str) -> Result<usize, Error> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| Error::Spec(format!("no host {name:?} in bed {}", self.id)))
    }

    /// A command that will run inside host `name`'s namespace.
    pub fn command(
        &self,
        name: &str,
        program: impl AsRef<std::ffi::OsStr>,
    ) -> Result<HostCommand, Error> {
        let host = self.host(name)?;
        let netns = sys::netns_file(&host.netns)?;
        let mut command = Command::new(program);
        sys::spawn_inside(&mut command, &netns);
        Ok(HostCommand {
            command,
            _netns: netns,
        })
    }

    /// Moves the calling thread into host `name`'s namespace until the returned guard is
    /// dropped: its sockets, and the threads and processes it starts meanwhile, are the
    /// host's. (A demo's load driver runs on a client host this way.) The bed's own commands
    /// still run in the root namespace.
    pub fn enter(&self, name: &str) -> Result<Entered, Error> {
        let back = File::open("/proc/thread-self/ns/net")?;
        sys::enter(&sys::netns_file(&self.host(name)?.netns)?)?;
        Ok(Entered {
            back,
            _not_send: std::marker::PhantomData,
        })
    }

    /// Runs `f` on a new thread inside host `name`'s namespace: sockets it makes are the host's.
    pub fn spawn_in<T, F>(&self, name: &str, f: F) -> Result<JoinHandle<Result<T, Error>>, Error>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let file = sys::netns_file(&self.host(name)?.netns)?;
        Ok(std::thread::spawn(move || {
            sys::enter(&file)?;
            Ok(f())
        }))
    }

    /// Gives host `name` the link `spec` (rate, delay, jitter, loss), both directions.
    pub fn shape(&mut self, name: &str, spec: LinkSpec) -> Result<(), Error> {
        let i = self.index(name)?;
        self.set_link(i, spec)?;
        self.apply_faults()
    }

    /// Sets the one-way delay between hosts `a` and `b`, each way, to `one_way` instead of the
    /// sum of their links' delays (`None`: that sum again). Sites whose distances are not
    /// those of a star, as Coral's, are made this way. Each packet is still delayed once, on
    /// arrival, with the receiver's link's jitter.
    pub fn delay_between(
        &mut self,
        a: &str,
        b: &str,
        one_way: Option<Duration>,
    ) -> Result<(), Error> {
        self.delays_between(&[(a, b, one_way)])
    }

    /// [`Bed::delay_between`] for many pairs at once, applied in one pass (a topology of many
    /// hosts has thousands of pairs, and each pass rewrites the hosts' queue rules).
    pub fn delays_between(
        &mut self,
        pairs: &[(&str, &str, Option<Duration>)],
    ) -> Result<(), Error> {
        let mut set = Vec::with_capacity(pairs.len());
        for &(a, b, one_way) in pairs {
            let (i, j) = (self.index(a)?, self.index(b)?);
            if i == j {
                return Err(Error::Spec(format!("{a:?} to itself has no delay to set")));
            }
            set.push(((i.min(j), i.max(j)), one_way));
        }
        for (pair, one_way) in set {
            match one_way {
                Some(d) => self.pairs.insert(pair, d),
                None => self.pairs.remove(&pair),
            };
        }
        self.apply_delays()
    }

    /// Adds `extra` one-way delay to host `name`'s link: a slow but alive server.
    pub fn slow(&mut self, name: &str, extra: Duration) -> Result<(), Error> {
        let i = self.index(name)?;
        let mut spec = self.hosts[i].now;
        spec.delay += extra;
        self.set_link(i, spec)?;
        self.apply_faults()
    }

    /// Cuts host `name`'s link: nothing reaches it, nothing leaves it (silently, as a pulled
    /// cable: senders time out rather than get an error).
    pub fn cut(&mut self, name: &str) -> Result<(), Error> {
        let i = self.index(name)?;
        self.faults.cut.insert(i);
        self.apply_faults()
    }

    /// Partitions hosts `a` from hosts `b`: no packet between a host of `a` and one of `b`;
    /// each side still reaches every other host.
    pub fn partition(&mut self, a: &[&str], b: &[&str]) -> Result<(), Error> {
        for x in a {
            for y in b {
                let (i, j) = (self.index(x)?, self.index(y)?);
                if i == j {
                    return Err(Error::Spec(format!("host {x:?} is on both sides")));
                }
                self.faults.parted.insert((i.min(j), i.max(j)));
            }
        }
        self.apply_faults()
    }

    /// Undoes every fault on host `name`: its link as made, uncut, in no partition.
    pub fn restore(&mut self, name: &str) -> Result<(), Error> {
        let i = self.index(name)?;
        self.faults.cut.remove(&i);
        self.faults.parted.retain(|&(a, b)| a != i && b != i);
        self.set_link(i, self.hosts[i].link)?;
        self.apply_faults()
    }

    /// Every running delayer's measure of itself so far (hosts with a delay only).
    pub fn delayers(&self) -> Vec<DelayerReport> {
        use std::sync::atomic::Ordering::Relaxed;
        self.hosts
            .iter()
            .filter_map(|h| {
                let s = &h.delayer.as_ref()?.stats;
                Some(DelayerReport {
                    host: h.name.clone(),
                    packets: s.packets.load(Relaxed),
                    late: s.late.load(Relaxed),
                    max_late_ms: s.max_late_us.load(Relaxed) as f64 / 1e3,
                    overflows: s.overflows.load(Relaxed),
                    max_busy: s.max_busy_permille.load(Relaxed) as f64 / 1e3,
                    saturated_seconds: s.saturated_seconds.load(Relaxed),
                    seconds: s.seconds.load(Relaxed),
                    busy_s: s.busy_us.load(Relaxed) as f64 / 1e6,
                    cpu_s: s.cpu_us.load(Relaxed) as f64 / 1e6,
                })
            })
            .collect()
    }

    /// How much spare CPU the machine had since the first delayer started; `None` without
    /// delayers ([`crate::machine`]).
    pub fn machine(&self) -> Option<MachineReport> {
        self.machine.as_ref().map(MachineWatch::report)
    }

    /// Undoes every fault on every host.
    pub fn restore_all(&mut self) -> Result<(), Error> {
        self.faults = Faults::default();
        for i in 0..self.hosts.len() {
            self.set_link(i, self.hosts[i].link)?;
        }
        self.apply_faults()
    }

    /// Rate on both veth ends, delay through the receivers' delayers. Loss is a bridge rule
    /// ([`Bed::apply_faults`]).
    fn set_link(&mut self, i: usize, spec: LinkSpec) -> Result<(), Error> {
        let host = &self.hosts[i];
        // A new veth has no qdisc, so a host made without a rate needs nothing here.
        if spec.rate_bps != host.now.rate_bps {
            for (netns, dev) in [
                (Some(host.netns.as_str()), "eth0"),
                (None, host.port.as_str()),
            ] {
                match spec.rate_bps {
                    Some(bps) => {
                        let args = tbf_args(dev, bps);
                        let args: Vec<&str> = args.iter().map(String::as_str).collect();
                        sys::tc(netns, &args)?;
                    }
                    None => {
                        // No qdisc to remove is fine.
                        let _ = sys::tc(netns, &["qdisc", "del", "dev", dev, "root"]);
                    }
                }
            }
        }
        self.hosts[i].now = spec;
        self.apply_delays()
    }

    /// Every delay is applied where a packet arrives, after the links' rate limits, as a
    /// wire's propagation delay: a packet from host `j` to host `i` waits, in `i`'s input
    /// hook, `j`'s one-way delay plus `i`'s, in queue `j + 1` of `i`'s delayer. (Delaying at
    /// the sender instead would release bursts into its own rate limiter, which drops what a
    /// local queue would have pushed back on.)
    fn apply_delays(&mut self) -> Result<(), Error> {
        let n = self.hosts.len();
        let links: Vec<(Duration, Duration, Ipv4Addr)> = self
            .hosts
            .iter()
            .map(|h| (h.now.delay, h.now.jitter, h.addr))
            .collect();
        // The one-way delay of a packet from host j to host i.
        let pairs = self.pairs.clone();
        let delay = |i: usize, j: usize| {
            pairs
                .get(&(i.min(j), i.max(j)))
                .copied()
                .unwrap_or(links[j].0 + links[i].0)
        };
        for i in 0..n {
            let mut rules = String::from("*filter\n");
            for (j, &(_, _, addr)) in links.iter().enumerate() {
                if j != i && !delay(i, j).is_zero() {
                    rules += &format!(
                        "-A INPUT -i eth0 -s {addr} -j NFQUEUE --queue-num {} --queue-bypass\n",
                        j + 1
                    );
                }
            }
            rules += "COMMIT\n";
            let host = &mut self.hosts[i];
            if rules == host.delay_rules {
                if let Some(d) = &host.delayer {
                    for (j, &(_, jitter, _)) in links.iter().enumerate() {
                        d.params[j].set(delay(i, j), jitter + links[i].1);
                    }
                }
                continue;
            }
            if host.delayer.is_none() && rules.contains("NFQUEUE") {
                host.delayer = Some(Delayer::start(host, n)?);
                if self.machine.is_none() {
                    self.machine = Some(MachineWatch::start()?);
                }
            }
            if let Some(d) = &host.delayer {
                for (j, &(_, jitter, _)) in links.iter().enumerate() {
                    d.params[j].set(delay(i, j), jitter + links[i].1);
                }
            }
            sys::iptables(&host.netns, &rules)?;
            host.delay_rules = rules;
        }
        Ok(())
    }

    /// Rewrites the bed's bridge rules (loss, cut links, partitions) in one transaction. They
    /// drop IP packets only: hosts still resolve each other's addresses (ARP), so a peer
    /// behind a cut or a partition times out, as across a routed network, rather than being
    /// reported unreachable.
    fn apply_faults(&mut self) -> Result<(), Error> {
        let table = format!("ecdn_{}", self.id);
        let mut rules = String::new();
        for &i in &self.faults.cut {
            let p = &self.hosts[i].port;
            rules += &format!(
                "    iifname \"{p}\" ether type ip drop\n    oifname \"{p}\" ether type ip drop\n"
            );
        }
        for &(i, j) in &self.faults.parted {
            let (a, b) = (&self.hosts[i].port, &self.hosts[j].port);
            rules += &format!(
                "    iifname \"{a}\" oifname \"{b}\" ether type ip drop\n\
                 \x20   iifname \"{b}\" oifname \"{a}\" ether type ip drop\n"
            );
        }
        for h in &self.hosts {
            if h.now.loss_ppm > 0 {
                // One draw per packet and direction: a packet from the host, and one to it.
                let (p, ppm) = (&h.port, h.now.loss_ppm);
                rules += &format!(
                    "    iifname \"{p}\" ether type ip numgen random mod 1000000 < {ppm} drop\n\
                     \x20   oifname \"{p}\" ether type ip numgen random mod 1000000 < {ppm} drop\n"
                );
            }
        }
        let script = format!(
            "table bridge {table} {{}}\ndelete table bridge {table}\n\
             table bridge {table} {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n{rules}  }}\n}}\n"
        );
        sys::run_with_input("nft", &["-f", "-"], Some(&script))?;
        Ok(())
    }

    /// Stops the delayers and removes everything the bed made. Dropping the bed does it too.
    pub fn teardown(&mut self) -> Result<(), Error> {
        if self.down {
            return Ok(());
        }
        self.down = true;
        for h in &mut self.hosts {
            if let Some(mut d) = h.delayer.take() {
                d.stop.store(true, Ordering::Relaxed);
                if let Some(t) = d.thread.take() {
                    let _ = t.join();
                }
            }
        }
        self.machine = None;
        let result = teardown_id(&self.id);
        if let Some((mut child, stdin)) = self.guard.take() {
            drop(stdin); // the watcher sees its owner go, finds nothing left, and ends
            let _ = child.wait();
        }
        result
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("testbed {}: teardown: {e}", self.id);
        }
    }
}

/// The calling thread is inside a host until this is dropped (see [`Bed::enter`]).
#[must_use = "the thread leaves the host when this is dropped"]
pub struct Entered {
    back: File,
    /// It restores the thread that made it, so it stays on that thread.
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Err(e) = sys::enter(&self.back) {
            eprintln!("testbed: cannot return to the root network namespace: {e}");
        }
    }
}

/// A command bound to a host's namespace (see [`Bed::command`]).
pub struct HostCommand {
    /// The command; set its arguments and spawn it.
    pub command: Command,
    _netns: File,
}

/// `tc qdisc replace ... tbf` for `bps`: a bucket of 4 ms at the rate, and no less than
/// 128 KiB so that a GSO packet (up to 64 KiB) always fits; a queue of 20 ms.
fn tbf_args(dev: &str, bps: u64) -> Vec<String> {
    let bytes_per_s = bps / 8;
    let burst = (bytes_per_s / 250).max(128 << 10);
    let limit = (bytes_per_s / 50).max(2 * burst);
    ["qdisc", "replace", "dev", dev, "root", "tbf", "rate"]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("{bps}bit"),
            "burst".into(),
            burst.to_string(),
            "limit".into(),
            limit.to_string(),
        ])
        .collect()
}

/// Checks that this machine can make a bed, naming what is missing.
pub fn preflight() -> Result<(), Error> {
    sys::remember_root()?;
    for (tool, package) in [
        ("ip", "iproute2"),
        ("tc", "iproute2"),
        ("nft", "nftables"),
        ("iptables-legacy-restore", "iptables"),
    ] {
        if sys::run(tool, &["-V"]).is_err() && sys::run(tool, &["--version"]).is_err() {
            return Err(Error::Missing {
                command: tool.into(),
                why: format!("install Debian's {package}"),
            });
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::Missing {
            command: "ip netns add".into(),
            why: "a test bed needs root (network namespaces, veths, tc)".into(),
        });
    }
    Ok(())
}

fn state_path(id: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{id}.json"))
}

/// A fresh bed id: five characters of `[a-z0-9]` from the process id, the clock and a
/// counter, not used by any namespace, bridge or state file.
fn new_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    loop {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut x = nanos
            ^ (u64::from(std::process::id()) << 32)
            ^ u64::from(COUNTER.fetch_add(1, Ordering::Relaxed))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 31;
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let id: String = (0..5)
            .map(|_| {
                let c = alphabet[(x % 36) as usize] as char;
                x /= 36;
                c
            })
            .collect();
        let taken =
            state_path(&id).exists() || Path::new(&format!("/sys/class/net/ecb{id}")).exists();
        if !taken {
            return id;
        }
    }
}

fn spawn_guard(exe: &Path, id: &str) -> Result<(Child, ChildStdin), Error> {
    let mut cmd = Command::new(exe);
    cmd.args(["testbed", "guard", id])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // Its own session: a Ctrl-C meant for the owner does not reach the watcher.
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| Error::Missing {
        command: format!("{} testbed guard", exe.display()),
        why: e.to_string(),
    })?;
    let stdin = child.stdin.take().expect("stdin is piped");
    Ok((child, stdin))
}

/// The watcher's loop (`ecdn testbed guard ID`): waits until its standard input closes, which
/// happens when the owner ends in any way, then removes bed `id`.
pub fn guard(id: &str) -> Result<(), Error> {
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin();
    loop {
        match std::io::Read::read(&mut stdin, &mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    teardown_id(id)
}

/// Removes everything bed `id` made: its hosts' processes and namespaces, its bridge and
/// ports, its bridge rules and its state file. What is already gone is skipped.
pub fn teardown_id(id: &str) -> Result<(), Error> {
    let prefix = format!("ecdn-{id}-");
    let mut first_error = None;
    for netns in list_netns() {
        if netns.starts_with(&prefix) {
            for pid in sys::netns_pids(&netns) {
                // Never this process: an owner whose main thread is still in a host (a bench
                // that drops its bed before leaving the readers' host) is listed there.
                if pid != std::process::id() as i32 {
                    sys::kill(pid);
                }
            }
            if let Err(e) = sys::ip(&["netns", "delete", &netns]) {
                first_error.get_or_insert(e);
            }
        }
    }
    for link in list_links() {
        if link == format!("ecb{id}") || (link.starts_with(&format!("ecv{id}")) && link.len() == 10)
        {
            if let Err(e) = sys::ip(&["link", "delete", &link]) {
                // A veth goes with its peer's namespace; it may be gone by now.
                if Path::new(&format!("/sys/class/net/{link}")).exists() {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    let table = format!("ecdn_{id}");
    if list_bridge_tables().contains(&table) {
        if let Err(e) = sys::run("nft", &["delete", "table", "bridge", &table]) {
            first_error.get_or_insert(e);
        }
    }
    let _ = std::fs::remove_file(state_path(id));
    first_error.map_or(Ok(()), Err)
}

/// The names in directory `dir` (none if it cannot be read).
fn names_in(dir: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn list_netns() -> Vec<String> {
    names_in("/run/netns")
}

fn list_links() -> Vec<String> {
    names_in("/sys/class/net")
}

fn list_bridge_tables() -> Vec<String> {
    sys::run("nft", &["list", "tables", "bridge"])
        .map(|out| {
            out.lines()
                .filter_map(|l| l.strip_prefix("table bridge "))
                .map(|t| t.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// What [`down`] did to one bed.
#[derive(Debug, Serialize)]
pub struct Swept {
    /// The bed's id.
    pub id: String,
    /// Its owner's pid, if its state file named one.
    pub owner: Option<i32>,
    /// Whether it was removed (false: its owner is alive and `all` was not given).
    pub removed: bool,
}

/// Finds every bed on this machine (namespaces, bridges, rules, state files) and removes those
/// whose owner is gone, or all of them with `all`.
pub fn down(all: bool) -> Result<Vec<Swept>, Error> {
    let mut ids = BTreeSet::new();
    for netns in list_netns() {
        if let Some(rest) = netns.strip_prefix("ecdn-") {
            if let Some((id, _)) = rest.split_once('-') {
                ids.insert(id.to_string());
            }
        }
    }
    for link in list_links() {
        if let Some(id) = link.strip_prefix("ecb") {
            if id.len() == 5 {
                ids.insert(id.to_string());
            }
        }
    }
    for t in list_bridge_tables() {
        if let Some(id) = t.strip_prefix("ecdn_") {
            ids.insert(id.to_string());
        }
    }
    if let Ok(dir) = std::fs::read_dir(STATE_DIR) {
        for e in dir.flatten() {
            if let Some(id) = e.file_name().to_string_lossy().strip_suffix(".json") {
                ids.insert(id.to_string());
            }
        }
    }
    let mut swept = Vec::new();
    for id in ids {
        let owner = std::fs::read(state_path(&id))
            .ok()
            .and_then(|b| serde_json::from_slice::<State>(&b).ok())
            .map(|s| s.owner);
        let alive = owner.is_some_and(sys::alive);
        let removed = all || !alive;
        if removed {
            teardown_id(&id)?;
        }
        swept.push(Swept { id, owner, removed });
    }
    Ok(swept)
}
