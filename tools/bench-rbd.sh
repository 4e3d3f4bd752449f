#!/bin/bash
# Side-by-side on Ceph RBD: raw librbd (`rbd bench`), isertd's rbd backstore and
# tgtd's bs_rbd, one after the other, each on its own prefilled image of one size;
# then two isertd gateways serving one image as one target (docs/cluster.md), both
# ALUA groups active/optimized, with the load split over them: "2gw" on an image
# with the feature layering only (no exclusive lock), "2gw-xlock" on one with rbd's
# default features, where librbd's exclusive lock moves between the two writers
# (write workloads only, each run stopped SECONDS + 20 s after its start at most).
# iserbench drives the targets over iSCSI/TCP on loopback (iscsi-perf cannot
# write).  Workloads, all at 32 outstanding I/Os (2gw: 16 through each gateway, each
# on its half of the image): 4 KiB random read and write, 1 MiB sequential read and
# write.  Prints IOPS, MiB/s and the target's CPU time per I/O for each (2gw: both
# gateways'), the ratios isertd/raw, isertd/tgtd, 2gw/isertd and 2gw/raw, and the
# version of the 2gw image's shared reservation state before and after the runs.
# Run as root (tgtd needs it).
#
# usage: tools/bench-rbd.sh [--quick | --smoke] [--build DIR] [SECONDS]
#   SECONDS   per run (default 10; --quick 5; --smoke 2)
#   --quick   5 s runs on 256 MiB images (default: 1 GiB)
#   --smoke   2 s runs on 64 MiB images: proves the script works; exits 1 if the
#             raw, the isertd or the 2gw run of a workload did no I/O (tgtd may be
#             missing, 2gw-xlock is not checked), 77 if ceph is not installed or
#             isertd was built without librbd
#   --build   the build directory with isertd, iserbench and iserctl (default build;
#             without iserctl the state's version is not shown)
# Without CEPH_CONF the script runs itself inside tests/ceph/cluster.sh run (a
# throw-away one-mon, one-memstore-OSD cluster on loopback); with CEPH_CONF it uses
# that cluster's pool $BENCH_RBD_POOL (default rbd) as client.admin and removes the
# images it created and the gateways' objects beside them.  BENCH_RBD_FEATURES=layering
# (say) creates the raw, isertd and tgtd images with those features instead of rbd's
# default; BENCH_RBD_KEEP=1 keeps the work directory.
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
	*) sed -n '/^# usage:/,/^set -e/{/^set -e/d; s/^# \{0,1\}//p}' "$0" >&2; exit 2 ;;
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
iserctl=$build/tools/iserctl/iserctl
for b in "$isertd" "$iserbench"; do
	[ -x "$b" ] || { echo "build first: meson setup $build && ninja -C $build ($b missing)"; exit 1; }
