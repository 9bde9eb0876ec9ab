//! `ecdn node --origin s3://BUCKET/PREFIX`: an S3-compatible store as the node's origin,
//! through the backend tier (`ecdn_backend`): misses are read with TOFEC's coded, chunked
//! range requests.
//!
//! The node's upstream speaks HTTP to `host:port` origins through a connector. Each `s3://`
//! origin (the default one or a route's) is replaced by `http://ecdn-backend-N`, and the
//! connector answers a connection to `ecdn-backend-N:80` with an in-memory pipe to a
//! `ecdn_backend::gateway` served in this process over the store's proxy; every other origin
//! is TCP as usual. The store's endpoint, region and credentials come from the AWS
//! environment variables.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ecdn_backend::gateway::{serve_connection, GatewayConfig};
use ecdn_backend::proxy::{Proxy, ProxyConfig};
use ecdn_backend::store::{S3Config, S3Store};
use ecdn_backend::tofec::Strategy;
use ecdn_node::node::NodeConfig;
use ecdn_node::node::{tcp_connector, Connecting, Connector, OriginIo};

/// How the node reads its S3 origins.
#[derive(Clone, Debug)]
pub struct BackendSettings {
    pub strategy: Strategy,
    pub connections: usize,
    pub cache_control: Option<String>,
    pub task_timeout: Duration,
}

/// Whether `url` names an S3 origin.
pub fn is_s3(url: &str) -> bool {
    url.starts_with("s3://")
}

/// Replaces the node's `s3://` origins by in-process gateways; the connector that reaches
/// them (`None`: no S3 origin, plain TCP). Must run inside the node's runtime.
pub fn wire(node: &mut NodeConfig, b: &BackendSettings) -> Result<Option<Connector>> {
    let mut gateways: HashMap<String, (Proxy, Arc<GatewayConfig>)> = HashMap::new();
    let mut by_url: HashMap<String, String> = HashMap::new();
    let mut replace = |url: &mut String| -> Result<()> {
        if !is_s3(url) {
            return Ok(());
        }
        if let Some(host) = by_url.get(url.as_str()) {
            *url = format!("http://{host}");
            return Ok(());
        }
        let s3 = S3Config::from_url(url)?;
        let store = Arc::new(S3Store::new(&s3, b.task_timeout)?);
        let proxy = Proxy::start(
            store,
            ProxyConfig {
                strategy: b.strategy,
                connections: b.connections.max(1),
                task_timeout: b.task_timeout,
                ..ProxyConfig::default()
            },
        );
        let host = format!("ecdn-backend-{}", gateways.len());
        let gw = GatewayConfig {
            cache_control: b.cache_control.clone(),
        };
        gateways.insert(format!("{host}:80"), (proxy, Arc::new(gw)));
        by_url.insert(url.clone(), host.clone());
        *url = format!("http://{host}");
        Ok(())
    };
    replace(&mut node.origin)?;
    for (_, url) in node.routes.iter_mut() {
        replace(url)?;
    }
    if gateways.is_empty() {
        return Ok(None);
    }
    let gateways = Arc::new(gateways);
    let tcp = tcp_connector();
    Ok(Some(Arc::new(move |authority: String| -> Connecting {
        match gateways.get(&authority) {
            Some((proxy, cfg)) => {
                let (ours, theirs) = tokio::io::duplex(256 << 10);
                tokio::spawn(serve_connection(theirs, proxy.clone(), cfg.clone()));
                Box::pin(async move { Ok(Box::new(ours) as Box<dyn OriginIo>) })
            }
            None => tcp(authority),
        }
    })))
}
