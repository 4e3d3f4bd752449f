#!/bin/bash
# The guest section of tools/bench/bench.py, run in the test guest by
# tests/vm/run.sh: over iSER on rxe and siw, with the kernel initiator
# (ib_iser) and fio, isertd next to LIO and tgtd --iser on the same storage:
#   NVMe  isertd-block (/dev/nvme0n1), isertd-nvme (passthrough, /dev/ng0n1),
#         lio-iblock (/dev/nvme0n1), tgtd-block (rdwr, O_DIRECT, /dev/nvme0n1)
#   RAM   isertd-ram (preallocate: allocated at start, as rd_mcp is), lio-ram (rd_mcp),
#         tgtd-ram (rdwr on a tmpfs file); isertd-lazyram (not preallocated: memory
#         where written, iSER reads copied into a pool buffer; not in the default set)
# LIO serves iSER on rxe only (on siw its TCP listener takes the port).
# One JSON line per run in $VM_WORK/bench.jsonl: IOPS, MiB/s, fio's mean
# latency, the target process's CPU per I/O (none for LIO: kernel threads)
# and the whole guest's busy CPU per I/O (target, initiator and the soft RDMA
# device: the one figure that compares all three).
# BENCH_SECS (5), BENCH_ROUNDS (3), BENCH_QUICK (1: rxe, NVMe targets but
# passthrough, 4 KiB random reads only), BENCH_REACTORS (1) and
# BENCH_POLL_MODE (event) for isertd, BENCH_TARGETS (a subset of the names
# above; isertd-KIND-MODE runs that isertd in poll mode MODE: event,
# adaptive or busy; adaptiveN: adaptive with global.adaptive_spin_us N), BENCH_PROVS (rxe siw; tcp: the kernel initiator over
# iSCSI/TCP on 127.0.0.1, every target beside the others as over iSER),
# BENCH_WORKLOADS (a subset of the workload names, e.g. "4k-randread-qd1"),
# BENCH_MODE_WORKLOADS (the workloads an isertd-KIND-MODE target runs, e.g.
# "4k-randread-qd1": the poll modes compared at QD1 in a run that keeps the
# other workloads for event mode and the peers; default: all of them).
# BENCH_COST=1: in round 1, each workload once more on the targets that have
# a process (isertd, tgtd) under strace -f -y: system calls per I/O by kind
# (tools/bench/syscalls.py, which says why not perf trace here), one "cost"
# JSON line each.
# BENCH_PERF=1: a system-wide perf profile of each run (cpu-clock, the guest
# has no PMU) in $VM_WORK/perf/, PROV-TARGET-WORKLOAD-rROUND.txt: where the
# guest's CPU went by command and by symbol.  Sampling slows TCG down: the
# figures of a profiled run are not comparable with unprofiled ones.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/lio.sh"
source "$(dirname "$VM_LIB")/bench-lib.sh"
SECS=${BENCH_SECS:-5} ROUNDS=${BENCH_ROUNDS:-3}
IQN=iqn.2026-11.org.isert.vm:bench
OUT=$VM_WORK/bench.jsonl
: > "$OUT"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	PROVS=rxe TARGETS="isertd-block lio-iblock tgtd-block"
	WLS="4k-randread-qd1:4k:randread:1 4k-randread-qd32:4k:randread:32"
else
	PROVS="rxe siw" TARGETS="isertd-block isertd-nvme lio-iblock tgtd-block isertd-ram lio-ram tgtd-ram"
	WLS="4k-randread-qd1:4k:randread:1 4k-randread-qd32:4k:randread:32 4k-randwrite-qd32:4k:randwrite:32 128k-seqread-qd8:128k:read:8"
fi
TARGETS=${BENCH_TARGETS:-$TARGETS} PROVS=${BENCH_PROVS:-$PROVS}
if [ -n "${BENCH_WORKLOADS:-}" ]; then
	pick=
	for wl in $WLS; do
		case " $BENCH_WORKLOADS " in *" ${wl%%:*} "*) pick="$pick $wl" ;; esac
	done
	[ -n "$pick" ] || { vm_log "BENCH_WORKLOADS names none of: $(for wl in $WLS; do printf '%s ' "${wl%%:*}"; done)"; exit 1; }
	WLS=$pick
