#!/bin/bash
# Side-by-side iSER benchmark inside the test guest: isertd, tgtd --iser and
# LIO (ib_isert, rxe only: LIO cannot listen on siw next to its TCP portal)
# serve the same kind of 256 MiB RAM LUN; the kernel initiator (ib_iser) and
# fio drive each with 4 KiB random reads at QD16 and 128 KiB sequential reads.
# Prints IOPS, MiB/s, the target's CPU seconds (process CPU for isertd and
# tgtd; LIO runs in kernel threads and has none), the guest's whole busy CPU
# seconds (target, initiator and the soft RDMA device: the one column that
# compares all three) and ratios.  BENCH_INITIATOR=iserbench drives the
# targets with our initiator library (iserbench over iser://, 16 threads)
# instead of the kernel initiator and fio.  Not part of the test suite:
#   tests/vm/run.sh --timeout 1500 tests/vm/bench-iser.sh
#   (BENCH_SECS=15, BENCH_INITIATOR=kernel|iserbench)
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/lio.sh"
source "$(dirname "$VM_LIB")/bench-lib.sh"
SECS=${BENCH_SECS:-15}
INIT=${BENCH_INITIATOR:-kernel}
IQN=iqn.2026-11.org.isert.vm:bench
RES=$VM_WORK/bench-results.txt
: > "$RES"

# row NAME LABEL IOPS MIBS MARK0 MARK1: one result line
row() {
	local p0 g0 p1 g1
	read -r p0 g0 <<< "$5"; read -r p1 g1 <<< "$6"
	printf '%-8s %-22s %-14s %9s %9s %10s %11s\n' "$PROV" "$1" "$2" "$3" "$4" \
		"$([ "$p0" = - ] && echo - || awk -v a=$p0 -v b=$p1 'BEGIN{printf "%.2f", b-a}')" \
		"$(awk -v a=$g0 -v b=$g1 'BEGIN{printf "%.2f", b-a}')" | tee -a "$RES"
}

# run_fio NAME DEV PID: two workloads through the kernel initiator
run_fio() {
	local name=$1 dev=$2 pid=$3 wl bs rw m0 m1 iops bw
	for wl in 4k-randread:4k:randread 128k-seqread:128k:read; do
		IFS=: read -r label bs rw <<< "$wl"
		m0=$(cpu_mark "$pid")
		fio --name=b --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=16 --rw=$rw --bs=$bs \
			--time_based --runtime=$SECS --size=200m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
		m1=$(cpu_mark "$pid")
		read -r iops bw <<< "$(fio_read_result /tmp/fio.json)"
		row "$name" $label $iops $bw "$m0" "$m1"
	done
}

# run_iserbench NAME URL PID: the same two workloads through our initiator library
run_iserbench() {
	local name=$1 url=$2 pid=$3 wl bs seek m0 m1 avg
	for wl in 4k-randread:4k:random 128k-seqread:128k:seq; do
		IFS=: read -r label bs seek <<< "$wl"
		printf 'sd=sd1,lun=%s,threads=16\nwd=wd1,sd=sd1,xfersize=%s,rdpct=100,seekpct=%s\nrd=rd1,wd=wd1,iorate=max,elapsed=%s,interval=1\n' \
			"$url" $bs $seek $SECS > /tmp/bench.parm
		m0=$(cpu_mark "$pid")
		"$ISERT_BUILD/tools/iserbench/iserbench" -f /tmp/bench.parm -o /tmp/ibout -i $ISCSI_INITIATOR > /tmp/ib.txt 2>&1
		m1=$(cpu_mark "$pid")
		avg=$(awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) { printf "%d %s", $(i + 1), $(i + 2); exit } }' /tmp/ib.txt)
		[ -n "$avg" ] || { tail -3 /tmp/ib.txt; return 1; }
		read -r iops bw <<< "$avg"
		row "$name" $label $iops $bw "$m0" "$m1"
	done
}

# load NAME PORTAL_IP LUN PID: one target's measurements with the chosen initiator
load() {
	if [ "$INIT" = iserbench ]; then
		run_iserbench "$1" "iser://$2/$IQN/$3" "$4"
		return
	fi
	local dev; dev=$(login_dev $2:3260) || return 1
	run_fio "$1" "$dev" "$4"
	logout_all
}

