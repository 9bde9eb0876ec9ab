#!/usr/bin/env bash
# Installs what ecdn's tests need from the system and the machine lacks: Debian packages
# (apt-get, as root or through sudo; elsewhere it names them and goes on) and moto's S3 server
# from PyPI. `.ci/run` runs it before the README's test command, and that command, ./test.sh,
# runs it too, so a newcomer's machine gets the same set-up; on a machine that has everything
# it installs nothing.
set -euo pipefail

# What the tests need from the system:
# - fonts-dejavu-core: the plot tests render text with a TTF font;
# - curl, nginx-light: the end-to-end tests (crates/ecdn/tests/e2e.rs) use curl as a client
#   and nginx as an origin;
# - procps: `ps`/`kill` used by the end-to-end tests and the bench scripts;
# - mount (`losetup`) and util-linux (`blockdev`): the store and e2e tests on a loop block
#   device;
# - g++: libfuzzer-sys compiles libFuzzer when the fuzz crate is checked;
# - etcd-server: the etcd control-plane tests (crates/ecdn-cluster/tests/etcd.rs) start their
#   own etcd members on loopback;
# - moto's S3 server (PyPI, `moto[server]`, with python3-pip where pip is missing): the
#   backend tier's S3 tests (crates/ecdn-backend/tests/s3.rs) check the client against it;
# - boto3 and the AWS CLI (PyPI, `awscli`; moto brings boto3 too): the S3 face's tests
#   (crates/ecdn-node/tests/s3.rs) drive a cluster with the AWS SDK for Python and `aws s3`;
# - rclone: the same tests copy, check and sync trees through the S3 face with it;
# - openssl: the same tests make a private CA and a certificate for moto's TLS endpoint, and the
#   node's HTTPS test (crates/ecdn/tests/e2e.rs) makes its certificates;
# - dnsutils: `dig` queries the DNS redirector in its test (crates/ecdn-coral/src/dns.rs);
# - chromium: the status page's test loads the page in headless Chromium
#   (crates/ecdn-node/tests/status_page.rs).
# - iproute2 (`ip`, `tc`), nftables and iptables: the test bed's tests
#   (crates/ecdn/tests/testbed.rs) make hosts as network namespaces and shape their links.
# Building needs none of them (no `protoc` either: third_party/etcd-client/VENDORED.md).
missing=()
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
command -v curl >/dev/null || missing+=(curl)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v ps >/dev/null || missing+=(procps)
command -v losetup >/dev/null || [ -x /sbin/losetup ] || missing+=(mount)
command -v blockdev >/dev/null || [ -x /sbin/blockdev ] || missing+=(util-linux)
command -v c++ >/dev/null || missing+=(g++)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
command -v openssl >/dev/null || missing+=(openssl)
command -v dig >/dev/null || missing+=(dnsutils)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v rclone >/dev/null || missing+=(rclone)
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || missing+=(iproute2)
command -v tc >/dev/null || [ -x /usr/sbin/tc ] || missing+=(iproute2)
command -v nft >/dev/null || [ -x /usr/sbin/nft ] || missing+=(nftables)
command -v iptables-legacy-restore >/dev/null || [ -x /usr/sbin/iptables-legacy-restore ] || missing+=(iptables)
command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if command -v apt-get >/dev/null && { [ "${#sudo[@]}" -eq 0 ] || command -v sudo >/dev/null; }; then
    echo "install-test-deps: installing ${missing[*]}" >&2
    ("${sudo[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}") >&2 ||
      echo "install-test-deps: could not install ${missing[*]}; the tests that need them will fail" >&2
  else
    echo "install-test-deps: missing ${missing[*]} (Debian package names); the tests that need them will fail" >&2
  fi
fi
if ! command -v moto_server >/dev/null; then
  echo "install-test-deps: installing moto[server] from PyPI" >&2
  python3 -m pip install --quiet 'moto[server]>=5,<6' >&2 ||
    python3 -m pip install --quiet --break-system-packages 'moto[server]>=5,<6' >&2 ||
    echo "install-test-deps: could not install moto[server]; the backend's S3 tests will fail" >&2
fi
if ! python3 -c "import boto3" >/dev/null 2>&1 || ! command -v aws >/dev/null; then
  echo "install-test-deps: installing boto3 and awscli from PyPI" >&2
  python3 -m pip install --quiet 'boto3>=1.34' 'awscli>=1.32' >&2 ||
    python3 -m pip install --quiet --break-system-packages 'boto3>=1.34' 'awscli>=1.32' >&2 ||
    echo "install-test-deps: could not install boto3 and awscli; the S3 face's tests will fail" >&2
fi
