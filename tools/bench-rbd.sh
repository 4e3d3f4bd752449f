#!/bin/bash
# Side-by-side on Ceph RBD: raw librbd (`rbd bench`), isertd's rbd backstore and
# tgtd's bs_rbd, one after the other, each on its own prefilled image of one size.
# iserbench drives both targets over iSCSI/TCP on loopback (iscsi-perf cannot
# write).  Workloads, all at 32 outstanding I/Os: 4 KiB random read and write,
# 1 MiB sequential read and write.  Prints IOPS, MiB/s and the target's CPU time
# per I/O for each, and the ratios isertd/raw and isertd/tgtd.  Run as root (tgtd
# needs it).
#
# usage: tools/bench-rbd.sh [--quick | --smoke] [--build DIR] [SECONDS]
#   SECONDS   per run (default 10; --quick 5; --smoke 2)
#   --quick   5 s runs on 256 MiB images (default: 1 GiB)
#   --smoke   2 s runs on 64 MiB images: proves the script works; exits 1 if the
#             raw or the isertd run of a workload did no I/O (tgtd may be missing),
#             77 if ceph is not installed or isertd was built without librbd
#   --build   the build directory with isertd and iserbench (default build)
# Without CEPH_CONF the script runs itself inside tests/ceph/cluster.sh run (a
# throw-away one-mon, one-memstore-OSD cluster on loopback); with CEPH_CONF it uses
# that cluster's pool $BENCH_RBD_POOL (default rbd) as client.admin and removes the
# images it created.  BENCH_RBD_FEATURES=layering (say) creates the images with
# those features instead of rbd's default; BENCH_RBD_KEEP=1 keeps the work directory.
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
args=("$@")
mode=full secs='' build=build
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick ;;
	--smoke) mode=smoke ;;
	--build) build=${2:?--build needs a directory}; shift ;;
	[0-9]*) secs=$1 ;;
	*) sed -n '10,23s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
case $mode in
full)  secs=${secs:-10}; size_mib=1024 ;;
quick) secs=${secs:-5};  size_mib=256 ;;
smoke) secs=${secs:-2};  size_mib=64 ;;
esac
isertd=$build/target/isertd
iserbench=$build/tools/iserbench/iserbench
for b in "$isertd" "$iserbench"; do
	[ -x "$b" ] || { echo "build first: meson setup $build && ninja -C $build ($b missing)"; exit 1; }
done
if [ -z "${CEPH_CONF:-}" ]; then
	# memstore keeps the images in the OSD's memory: room for them and the pool's metadata.
	# cluster.sh exits 77 (skipped) when ceph is not installed.
	export CEPH_MEMSTORE_BYTES=$(( (3 * size_mib + 512) * 1048576 ))
	# memstore's default keeps an object as one list of buffers that each small write
	# splits further: 4 KiB random writes (raw librbd alone) fell from 11800 to 2700 per
	# second within 30 s, so the order of the runs decided the result.  In pages
	# (memstore_page_set) they fell by about 40 % over 12 s and then held.  The daemons
	# read CEPH_ARGS.
	export CEPH_ARGS="${CEPH_ARGS:+$CEPH_ARGS }--memstore_page_set=true"
	exec tests/ceph/cluster.sh run -- "$self" "${args[@]}"