login_dev() {   # login_dev PORTAL: log in over iser to $IQN, print the disk
	iscsiadm -m discovery -t sendtargets -p $1 -I iser >/dev/null &&
		iscsiadm -m node -T $IQN -p $1 -I iser --login >/dev/null && iscsi_wait_disks $IQN 1 &&
		iscsi_disks $IQN | awk '{print $2; exit}'
}
logout_all() { iscsiadm -m node --logoutall=all >/dev/null 2>&1; iscsiadm -m node -o delete >/dev/null 2>&1; }

bench_isertd() {
	cat > /tmp/bench.json <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "256M" } ],
  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "$1", "port": 3260, "iser": true }, { "ip": "127.0.0.1", "port": 3262 } ],
    "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ],
  "global": { "reactors": 1 } }
JSON
	isertd_start /tmp/bench.json 3262 || return 1
	load isertd $1 0 $ISERTD_PID
	isertd_stop
}

bench_tgtd() {
	truncate -s 256M /dev/shm/tgt.img
	tgtd --iser pool_sz_mb=64 -f >"$VM_WORK/tgtd.log" 2>&1 &
	local pid=$! T="tgtadm --lld iser"
	wait_for 10 $T --op show --mode target || return 1
	$T --op new --mode target --tid 1 -T $IQN && $T --op new --mode logicalunit --tid 1 --lun 1 -b /dev/shm/tgt.img &&
		$T --op bind --mode target --tid 1 -I ALL && $T --op bind --mode target --tid 1 -Q $ISCSI_INITIATOR || return 1
	load "tgtd --iser" $1 1 $pid
	tgtd_stop $pid
	rm -f /dev/shm/tgt.img
}

bench_lio() {
	lio_ram bench 256 && mkdir -p $LIO/iscsi/$IQN/tpgt_1/np/$1:3260 &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/np/$1:3260/iser &&
		mkdir -p $LIO/iscsi/$IQN/tpgt_1/lun/lun_0 && ln -s $LIO/core/rd_mcp_0/bench $LIO/iscsi/$IQN/tpgt_1/lun/lun_0/bench &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/attrib/generate_node_acls && echo 1 > $LIO/iscsi/$IQN/tpgt_1/attrib/cache_dynamic_acls &&
		echo 0 > $LIO/iscsi/$IQN/tpgt_1/attrib/authentication && echo 0 > $LIO/iscsi/$IQN/tpgt_1/attrib/demo_mode_write_protect &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/enable || return 1
	load LIO $1 0 ""
}

one() {
	PROV=$1
	bench_isertd $2 || vm_log "isertd on $1 failed"
	bench_tgtd $2 || vm_log "tgtd on $1 failed"
	# LIO serves iSER on rxe only (on siw its TCP listener takes the port).
	[ "$1" = rxe ] && { bench_lio $2 || vm_log "LIO on $1 failed"; }
	return 0
}

iscsi_start || exit 1
printf '%-8s %-22s %-14s %9s %9s %10s %11s\n' provider target workload IOPS MiB/s "CPU s" "guest CPU s" | tee -a "$RES"
for_each_rdma one
echo "== ratios (isertd / other, IOPS)"
python3 - "$RES" <<'PY'
import sys, re
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith('provider')]
res = {}
for r in rows:
    prov, wl, iops, cpu, gcpu = r[0], r[-5], int(r[-4]), r[-2], float(r[-1])
    name = ' '.join(r[1:-5])
    res[(prov, name.split()[0], wl)] = (iops, None if cpu == '-' else float(cpu), gcpu)
per = lambda n, s: n / max(s, 0.01)
for (prov, name, wl), (iops, cpu, gcpu) in sorted(res.items()):
    mine = res.get((prov, 'isertd', wl))
    if name == 'isertd' or not mine:
        continue
    line = f"{prov} {wl}: isertd/{name} IOPS {mine[0] / max(iops, 1):.2f}x"
    if cpu is not None:
        line += f", per target CPU-second {per(mine[0], mine[1]) / per(iops, cpu):.2f}x"
    line += f", per guest CPU-second {per(mine[0], mine[2]) / per(iops, gcpu):.2f}x"
    print(line)
PY
exit 0