done
whos="raw isertd tgtd 2gw 2gw-xlock"   # the images, one per run
if [ -z "${CEPH_CONF:-}" ]; then
	# memstore keeps the images in the OSD's memory: room for them and the pool's metadata.
	# cluster.sh exits 77 (skipped) when ceph is not installed.
	export CEPH_MEMSTORE_BYTES=$(( ($(wc -w <<<"$whos") * size_mib + 512) * 1048576 ))
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
iqn_i=iqn.2026-11.org.isert:rbdbench
iqn_t=iqn.2026-11.org.isert:tgtrbdbench
# The gateway pairs' targets: the ALUA states and gateways of a target are kept in the
# pool under its name, so a name of this run's own.
iqn_g=iqn.2026-11.org.isert:rbdbench-2gw-$$
iqn_x=iqn.2026-11.org.isert:rbdbench-2gw-xlock-$$
declare -A pid=() ids=()   # isertd's pid by name (isertd, gw1, gw2, xl1, xl2); image ids by run
pids=() tgtd_pid='' images=()
cleanup() {
	if [ -n "$tgtd_pid" ]; then
		# tgtd ignores SIGTERM while it has targets: drop the target (closing the image,
		# so its watch is gone for rbd rm below), ask tgtd to stop, then insist.
		tgtadm -C "$tgt_ctl" --op delete --mode target --tid 1 --force >/dev/null 2>&1 || true
		tgtadm -C "$tgt_ctl" --op delete --mode system >/dev/null 2>&1 || true
	fi
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	local killed=
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		local alive=
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ -z "$alive" ] && break
		sleep 0.3
	done
	for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && killed=1 && kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	# Closed by then, so no watcher holds them; a process killed with -9 (an isertd stuck
	# on the exclusive lock, say) leaves its watch until the OSD drops it
	# (osd_client_watch_timeout): then try again for up to 40 s.
	local tries=1 k
	[ -n "$killed" ] && tries=40
	for img in "${images[@]}"; do
		for ((k = 0; k < tries; k++)); do
			timeout 60 rbd rm --no-progress "$pool/$img" >/dev/null 2>&1 && break
			sleep 1
		done
	done
	# What the gateways keep beside the images and for their targets (docs/cluster.md).
	local objs=()
	for id in "${ids[@]}"; do objs+=("isert_state.$id" "isert_state_sharers.$id"); done
	for t in "$iqn_i" "$iqn_g" "$iqn_x"; do objs+=("isert_alua.$t" "isert_alua_sharers.$t"); done
	for o in "${objs[@]}"; do timeout 30 rados -p "$pool" rm "$o" >/dev/null 2>&1 || true; done
	if [ -n "${BENCH_RBD_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

read -r port_i port_t port_g1 port_g2 port_x1 port_x2 <<<"$(python3 -c '
import socket
ss = [socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')"

# One image of one size per run.  raw, isertd and tgtd with rbd's default features (or
# BENCH_RBD_FEATURES): each writer takes its image's exclusive lock once and keeps it (on
# one shared image the lock would move at each run's first write, part of no workload).
# 2gw with layering only: no exclusive lock, so both gateways write without moving one.
# 2gw-xlock with rbd's default features: the lock moves between the two gateways.
# Each is written end to end first so that every read is of data the OSD holds.
for who in $whos; do
	img=$image-$who
	case $who in
	2gw) features=layering ;;
	2gw-xlock) features= ;;
	*) features=${BENCH_RBD_FEATURES:-} ;;
	esac
	rbd create --size "${size_mib}M" ${features:+--image-feature "$features"} \
		"$pool/$img" >"$work/create.out" 2>&1 ||
		{ echo "rbd create $pool/$img failed:"; cat "$work/create.out"; exit 1; }
	images+=("$img")
	rbd info --format json "$pool/$img" >"$work/info-$who.json" 2>&1 || true
	ids[$who]=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' "$work/info-$who.json" \
		2>/dev/null || true)
	rbd bench --io-type write --io-size 4M --io-pattern seq --io-threads 16 \
		--io-total "${size_mib}M" "$pool/$img" >"$work/prefill.out" 2>&1 ||
		{ echo "prefill of $pool/$img failed:"; cat "$work/prefill.out"; exit 1; }
done
features_of() {
	python3 -c 'import json, sys; print(",".join(json.load(open(sys.argv[1]))["features"]))' "$work/info-$1.json" \
		2>/dev/null || echo '?'
}

# The OSD's 4 KiB write rate fell by about 40 % over the first 12 s of writing and then
# held (memstore in pages, one OSD; it looked like the PG logs filling to their cap of
# 10000 entries per PG): 100000 writes first, so that the raw run, always first, does
# not get the early speed.  Not for --smoke, whose rates mean nothing.
if [ $mode != smoke ]; then
	timeout 60 rbd bench --rbd_cache=false --io-type write --io-size 4K --io-pattern rand \
		--io-threads 32 --io-total 400M "$pool/$image-raw" >"$work/warmup.out" 2>&1 || true
fi

# isertd: the rbd backstore as configured by default (write_cache off: rbd_cache off).
cat >"$work/isertd.json" <<JSON
{ "backstores": [ { "name": "img", "type": "rbd", "pool": "$pool", "image": "$image-isertd",
    "conf": "$CEPH_CONF", "client_id": "admin" } ],
  "targets": [ { "iqn": "$iqn_i", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port_i } ], "luns": [ { "lun": 0, "backstore": "img" } ] } ] } ] }