fi
command -v rbd >/dev/null || { echo "rbd not found: apt-get install ceph-common"; exit 1; }
pool=${BENCH_RBD_POOL:-rbd}
image=bench-rbd-$$
work=$(mktemp -d /tmp/bench-rbd.XXXXXX)
tgt_ctl=$(( 100 + $$ % 800 ))   # tgtd's control socket /var/run/tgtd/socket.N
pids=() isertd_pid='' tgtd_pid='' images=()
cleanup() {
	if [ -n "$tgtd_pid" ]; then
		# tgtd ignores SIGTERM while it has targets: drop the target (closing the image,
		# so its watch is gone for rbd rm below), ask tgtd to stop, then insist.
		tgtadm -C "$tgt_ctl" --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
		tgtadm -C "$tgt_ctl" --op delete --mode system >/dev/null 2>&1 || true
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		local alive=
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		sleep 0.3
	done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	# Closed by then, so no watcher holds them.
	for img in "${images[@]}"; do rbd rm --no-progress "$pool/$img" >/dev/null 2>&1 || true; done
	if [ -n "${BENCH_RBD_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

read -r port_i port_t <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')"

# Three images of one size, one per client (raw, isertd, tgtd), with rbd's default
# features: each writer takes its image's exclusive lock once and keeps it (on one
# shared image the lock would move at each run's first write, part of no workload).
# Each is written end to end first so that every read is of data the OSD holds.
for who in raw isertd tgtd; do
	img=$image-$who
	rbd create --size "${size_mib}M" ${BENCH_RBD_FEATURES:+--image-feature "$BENCH_RBD_FEATURES"} \
		"$pool/$img" >"$work/create.out" 2>&1 ||
		{ echo "rbd create $pool/$img failed:"; cat "$work/create.out"; exit 1; }
	images+=("$img")
	rbd bench --io-type write --io-size 4M --io-pattern seq --io-threads 16 \
		--io-total "${size_mib}M" "$pool/$img" >"$work/prefill.out" 2>&1 ||
		{ echo "prefill of $pool/$img failed:"; cat "$work/prefill.out"; exit 1; }
done

# The OSD's 4 KiB write rate fell by about 40 % over the first 12 s of writing and then
# held (memstore in pages, one OSD; it looked like the PG logs filling to their cap of
# 10000 entries per PG): 100000 writes first, so that the raw run, always first, does
# not get the early speed.  Not for --smoke, whose rates mean nothing.
if [ $mode != smoke ]; then
	timeout 60 rbd bench --rbd_cache=false --io-type write --io-size 4K --io-pattern rand \
		--io-threads 32 --io-total 400M "$pool/$image-raw" >"$work/warmup.out" 2>&1 || true
fi

# isertd: the rbd backstore as configured by default (write_cache off: rbd_cache off).
iqn_i=iqn.2026-11.org.isert:rbdbench
iqn_t=iqn.2026-11.org.isert:tgtrbdbench
cat >"$work/isertd.json" <<JSON
{ "backstores": [ { "name": "img", "type": "rbd", "pool": "$pool", "image": "$image-isertd",
    "conf": "$CEPH_CONF", "client_id": "admin" } ],
  "targets": [ { "iqn": "$iqn_i", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port_i } ], "luns": [ { "lun": 0, "backstore": "img" } ] } ] } ] }
JSON
isertd_err=
# Its own admin socket and no state directory: nothing shared with another isertd.
"$isertd" --config "$work/isertd.json" --admin-socket "$work/admin.sock" --state-dir none \
	2>"$work/isertd.log" &
pids+=($!); isertd_pid=$!
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port_i") 2>/dev/null && break
	kill -0 "$isertd_pid" 2>/dev/null || break
	sleep 0.2
done
if ! (exec 3<>"/dev/tcp/127.0.0.1/$port_i") 2>/dev/null; then
	isertd_err="isertd did not start: $(tail -n 3 "$work/isertd.log" | tr '\n' ' ')"
	isertd_pid=
fi

# tgtd: bs_rbd reads its cluster from bsopts conf=/id=; CEPH_ARGS (which it parses)
# turns librbd's cache off as isertd has it and rbd bench is told below.
tgt_err=
if ! command -v tgtd >/dev/null; then
	tgt_err="tgtd not found: apt-get install tgt tgt-rbd"
else
	CEPH_ARGS="${CEPH_ARGS:+$CEPH_ARGS }--rbd_cache=false" tgtd -f -C "$tgt_ctl" --iscsi portal=127.0.0.1:"$port_t" >"$work/tgtd.log" 2>&1 &
	pids+=($!); tgtd_pid=$!
	for _ in $(seq 50); do
		tgtadm -C "$tgt_ctl" --op show --mode sys >/dev/null 2>&1 && break
		kill -0 "$tgtd_pid" 2>/dev/null || break
		sleep 0.2
	done
	if ! out=$( { tgtadm -C "$tgt_ctl" --lld iscsi --op new --mode target --tid 1 -T "$iqn_t" &&
		tgtadm -C "$tgt_ctl" --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 \
			--bstype rbd --backing-store "$pool/$image-tgtd" --bsopts "conf=$CEPH_CONF;id=admin" &&
		tgtadm -C "$tgt_ctl" --lld iscsi --op bind --mode target --tid 1 -I ALL; } 2>&1); then
		tgt_err="tgtd with bs_rbd: ${out//$'\n'/ }; tgtd.log: $(grep -E 'bs_rbd|rbd|backing' "$work/tgtd.log" | tail -n 4 | tr '\n' ' ')"
	fi
fi
[ -n "$isertd_err" ] && echo "isertd: not run: $isertd_err"
[ -n "$tgt_err" ] && echo "tgtd: not run: $tgt_err"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)

# raw IOTYPE SIZE PATTERN -> IOPS.  rbd bench runs until interrupted and prints the
# cumulative count each second; the clock starts at its header (starting rbd and
# opening the image took 1 to 3 s here), and the rate is from the end of second 1 to
# the last line (the first second left out, as iserbench's avg_2-N leaves it out).
raw() {
	timeout -s INT -k 5 $((secs + 60)) rbd bench --rbd_cache=false --io-type "$1" --io-size "$2" \
		--io-pattern "$3" --io-threads 32 --io-total 1T "$pool/$image-raw" >"$work/raw.out" 2>&1 &
	local p=$!
	for _ in $(seq 300); do
		grep -q 'SEC' "$work/raw.out" && break
		kill -0 "$p" 2>/dev/null || break
		sleep 0.1
	done
	sleep "$secs.5"
	kill -INT "$p" 2>/dev/null || true   # timeout passes it on to rbd
	wait "$p" || true
	awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ { if (!s0) { s0 = $1; o0 = $2 } s1 = $1; o1 = $2 }
	     END { if (s1 > s0) printf "%d\n", (o1 - o0) / (s1 - s0); else if (s1) printf "%d\n", o1 / s1; else print 0 }' \
		"$work/raw.out"
}

