//! Certificates for the peer protocol's mutual TLS (the cluster file's `[peer_tls]`,
//! `ecdn_cluster::mtls`) of a demo or a bench: a CA made for the run, and one certificate it
//! signs for every address the run's processes listen on, which each process presents as a
//! client and as a server. An operator's cluster uses its own CA and a certificate per host.

use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `peer-ca.pem`, `peer.pem` and `peer.key` in `dir` (a new CA, and a certificate it
/// signed naming every address of `ips`); returns the cluster file's `[peer_tls]` section.
pub fn write_peer_tls(dir: &Path, ips: &[IpAddr]) -> Result<String> {
    let ca_key = rcgen::KeyPair::generate().context("a key for the run's CA")?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "ecdn run CA");
    let ca = ca.self_signed(&ca_key).context("the run's CA")?;
    let mut names: Vec<String> = ips.iter().map(|ip| ip.to_string()).collect();
    names.sort();
    names.dedup();
    let key = rcgen::KeyPair::generate().context("a key for the peers' certificate")?;
    let mut params = rcgen::CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "ecdn peer");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .context("the peers' certificate")?;
    let write = |name: &str, pem: String| -> Result<String> {
        let path = dir.join(name);
        std::fs::write(&path, pem).with_context(|| format!("writing {}", path.display()))?;
        Ok(path.display().to_string())
    };
    Ok(format!(
        "[peer_tls]\nca = {:?}\ncert = {:?}\nkey = {:?}\n",
        write("peer-ca.pem", ca.pem())?,
        write("peer.pem", cert.pem())?,
        write("peer.key", key.serialize_pem())?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_load_as_a_peer_tls_section() {
        let dir = tempfile::tempdir().unwrap();
        let ips = ["127.0.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap()];
        let section = write_peer_tls(dir.path(), &ips).unwrap();
        let text = format!(
            "scheme = \"rep2\"\nkey = \"0123456789abcdef-certs\"\ncoordinator = \
             \"127.0.0.1:1\"\n{section}[[node]]\nid = 0\nclient = \"127.0.0.1:2\"\npeer = \
             \"127.0.0.1:3\"\n[[node]]\nid = 1\nclient = \"127.0.0.1:4\"\npeer = \"127.0.0.1:5\"\n"
        );
        let cfg = ecdn_cluster::ClusterConfig::parse(&text).unwrap();
        assert!(cfg.peer_tls().is_some());
    }
}