fi
TGTD_PID=
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	isertd_stop >/dev/null 2>&1
	[ -n "$TGTD_PID" ] && tgtd_stop $TGTD_PID
	lio_clear
	return 0
}

# lio_clear: every LIO target and storage object gone, so the NVMe namespace is free again.
lio_clear() {
	local t d
	for t in $LIO/iscsi/iqn.*/tpgt_1; do
		[ -d "$t" ] || continue
		echo 0 > $t/enable 2>/dev/null
		for d in $t/np/*; do [ -d "$d" ] && { echo 0 > $d/iser 2>/dev/null; rmdir $d; }; done
		for d in $t/lun/lun_*; do [ -d "$d" ] && { find $d -maxdepth 1 -type l -delete; rmdir $d; }; done
		rmdir $t ${t%/tpgt_1}
	done
	for d in $LIO/core/*_[0-9]*/*/; do [ -d "$d" ] && rmdir "$d"; done
	for d in $LIO/core/*_[0-9]*/; do [ -d "$d" ] && rmdir "$d"; done
	return 0
}

# start_TARGET IP: serve LUN $LUN of $IQN on IP:3260 over iSER; PID is the process (empty for LIO).
start_isertd() {   # start_isertd KIND[-MODE] IP
	local bs mode=${BENCH_POLL_MODE:-event} portal spin=
	case $1 in *-*) mode=${1#*-}; set -- "${1%%-*}" "$2";; esac
	case $mode in adaptive[0-9]*) spin=', "adaptive_spin_us": '${mode#adaptive}; mode=adaptive;; esac
	# Over iSER the TCP portal on :3262 is only the readiness probe's.
	portal='{ "ip": "'$2'", "port": 3260, "iser": true }, { "ip": "127.0.0.1", "port": 3262 }'
	[ "$PROV" = tcp ] && portal='{ "ip": "127.0.0.1", "port": 3262 }'
	case $1 in
	block) bs='{ "name": "lun", "type": "block", "path": "'$NVME_DEV'", "write_cache": true }';;
	nvme) bs='{ "name": "lun", "type": "nvme", "path": "/dev/ng0n1", "write_cache": true }';;
	ram) bs='{ "name": "lun", "type": "ram", "size": "256M", "preallocate": true }';;
	lazyram) bs='{ "name": "lun", "type": "ram", "size": "256M" }';;
	esac
	cat > /tmp/bench.json <<JSON
{ "backstores": [ $bs ],
  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ $portal ],
    "luns": [ { "lun": 0, "backstore": "lun" } ] } ] } ],
  "global": { "reactors": ${BENCH_REACTORS:-1}, "poll_mode": "$mode"$spin } }