# ib URL XFER RDPCT SEEK -> IOPS: iserbench's avg_2-N (the first interval left out).
ib() {
	cat >"$work/b.parm" <<EOF
sd=sd1,lun=$1,threads=32
wd=wd1,sd=sd1,xfersize=$2,rdpct=$3,seekpct=$4
rd=rd1,wd=wd1,iorate=max,elapsed=$secs,interval=1
EOF
	{ "$iserbench" -f "$work/b.parm" -o "$work/ib" 2>>"$work/iserbench.err" | tee -a "$work/ib.out" || true; } |
		awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) printf "%d\n", $(i + 1) }' | tail -1
}

# line WORKLOAD RUN IOPS BYTES CPU_TICKS|-
line() {
	awk -v w="$1" -v r="$2" -v iops="$3" -v b="$4" -v cpu="$5" -v hz="$hz" -v s="$secs" 'BEGIN {
		us = "-"
		if (cpu != "-" && iops > 0) us = sprintf("%.1f", cpu / hz * 1e6 / (iops * s))
		printf "%-22s %-7s %9d %9.1f %13s\n", w, r, iops, iops * b / 1048576, us }'
}

echo "images $pool/$image-{raw,isertd,tgtd}, ${size_mib} MiB each, prefilled; ${secs} s per run, 32 I/Os outstanding; client: rbd bench (raw), iserbench over iSCSI/TCP on loopback (isertd, tgtd)"
printf '%-22s %-7s %9s %9s %13s\n' "workload" "run" "IOPS" "MiB/s" "target us/IO"
bad=
for wl in "4k-randread:read:rand:4096:100:random" "4k-randwrite:write:rand:4096:0:random" \
	  "1m-seqread:read:seq:1048576:100:seq" "1m-seqwrite:write:seq:1048576:0:seq"; do
	IFS=: read -r name iotype pattern bytes rdpct seek <<<"$wl"
	r=$(raw "$iotype" "$bytes" "$pattern"); r=${r:-0}
	line "$name" raw "$r" "$bytes" -
	[ "$r" -gt 0 ] || echo "rbd bench said: $(grep -v '^ *[0-9]' "$work/raw.out" | tail -n 3 | tr '\n' ' ')"
	i=0
	if [ -n "$isertd_pid" ]; then
		t0=$(cpu_ticks "$isertd_pid")
		i=$(ib "iscsi://127.0.0.1:$port_i/$iqn_i/0" "$bytes" "$rdpct" "$seek"); i=${i:-0}
		line "$name" isertd "$i" "$bytes" $(( $(cpu_ticks "$isertd_pid") - t0 ))
	else
		echo "$(printf '%-22s %-7s' "$name" isertd) not run"
	fi
	t=0
	if [ -z "$tgt_err" ]; then
		t0=$(cpu_ticks "$tgtd_pid")
		t=$(ib "iscsi://127.0.0.1:$port_t/$iqn_t/1" "$bytes" "$rdpct" "$seek"); t=${t:-0}
		line "$name" tgtd "$t" "$bytes" $(( $(cpu_ticks "$tgtd_pid") - t0 ))
	else
		echo "$(printf '%-22s %-7s' "$name" tgtd) not run"
	fi
	awk -v n="$name" -v r="$r" -v i="$i" -v t="$t" 'BEGIN {
		printf "%-22s ratios: isertd/raw %s, isertd/tgtd %s\n", n,
			(r > 0 && i > 0 ? sprintf("%.2fx", i / r) : "-"), (t > 0 && i > 0 ? sprintf("%.2fx", i / t) : "-") }'
	[ "$r" -gt 0 ] && [ "$i" -gt 0 ] || bad=1
done
if [ -s "$work/iserbench.err" ]; then
	echo "iserbench said:"; sort "$work/iserbench.err" | uniq -c | sort -rn | head -n 5
fi
if grep -qiE 'error|fail|timed out' "$work/isertd.log"; then
	echo "isertd's log has errors:"; grep -iE 'error|fail|timed out' "$work/isertd.log" | head -n 5
fi
if [ $mode = smoke ] && grep -q 'built without librbd' "$work/isertd.log"; then
	echo "smoke: skipped, isertd has no rbd backstore"; exit 77
fi
if [ $mode = smoke ] && [ -n "$bad" ]; then
	echo "smoke: a raw or isertd run did no I/O"; exit 1
fi
exit 0
