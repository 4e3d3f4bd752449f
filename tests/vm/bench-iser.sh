#!/bin/bash
# Side-by-side iSER benchmark inside the test guest: isertd, tgtd --iser and
# LIO (ib_isert, rxe only: LIO cannot listen on siw next to its TCP portal)
# serve the same kind of 256 MiB RAM LUN; the kernel initiator (ib_iser) and
# fio drive each with 4 KiB random reads at QD16 and 128 KiB sequential reads.
# Prints IOPS, MiB/s, the target's CPU seconds (process CPU for isertd and
# tgtd; LIO runs in kernel threads, so its column is the guest's whole busy
# time, initiator included) and ratios.  Not part of the test suite:
#   tests/vm/run.sh --timeout 1500 tests/vm/bench-iser.sh      (BENCH_SECS=15, BENCH_LIO=1)
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/lio.sh"
SECS=${BENCH_SECS:-15}
IQN=iqn.2026-11.org.isert.vm:bench
RES=$VM_WORK/bench-results.txt
: > "$RES"

proc_cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' /proc/$1/stat; }
busy_cpu() { awk '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat; }

# run_fio NAME DEV PID: two workloads; PID "" measures the whole guest
run_fio() {
	local name=$1 dev=$2 pid=$3 wl bs rw c0 c1 iops bw
	for wl in 4k-randread:4k:randread 128k-seqread:128k:read; do
		IFS=: read -r label bs rw <<< "$wl"
		c0=$([ -n "$pid" ] && proc_cpu $pid || busy_cpu)
		fio --name=b --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=16 --rw=$rw --bs=$bs \
			--time_based --runtime=$SECS --size=200m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
		c1=$([ -n "$pid" ] && proc_cpu $pid || busy_cpu)
		iops=$(python3 -c 'import json;j=json.load(open("/tmp/fio.json"))["jobs"][0]["read"];print(int(j["iops"]), round(j["bw"]/1024,1))')
		read -r iops bw <<< "$iops"
		printf '%-8s %-22s %-14s %9s %9s %10s\n' "$PROV" "$name" "$label" "$iops" "$bw" \
			"$(awk -v a=$c0 -v b=$c1 'BEGIN{printf "%.2f", b-a}')" | tee -a "$RES"
	done
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
	local dev; dev=$(login_dev $1:3260) || { isertd_stop; return 1; }
	run_fio isertd "$dev" $ISERTD_PID
	logout_all
	isertd_stop
}

bench_tgtd() {
	truncate -s 256M /dev/shm/tgt.img
	tgtd --iser pool_sz_mb=64 -f >"$VM_WORK/tgtd.log" 2>&1 &
	local pid=$! dev T="tgtadm --lld iser"
	wait_for 10 $T --op show --mode target || return 1
	$T --op new --mode target --tid 1 -T $IQN && $T --op new --mode logicalunit --tid 1 --lun 1 -b /dev/shm/tgt.img &&
		$T --op bind --mode target --tid 1 -I ALL && $T --op bind --mode target --tid 1 -Q $ISCSI_INITIATOR || return 1
	dev=$(login_dev $1:3260) || { kill $pid; return 1; }
	run_fio "tgtd --iser" "$dev" $pid
	logout_all
	$T --op delete --mode system --force >/dev/null 2>&1
	kill $pid 2>/dev/null; wait $pid 2>/dev/null
	rm -f /dev/shm/tgt.img
}

bench_lio() {
	lio_ram bench 256 && mkdir -p $LIO/iscsi/$IQN/tpgt_1/np/$1:3260 &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/np/$1:3260/iser &&
		mkdir -p $LIO/iscsi/$IQN/tpgt_1/lun/lun_0 && ln -s $LIO/core/rd_mcp_0/bench $LIO/iscsi/$IQN/tpgt_1/lun/lun_0/bench &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/attrib/generate_node_acls && echo 1 > $LIO/iscsi/$IQN/tpgt_1/attrib/cache_dynamic_acls &&
		echo 0 > $LIO/iscsi/$IQN/tpgt_1/attrib/authentication && echo 0 > $LIO/iscsi/$IQN/tpgt_1/attrib/demo_mode_write_protect &&
		echo 1 > $LIO/iscsi/$IQN/tpgt_1/enable || return 1
	local dev; dev=$(login_dev $1:3260) || return 1
	run_fio "LIO (whole guest)" "$dev" ""
	logout_all
}

one() {
	PROV=$1
	bench_isertd $2 || vm_log "isertd on $1 failed"
	bench_tgtd $2 || vm_log "tgtd on $1 failed"
	# LIO over iSER hung this script once (fio never returned): opt in with BENCH_LIO=1.
	[ "$1" = rxe ] && [ "${BENCH_LIO:-0}" = 1 ] && { bench_lio $2 || vm_log "LIO on $1 failed"; }
	return 0
}

iscsi_start || exit 1
printf '%-8s %-22s %-14s %9s %9s %10s\n' provider target workload IOPS MiB/s "CPU s" | tee -a "$RES"
for_each_rdma one
echo "== ratios (isertd / other, IOPS)"
python3 - "$RES" <<'PY'
import sys, re
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith('provider')]
res = {}
for r in rows:
    prov, wl = r[0], r[-4]
    name = ' '.join(r[1:-4])
    res[(prov, name.split()[0], wl)] = (int(r[-3]), float(r[-1]))
for (prov, name, wl), (iops, cpu) in sorted(res.items()):
    if name == 'isertd':
        continue
    mine = res.get((prov, 'isertd', wl))
    if mine:
        print(f"{prov} {wl}: isertd/{name} IOPS {mine[0] / max(iops, 1):.2f}x"
              + (f", IOPS per target CPU-second {(mine[0] / max(mine[1], 0.01)) / (iops / max(cpu, 0.01)):.2f}x"
                 if name != 'LIO' else ""))
PY
exit 0