JSON
	isertd_start /tmp/bench.json 3262 || return 1
	PID=$ISERTD_PID LUN=0 PORTAL=$2:3260
	[ "$PROV" = tcp ] && PORTAL=127.0.0.1:3262
	return 0
}
start_lio() {   # start_lio KIND IP
	local so t=$LIO/iscsi/$IQN/tpgt_1
	case $1 in
	iblock) lio_iblock bench $NVME_DEV && so=iblock_0/bench;;
	ram) lio_ram bench 256 && so=rd_mcp_0/bench;;
	esac || return 1
	mkdir -p $t/np/$2:3260 && { [ "$PROV" = tcp ] || echo 1 > $t/np/$2:3260/iser; } && mkdir -p $t/lun/lun_0 &&
		ln -s $LIO/core/$so $t/lun/lun_0/bench &&
		echo 1 > $t/attrib/generate_node_acls && echo 1 > $t/attrib/cache_dynamic_acls &&
		echo 0 > $t/attrib/authentication && echo 0 > $t/attrib/demo_mode_write_protect &&
		echo 1 > $t/enable || return 1
	PID= LUN=0 PORTAL=$2:3260
}
start_tgtd() {   # start_tgtd KIND IP
	local T="tgtadm --lld iser" dev=$NVME_DEV flags="--bsoflags direct" iser="--iser pool_sz_mb=64"
	[ $1 = ram ] && { truncate -s 256M /dev/shm/tgt.img; dev=/dev/shm/tgt.img; flags=; }
	[ "$PROV" = tcp ] && { T="tgtadm --lld iscsi"; iser=; }
	# Its TCP listener off :3260: iWARP shares TCP's port space, and on siw
	# the iSER listen on :3260 fails while tgtd's TCP portal holds it.
	tgtd --iscsi portal=127.0.0.1:3263 $iser -f >> "$VM_WORK/tgtd.log" 2>&1 &
	TGTD_PID=$! PORTAL=$2:3260
	[ "$PROV" = tcp ] && PORTAL=127.0.0.1:3263
	wait_for 10 $T --op show --mode target || return 1
	$T --op new --mode target --tid 1 -T $IQN && $T --op new --mode logicalunit --tid 1 --lun 1 -b $dev $flags &&
		$T --op bind --mode target --tid 1 -I ALL && $T --op bind --mode target --tid 1 -Q $ISCSI_INITIATOR || return 1
	PID=$TGTD_PID LUN=1
}
stop_target() {
	case $1 in
	isertd-*) isertd_stop;;
	lio-*) lio_clear;;
	tgtd-*) tgtd_stop $TGTD_PID; TGTD_PID=; rm -f /dev/shm/tgt.img;;
	esac
}

# perf_start / perf_report BASE: a profile of the whole guest while fio runs,
# reported by command, then by command, shared object and symbol.
PERF_PID=
perf_start() {
	mkdir -p "$VM_WORK/perf"
	perf record -a -g -e cpu-clock -F 499 -o /tmp/perf.data > /tmp/perf.log 2>&1 &
	PERF_PID=$!
}
perf_report() {
	kill -INT $PERF_PID 2>/dev/null; wait $PERF_PID; PERF_PID=
	{
		echo "# $(basename "$1"): perf record -a -g -e cpu-clock -F 499 while fio ran"
		perf report -i /tmp/perf.data --stdio --no-children --sort comm --percent-limit 1 -g none 2>/dev/null | grep -v '^$'
		perf report -i /tmp/perf.data --stdio --no-children --sort comm,dso,sym --percent-limit 0.7 -g none 2>/dev/null | grep -v '^$'
	} > "$1.txt"
	rm -f /tmp/perf.data
}

# measure PROV TARGET ROUND DEV: every workload on DEV, one JSON line each
measure() {
	local wl name bs rw qd m0 m1
	for wl in $WLS; do
		IFS=: read -r name bs rw qd <<< "$wl"
		case "$2:${BENCH_MODE_WORKLOADS:-}" in
		isertd-*-*:?*) case " $BENCH_MODE_WORKLOADS " in *" $name "*) ;; *) continue;; esac;;
		esac
		m0=$(cpu_mark "$PID")
		[ "${BENCH_PERF:-0}" = 1 ] && perf_start
		fio --name=b --filename=/dev/$4 --direct=1 --ioengine=libaio --iodepth=$qd --rw=$rw --bs=$bs \
			--time_based --runtime=$SECS --size=200m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null ||
			{ vm_log "fio $name on $2 failed"; [ -z "$PERF_PID" ] || kill -INT $PERF_PID; return 1; }
		m1=$(cpu_mark "$PID")
		[ "${BENCH_PERF:-0}" = 1 ] && perf_report "$VM_WORK/perf/$1-$2-$name-r$3"
		python3 - "$1" "$2" "$name" "$3" "$m0" "$m1" /tmp/fio.json >> "$OUT" <<'PY' || return 1
import json, sys
prov, target, wl, rnd, m0, m1, f = sys.argv[1:]
j = json.load(open(f))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
ios = d["total_ios"]
p0, g0 = m0.split(); p1, g1 = m1.split()
print(json.dumps({"section": "guest", "prov": prov, "target": target, "workload": wl, "round": int(rnd),
    "iops": d["iops"], "mib_s": d["bw_bytes"] / 1048576, "lat_us": d["lat_ns"]["mean"] / 1000,
    "cpu_us_per_io": None if p0 == "-" else (float(p1) - float(p0)) * 1e6 / max(ios, 1),
    "guest_cpu_us_per_io": (float(g1) - float(g0)) * 1e6 / max(ios, 1)}))