JSON
# gateway NAME TAG PORT IQN IMAGE: one of the two gateways of target IQN on IMAGE, as
# docs/cluster.md and tests/ceph/test_cluster.py set them up: its portal group tagged
# TAG (1 or 2), ALUA group TAG its own ports and the other group the other gateway's,
# both active/optimized.
gateway() {
	local own='"tpgs": ['$2']' other='"remote_ports": ['$((3 - $2))']' g1 g2
	if [ "$2" = 1 ]; then g1=$own g2=$other; else g1=$other g2=$own; fi
	cat >"$work/$1.json" <<JSON
{ "backstores": [ { "name": "img", "type": "rbd", "pool": "$pool", "image": "$5",
    "conf": "$CEPH_CONF", "client_id": "admin" } ],
  "targets": [ { "iqn": "$4", "tpgs": [ { "tag": $2, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $3 } ], "luns": [ { "lun": 0, "backstore": "img" } ] } ],
    "alua": { "mode": "both", "groups": [
      { "id": 1, "state": "active_optimized", $g1 },
      { "id": 2, "state": "active_optimized", $g2 } ] } } ] }
JSON
}
gateway gw1 1 "$port_g1" "$iqn_g" "$image-2gw"
gateway gw2 2 "$port_g2" "$iqn_g" "$image-2gw"
gateway xl1 1 "$port_x1" "$iqn_x" "$image-2gw-xlock"
gateway xl2 2 "$port_x2" "$iqn_x" "$image-2gw-xlock"

# start NAME: isertd with $work/NAME.json, its own admin socket $work/NAME.sock and no
# state directory (nothing shared with another isertd but what the cluster keeps for
# its rbd LUs), log $work/NAME.log.
start() {
	"$isertd" --config "$work/$1.json" --admin-socket "$work/$1.sock" --state-dir none \
		>>"$work/$1.log" 2>&1 &
	pids+=($!); pid[$1]=$!
}
# started NAME PORT: waits until NAME's portal PORT answers; if it does not (20 s), NAME's
# pid is dropped and err[NAME] says why.
declare -A err=()
started() {
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && break
		kill -0 "${pid[$1]}" 2>/dev/null || break
		sleep 0.2
	done
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
		err[$1]="$1 did not start: $(tail -n 3 "$work/$1.log" | tr '\n' ' ')"
		pid[$1]=
	fi
}
# The first of each pair with the single isertd, then the second ones: a gateway that
# starts checks its ports and target against the gateways serving already.
start isertd; start gw1; start xl1
started isertd "$port_i"; started gw1 "$port_g1"; started xl1 "$port_x1"
if [ -n "${pid[gw1]}" ]; then start gw2; fi
if [ -n "${pid[xl1]}" ]; then start xl2; fi
if [ -n "${pid[gw2]:-}" ]; then started gw2 "$port_g2"; else pid[gw2]=; fi
if [ -n "${pid[xl2]:-}" ]; then started xl2 "$port_x2"; else pid[xl2]=; fi
isertd_err=${err[isertd]:-}
gw_err="${err[gw1]:-}${err[gw2]:-}"
xl_err="${err[xl1]:-}${err[xl2]:-}"

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
[ -n "$gw_err" ] && echo "2gw: not run: $gw_err"
[ -n "$xl_err" ] && echo "2gw-xlock: not run: $xl_err"

cpu_ticks() {
	local t=0 p
	for p; do t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0) )); done
	echo $t
}
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

# ib LIMIT XFER RDPCT SEEK URL... -> IOPS: iserbench's avg_2-N (the first interval left
# out), 32 I/Os outstanding in all.  With several URLs (the LUN of one image through
# each gateway) one wd runs over one sd per URL, each with its share of the 32 and its
# share of the LUN (range=), so that no two gateways write one object at once.
# iserbench is interrupted (SIGINT: it ends the run and still reports) LIMIT s after its
# start and killed 10 s later; $work/ib.rc then says 124 or 137.
ib() {
	local limit=$1 xfer=$2 rdpct=$3 seek=$4 n k=0 sds=
	shift 4
	n=$#
	: >"$work/b.parm"
	for url; do
		k=$((k + 1))
		if [ "$n" -eq 1 ]; then
			echo "sd=sd1,lun=$url,threads=32"
		else
			echo "sd=sd$k,lun=$url,threads=$((32 / n)),range=($(( (k - 1) * 100 / n )),$(( k * 100 / n )))"
		fi >>"$work/b.parm"
		sds=${sds:+$sds,}sd$k
	done
	[ "$n" -gt 1 ] && sds="($sds)"
	cat >>"$work/b.parm" <<EOF
wd=wd1,sd=$sds,xfersize=$xfer,rdpct=$rdpct,seekpct=$seek
rd=rd1,wd=wd1,iorate=max,elapsed=$secs,interval=1
EOF
	{ timeout -s INT -k 10 "$limit" "$iserbench" -f "$work/b.parm" -o "$work/ib" 2>>"$work/iserbench.err"
	  echo $? >"$work/ib.rc"; } | tee -a "$work/ib.out" |
		awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) printf "%d\n", $(i + 1) }' | tail -1
}

