#!/bin/bash
# What statistics cost: isertd as built (statistics on) and isertd built with
# -Dstats=false (hooks compiled out), side by side on loopback, each serving
# a RAM LUN to iscsi-perf (libiscsi) doing 4 KiB random reads at queue depth
# 32 (target and client pinned to different cores
# when there are two).  The two run in turns (ROUNDS rounds, the
# order swapped each round) so drift hits both alike; prints IOPS and IOPS
# per target CPU-second for each, and the ratio on/off.
#
# usage: tools/bench-stats.sh [SECONDS] [ROUNDS]   (default 10 s, 3 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${2:-3}
on=build/target/isertd
off=build-nostats/target/isertd
[ -x "$on" ] || { echo "build first: meson setup build && ninja -C build"; exit 1; }
command -v iscsi-perf >/dev/null || { echo "iscsi-perf not found: apt-get install libiscsi-bin"; exit 1; }
if [ ! -d build-nostats ]; then
	echo "== configuring build-nostats (-Dstats=false)"
	meson setup build-nostats -Dstats=false -Dtests=false >/dev/null
fi
ninja -C build-nostats target/isertd >/dev/null
work=$(mktemp -d /dev/shm/bench-stats.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# Each on a core of its own where there are two: the client's load does not land on the target's core.
pin_target= pin_client=
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin_target="taskset -c 1" pin_client="taskset -c 0"; fi

start() { # NAME BINARY PORT
	cat >"$work/$1.json" <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "1G" } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:$1", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $3 } ], "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ] }
JSON
	$pin_target "$2" --config "$work/$1.json" -r 1 2>"$work/$1.log" &
	pids+=($!)
}
start on "$on" 3362
on_pid=$!
start off "$off" 3363
off_pid=$!
sleep 1

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A ios=([on]=0 [off]=0) ticks=([on]=0 [off]=0)

run() { # NAME PID PORT
	local t0 t1 iops
	t0=$(cpu_ticks "$2")
	iops=$(timeout -s INT "$secs" $pin_client iscsi-perf -m 32 -b 8 -r "iscsi://127.0.0.1:$3/iqn.2026-11.org.isert:$1/0" 2>&1 |
		tr '\r' '\n' | grep -o 'iops average [0-9]*' | tail -1 | awk '{print $3}' || true)
	t1=$(cpu_ticks "$2")
	ios[$1]=$(( ${ios[$1]} + ${iops:-0} * secs ))
	ticks[$1]=$(( ${ticks[$1]} + t1 - t0 ))
	printf '  round %d %-4s %8d IOPS  %5.2f target cores\n' "$r" "$1" "${iops:-0}" \
		"$(awk -v t=$((t1 - t0)) -v hz="$hz" -v s="$secs" 'BEGIN { print t / hz / s }')"
}

echo "== 4 KiB random read, QD32, $rounds x $secs s each (statistics on: $on; off: $off)"
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then run on $on_pid 3362; run off $off_pid 3363
	else run off $off_pid 3363; run on $on_pid 3362; fi
done
awk -v i1="${ios[on]}" -v t1="${ticks[on]}" -v i0="${ios[off]}" -v t0="${ticks[off]}" -v hz="$hz" \
    -v s=$((secs * rounds)) 'BEGIN {
	p1 = t1 ? i1 / (t1 / hz) : 0; p0 = t0 ? i0 / (t0 / hz) : 0
	printf "statistics on : %8d IOPS, %9.0f IOPS per target CPU-second\n", i1 / s, p1
	printf "statistics off: %8d IOPS, %9.0f IOPS per target CPU-second\n", i0 / s, p0
	printf "on/off: IOPS %.3f, IOPS per target CPU-second %.3f (%+.1f%%)\n", (i0 ? i1 / i0 : 0),
		(p0 ? p1 / p0 : 0), (p0 ? (p1 / p0 - 1) * 100 : 0) }'
