//! The demo's test bed: a host per node at the topology's distances, the origin's host (a
//! thread of this process serving on it) and the probed resolver's host.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use ecdn_node::origin::{Origin, OriginConfig};
use ecdn_testbed::{Bed, BedConfig, HostSpec, LinkSpec};

use super::super::proxies::ORIGIN_RTT;
use super::super::topology::Topology;

pub(super) const HTTP_PORT: u16 = 8090;
pub(super) const ADMIN_PORT: u16 = 8091;
pub(super) const DSHT_PORT: u16 = 8092;
pub(super) const DNS_PORT: u16 = 53;
const ORIGIN_PORT: u16 = 80;
/// A bed has at most 99 hosts: the nodes, `origin`, `resolver` and `client`.
pub const MAX_NODES: usize = 96;

/// The bed of a run: its hosts, the nodes' addresses, the origin and the resolver.
pub(super) struct ProcBed {
    pub(super) bed: Bed,
    pub(super) topo: Topology,
    /// Each node's address (its host's) and site, in the topology's order.
    pub(super) nodes: Vec<(IpAddr, usize)>,
    pub(super) origin: SocketAddr,
    pub(super) resolver: IpAddr,
}

impl ProcBed {
    pub(super) fn create(topo: &Topology, link: &str) -> Result<ProcBed> {
        let spec = LinkSpec::parse(link).map_err(|e| anyhow!("--link: {e}"))?;
        let sites: Vec<usize> = topo.nodes().into_iter().map(|(_, s)| s).collect();
        let n = sites.len();
        if n > MAX_NODES {
            bail!("--processes: at most {MAX_NODES} nodes (a test bed has at most 99 hosts)");
        }
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let mut hosts = Vec::new();
        for name in names
            .iter()
            .map(String::as_str)
            .chain(["origin", "resolver", "client"])
        {
            hosts.push(HostSpec::new(name, spec).map_err(anyhow::Error::msg)?);
        }
        let exe = std::env::current_exe().context("this executable's path")?;
        let mut bed = Bed::create(&BedConfig {
            hosts,
            guard: Some(exe),
        })
        .context("--processes: building the test bed")?;
        let mut pairs: Vec<(&str, &str, Option<Duration>)> = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                pairs.push((&names[i], &names[j], Some(topo.rtt(sites[i], sites[j]) / 2)));
            }
            pairs.push((&names[i], "origin", Some(ORIGIN_RTT / 2)));
            pairs.push((&names[i], "resolver", Some(topo.rtt(0, sites[i]) / 2)));
        }
        bed.delays_between(&pairs)
            .context("--processes: the topology's delays")?;
        let addr = |h: &str| -> Result<IpAddr> { Ok(IpAddr::V4(bed.host(h)?.addr)) };
        let nodes = (0..n)
            .map(|i| Ok((addr(&names[i])?, sites[i])))
            .collect::<Result<Vec<_>>>()?;
        let origin = SocketAddr::new(addr("origin")?, ORIGIN_PORT);
        let resolver = addr("resolver")?;
        Ok(ProcBed {
            bed,
            topo: topo.clone(),
            nodes,
            origin,
            resolver,
        })
    }

    pub(super) fn http(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.nodes[i].0, HTTP_PORT)
    }

    pub(super) fn admin(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.nodes[i].0, ADMIN_PORT)
    }

    pub(super) fn admins(&self) -> Vec<SocketAddr> {
        (0..self.nodes.len()).map(|i| self.admin(i)).collect()
    }

    /// The first node of each site, which runs its redirector.
    pub(super) fn redirectors(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| i == 0 || self.nodes[i - 1].1 != self.nodes[i].1)
            .collect()
    }

    /// The site of a node's address.
    fn site_of(&self, ip: IpAddr) -> Option<usize> {
        self.nodes.iter().find(|(a, _)| *a == ip).map(|(_, s)| *s)
    }

    /// The RTT between two addresses of the bed: nodes by their sites, the resolver as site 0.
    pub(super) fn rtt(&self, a: IpAddr, b: IpAddr) -> Duration {
        let site = |ip: IpAddr| {
            if ip == self.resolver {
                Some(0)
            } else {
                self.site_of(ip)
            }
        };
        match (site(a), site(b)) {
            (Some(x), Some(y)) => self.topo.rtt(x, y),
            _ => Duration::ZERO,
        }
    }

    /// The namespace of each node's process, by its name in
    /// [`crate::cluster_demo::procs::Procs`].
    pub(super) fn placement(&self) -> Result<HashMap<String, String>> {
        (0..self.nodes.len())
            .map(|i| {
                let netns = self.bed.host(&format!("n{i}"))?.netns.clone();
                Ok((format!("node {i}"), netns))
            })
            .collect()
    }
}

/// The origin, on its own host, in a thread of this process.
pub(super) struct OriginThread {
    requests: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl OriginThread {
    pub(super) fn start(bed: &ProcBed) -> Result<OriginThread> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr = bed.origin;
        let thread = bed.bed.spawn_in("origin", move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let origin = Origin::start(addr, OriginConfig::default())
                    .await
                    .with_context(|| format!("starting the origin on {addr}"))?;
                let _ = tx.send(origin.request_counter());
                let _ = stopped.await;
                origin.stop().await?;
                Ok(())
            })
        })?;
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(requests) => Ok(OriginThread {
                requests,
                stop: Some(stop),
            }),
            Err(_) => match thread.join() {
                Ok(Ok(Err(e))) => Err(e),
                _ => bail!("the origin did not start on {addr}"),
            },
        }
    }

    pub(super) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for OriginThread {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// The `resolver` host's DNS port: it accepts TCP connections (a redirector's probe) and
/// nothing else, until dropped.
pub(super) struct ResolverPort(Arc<AtomicBool>);

impl ResolverPort {
    pub(super) fn start(bed: &ProcBed) -> Result<ResolverPort> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        bed.bed.spawn_in("resolver", move || {
            let listener = std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, DNS_PORT))
                .and_then(|l| l.set_nonblocking(true).map(|()| l));
            let listener = match listener {
                Ok(l) => {
                    let _ = tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            while !flag.load(Ordering::Relaxed) {
                if listener.accept().is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        })?;
        rx.recv_timeout(Duration::from_secs(10))
            .context("the resolver host's port 53")?
            .context("listening on the resolver host's TCP port 53")?;
        Ok(ResolverPort(stop))
    }
}

impl Drop for ResolverPort {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