# line WORKLOAD RUN IOPS BYTES CPU_TICKS|- [NOTE]
line() {
	awk -v w="$1" -v r="$2" -v iops="$3" -v b="$4" -v cpu="$5" -v hz="$hz" -v s="$secs" -v note="${6:-}" 'BEGIN {
		us = "-"
		if (cpu != "-" && iops > 0) us = sprintf("%.1f", cpu / hz * 1e6 / (iops * s))
		printf "%-22s %-9s %9d %9.1f %13s%s\n", w, r, iops, iops * b / 1048576, us, note ? "  " note : "" }'
}
notrun() { echo "$(printf '%-22s %-9s' "$1" "$2") not run"; }

# shared SOCKET -> "OBJECT VERSION ALUA-OBJECT ALUA-VERSION": the 2gw image's reservation
# state object and the target's ALUA state object and their versions (each the RADOS
# object's version) as the gateway with admin socket SOCKET has them (iserctl cluster).
shared() {
	[ -x "$iserctl" ] || { echo "- - - -"; return; }
	timeout 30 "$iserctl" -s "$1" --json cluster 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
out = []
for key in ("reservations", "alua"):
    o = (d.get(key) or [{}])[0]
    out += [o.get("object", "-"), str(o.get("version", "-"))]
print(*out)' 2>/dev/null || echo "- - - -"
}
# shared_line WHEN: the 2gw image's shared state as both gateways report it, and the
# modification time of its reservation state object in RADOS (rados stat); $state the lot.
shared_line() {
	local o1 v1 a1 av1 o2 v2 a2 av2 mtime
	read -r o1 v1 a1 av1 <<<"$(shared "$work/gw1.sock")"
	read -r o2 v2 a2 av2 <<<"$(shared "$work/gw2.sock")"
	mtime=$(timeout 30 rados -p "$pool" stat "isert_state.${ids[2gw]:-}" 2>&1 | sed 's/.* mtime //; s/, size.*//')
	if [ "$v1" = - ]; then
		echo "2gw shared state $1: $pool/isert_state.${ids[2gw]:-} mtime $mtime (version not shown: no $iserctl)"
	else
		echo "2gw shared state $1: reservations $o1 version $v1 (gateway 1), $v2 (gateway 2), mtime $mtime; ALUA states $a1 version $av1 (gateway 1), $av2 (gateway 2)"
	fi
	state="$v1 $v2 $av1 $av2 $mtime"
}

echo "images $pool/$image-{raw,isertd,tgtd}, ${size_mib} MiB each, prefilled; ${secs} s per run, 32 I/Os outstanding; client: rbd bench (raw), iserbench over iSCSI/TCP on loopback (the others)"
echo "2gw: two isertd serving $pool/$image-2gw (features $(features_of 2gw)) as one target, portal groups 1 and 2, both ALUA groups active/optimized; iserbench 16 I/Os through each gateway, each on its half of the LUN; target CPU: both gateways'"
echo "2gw-xlock: the same on $pool/$image-2gw-xlock (features $(features_of 2gw-xlock)); write workloads only, each run stopped $((secs + 20)) s after its start at most"
state_before= state_after=
if [ -z "$gw_err" ]; then
	shared_line "before the runs"; state_before=$state
