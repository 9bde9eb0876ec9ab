//! Where the bench's storage cloud runs: in this process on loopback, or on a host of its own
//! on a test bed (`--testbed LINK`), behind a shaped link, with the proxy on another host.
//!
//! The bed has two hosts: `proxy` (this process's runtime: the proxy and the load) and
//! `store` (the emulator, on a thread of its own inside the host's namespace, with a runtime
//! of its own, restarted for each delay source). Every request of the proxy to the store
//! crosses both hosts' links, so the link's delay is added to every task twice (there and
//! back) and its rate caps the bytes the proxy reads.

use std::net::SocketAddr;
use std::sync::Mutex;

use anyhow::{Context, Result};
use ecdn_backend::emulator::{Emulator, EmulatorConfig, Restart};
use ecdn_testbed::{Bed, BedConfig, HostSpec, LinkSpec};

/// A test bed with the proxy's host and the store's.
pub struct StoreBed {
    bed: Mutex<Bed>,
}

/// The emulator's port on its host.
const STORE_PORT: u16 = 9000;

impl StoreBed {
    /// The bed: `proxy` unshaped, `store` behind `link` (both directions).
    pub fn create(link: &str) -> Result<StoreBed> {
        let spec = LinkSpec::parse(link).map_err(|e| anyhow::anyhow!("--testbed: {e}"))?;
        ecdn_testbed::bed::preflight().context("--testbed")?;
        let hosts = vec![
            HostSpec::new("proxy", LinkSpec::default()).map_err(anyhow::Error::msg)?,
            HostSpec::new("store", spec).map_err(anyhow::Error::msg)?,
        ];
        let config = BedConfig {
            hosts,
            guard: std::env::current_exe().ok(),
        };
        let bed = Bed::create(&config).context("building the test bed")?;
        eprintln!(
            "ecdn backend bench: test bed {}: the store behind {spec}",
            bed.id()
        );
        Ok(StoreBed {
            bed: Mutex::new(bed),
        })
    }

    /// Moves the calling thread into the proxy's host (see [`Bed::enter`]).
    pub fn enter_proxy(&self) -> Result<ecdn_testbed::bed::Entered> {
        Ok(self.lock().enter("proxy")?)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bed> {
        self.bed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running emulator, here or on the bed.
pub enum Store {
    Here(Emulator),
    Bed {
        endpoint: String,
        restart: Restart,
        stop: tokio::sync::oneshot::Sender<()>,
        thread: std::thread::JoinHandle<Result<Result<()>, ecdn_testbed::Error>>,
    },
}

impl Store {
    /// The emulator on loopback, in this runtime.
    pub async fn here(cfg: EmulatorConfig) -> Result<Store> {
        let emu = Emulator::start("127.0.0.1:0".parse()?, cfg)
            .await
            .context("starting the emulator")?;
        Ok(Store::Here(emu))
    }

    /// The emulator on the bed's store host.
    pub async fn on_bed(bed: &StoreBed, cfg: EmulatorConfig) -> Result<Store> {
        let addr = SocketAddr::from((bed.lock().host("store")?.addr, STORE_PORT));
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = bed.lock().spawn_in("store", move || -> Result<()> {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the store's runtime")?;
            rt.block_on(async move {
                let emu = match Emulator::start(addr, cfg).await {
                    Ok(emu) => emu,
                    Err(e) => {
                        let _ = started_tx.send(Err(e.to_string()));
                        return Ok(());
                    }
                };
                let _ = started_tx.send(Ok((emu.endpoint(), emu.restarter())));
                let _ = stopped.await;
                emu.stop().await;
                Ok(())
            })
        })?;
        let (endpoint, restart) = match started.await {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => anyhow::bail!("starting the emulator on the store host: {e}"),
            Err(_) => anyhow::bail!("the store host's thread ended before its emulator started"),
        };
        Ok(Store::Bed {
            endpoint,
            restart,
            stop,
            thread,
        })
    }

    /// `http://ADDR`, for the S3 client.
    pub fn endpoint(&self) -> String {
        match self {
            Store::Here(emu) => emu.endpoint(),
            Store::Bed { endpoint, .. } => endpoint.clone(),
        }
    }

    /// Starts its delays again: the same variates, slow periods from now.
    pub fn restart(&self) {
        match self {
            Store::Here(emu) => emu.restarter().restart(),
            Store::Bed { restart, .. } => restart.restart(),
        }
    }

    pub async fn stop(self) {
        match self {
            Store::Here(emu) => emu.stop().await,
            Store::Bed { stop, thread, .. } => {
                let _ = stop.send(());
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            }
        }
    }
}
