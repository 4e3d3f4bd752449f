#!/bin/bash
# Proves tests/ceph/cluster.sh: an image round-trips 1 MiB of random data through the
# cluster. Run as `cluster.sh run -- smoke.sh` (needs CEPH_CONF).
set -euo pipefail
: "${CEPH_CONF:?run me under tests/ceph/cluster.sh run}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
img=smoke-$$

rbd create --size 64M "rbd/$img"
rbd ls rbd | grep -qx "$img" || { echo "FAIL: $img not in rbd ls"; exit 1; }
head -c 1M /dev/urandom >"$tmp/in"
# rbd import makes an image of its own (it cannot write into rbd/$img): 1 MiB of random
# data goes in through librbd and comes back out with rbd export.
rbd import --no-progress "$tmp/in" "rbd/$img-data"
rbd export --no-progress "rbd/$img-data" "$tmp/out"
cmp "$tmp/in" "$tmp/out"
[ "$(rbd info --format json "rbd/$img" | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')" \
	= $((64 << 20)) ] || { echo "FAIL: rbd/$img is not 64 MiB"; exit 1; }
rbd rm --no-progress "rbd/$img"
rbd rm --no-progress "rbd/$img-data"
[ -z "$(rbd ls rbd)" ] || { echo "FAIL: images left: $(rbd ls rbd)"; exit 1; }
echo "smoke: 1 MiB round-tripped through rbd/$img-data, images removed"
