#!/bin/bash
# QD1 4 KiB latency and isertd CPU per I/O, two isertd builds (or two
# configurations of one) side by side, inside the test guest: the kernel initiator (ib_iser) and fio (libaio,
# direct, 4 KiB random read, then random write, QD1) against a 64 MiB RAM
# LUN (BENCH_LUN=block: the guest's NVMe namespace through the block
# backstore), on Soft-RoCE and on Soft-iWARP (BENCH_PROVS: a subset of "rxe
# siw tcp"; tcp: iSCSI over TCP on 127.0.0.1).  The builds alternate (A B A B ...,
# BENCH_ROUNDS rounds each, one isertd start and login per run) so that load
# on the host hits both alike; every run is printed, then the medians.
#   BENCH_BASE=/path/to/other/build tests/vm/run.sh --build build --timeout 1500 tests/vm/bench-qd1.sh
#   (BENCH_SECS=5 per workload, BENCH_ROUNDS=3, BENCH_POLL=event|adaptive|busy,
#   BENCH_QD=1: another queue depth, e.g. 32 for the cost per I/O under load)
# A is BENCH_BASE's isertd ("base"), B is the --build tree's ("new").  Two
# configurations instead: leave BENCH_BASE out (both run the --build tree)
# and give BENCH_BASE_GLOBAL and/or BENCH_NEW_GLOBAL, members added to each
# one's "global" section, e.g. BENCH_NEW_GLOBAL='"iser_srq": 256'.  Columns:
# fio's completion latency mean and median (us), IOPS, isertd's CPU time
# (utime + stime from /proc/PID/stat) per I/O (us), the whole guest's busy CPU
# per I/O (us: target, initiator and the soft RDMA device).  Not part of the
# test suite.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/bench-lib.sh"
SECS=${BENCH_SECS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
POLL=${BENCH_POLL:-event}
QD=${BENCH_QD:-1}
LUN=${BENCH_LUN:-ram}
case $LUN in
ram) BS='{ "name": "lun", "type": "ram", "size": "64M" }' ;;
block) BS='{ "name": "lun", "type": "block", "path": "'$NVME_DEV'", "write_cache": true }'
	nvme_ready || { vm_log "BENCH_LUN=block: no NVMe namespace"; exit 1; } ;;
*) vm_log "BENCH_LUN must be ram or block, not $LUN"; exit 1 ;;
esac
PROVS=${BENCH_PROVS:-rxe siw}
IQN=iqn.2026-11.org.isert.vm:qd1
RES=$VM_WORK/bench-qd1.txt
: > "$RES"
BENCH_BASE=${BENCH_BASE:-$ISERT_BUILD}
[ -x "$BENCH_BASE/target/isertd" ] || { vm_log "BENCH_BASE must name a build tree with target/isertd"; exit 1; }
vm_cleanup_hook() { bench_logout; isertd_stop >/dev/null 2>&1; }


# run PROVIDER IP VARIANT BUILD ROUND GLOBAL: one isertd of BUILD, both workloads
# (PROVIDER tcp: the kernel initiator over TCP to the 127.0.0.1 portal)
run() {
	local prov=$1 ip=$2 var=$3 build=$4 round=$5 extra=${6:+, $6} dev rw c0 c1 out portal
	portal='{ "ip": "'$ip'", "port": 3260, "iser": true }, '
	[ $prov = tcp ] && portal=
	cat > /tmp/qd1.json <<JSON
{ "backstores": [ $BS ],
  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ $portal{ "ip": "127.0.0.1", "port": 3262 } ],
    "luns": [ { "lun": 0, "backstore": "lun" } ] } ] } ],
  "global": { "reactors": 1, "poll_mode": "$POLL"$extra } }
JSON
	ISERT_BUILD=$build isertd_start /tmp/qd1.json 3262 || return 1
	if [ $prov = tcp ]; then
		dev=$(bench_login $IQN 127.0.0.1:3262 default)
	else
		dev=$(bench_login $IQN $ip:3260 iser)
	fi
	[ -n "$dev" ] || { isertd_stop; return 1; }
	for rw in randread randwrite; do
		c0=$(cpu_mark $ISERTD_PID)
		fio --name=q --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=$QD --rw=$rw --bs=4k \
			--time_based --runtime=$SECS --size=60m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
		c1=$(cpu_mark $ISERTD_PID)
		out=$(python3 - /tmp/fio.json $rw $c0 $c1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))['jobs'][0]
s = j['read' if sys.argv[2] == 'randread' else 'write']
n = max(s['total_ios'], 1)
p0, g0, p1, g1 = (float(x) for x in sys.argv[3:7])
print('%.1f %.1f %d %.1f %.1f' % (s['clat_ns']['mean'] / 1e3, s['clat_ns']['percentile']['50.000000'] / 1e3,
                                  s['iops'], (p1 - p0) * 1e6 / n, (g1 - g0) * 1e6 / n))
PY
		) || out="- - - - -"
		printf '%-4s %-5s %d %-9s %s\n' $prov $var $round $rw "$out" | tee -a "$RES"
	done
	bench_logout
	isertd_stop
}

one() {
	local r
	for r in $(seq $ROUNDS); do
		run $1 $2 base "$BENCH_BASE" $r "${BENCH_BASE_GLOBAL:-}" || vm_log "base on $1 round $r failed"
		run $1 $2 new "$ISERT_BUILD" $r "${BENCH_NEW_GLOBAL:-}" || vm_log "new on $1 round $r failed"
	done
	return 0
}

iscsi_start || exit 1
echo "prov var round workload clat_mean_us clat_p50_us IOPS cpu_us_per_io guest_cpu_us_per_io   (QD$QD 4k, ${SECS}s, poll_mode $POLL, $LUN LUN)"
echo "base: $BENCH_BASE {${BENCH_BASE_GLOBAL:-}}  new: $ISERT_BUILD {${BENCH_NEW_GLOBAL:-}}"
case " $PROVS " in *" tcp "*) one tcp 127.0.0.1 ;; esac
RDMA_PROVIDERS=$(for p in $RDMA_PROVIDERS; do case " $PROVS " in *" $p "*) echo $p ;; esac; done)
[ -z "$RDMA_PROVIDERS" ] || for_each_rdma one
echo "== medians (new / base)"
python3 - "$RES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
res = {}
for prov, var, _, wl, *v in rows:
    if '-' not in v:
        res.setdefault((prov, wl, var), []).append([float(x) for x in v])
for prov, wl in sorted({(k[0], k[1]) for k in res}):
    med = {var: [statistics.median(c) for c in zip(*res[(prov, wl, var)])] for var in ('base', 'new')
           if (prov, wl, var) in res}
    for var, m in med.items():
        print('%-4s %-9s %-4s clat mean %7.1f us  p50 %7.1f us  IOPS %6d  CPU/IO %6.1f us  guest CPU/IO %6.1f us  (%d runs)' %
              (prov, wl, var, m[0], m[1], m[2], m[3], m[4], len(res[(prov, wl, var)])))
    if len(med) == 2:
        b, n = med['base'], med['new']
        print('%-4s %-9s new/base: clat mean %.2fx, p50 %.2fx, IOPS %.2fx, CPU/IO %.2fx, guest CPU/IO %.2fx' %
              (prov, wl, n[0] / b[0], n[1] / b[1], n[2] / max(b[2], 1e-9), n[3] / max(b[3], 1e-9),
               n[4] / max(b[4], 1e-9)))
PY
exit 0
