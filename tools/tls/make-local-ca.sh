#!/usr/bin/env bash
# Makes a local certificate authority and one node certificate signed by it, for a cluster on
# this machine or a private network: `tools/tls/make-local-ca.sh <dir> [host ...]`.
#   <dir>/ca.pem            the CA's certificate: TESSERA_TLS_CA_FILE on every node, and the
#                           clients' trust (curl --cacert, NODE_EXTRA_CA_CERTS)
#   <dir>/ca.key            the CA's key: keep it off the nodes
#   <dir>/node.pem, .key    TESSERA_TLS_CERT_FILE and TESSERA_TLS_KEY_FILE, valid for localhost,
#                           127.0.0.1 and each host named (docker-compose's: config router shard0 ...)
# An existing CA in <dir> is kept and signs the new node certificate. Needs openssl.
set -euo pipefail
dir=${1:?usage: make-local-ca.sh <dir> [host ...]}
shift
mkdir -p "$dir"
cd "$dir"
if [ ! -f ca.key ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 825 -subj "/CN=Tessera local CA" 2>/dev/null
fi
san="DNS:localhost,IP:127.0.0.1"
for host in "$@"; do san="$san,DNS:$host"; done
openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj "/CN=tessera-node" 2>/dev/null
openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 825 \
  -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san") 2>/dev/null
rm -f node.csr ca.srl
chmod 600 ca.key node.key
echo "made $dir/ca.pem and $dir/node.pem (for $san)"
