#!/usr/bin/env bash
# A real S3 server for the archival tests' radosgw tier (PERDURA_TEST_S3=radosgw, tests/support/s3.py):
# Ceph's radosgw from Debian 12's packages, on a single-node cluster (one mon, one OSD on memstore, so the
# data lives in RAM) bound to 127.0.0.1 only, with its ceph.conf, keyring, data, logs and pid files all
# under DIR (nothing in /etc/ceph, no systemd). Installs the packages with apt when they are missing and
# it runs as root. The S3 user it creates signs with SigV4 (enforced: a wrong secret is refused).
#
#   usage: ceph-rgw-up.sh DIR [RGW_PORT]     (RGW_PORT default 17480; DIR is emptied first)
#   env:   MON_V2_PORT, MON_V1_PORT (43300, 46789), RGW_ACCESS_KEY, RGW_SECRET_KEY, MEMSTORE_BYTES (4 GiB)
#   stop:  kill $(cat DIR/run/*.pid)   restart radosgw alone: radosgw -c DIR/ceph.conf -n client.admin
#
# Two gotchas, both set below:
#  1. Cluster auth is `none` (S3's SigV4 is still enforced by radosgw), and with auth none msgr2 cannot use
#     its `secure` mode: without `ms mon client mode = crc` and `ms client mode = crc`, radosgw hangs 300 s
#     and dies with "failed to fetch mon config" (ceph and ceph-osd do not show the problem).
#  2. SSE-C and SSE-KMS over plain http need `rgw crypt require ssl = false` (KMS backend `testing` with a
#     static key). Do not set `rgw crypt default encryption key`: it breaks CopyObject (NotImplemented).
# Adapted from the recipe in shared/recipes (COMPONENTS.md section 2.2).
set -euo pipefail
R=${1:?usage: ceph-rgw-up.sh DIR [RGW_PORT]}
PORT=${2:-17480}
AK=${RGW_ACCESS_KEY:-testaccesskey}
SK=${RGW_SECRET_KEY:-testsecretkey}
MONV2=${MON_V2_PORT:-43300}
MONV1=${MON_V1_PORT:-46789}

if ! command -v radosgw >/dev/null 2>&1 || ! command -v ceph-mon >/dev/null 2>&1 \
  || ! command -v ceph-osd >/dev/null 2>&1 || ! command -v radosgw-admin >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "Ceph's radosgw is not installed: apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw ceph-common" >&2
    exit 1
  fi
  echo "installing ceph-mon ceph-osd radosgw ceph-common with apt-get (about 20 s)..." >&2
  # Another install holding dpkg's lock is waited for, not failed on (as infra/scripts/ensure-services.sh).
  wait=(-o DPkg::Lock::Timeout=600)
  DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive apt-get "${wait[@]}" install -y -qq --no-install-recommends \
    ceph-mon ceph-osd radosgw ceph-common >/dev/null
fi

rm -rf "${R:?}"/{run,log,mon,osd,rgw} "$R/ceph.conf" "$R/keyring" "$R/monmap"
mkdir -p "$R"/{run,log,mon,osd,rgw}
# A start that fails half way leaves no daemon behind.
trap 'for p in "$R"/run/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done' ERR
FSID=$(python3 -c 'import uuid;print(uuid.uuid4())')
KEY=$(python3 -c 'import base64,os;print(base64.b64encode(os.urandom(32)).decode())')
cat >"$R/ceph.conf" <<CONF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MONV2,v1:127.0.0.1:$MONV1]
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
# gotcha 1: auth none cannot do msgr2's secure mode
ms mon client mode = crc
ms client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool delete = true
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = ${MEMSTORE_BYTES:-4294967296}
run dir = $R/run
admin socket = $R/run/\$name.asok
log file = $R/log/\$name.log
pid file = $R/run/\$name.pid
mon data = $R/mon/\$cluster-\$id
osd data = $R/osd/\$cluster-\$id
keyring = $R/keyring
client mount timeout = 30
[client.admin]
rgw frontends = beast endpoint=127.0.0.1:$PORT
rgw data = $R/rgw
# gotcha 2: SSE-C and SSE-KMS over plain http; SSE-S3 is not implemented in Pacific
rgw crypt require ssl = false
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = testkey-1=$KEY alias/test=$KEY
CONF
C=(-c "$R/ceph.conf")
t0=$(date +%s.%N)
ceph-authtool --create-keyring "$R/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$R/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MONV2,v1:127.0.0.1:$MONV1]" "$R/monmap" >/dev/null
ceph-mon "${C[@]}" --mkfs -i a --monmap "$R/monmap" --keyring "$R/keyring"
ceph-mon "${C[@]}" -i a
ID=$(ceph "${C[@]}" osd create)
mkdir -p "$R/osd/ceph-$ID"
ceph-osd "${C[@]}" -i "$ID" --mkfs --osd-uuid "$(python3 -c 'import uuid;print(uuid.uuid4())')" 2>/dev/null
ceph "${C[@]}" osd crush add-bucket localhost host >/dev/null 2>&1
ceph "${C[@]}" osd crush move localhost root=default >/dev/null 2>&1
ceph "${C[@]}" osd crush add "osd.$ID" 1.0 host=localhost >/dev/null 2>&1
ceph-osd "${C[@]}" -i "$ID" 2>/dev/null
up=""
for _ in $(seq 1 120); do
  if ceph "${C[@]}" osd stat 2>/dev/null | grep -q ' 1 up'; then up=1; break; fi
  sleep 0.5
done
[ -n "$up" ] || { echo "the OSD did not come up in 60 s; see $R/log/" >&2; false; }
radosgw "${C[@]}" -n client.admin
up=""
for _ in $(seq 1 240); do
  if curl -s -m 1 -o /dev/null "http://127.0.0.1:$PORT"; then up=1; break; fi
  sleep 0.25
done
[ -n "$up" ] || { echo "radosgw did not answer on 127.0.0.1:$PORT in 60 s; see $R/log/client.admin.log" >&2; false; }
radosgw-admin "${C[@]}" user create --uid=test --display-name=test --access-key="$AK" --secret="$SK" \
  >/dev/null 2>"$R/log/radosgw-admin.err"
echo "rgw ready in $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s: endpoint=http://127.0.0.1:$PORT access_key=$AK secret_key=$SK"
