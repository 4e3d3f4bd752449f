#!/bin/bash
# Initiator benchmark: our library against libiscsi, same target (isertd,
# RAM LUN on loopback), same poll()-loop program (isc-bench), one after the
# other: 4 KiB random read at queue depth 32 and 128 KiB sequential read.
# Prints IOPS and IOPS per initiator CPU-second (getrusage of the initiator
# process), and the ratio isc/libiscsi.
#
# usage: initiator/tool/bench-initiator.sh [BUILD_DIR] [SECONDS]   (defaults: build, 10)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
secs=${2:-10}
isertd=$build/target/isertd
bench=$build/initiator/isc-bench
[ -x "$isertd" ] && [ -x "$bench" ] || { echo "build first (isc-bench needs libiscsi-dev)"; exit 1; }
port=3284
work=$(mktemp -d /dev/shm/isc-bench.XXXXXX)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cat >"$work/isertd.json" <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "1G" } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:ibench", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port } ], "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ] }
JSON
"$isertd" --config "$work/isertd.json" 2>"$work/isertd.log" &
pid=$!
sleep 1
url=iscsi://127.0.0.1:$port/iqn.2026-11.org.isert:ibench/0
printf '%-22s %-9s %10s %10s %10s %16s\n' workload library IOPS MiB/s us/IO "IOPS/CPU-second"
for wl in "4k-randread-qd32:4096:--random" "128k-seqread-qd32:131072:"; do
	IFS=: read -r name bs rnd <<<"$wl"
	declare -A per
	for lib in libiscsi isc; do
		out=$("$bench" --lib $lib --bs "$bs" --qd 32 --seconds "$secs" $rnd "$url")
		iops=$(awk '{print $2}' <<<"$out"); mibs=$(awk '{print $4}' <<<"$out")
		us=$(awk '{print $9}' <<<"$out"); eff=$(awk '{print $11}' <<<"$out")
		per[$lib]=$eff
		printf '%-22s %-9s %10s %10s %10s %16s\n' "$name" $lib "$iops" "$mibs" "$us" "$eff"
	done
	awk -v n="$name" -v a="${per[isc]}" -v b="${per[libiscsi]}" \
		'BEGIN { printf "%-22s isc/libiscsi IOPS per initiator CPU-second: %.2fx\n", n, (b ? a / b : 0) }'
done
