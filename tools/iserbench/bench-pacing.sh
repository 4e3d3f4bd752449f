#!/bin/bash
# What pacing costs: iserbench against an isertd RAM LUN on loopback (one
# reactor), 4 KiB random reads with threads=16: a max run, then fixed rates
# (default 50, 80 and 90 % of the rate it reached; N% or I/Os per second,
# e.g. 20000 to see a rate where one arrival is due every 50 µs). Per run:
# the rate asked and
# reached, resp and queue depth (avg_ line), the queue wait line, and the
# CPU time per I/O of iserbench and of isertd (whole processes, from
# getrusage and /proc). A paced run should reach its rate at a CPU per I/O
# near the max run's.
#   tools/iserbench/bench-pacing.sh [BUILD_DIR] [SECONDS] [RATE...]   (default build, 8, 50% 80% 90%)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:-$root/build}")
secs=${2:-8}
shift $(($# < 2 ? $# : 2))
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(50% 80% 90%)
isertd=$build/target/isertd
iserbench=$build/tools/iserbench/iserbench
for b in "$isertd" "$iserbench"; do
	[ -x "$b" ] || { echo "bench-pacing: $b not built (meson compile -C $build)" >&2; exit 1; }
done
port=3298
iqn=iqn.2026-11.org.isert:pacing
work=$(mktemp -d /tmp/bench-pacing.XXXXXX)
tpid=
cleanup() { [ -n "$tpid" ] && kill "$tpid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cd "$work"
cat >isertd.json <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "256M" } ],
  "targets": [ { "iqn": "$iqn", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port } ],
    "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ] }
JSON
"$isertd" --config isertd.json --admin-socket none --state-dir none -r 1 >isertd.log 2>&1 &
tpid=$!
for _ in $(seq 50); do grep -q "listening on 127.0.0.1:$port" isertd.log && break; sleep 0.1; done
grep -q "listening on 127.0.0.1:$port" isertd.log || { echo "isertd did not start:"; cat isertd.log; exit 1; }

ticks=$(getconf CLK_TCK)
tcpu() { awk '{ print $14 + $15 }' "/proc/$tpid/stat"; }
printf '%-10s %10s %10s %8s %6s %10s %10s %12s  %s\n' run asked reached resp_ms depth ib_us/io tgt_us/io ios "queue wait"
# run RATE: one 4 KiB random-read run; prints a row, leaves the avg rate in $reached
run() {
	cat >p.parm <<EOF
sd=sd1,lun=iscsi://127.0.0.1:$port/$iqn/0,threads=16
wd=rr,sd=sd1,xfersize=4k,rdpct=100,seekpct=100
rd=r,wd=rr,iorate=$1,elapsed=$secs,interval=1
EOF
	local t0 t1 u s ios
	t0=$(tcpu)
	/usr/bin/time -f '%U %S' -o time.txt "$iserbench" -f p.parm -o out >run.txt 2>&1 ||
		{ echo "iserbench failed:"; tail run.txt; exit 1; }
	t1=$(tcpu)
	read -r u s <time.txt
	# every interval's I/Os (rate x seconds, 1-second intervals), the first included
	ios=$(awk '/^[0-9:.]+ +[0-9]+ / { n += $3 } END { printf "%d", n }' run.txt)
	read -r reached resp depth < <(awk '$2 ~ /^avg_/ { print $3, $7, $12 }' run.txt)
	awk -v run="$2" -v asked="$1" -v r="$reached" -v resp="$resp" -v d="$depth" -v u="$u" -v s="$s" \
		-v t0="$t0" -v t1="$t1" -v hz="$ticks" -v n="$ios" -v w="$(sed -n 's/^queue wait (arrival to start): //p' run.txt)" \
		'BEGIN { printf "%-10s %10s %10.0f %8s %6s %10.2f %10.2f %12d  %s\n", run, asked, r, resp, d,
			(u + s) * 1e6 / n, (t1 - t0) * 1e6 / hz / n, n, w }'
}
run max max
max=${reached%.*}
for r in "${rates[@]}"; do
	case $r in
	*%) run $((max * ${r%\%} / 100)) "$r" ;;
	*) run "$r" "$r" ;;
	esac
done
