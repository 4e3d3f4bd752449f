#!/bin/bash
# iseradm map (ublk + the initiator library) against the kernel's own
# initiator (ib_iser over RDMA, iscsi_tcp over TCP), side by side on the same
# isertd RAM LUN in the test guest: fio 4 KiB random reads at QD32 and
# 128 KiB sequential reads at QD8 on the block device each one gives.
# Prints IOPS, MiB/s, the guest's busy CPU seconds (initiator, target and the
# soft RDMA device together: the same target in both rows, so the
# difference is the initiator's) and guest CPU microseconds per I/O, then
# ratios (map / kernel).  Not part of the test suite:
#   tests/vm/run.sh --timeout 1500 tests/vm/bench-map.sh   (BENCH_SECS=15, MAP_QUEUES=2)
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/bench-lib.sh"
SECS=${BENCH_SECS:-15}
IQN=iqn.2026-11.org.isert.vm:bench
ADM="$ISERT_BUILD/initiator/iseradm --initiator-name $ISCSI_INITIATOR"
RES=$VM_WORK/bench-map-results.txt
: > "$RES"
vm_cleanup_hook() {
	local d
	for d in /dev/ublkc*; do [ -e "$d" ] && $ADM unmap "$d" >/dev/null 2>&1; done
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	isertd_stop >/dev/null 2>&1
	return 0
}

# measure TRANSPORT INITIATOR DEV: both workloads on DEV, one row each
measure() {
	local wl label bs rw qd g0 g1 iops bw
	for wl in 4k-randread:4k:randread:32 128k-seqread:128k:read:8; do
		IFS=: read -r label bs rw qd <<< "$wl"
		g0=$(busy_cpu)
		fio --name=b --filename=$3 --direct=1 --ioengine=io_uring --iodepth=$qd --rw=$rw --bs=$bs \
			--time_based --runtime=$SECS --size=200m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
		g1=$(busy_cpu)
		read -r iops bw <<< "$(fio_read_result /tmp/fio.json)"
		printf '%-6s %-10s %-14s %9s %9s %11s %9s\n' $1 $2 $label $iops $bw \
			"$(awk -v a=$g0 -v b=$g1 'BEGIN{printf "%.2f", b-a}')" \
			"$(awk -v a=$g0 -v b=$g1 -v n=$iops -v s=$SECS 'BEGIN{printf "%.1f", (b-a)*1e6/(n*s)}')" | tee -a "$RES"
	done
}

# kernel TRANSPORT PORTAL IFACE: the kernel initiator's disk
kernel() {
	local dev
	dev=$(bench_login $IQN $2 $3) || return 1
	measure $1 kernel /dev/$dev
	bench_logout
}

# map TRANSPORT URL: iseradm map's device
map() {
	local dev
	dev=$($ADM map --daemon --queues ${MAP_QUEUES:-2} --depth 64 "$2") || return 1
	measure $1 "map" $dev
	$ADM unmap $dev >/dev/null
}

one() {
	local p=$1 ip=$2
	kernel $p $ip:3260 iser || vm_log "kernel initiator on $p failed"
	map $p iser://$ip/$IQN/0 || vm_log "iseradm map on $p failed"
}

iscsi_start || exit 1
cat > /tmp/bench.json <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "256M" } ],
  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "0.0.0.0", "port": 3260, "iser": true }, { "ip": "127.0.0.1", "port": 3262 } ],
    "luns": [ { "lun": 0, "backstore": "ram" } ] } ] } ],
  "global": { "reactors": 1 } }
JSON
printf '%-6s %-10s %-14s %9s %9s %11s %9s\n' path initiator workload IOPS MiB/s "guest CPU s" "us/IO" | tee -a "$RES"
for p in $RDMA_PROVIDERS; do rdma_up $p >/dev/null || vm_log "cannot bring up $p"; done
isertd_start /tmp/bench.json 3262 || exit 1
kernel tcp 127.0.0.1:3262 default || vm_log "kernel initiator on tcp failed"
map tcp iscsi://127.0.0.1:3262/$IQN/0 || vm_log "iseradm map on tcp failed"
for p in $RDMA_PROVIDERS; do one $p $(rdma_ip $p); done
isertd_stop
echo "== ratios (iseradm map / kernel initiator)"
python3 - "$RES" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith('path')]
res = {(r[0], r[1], r[2]): (int(r[3]), float(r[6])) for r in rows}
for (path, init, wl), (iops, us) in sorted(res.items()):
    k = res.get((path, 'kernel', wl))
    if init != 'map' or not k:
        continue
    print(f"{path} {wl}: IOPS {iops / max(k[0], 1):.2f}x, guest CPU per I/O {us / max(k[1], 0.01):.2f}x")
PY
exit 0