PY
		tail -1 "$OUT"
		if [ "${BENCH_COST:-0}" = 1 ] && [ "$3" = 1 ] && [ -n "$PID" ]; then
			cost "$@" "$name" "$bs" "$rw" "$qd" || return 1
		fi
	done
}

# cost PROV TARGET ROUND DEV NAME BS RW QD: the workload once more under
# strace on every thread of the target's process; one "cost" JSON line.
cost() {
	strace -f -qq -y -o /tmp/trace.txt -p "$PID" 2> /tmp/trace.err &
	local tp=$!
	sleep 1
	fio --name=b --filename=/dev/$4 --direct=1 --ioengine=libaio --iodepth=$8 --rw=$7 --bs=$6 \
		--time_based --runtime=$SECS --size=200m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
	local rc=$?
	kill -INT $tp 2>/dev/null; wait $tp
	[ $rc = 0 ] || { vm_log "fio $5 on $2 (traced) failed"; return 1; }
	python3 - "$1" "$2" "$5" /tmp/fio.json /tmp/trace.txt /tmp/trace.err >> "$OUT" <<'PY' || return 1
import json, sys
sys.path.insert(0, __import__("os").environ["ISERT_SRC"] + "/tools/bench")
import syscalls
prov, target, wl, f, trace, err = sys.argv[1:]
j = json.load(open(f))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
kinds, names = syscalls.parse(open(trace, errors="replace"), "strace")
complaints = [x.strip() for x in open(err) if x.strip()]
if not ios or not sum(kinds.values()):
    sys.exit(f"cost {prov} {target} {wl}: {ios} I/Os, {sum(kinds.values())} calls seen: {complaints}")
print(json.dumps(syscalls.entry(prov, target, wl, ios, kinds, names, complaints)))
PY
	tail -1 "$OUT"
}

one() {   # one PROV IP ROUND TARGET
	local dev kind=${4#*-} rc=0 iface=iser PROV=$1
	[ $1 = siw ] && [ "${4%%-*}" = lio ] && return 0
	[ $1 = tcp ] && iface=default
	start_${4%%-*} $kind $2 || { vm_log "$4 on $1: did not start"; stop_target $4; return 1; }
	dev=$(bench_login $IQN $PORTAL $iface $LUN) && [ -n "$dev" ] || { vm_log "$4 on $1: no disk"; bench_logout; stop_target $4; return 1; }
	# The 200 MiB the workloads touch, written once: reads of a RAM LU's untouched
	# pages would all come from the one zero page, and of the NVMe image's holes.
	fio --name=fill --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=8 --rw=write --bs=1m \
		--size=200m --eta=never > /dev/null 2>&1 || { vm_log "$4 on $1: the fill failed"; rc=1; }
	measure $1 $4 $3 $dev || rc=1
	bench_logout
	stop_target $4
	return $rc
}

round() {   # round PROV IP ROUND: every target, a different one first each round
	local t n=0 list=($TARGETS) rc=0 i
	for ((i = 0; i < ${#list[@]}; i++)); do
		t=${list[$(( (i + $3 - 1) % ${#list[@]} ))]}
		one $1 $2 $3 $t || rc=1
	done
	return $rc
}

nvme_ready || { vm_log "no NVMe namespace"; exit 1; }
iscsi_start || exit 1
RDMA_PROVIDERS=$(echo " $PROVS " | sed 's/ tcp / /')
rc=0
for r in $(seq $ROUNDS); do
	vm_log "== round $r/$ROUNDS"
	case " $PROVS " in *" tcp "*) round tcp 127.0.0.1 $r || rc=1;; esac
	[ -z "${RDMA_PROVIDERS// /}" ] || for_each_rdma round $r || rc=1
done
exit $rc
