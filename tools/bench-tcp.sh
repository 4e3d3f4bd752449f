#!/bin/bash
# Side-by-side: isertd and tgtd serve the same kind of RAM-backed LUN on
# loopback; iscsi-perf (libiscsi) drives each with 4 KiB random reads at
# queue depth 32 and 128 KiB sequential reads.  Prints IOPS, MiB/s, target
# CPU time per I/O for both, and the ratios.  Run as root (tgtd needs it).
#
# usage: tools/bench-tcp.sh [SECONDS]   (default 10 per run)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
isertd=build/target/isertd
[ -x "$isertd" ] || { echo "build first: meson setup build && ninja -C build"; exit 1; }
command -v tgtd >/dev/null || { echo "tgtd not found: apt-get install tgt"; exit 1; }
command -v iscsi-perf >/dev/null || { echo "iscsi-perf not found: apt-get install libiscsi-bin"; exit 1; }
work=$(mktemp -d /dev/shm/bench.XXXXXX)
pids=()
cleanup() {
	# tgtd ignores SIGTERM while it has targets: ask it to stop, then insist.
	tgtadm -C 7 --op delete --mode system --force >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/isertd.json" <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "1G" } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:bench", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": 3360 } ], "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ] }
JSON
"$isertd" --config "$work/isertd.json" 2>"$work/isertd.log" &
pids+=($!); isertd_pid=$!
# tgtd: its fastest RAM-like setup is the rdwr backstore on a tmpfs file.
truncate -s 1G "$work/tgt.img"
tgtd -f -C 7 --iscsi portal=127.0.0.1:3361 >"$work/tgtd.log" 2>&1 &
pids+=($!); tgtd_pid=$!
sleep 1
tgtadm -C 7 --lld iscsi --op new --mode target --tid 1 -T iqn.2026-11.org.isert:tgtbench
tgtadm -C 7 --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$work/tgt.img"
tgtadm -C 7 --lld iscsi --op bind --mode target --tid 1 -I ALL
# warm both LUNs so reads hit memory that exists
dd if=/dev/zero of="$work/tgt.img" bs=1M count=1024 conv=notrunc status=none

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# run NAME PID URL BLOCKS RANDOM -> prints "iops mibs cpu_us_per_io"
run() {
	local pid=$2 url=$3 blocks=$4 rnd=$5 t0 t1 out
	t0=$(cpu_ticks "$pid")
	out=$(timeout -s INT "$secs" iscsi-perf -m 32 -b "$blocks" $rnd "$url" 2>&1 | tr '\r' '\n' | grep -o 'iops average [0-9]*' | tail -1 | awk '{print $3}')
	t1=$(cpu_ticks "$pid")
	local iops=${out:-0}
	local cpu=$(( t1 - t0 ))
	awk -v iops="$iops" -v cpu="$cpu" -v hz="$hz" -v s="$secs" -v b="$blocks" 'BEGIN {
		ios = iops * s; cpus = cpu / hz
		printf "%d %.1f %.2f %.2f\n", iops, iops * b * 512 / 1048576, (ios ? cpus * 1e6 / ios : 0), cpus / s }'
}

printf '%-28s %10s %10s %14s %12s\n' "run" "IOPS" "MiB/s" "target us/IO" "target cores"
declare -A res
for wl in "4k-randread-qd32:8:-r" "128k-seqread-qd32:256:"; do
	IFS=: read -r name blocks rnd <<<"$wl"
	for t in isertd tgtd; do
		if [ $t = isertd ]; then url=iscsi://127.0.0.1:3360/iqn.2026-11.org.isert:bench/0; pid=$isertd_pid
		else url=iscsi://127.0.0.1:3361/iqn.2026-11.org.isert:tgtbench/1; pid=$tgtd_pid; fi
		read -r iops mibs us cores <<<"$(run $t $pid $url $blocks "$rnd")"
		res[$name.$t]="$iops $us"
		printf '%-28s %10s %10s %14s %12s\n' "$name $t" "$iops" "$mibs" "$us" "$cores"
	done
	read -r i1 u1 <<<"${res[$name.isertd]}"; read -r i2 u2 <<<"${res[$name.tgtd]}"
	awk -v n="$name" -v i1="$i1" -v i2="$i2" -v u1="$u1" -v u2="$u2" 'BEGIN {
		printf "%-28s IOPS ratio isertd/tgtd %.2fx, IOPS per target CPU-second ratio %.2fx\n", n,
			(i2 ? i1 / i2 : 0), (u1 > 0 ? u2 / u1 : 0) }'
done