fi
printf '%-22s %-9s %9s %9s %13s\n' "workload" "run" "IOPS" "MiB/s" "target us/IO"
bad=
for wl in "4k-randread:read:rand:4096:100:random" "4k-randwrite:write:rand:4096:0:random" \
	  "1m-seqread:read:seq:1048576:100:seq" "1m-seqwrite:write:seq:1048576:0:seq"; do
	IFS=: read -r name iotype pattern bytes rdpct seek <<<"$wl"
	r=$(raw "$iotype" "$bytes" "$pattern"); r=${r:-0}
	line "$name" raw "$r" "$bytes" -
	[ "$r" -gt 0 ] || echo "rbd bench said: $(grep -v '^ *[0-9]' "$work/raw.out" | tail -n 3 | tr '\n' ' ')"
	i=0
	if [ -n "${pid[isertd]}" ]; then
		t0=$(cpu_ticks "${pid[isertd]}")
		i=$(ib $((secs + 60)) "$bytes" "$rdpct" "$seek" "iscsi://127.0.0.1:$port_i/$iqn_i/0"); i=${i:-0}
		line "$name" isertd "$i" "$bytes" $(( $(cpu_ticks "${pid[isertd]}") - t0 ))
	else
		notrun "$name" isertd
	fi
	t=0
	if [ -z "$tgt_err" ]; then
		t0=$(cpu_ticks "$tgtd_pid")
		t=$(ib $((secs + 60)) "$bytes" "$rdpct" "$seek" "iscsi://127.0.0.1:$port_t/$iqn_t/1"); t=${t:-0}
		line "$name" tgtd "$t" "$bytes" $(( $(cpu_ticks "$tgtd_pid") - t0 ))
	else
		notrun "$name" tgtd
	fi
	g=0
	if [ -z "$gw_err" ]; then
		t0=$(cpu_ticks "${pid[gw1]}" "${pid[gw2]}")
		g=$(ib $((secs + 60)) "$bytes" "$rdpct" "$seek" "iscsi://127.0.0.1:$port_g1/$iqn_g/0" \
			"iscsi://127.0.0.1:$port_g2/$iqn_g/0"); g=${g:-0}
		line "$name" 2gw "$g" "$bytes" $(( $(cpu_ticks "${pid[gw1]}" "${pid[gw2]}") - t0 ))
	else
		notrun "$name" 2gw
	fi
	x=0
	if [ "$iotype" = write ] && [ -z "$xl_err" ]; then
		t0=$(cpu_ticks "${pid[xl1]}" "${pid[xl2]}")
		x=$(ib $((secs + 20)) "$bytes" "$rdpct" "$seek" "iscsi://127.0.0.1:$port_x1/$iqn_x/0" \
			"iscsi://127.0.0.1:$port_x2/$iqn_x/0"); x=${x:-0}
		note=
		case $(cat "$work/ib.rc" 2>/dev/null) in
		124) note="(stopped after $((secs + 20)) s)" ;;
		137) note="(killed after $((secs + 30)) s)" ;;
		esac
		line "$name" 2gw-xlock "$x" "$bytes" $(( $(cpu_ticks "${pid[xl1]}" "${pid[xl2]}") - t0 )) "$note"
	elif [ "$iotype" = write ]; then
		notrun "$name" 2gw-xlock
	fi
	awk -v n="$name" -v r="$r" -v i="$i" -v t="$t" -v g="$g" -v x="$x" -v w="$iotype" 'BEGIN {
		printf "%-22s ratios: isertd/raw %s, isertd/tgtd %s, 2gw/isertd %s, 2gw/raw %s%s\n", n,
			(r > 0 && i > 0 ? sprintf("%.2fx", i / r) : "-"), (t > 0 && i > 0 ? sprintf("%.2fx", i / t) : "-"),
			(i > 0 && g > 0 ? sprintf("%.2fx", g / i) : "-"), (r > 0 && g > 0 ? sprintf("%.2fx", g / r) : "-"),
			(w == "write" ? ", 2gw-xlock/2gw " (g > 0 && x > 0 ? sprintf("%.2fx", x / g) : "-") : "") }'
	[ "$r" -gt 0 ] && [ "$i" -gt 0 ] && [ "$g" -gt 0 ] || bad=1
done
if [ -z "$gw_err" ]; then
	shared_line "after the runs"; state_after=$state
	if [ "$state_before" = "$state_after" ]; then
		echo "2gw shared state: unchanged by the runs (no reservation or ALUA state was written during the I/O)"
	else
		echo "2gw shared state: changed during the runs"
	fi
fi
if [ -s "$work/iserbench.err" ]; then
	echo "iserbench said:"; sort "$work/iserbench.err" | uniq -c | sort -rn | head -n 5
fi
for n in isertd gw1 gw2 xl1 xl2; do
	if grep -qiE 'error|fail|timed out|fenced' "$work/$n.log" 2>/dev/null; then
		echo "$n's log ($n.log) has errors:"; grep -iE 'error|fail|timed out|fenced' "$work/$n.log" | head -n 5
	fi
done
if [ $mode = smoke ] && grep -q 'built without librbd' "$work/isertd.log"; then
	echo "smoke: skipped, isertd has no rbd backstore"; exit 77
fi
if [ $mode = smoke ] && [ -n "$bad" ]; then
	echo "smoke: a raw, isertd or 2gw run did no I/O"; exit 1
fi
exit 0
