#!/bin/bash
# iserbench next to iscsi-perf (libiscsi) against the same isertd RAM LUN:
# 4 KiB random read and 128 KiB sequential read, both at queue depth 32.
# Prints both IOPS and the ratio: iserbench must not be the bottleneck
# (within 10% of iscsi-perf or faster).
#
# usage: tools/iserbench/bench-iserbench.sh [SECONDS] [BUILDDIR]   (default 10, build)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
build=${2:-build}
isertd=$build/target/isertd
iserbench=$build/tools/iserbench/iserbench
for b in "$isertd" "$iserbench"; do
	[ -x "$b" ] || { echo "build first: meson setup $build && ninja -C $build ($b missing)"; exit 1; }
done
command -v iscsi-perf >/dev/null || { echo "iscsi-perf not found: apt-get install libiscsi-bin"; exit 1; }
port=3299
iqn=iqn.2026-11.org.isert:ibbench
url=iscsi://127.0.0.1:$port/$iqn/0
work=$(mktemp -d /tmp/ibbench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/isertd.json" <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "1G" } ],
  "targets": [ { "iqn": "$iqn", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port } ], "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ] }
JSON
"$isertd" --config "$work/isertd.json" 2>"$work/isertd.log" &
pid=$!
sleep 1

# Write the LUN once so both tools read memory that exists.
cat >"$work/fill.parm" <<EOF
sd=sd1,lun=$url,threads=8
wd=fill,sd=sd1,xfersize=1m,rdpct=0,seekpct=eof
rd=fill,wd=fill,iorate=max,elapsed=600,interval=5
EOF
"$iserbench" -f "$work/fill.parm" -o "$work/fill" >/dev/null

# iserbench WL: avg IOPS of a SECONDS-long max run
ib_run() {
	local xfer=$1 seek=$2
	cat >"$work/b.parm" <<EOF
sd=sd1,lun=$url,threads=32
wd=wd1,sd=sd1,xfersize=$xfer,rdpct=100,seekpct=$seek
rd=rd1,wd=wd1,iorate=max,elapsed=$secs,interval=1
EOF
	"$iserbench" -f "$work/b.parm" -o "$work/out" |
		awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) printf "%d\n", $(i + 1) }' | tail -1
}

perf_run() {
	local blocks=$1 rnd=$2
	timeout -s INT "$secs" iscsi-perf -m 32 -b "$blocks" $rnd "$url" 2>&1 | tr '\r' '\n' |
		grep -o 'iops average [0-9]*' | tail -1 | awk '{print $3}' || true  # timeout ends it: 124
}

printf '%-24s %12s %12s %8s\n' "workload (QD32)" "iscsi-perf" "iserbench" "ratio"
for wl in "4k-random-read:8:-r:4k:100" "128k-sequential-read:256::128k:0"; do
	IFS=: read -r name blocks rnd xfer seek <<<"$wl"
	p=$(perf_run "$blocks" "$rnd")
	i=$(ib_run "$xfer" "$seek")
	awk -v n="$name" -v p="${p:-0}" -v i="${i:-0}" 'BEGIN {
		printf "%-24s %12d %12d %7.2fx\n", n, p, i, (p ? i / p : 0) }'
done
