#!/bin/bash
# Initiator benchmark: our library against libiscsi, same target (isertd,
# RAM LUN on loopback), same poll()-loop program (isc-bench), one after the
# other: 4 KiB random read at queue depth 32 and 128 KiB sequential read.
# Prints IOPS and IOPS per initiator CPU-second (getrusage of the initiator
# process), and the ratio isc/libiscsi.  On a shared 2-core machine one run
# swings by a third, so the two libraries take turns for ROUNDS rounds and
# the medians are compared.
#
# usage: [ROUNDS=3] initiator/tool/bench-initiator.sh [BUILD_DIR] [SECONDS]   (defaults: build, 10)
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
rounds=${ROUNDS:-3}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "$rounds rounds of ${secs} s per library and workload, taking turns; medians below"
printf '%-22s %-9s %10s %10s %10s %16s\n' workload library IOPS MiB/s us/IO "IOPS/CPU-second"
for wl in "4k-randread-qd32:4096:--random" "128k-seqread-qd32:131072:"; do
	IFS=: read -r name bs rnd <<<"$wl"
	for lib in libiscsi isc; do : >"$work/$name.$lib"; done
	for r in $(seq "$rounds"); do
		for lib in libiscsi isc; do
			"$bench" --lib $lib --bs "$bs" --qd 32 --seconds "$secs" $rnd "$url" >>"$work/$name.$lib"
		done
		printf '  %s round %d/%d done\r' "$name" "$r" "$rounds" >&2
	done
	declare -A per
	for lib in libiscsi isc; do
		f=$work/$name.$lib
		iops=$(awk '{print $2}' "$f" | median); mibs=$(awk '{print $4}' "$f" | median)
		us=$(awk '{print $9}' "$f" | median); eff=$(awk '{print $11}' "$f" | median)
		per[$lib]=$eff
		printf '%-22s %-9s %10.0f %10.1f %10.2f %16.0f\n' "$name" $lib "$iops" "$mibs" "$us" "$eff"
	done
	ra=$(awk '{ printf "%s ", $11 }' "$work/$name.isc"); rb=$(awk '{ printf "%s ", $11 }' "$work/$name.libiscsi")
	awk -v n="$name" -v a="${per[isc]}" -v b="${per[libiscsi]}" -v ra="$ra" -v rb="$rb" \
		'BEGIN { printf "%-22s isc/libiscsi IOPS per initiator CPU-second: %.2fx (rounds: isc %s/ libiscsi %s)\n", n, (b ? a / b : 0), ra, rb }'
done
