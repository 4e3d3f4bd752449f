#!/bin/bash
# isertd's reactor poll modes under block I/O, measured against each other in
# one guest boot:
# isertd serves the guest's NVMe namespace (/dev/nvme0n1, block backstore,
# one reactor) to the kernel initiator over TCP (iscsi_tcp on loopback) and
# over iSER (ib_iser on rxe); fio runs 4 KiB randread QD1 and QD32, 4 KiB
# randwrite QD32 and 128 KiB sequential read QD8.  Each variant is one
# isertd start (a poll_mode and environment variables for isertd); the
# variants alternate within every round (A B C, then C B A, ...) so that
# drift in a noisy host (TCG, other guests) falls on all of them alike.
# (It also measured fixed buffers and the polled ring, both removed since:
# docs/architecture.md, "Measured".)
# Prints one line per run and, at the end, the median per variant of IOPS,
# fio's mean latency (us), isertd's CPU per I/O (us, /proc/PID/stat utime +
# stime) and the whole guest's busy CPU per I/O (us).  Not part of the test
# suite:
#   tests/vm/run.sh --cache CACHE --timeout 2400 tests/vm/bench-uring.sh
#   BENCH_SECS=5 BENCH_ROUNDS=3 BENCH_TRANSPORTS="tcp iser"
#   BENCH_VARIANTS="NAME:POLL_MODE[:VAR=VALUE,...] ..." (default: event and
#   adaptive)
source "$VM_LIB"
source "$(dirname "$VM_LIB")/bench-lib.sh"
SECS=${BENCH_SECS:-5}
ROUNDS=${BENCH_ROUNDS:-3}
TRANSPORTS=${BENCH_TRANSPORTS:-tcp iser}
VARIANTS=${BENCH_VARIANTS:-event:event adaptive:adaptive}
IQN=iqn.2026-11.org.isert.vm:uring
RES=$VM_WORK/bench-uring.txt
WORKLOADS="rr4k-qd1:4k:randread:1 rr4k-qd32:4k:randread:32 rw4k-qd32:4k:randwrite:32 sr128k-qd8:128k:read:8"

config() {   # config POLL_MODE RDMA_IP
	local iser=
	[ -z "$2" ] || iser=", { \"ip\": \"$2\", \"port\": 3260, \"iser\": true }"
	cat > /tmp/uring.json <<JSON
{ "backstores": [ { "name": "nvme", "type": "block", "path": "$NVME_DEV", "write_cache": true } ],
  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1,
    "portals": [ { "ip": "127.0.0.1", "port": 3260 }$iser ],
    "luns": [ { "lun": 0, "backstore": "nvme" } ],
    "acls": [ { "initiator": "$ISCSI_INITIATOR", "mapped_luns": [ { "mapped_lun": 0, "tpg_lun": 0 } ] } ] } ] } ],
  "global": { "reactors": 1, "poll_mode": "$1" } }
JSON
}


# fio_result FILE: "IOPS mean-latency-us total-ios" of the side that ran
fio_result() {
	python3 -c 'import json,sys
j = json.load(open(sys.argv[1]))["jobs"][0]
s = j["read"] if j["read"]["total_ios"] else j["write"]
print(int(s["iops"]), round(s["lat_ns"]["mean"] / 1000, 1), s["total_ios"])' "$1"
}

# run_one ROUND VARIANT TRANSPORT DEV: the four workloads, one result line each
run_one() {
	local wl label bs rw qd c0 g0 c1 g1 iops lat ios
	for wl in $WORKLOADS; do
		IFS=: read -r label bs rw qd <<< "$wl"
		read -r c0 g0 <<< "$(cpu_mark $ISERTD_PID)"
		fio --name=b --filename=/dev/$4 --direct=1 --ioengine=libaio --iodepth=$qd --rw=$rw --bs=$bs \
			--time_based --runtime=$SECS --size=256m --eta=never --output-format=json > /tmp/fio.json 2>/dev/null
		read -r c1 g1 <<< "$(cpu_mark $ISERTD_PID)"
		read -r iops lat ios <<< "$(fio_result /tmp/fio.json)" || return 1
		printf '%s %s %s %s %s %s %s %s\n' $1 $2 $3 $label $iops $lat \
			"$(awk -v a=$c0 -v b=$c1 -v n=$ios 'BEGIN{printf "%.1f", (b-a)*1e6/n}')" \
			"$(awk -v a=$g0 -v b=$g1 -v n=$ios 'BEGIN{printf "%.1f", (b-a)*1e6/n}')" | tee -a "$RES"
	done
}

# variant ROUND NAME:MODE[:VAR=VALUE,...]: one isertd run, every transport
variant() {
	local round=$1 name mode envs t dev portal iface rc=0
	IFS=: read -r name mode envs <<< "$2"
	config "$mode" "$RDMA_IP"
	env ${envs//,/ } "$ISERT_BUILD/target/isertd" --config /tmp/uring.json >> "$VM_WORK/isertd.log" 2>&1 &
	ISERTD_PID=$!
	wait_for 20 port_listening 3260 || { vm_log "isertd ($name) did not start"; tail -5 "$VM_WORK/isertd.log"; return 1; }
	for t in $TRANSPORTS; do
		case $t in tcp) portal=127.0.0.1:3260 iface=default;; iser) portal=$RDMA_IP:3260 iface=iser;; esac
		dev=$(bench_login $IQN $portal $iface) || { vm_log "$name: $t login failed"; rc=1; continue; }
		run_one $round $name $t $dev || rc=1
		bench_logout
	done
	isertd_stop || rc=1
	return $rc
}

nvme_ready || exit 1
# Written once, so reads find data rather than holes of the image file.
dd if=/dev/urandom of=$NVME_DEV bs=1M count=256 oflag=direct status=none || exit 1
RDMA_IP=
case " $TRANSPORTS " in *" iser "*) RDMA_IP=$(rdma_up rxe) || exit 1;; esac
iscsi_start || exit 1
: > "$RES"
echo "round variant transport workload IOPS lat_us cpu_us/io guest_us/io" | tee -a "$RES"
set -- $VARIANTS
for ((round = 1; round <= ROUNDS; round++)); do
	order=("$@")
	if ((round % 2 == 0)); then
		order=(); for v in "$@"; do order=("$v" "${order[@]}"); done
	fi
	for v in "${order[@]}"; do variant $round "$v" || vm_log "variant $v failed in round $round"; done
done
echo "== medians over $ROUNDS rounds (${SECS}s runs): IOPS, mean latency us, isertd CPU us/IO, guest CPU us/IO"
python3 - "$RES" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
keys = []
res = {}
for r in rows:
    k = (r[2], r[3], r[1])
    if k not in res:
        keys.append(k)
    res.setdefault(k, []).append([float(x) for x in r[4:8]])
for k in sorted(keys, key=lambda k: (k[0], k[1], keys.index(k))):
    v = res[k]
    med = [st.median(c) for c in zip(*v)]
    spread = f"IOPS {min(x[0] for x in v):.0f}..{max(x[0] for x in v):.0f}"
    print(f"{k[0]:5} {k[1]:11} {k[2]:16} IOPS {med[0]:8.0f}  lat {med[1]:8.1f}  cpu/io {med[2]:7.1f}  guest/io {med[3]:7.1f}  (n={len(v)}, {spread})")
PY
rdma_down rxe
exit 0
