#!/bin/bash
# isertd over iSER with the Linux kernel initiator (ib_iser), on Soft-RoCE and
# on Soft-iWARP: discovery and login over iSER, CHAP, SCSI answers through
# sg3_utils (UNMAP and LOGICAL UNIT RESET included), data written and read back
# (large transfers included; 128 KiB READs sent from a preallocated RAM LU's
# own registered pages), ext4, fio with crc32c verification, faults
# (a 2 s Soft-RoCE link flap under fio verify among them),
# login/logout cycles with every connection freed and isertd's memory flat;
# raw iSER clients that break the rules (iser-hostile: commands without STags,
# connections dropped while isertd sends); live changes through the admin
# socket (iserctl) in one session with ext4 mounted: a hot-added LUN after a
# rescan, a grown file LUN's new size (isertd-iser-live.json); a login
# redirected from one iSER portal to another (redirect.sh, Soft-RoCE).
# Completion handling: Soft-RoCE runs in "adaptive" poll mode (which polls
# while busy), Soft-iWARP in "event" and ends with a data check in "busy"
# mode.  The live changes run over Soft-RoCE only: the admin path is the same
# whatever carries the session.
# A shared receive queue (shared_rq): four sessions on one reactor share it,
# each window cut to fit, on Soft-RoCE and Soft-iWARP.
# Two RDMA devices at once (two_devices): one isertd, one reactor, iSER
# portals on Soft-RoCE and Soft-iWARP, a kernel session through each with fio
# verify running on both together.
# FIO_SECS (default 10; longer by hand) sets the fio run length.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/redirect.sh"
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
FIO_SECS=${FIO_SECS:-10}
ISERTD_SOCK=/run/isertd-vm.sock
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1; isertd_stop >/dev/null 2>&1
	[ -z "${PROM_PID:-}" ] || kill $PROM_PID 2>/dev/null
}

rss_kb() { awk '/^VmRSS/ {print $2}' /proc/$ISERTD_PID/status; }
# heap_kb: isertd's RSS less the slabs its buffer pools hold (the stats'
# reactors section), in kB: what a leak makes grow, where a pool may grow by
# design (up to a quarter of buffer_pool_mb it keeps what it once needed,
# and how much it needed depends on how many dropped connections overlapped).
# Fails when a pool still has a buffer handed out.
heap_kb() {
	local rss pool
	rss=$(rss_kb) && pool=$(iserctl stats --json | python3 -c '
import json, sys
rs = json.load(sys.stdin)["reactors"]
in_use = sum(r["buffers_in_use"] for r in rs)
if in_use:
    sys.exit("%d pool buffers still in use" % in_use)
print(sum(r["buffer_pool_bytes"] for r in rs) // 1024)') || return 1
	echo "    isertd VmRSS ${rss} kB, buffer pools ${pool} kB" >&2
	echo $((rss - pool))
}
# No QP or CQ of isertd is left: the provider maps its queues from the uverbs device.
no_connections() { ! grep -q /dev/infiniband/uverbs /proc/$ISERTD_PID/maps; }
dd_verify() {   # dd_verify DEV MB BS: write a pattern with O_DIRECT, read it back, compare
	head -c $(($2 << 20)) /dev/urandom > /tmp/pat || return 1
	dd if=/tmp/pat of=$1 bs=$3 oflag=direct status=none && dd if=$1 of=/tmp/back bs=$3 iflag=direct \
		count=$(($2 * 1048576 / $(numfmt --from=iec $3))) status=none && cmp /tmp/pat /tmp/back
}
sg_answers() {   # the SCSI layer answers over iSER as over TCP
	sg_inq $1 >/dev/null && sg_vpd -p 0x00 $1 >/dev/null && sg_vpd -p 0x80 $1 >/dev/null &&
		sg_vpd -p 0x83 $1 >/dev/null && sg_vpd -p 0xb0 $1 >/dev/null && sg_vpd -p 0xb2 $1 >/dev/null &&
		sg_readcap -l $1 | grep -q "Logical block length"
}
sg_pr_cycle() {  # persistent reservations: register, reserve (WE), read it back, release, unregister
	sg_persist --out --register --param-sark=0x1234 $1 >/dev/null &&
		sg_persist --out --reserve --param-rk=0x1234 --prout-type=1 $1 >/dev/null &&
		sg_persist --in --read-reservation $1 | grep -q "0x1234" &&
		sg_persist --out --release --param-rk=0x1234 --prout-type=1 $1 >/dev/null &&
		sg_persist --out --register --param-rk=0x1234 --param-sark=0 $1 >/dev/null
}
sg_unmap_zero() { # UNMAP of written blocks: the RAM LUN reports LBPRZ, so they read back as zeroes
	head -c 8192 /dev/urandom | dd of=$1 bs=512 seek=4096 oflag=direct status=none &&
	sg_unmap --force --lba=4096 --num=16 $1 &&
	dd if=$1 iflag=direct bs=512 skip=4096 count=16 status=none | cmp - <(head -c 8192 /dev/zero)
}
sg_data_cmds() { # WRITE SAME, COMPARE AND WRITE (match and miscompare) through sg3_utils
	head -c 512 /dev/urandom > /tmp/blk && head -c 512 /dev/urandom > /tmp/blk2 &&
	sg_write_same --lba=2048 --num=16 --in=/tmp/blk $1 &&
	dd if=$1 iflag=direct bs=512 skip=2063 count=1 status=none | cmp - /tmp/blk &&
	cat /tmp/blk /tmp/blk2 > /tmp/caw && sg_compare_and_write --lba=2063 --num=1 --in=/tmp/caw $1 &&
	dd if=$1 iflag=direct bs=512 skip=2063 count=1 status=none | cmp - /tmp/blk2 &&
	! sg_compare_and_write --lba=2063 --num=1 --in=/tmp/caw $1 2>/dev/null
}
cycles() {   # cycles IQN PORTAL N: N login/logout cycles
	local i
	for i in $(seq "$3"); do
		iscsi_login "$1" "$2" iser >/dev/null 2>&1 && iscsi_wait_disks "$1" 2 && logout_gone "$1" "$2" || return 1
	done
}
# rdma_stats P DEV TARGET: isertd's statistics against a known workload (stats-check.py).
rdma_stats() {
	local chk="python3 $(dirname "$VM_LIB")/stats-check.py $ISERTD_SOCK" rc
	$chk snap /tmp/stats0.json &&
		dd if=$2 of=/dev/null bs=64k count=64 skip=1024 iflag=direct status=none &&
		head -c 4M /dev/urandom | dd of=$2 bs=1M seek=128 iflag=fullblock oflag=direct status=none || return 1
	$chk check /tmp/stats0.json $3 $ISCSI_INITIATOR 0 ${1}0 $((4 << 20)) $((4 << 20)) > /tmp/stats-check.txt
	rc=$?
	sed 's/^/    /' /tmp/stats-check.txt
	return $rc
}
# prom_start: Debian's Prometheus scraping isertd's /metrics (global.metrics
# in isertd-iser.json) every second, until prom_dashboard.
prom_start() {
	mkdir -p /tmp/prom && printf '%s\n' 'global: {scrape_interval: 1s, scrape_timeout: 1s}' \
		'scrape_configs: [{job_name: isertd, static_configs: [{targets: ["127.0.0.1:9464"]}]}]' \
		> /tmp/prom/prometheus.yml || return 1
	prometheus --config.file=/tmp/prom/prometheus.yml --storage.tsdb.path=/tmp/prom/tsdb \
		--web.listen-address=127.0.0.1:9090 > "$VM_WORK/prometheus.log" 2>&1 &
	PROM_PID=$!
	wait_for 60 curl -sf -o /dev/null http://127.0.0.1:9090/-/ready
}
# prom_dashboard DEV START: every query of the Grafana dashboard returns data
# over the workload since START (tests/integration/dashboard.py); the RDMA
# port counters only where DEV's sysfs has ports/1/counters (Soft-RoCE
# has none: isertd reports what sysfs has, never a zero).
prom_dashboard() {
	local absent=() rc
	[ -d /sys/class/infiniband/$1/ports/1/counters ] || absent=(--absent isert_rdma_port_counters_total)
	sleep 2   # one more scrape
	python3 "$ISERT_SRC/tests/integration/dashboard.py" "$ISERT_SRC/configs/grafana/isertd.json" \
		http://127.0.0.1:9090 "$2" "$(date +%s)" "${absent[@]}" > /tmp/dashboard.txt
	rc=$?
	sed 's/^/    /' /tmp/dashboard.txt
	kill $PROM_PID; wait $PROM_PID 2>/dev/null; PROM_PID=
	return $rc
}
logout_gone() { iscsi_logout "$1" "$2" iser >/dev/null && iscsi_no_session "$1"; }

# flap_under_io P DEV: the RDMA link goes down for 2 s while fio verify runs.
# Both QPs go to error; the session must come back and fio verify.  isertd
# must not close its connection with a DREQ while the port is down: on
# Soft-RoCE that send moves the device's QP1 (GSI) to error for good and no
# connection can be made on the device again (hold_disconnect, common/transport/rdma.c).
# Soft-RoCE also moves QP1 to error by itself in some such flaps (about 1 in
# 3 here) when isertd closed no connection, so sent no DREQ at all: the
# kernel initiator's session cannot come back then.  A dead QP1 is isertd's
# failure when isertd closed a connection during the flap (its log says so:
# a failed work request or a held disconnect); otherwise both checks are
# reported as the kernel's (not ok ... # TODO known).  It runs last in the
# script (flap_rxe), as nothing can use rxe0 after such a failure.
flap_under_io() {
	local p=$1 dev=$2 f rc n0 closed why
	# Every session logged in, no reconnect on the way.
	wait_for 30 bash -c '! grep -qv LOGGED_IN /sys/class/iscsi_session/*/state'
	# 20 s: the flap at 5 s, the session back within about 6 s of it (fio's longest latency in CI).
	fio --name=flap --filename=$dev --direct=1 --ioengine=libaio --iodepth=4 --rw=randrw --bsrange=4k-256k \
		--verify=crc32c --verify_fatal=1 --size=32m --time_based --runtime=20 --eta=never \
		--output="$VM_WORK/fio-flap-$p.txt" & f=$!
	sleep 5
	n0=$(wc -l < "$VM_WORK/isertd.log")
	ip link set vmnet_$p down && sleep 2 && ip link set vmnet_$p up
	wait_for 20 rdma_port_active ${p}0
	wait $f; rc=$?
	closed=$(tail -n +$((n0 + 1)) "$VM_WORK/isertd.log" | grep -cE "work request failed|RDMA WRITE failed|send failed|disconnect waits")
	echo "    isertd logged $closed connection failure(s) during the flap"
	if [ "$closed" -eq 0 ] && ! rdma res show qp link ${p}0 | grep -q 'type GSI state RTS'; then
		why="Soft-RoCE moved QP1 to error in a link flap in which isertd closed no connection (the kernel's rdma_rxe, tests/chaos/README.md)"
		vm_xfail "$p: the RDMA link down for 2 s under fio crc32c verify: the session comes back, no errors" "$why"
		vm_xfail "$p: after that flap the device's QP1 still works (isertd sent no DREQ while the port was down)" "$why"
		return 0
	fi
	ok "$p: the RDMA link down for 2 s under fio crc32c verify: the session comes back, no errors" test $rc -eq 0
	[ $rc -eq 0 ] || tail -5 "$VM_WORK/fio-flap-$p.txt" | sed 's/^/    /'
	ok "$p: after that flap the device's QP1 still works (isertd sent no DREQ while the port was down)" \
		bash -c "rdma res show qp link ${p}0 | grep -q 'type GSI state RTS'"
}
# flap_rxe: flap_under_io on a fresh rxe0, isertd and session, last in the script.
flap_rxe() {
	local ip t=$VM_PREFIX:open dev
	vm_log "=== iSER on rxe: the link down under I/O"
	ip=$(rdma_up rxe) || { ok "rxe flap: Soft-RoCE up" false; return 1; }
	config rxe $ip adaptive
	must "rxe flap: isertd starts" isertd_start /tmp/isertd-iser-rxe.json 3262
	iscsi_node $t $ip:3260 iser
	ok "rxe flap: login over iSER, 2 LUNs appear" \
		bash -c "iscsiadm -m node -T $t -p $ip:3260 -I iser --login >/dev/null" || return 1
	iscsi_wait_disks $t 2
	read -r _ dev <<< "$(iscsi_disks $t | head -1)"
	flap_under_io rxe /dev/$dev
	ok "rxe flap: logout" logout_gone $t $ip:3260
	ok "rxe flap: isertd stops cleanly" isertd_stop
}

one_provider() {
	local p=$1 ip=$2 portal=$2:3260 t=$VM_PREFIX:open dev found mode
	mode=$([ $p = rxe ] && echo adaptive || echo event)
	vm_log "=== iSER on $p ($ip), poll_mode $mode"
	config $p $ip $mode
	must "$p: isertd starts with an iSER portal on $portal" isertd_start /tmp/isertd-iser-$p.json 3262
	# The TCP portal isertd_start waits for can come up before the iSER listener is logged.
	ok "$p: isertd listens on $portal over iSER" wait_for 10 grep -q "listening on $ip:3260 (iser)" "$VM_WORK/isertd.log"
	found=$(iscsi_discover "$portal" iser)
	echo "$found" | sed 's/^/    discovered /'
	ok "$p: discovery over iSER lists $t" has_line "$t" <<< "$found"
	must "$p: login over iSER, 2 LUNs appear" bash -c "iscsiadm -m node -T $t -p $portal -I iser --login >/dev/null"
	must "$p: disks appear" iscsi_wait_disks $t 2
	ok "$p: the session runs over iSER" bash -c "iscsiadm -m session -P 1 | grep -q 'Iface Transport: iser'"
	read -r _ dev <<< "$(iscsi_disks $t | head -1)"
	ok "$p: sg_inq, sg_vpd 0x00/0x80/0x83/0xb0/0xb2, sg_readcap -l answer over iSER" sg_answers /dev/$dev
	ok "$p: sg_persist register/reserve/read/release/unregister over iSER" sg_pr_cycle /dev/$dev
	ok "$p: sg_write_same and sg_compare_and_write (match, then miscompare refused) over iSER" sg_data_cmds /dev/$dev
	ok "$p: sg_unmap over iSER, the blocks read back as zeroes" sg_unmap_zero /dev/$dev
	ok "$p: LOGICAL UNIT RESET task management over iSER (sg_reset -d), I/O works after" \
		bash -c "sg_reset -d /dev/$dev && dd if=/dev/$dev of=/dev/null bs=64k count=16 iflag=direct status=none"
	ok "$p: statistics: RDMA operations and bytes agree with 4 MiB of reads and 4 MiB of writes, ${p}0's counters as sysfs has them" \
		rdma_stats $p /dev/$dev $t
	ok "$p: libiscsi iscsi-inq over iser:// answers" bash -c "timeout 60 iscsi-inq -i $ISCSI_INITIATOR iser://$ip/$t/0 | grep -q 'Vendor:ISERT'"
	ok "$p: libiscsi iscsi-readcapacity16 over iser:// answers" bash -c "timeout 60 iscsi-readcapacity16 -i $ISCSI_INITIATOR iser://$ip/$t/0 | grep -q 'LOGICAL BLOCK LENGTH IN BYTES:512'"
	# A libiscsi initiator killed mid-I/O (no logout): the target survives, the kernel session keeps working.
	timeout -s KILL 4 iscsi-perf -i $ISCSI_INITIATOR -m 16 -b 64 iser://$ip/$t/1 >/dev/null 2>&1
	ok "$p: after a killed initiator, isertd runs and the kernel session still reads" \
		bash -c "kill -0 $ISERTD_PID && dd if=/dev/$dev of=/dev/null bs=1M count=8 iflag=direct status=none"
	# LUN 1 is a preallocated RAM LU: its first large READ over iSER registers it with the device (on a
	# thread of isertd's), and from then on its READs go out as RDMA WRITEs from its own pages.
	local dev1
	read -r _ dev1 <<< "$(iscsi_disks $t | sed -n 2p)"
	dd if=/dev/$dev1 of=/dev/null bs=128k count=1 iflag=direct status=none
	ok "$p: LUN 1 (preallocate) is registered with ${p}0 after its first 128 KiB READ" \
		wait_for 30 grep -q "backstore ram1: registered with RDMA device ${p}0" "$VM_WORK/isertd.log"
	ok "$p: LUN 1: 48 MiB written, read back in 128 KiB READs sent from its pages, crc32c verify" \
		fio --name=prealloc --filename=/dev/$dev1 --direct=1 --ioengine=libaio --iodepth=8 --rw=write \
			--bs=128k --size=48m --verify=crc32c --verify_fatal=1 --eta=never \
			--output="$VM_WORK/fio-prealloc-$p.txt"
	ok "$p: 4 MiB written and read back, 4 KiB direct I/O" dd_verify /dev/$dev 4 4K
	ok "$p: 32 MiB written and read back, 4 MiB direct I/O (several buffers per command)" dd_verify /dev/$dev 32 4M
	ok "$p: ext4 on LUN 0: mkfs, write, fsck -n clean" fs_write /dev/$dev /mnt/iser
	drop_caches
	ok "$p: ext4 files read back identical" fs_verify /dev/$dev /mnt/iser "$VM_WORK/$dev.sums"
	local t0=$(date +%s)
	[ $p = rxe ] && ok "$p: Prometheus starts, scraping isertd's /metrics" prom_start
	ok "$p: fio random read/write 4k-1m, QD16, crc32c verify, ${FIO_SECS}s, no errors" \
		fio --name=verify --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=16 --rw=randrw \
			--bsrange=4k-1m --verify=crc32c --verify_fatal=1 --size=128m --time_based --runtime=$FIO_SECS \
			--eta=never --output="$VM_WORK/fio-$p.txt"
	grep -E "READ:|WRITE:" "$VM_WORK/fio-$p.txt" | sed 's/^/    /'
	[ $p = rxe ] && ok "$p: every query of the Grafana dashboard returns data over the fio run (Prometheus' API)" \
		prom_dashboard ${p}0 $t0
	# The RDMA link goes down and up under an idle session: the session comes back (or is re-made).
	ip link set vmnet_$p down && sleep 1 && ip link set vmnet_$p up
	wait_for 20 rdma_port_active ${p}0
	ok "$p: after the RDMA link went down and up, I/O works again" \
		wait_for 60 dd if=/dev/$dev of=/dev/null bs=1M count=4 iflag=direct status=none
	# isertd restarted under a logged-in session: the initiator reconnects and I/O resumes.
	isertd_stop >/dev/null 2>&1
	must "$p: isertd starts again" isertd_start /tmp/isertd-iser-$p.json 3262
	ok "$p: after a target restart the session recovers and data reads back" \
		wait_for 60 dd if=/dev/$dev of=/dev/null bs=1M count=4 iflag=direct status=none
	ok "$p: logout" logout_gone $t $portal
	hostile $p $ip
	local before after
	# Warm-up: each reactor's pool and registrations are set up by its first sessions.
	ok "$p: 3 login/logout cycles over iSER (warm-up)" cycles $t $portal 3
	# Measured once the connections are gone: a logout returns to the initiator
	# before the target has flushed and freed the connection, and on siw that
	# takes a moment; each live connection holds 2.6 MiB of registered slots.
	wait_for 20 no_connections
	before=$(heap_kb)
	ok "$p: 10 more login/logout cycles over iSER" cycles $t $portal 10
	ok "$p: every iSER connection of isertd is freed after the cycles" wait_for 20 no_connections
	after=$(heap_kb)
	ok "$p: isertd memory (RSS less its buffer pools) flat over the cycles (< 1 MiB growth), no pool buffer in use" \
		test -n "$before" -a -n "$after" -a $((after - before)) -lt 1024
	t=$VM_PREFIX:chap
	iscsi_node $t $portal iser
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.auth.authmethod -v CHAP >/dev/null
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.auth.username -v $CHAP_USER >/dev/null
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.auth.password -v wrong-secret-1 >/dev/null
	ok "$p: CHAP over iSER with a wrong secret is refused" login_refused $t $portal iser
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.auth.password -v $CHAP_PASS >/dev/null
	ok "$p: CHAP over iSER logs in" bash -c "iscsiadm -m node -T $t -p $portal -I iser --login >/dev/null"
	ok "$p: CHAP session's LUN appears" iscsi_wait_disks $t 1
	ok "$p: CHAP session logout" logout_gone $t $portal
	[ $p = rxe ] && redirect_iser $p $ip
	ok "$p: isertd survived and stops cleanly" isertd_stop
	shared_rq $p $ip
	[ $p = rxe ] && live_iser $p $ip $mode
	[ $p = siw ] && busy_mode $p $ip
	return 0
}

# target_disks IQN LUN: the block device of LUN in every session to IQN.
target_disks() {
	local s d
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat $s/targetname 2>/dev/null)" = "$1" ] || continue
		for d in $s/device/target*/*:*:*:$2/block/*; do
			[ -b /dev/${d##*/} ] && echo "${d##*/}"
		done
	done
}
n_target_disks() { [ "$(target_disks $1 $2 | wc -l)" -eq $3 ]; }
# shared_rq P IP: one reactor, its iSER connections sharing one receive queue
# of 160 (global.iser_srq).  The kernel initiator logs in 4 sessions to one
# target (node.session.nr_sessions); fio verify runs on all 4 at once, each
# on its own quarter of LUN 0.  The session list then shows how the queue
# was shared (stats-check.py receives): windows cut so that they fit, every
# session on the queue with InitialR2T=Yes.  The queue is made with the
# first connection and released with the last.
shared_rq() {
	local p=$1 portal=$2:3260 t=$VM_PREFIX:open cfg=/tmp/isertd-iser-srq.json secs i d pids=() rc=0 chk
	secs=$((FIO_SECS < 20 ? FIO_SECS : 20))
	chk="python3 $(dirname "$VM_LIB")/stats-check.py $ISERTD_SOCK"
	vm_log "=== iSER on $p: one reactor, a shared receive queue of 160"
	sed -e "s/@IP@/$2/" -e 's/"reactors": 2, "poll_mode": "@POLL@"/"reactors": 1, "poll_mode": "event", "iser_srq": 160/' \
		"$(dirname "$VM_LIB")/isertd-iser.json" > $cfg
	must "$p: srq: isertd starts with one reactor and iser_srq 160" isertd_start $cfg 3262
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.nr_sessions -v 4 >/dev/null
	ok "$p: srq: 4 sessions log in over iSER" bash -c "iscsiadm -m node -T $t -p $portal -I iser --login >/dev/null"
	iscsiadm -m node -T $t -p $portal -I iser -o update -n node.session.nr_sessions -v 1 >/dev/null
	must "$p: srq: LUN 0 appears in each of the 4 sessions" wait_for 30 n_target_disks $t 0 4
	ok "$p: srq: one shared receive queue on ${p}0, of 160 receives" \
		test "$(log_count "shared receive queue on RDMA device ${p}0: 160 receives")" -eq 1
	i=0
	for d in $(target_disks $t 0); do
		fio --name=srq$i --filename=/dev/$d --direct=1 --ioengine=libaio --iodepth=32 --rw=randrw \
			--bsrange=4k-256k --verify=crc32c --verify_fatal=1 --offset=$((i * 64))m --size=48m \
			--time_based --runtime=$secs --eta=never --output="$VM_WORK/fio-srq-$p-$i.txt" & pids+=($!)
		i=$((i + 1))
	done
	for i in "${pids[@]}"; do wait $i || rc=1; done
	ok "$p: srq: fio crc32c verify, QD32, on the 4 sessions at once (${secs}s), no errors" test $rc -eq 0
	grep -hE "READ:|WRITE:" "$VM_WORK"/fio-srq-$p-*.txt | sed 's/^/    /'
	ok "$p: srq: windows cut to fit the queue, InitialR2T=Yes (the session list)" \
		bash -c "$chk receives $t 160 2 > /tmp/srq-$p.txt; rc=\$?; sed 's/^/    /' /tmp/srq-$p.txt; exit \$rc"
	ok "$p: srq: logout of the 4 sessions" logout_gone $t $portal
	ok "$p: srq: the queue is released with the last connection" \
		wait_for 20 grep -q "shared receive queue on RDMA device ${p}0 released" "$VM_WORK/isertd.log"
	ok "$p: srq: isertd stops cleanly" isertd_stop
}

# live_iser P IP POLL_MODE: live_changes (initiator.sh) over iSER, on an isertd
# with the live target only (isertd-iser-live.json) and a fresh file LUN.
live_iser() {
	local p=$1 portal=$2:3260 cfg=/tmp/isertd-iser-live-$1.json img=/tmp/isertd-iser-live-$1.img
	rm -f $img
	sed "s/@IP@/$2/; s/@POLL@/$3/; s|@FILE@|$img|" "$(dirname "$VM_LIB")/isertd-iser-live.json" > $cfg
	ok "$p: live: isertd starts with the live target and an admin socket" isertd_start $cfg 3262 || return 1
	live_changes $p $VM_PREFIX:live $portal iser
	ok "$p: live: logout" live_end $VM_PREFIX:live $portal iser
	ok "$p: live: isertd stops cleanly after the changes" isertd_stop
	rm -f $img
}

# hostile_run NAME ARGS...: iser-hostile's own ok/not ok lines, its output in $VM_WORK/NAME.txt.
hostile_run() {
	local out=$VM_WORK/$1.txt; shift
	timeout 120 "$ISERT_BUILD/tests/vm/iser-hostile" "$@" > "$out" 2>&1; local rc=$?
	sed 's/^/    /' "$out"
	[ $rc -eq 0 ] && grep -q "^# 0 failed" "$out"
}
log_count() { local n; n=$(grep -c "$1" "$VM_WORK/isertd.log" 2>/dev/null); echo "${n:-0}"; }
# hostile P IP: raw iSER clients that break the rules (iser-hostile.c), while
# no other session is logged in (no_connections looks at every connection).
# Commands without the STag they need close their own connection (a queued
# READ too: the use-after-free of issue 11, finding 8); connections dropped
# while isertd sends are all freed (finding 9) and its memory stays flat; a
# kernel login works after them and isertd stops with status 0.
# On siw a connection dropped mid-READ waits out common/transport/rdma.c's 5 s flush
# wait with its command buffers (8 MiB here) held, and the pool keeps the
# most it ever held (up to a quarter of buffer_pool_mb), which depends on how
# many of them overlapped: the memory check leaves the pools out (heap_kb).
hostile() {
	local p=$1 a="$2 3260 $VM_PREFIX:open $ISCSI_INITIATOR" portal=$2:3260 nr nw before after
	wait_for 20 no_connections
	nr=$(log_count "READ without a read STag") nw=$(log_count "WRITE without a write STag")
	ok "$p: hostile: a READ without a read STag (at ExpCmdSN; queued, then drained by a TEST UNIT READY) and a WRITE without a write STag: each connection closed, a new login served" \
		hostile_run hostile-$p-crafted no-stag,no-stag-queued,no-write-stag $a
	ok "$p: hostile: isertd logged 2 READs without a read STag and 1 WRITE without a write STag" \
		test "$(log_count "READ without a read STag") $(log_count "WRITE without a write STag")" = "$((nr + 2)) $((nw + 1))"
	ok "$p: hostile: every connection of the crafted commands is freed" wait_for 20 no_connections
	ok "$p: hostile: 8 connections at once dropped while isertd sends 32 READs of 256 KiB on each (warm-up)" \
		hostile_run hostile-$p-reset-warmup reset-while-sending $a 8 8
	ok "$p: hostile: every connection of the warm-up is freed" wait_for 20 no_connections
	before=$(heap_kb)
	ok "$p: hostile: 12 more connections dropped one a second while isertd sends 32 READs of 256 KiB" \
		hostile_run hostile-$p-reset reset-while-sending $a 12 1 1000
	ok "$p: hostile: every connection dropped while isertd sent is freed" wait_for 20 no_connections
	after=$(heap_kb)
	ok "$p: hostile: isertd memory (RSS less its buffer pools) flat over the dropped connections (< 1 MiB growth), no pool buffer in use" \
		test -n "$before" -a -n "$after" -a $((after - before)) -lt 1024
	ok "$p: hostile: after them a kernel-initiator login over iSER works" cycles $VM_PREFIX:open $portal 1
	ok "$p: hostile: isertd stops with status 0 (every connection freed)" isertd_stop
	must "$p: isertd starts again" isertd_start /tmp/isertd-iser-$p.json 3262
}

config() {   # config PROVIDER IP POLL_MODE: /tmp/isertd-iser-PROVIDER.json
	sed "s/@IP@/$2/; s/@POLL@/$3/" "$(dirname "$VM_LIB")/isertd-iser.json" > /tmp/isertd-iser-$1.json
}
busy_mode() {  # the reactors poll their completion queues without sleeping
	local p=$1 portal=$2:3260 t=$VM_PREFIX:open dev
	config $p $2 busy
	must "$p: isertd starts in busy poll mode" isertd_start /tmp/isertd-iser-$p.json 3262
	must "$p: busy: login over iSER" bash -c "iscsiadm -m node -T $t -p $portal -I iser --login >/dev/null"
	must "$p: busy: disks appear" iscsi_wait_disks $t 2
	read -r _ dev <<< "$(iscsi_disks $t | head -1)"
	ok "$p: busy: 4 MiB written and read back, 4 KiB direct I/O" dd_verify /dev/$dev 4 4K
	ok "$p: busy: 16 MiB written and read back, 4 MiB direct I/O" dd_verify /dev/$dev 16 4M
	ok "$p: busy: logout" logout_gone $t $portal
	ok "$p: busy: isertd stops cleanly" isertd_stop
}

# portal_sid IP: the kernel session logged in through the portal at IP.
portal_sid() {
	local c
	for c in /sys/class/iscsi_connection/connection*; do
		[ "$(cat $c/persistent_address 2>/dev/null)" = "$1" ] || continue
		c=${c##*/connection}
		echo "${c%%:*}"
		return 0
	done
	return 1
}
# portal_disk IP LUN: the block device of LUN in the session through IP.
portal_disk() {
	local sid d
	sid=$(portal_sid $1) || return 1
	for d in /sys/class/iscsi_session/session$sid/device/target*/*:*:*:$2/block/*; do
		[ -b /dev/${d##*/} ] && { echo "${d##*/}"; return 0; }
	done
	return 1
}
two_disks() { portal_disk $1 0 >/dev/null && portal_disk $2 1 >/dev/null; }
lists_target() {   # lists_target IQN PORTAL...: iSER discovery through each portal lists IQN
	local t=$1 p; shift
	for p in "$@"; do has_line "$t" <<< "$(iscsi_discover $p iser)" || return 1; done
}
log_more() { [ "$(log_count "$1")" -gt "$2" ]; }
logout_two() { iscsi_logout $1 $2:3260 iser >/dev/null && iscsi_logout $1 $3:3260 iser >/dev/null && iscsi_no_session $1; }
fio_verify() {   # fio_verify NAME DEV SIZE SECS: random read/write 4k-1m, QD16, crc32c verify
	fio --name=$1 --filename=/dev/$2 --direct=1 --ioengine=libaio --iodepth=16 --rw=randrw --bsrange=4k-1m \
		--verify=crc32c --verify_fatal=1 --size=$3 --time_based --runtime=$4 --eta=never \
		--output="$VM_WORK/fio-$1.txt"
}
# two_devices: one isertd serves two RDMA devices at once, as it would the two
# ports of a NIC: iSER portals on Soft-RoCE (rxe0) and Soft-iWARP (siw0), one
# reactor, so one buffer pool is registered with both (lazily: with each
# device's first connection).  The kernel initiator logs in through each
# portal (two sessions to one target, as multipath does); fio verify runs on
# LUN 0 through rxe and on LUN 1 through siw at the same time; the statistics
# show RDMA traffic on the connection of each device, on that one reactor.
two_devices() {
	local rxe siw t=$VM_PREFIX:open cfg=/tmp/isertd-iser-two.json d0 d1 p0 p1 r0 r1 secs chk nref nrm ndr del
	secs=$((FIO_SECS < 30 ? FIO_SECS : 30))
	chk="python3 $(dirname "$VM_LIB")/stats-check.py $ISERTD_SOCK"
	vm_log "=== iSER on two RDMA devices at once (rxe0 and siw0), one reactor"
	rxe=$(rdma_up rxe) && siw=$(rdma_up siw)
	must "two devices: rxe0 and siw0 up" test -n "$rxe" -a -n "$siw"
	sed -e "s/{ \"ip\": \"@IP@\", \"port\": 3260, \"iser\": true }/{ \"ip\": \"$rxe\", \"port\": 3260, \"iser\": true }, { \"ip\": \"$siw\", \"port\": 3260, \"iser\": true }/" \
		-e 's/"reactors": 2/"reactors": 1/; s/@POLL@/adaptive/' "$(dirname "$VM_LIB")/isertd-iser.json" > $cfg
	nref=$(log_count "cannot accept iSER connection") nrm=$(log_count "RDMA device siw0 removed")
	ndr=$(log_count "buffer pool deregistered from RDMA device siw0")
	must "two devices: isertd starts with iSER portals on $rxe (rxe0) and $siw (siw0) and one reactor" \
		isertd_start $cfg 3262
	ok "two devices: isertd listens on both" wait_for 10 bash -c "grep -q 'listening on $rxe:3260 (iser)' '$VM_WORK/isertd.log' &&
		grep -q 'listening on $siw:3260 (iser)' '$VM_WORK/isertd.log'"
	ok "two devices: discovery over iSER through each portal lists $t" \
		lists_target $t $rxe:3260 $siw:3260
	must "two devices: login over iSER through rxe0" bash -c "iscsiadm -m node -T $t -p $rxe:3260 -I iser --login >/dev/null"
	must "two devices: login over iSER through siw0 while the rxe0 session stays" \
		bash -c "iscsiadm -m node -T $t -p $siw:3260 -I iser --login >/dev/null"
	must "two devices: LUN 0 through rxe0 and LUN 1 through siw0 appear" wait_for 30 two_disks $rxe $siw
	d0=$(portal_disk $rxe 0) d1=$(portal_disk $siw 1)
	echo "    rxe0 session $(portal_sid $rxe): LUN 0 is $d0; siw0 session $(portal_sid $siw): LUN 1 is $d1"
	$chk snap /tmp/stats-two.json
	fio_verify two-rxe $d0 128m $secs & p0=$!
	fio_verify two-siw $d1 48m $secs & p1=$!
	wait $p0; r0=$?
	wait $p1; r1=$?
	ok "two devices: fio crc32c verify on LUN 0 through rxe0, ${secs}s, no errors (while siw0 ran too)" test $r0 -eq 0
	ok "two devices: fio crc32c verify on LUN 1 through siw0, ${secs}s, no errors (while rxe0 ran too)" test $r1 -eq 0
	grep -hE "READ:|WRITE:" "$VM_WORK/fio-two-rxe.txt" "$VM_WORK/fio-two-siw.txt" | sed 's/^/    /'
	ok "two devices: statistics: RDMA WRITEs and READs on the connection of each device, one reactor" \
		bash -c "$chk devices /tmp/stats-two.json $t $ISCSI_INITIATOR $rxe $siw > /tmp/stats-two.txt; rc=\$?;
			sed 's/^/    /' /tmp/stats-two.txt; exit \$rc"
	ok "two devices: isertd refused no connection" test "$(log_count "cannot accept iSER connection")" -eq $nref
	# siw0 goes away under its session (the port of a NIC failing): isertd
	# hears of it, the connection on it closes, the pool deregisters its slabs
	# from siw0, and the rxe0 session goes on.  The removal itself completes
	# only once isertd stops: rxe and siw wait for every user of a device, and
	# the portal's listener and the device's PD keep it open (docs/architecture.md).
	rdma link delete siw0 >/dev/null 2>&1 & del=$!
	ok "two devices: siw0 removed under its session: isertd hears of it" \
		wait_for 20 log_more "RDMA device siw0 removed" $nrm
	ok "two devices: the buffer pool deregisters its slabs from siw0 (its connection there closed)" \
		wait_for 20 log_more "buffer pool deregistered from RDMA device siw0" $ndr
	grep -E "siw0 removed|deregistered from RDMA device siw0" "$VM_WORK/isertd.log" | tail -4 | sed 's/^/    /'
	ok "two devices: after siw0 went away the rxe0 session writes and reads back 8 MiB" dd_verify /dev/$d0 8 64K
	ok "two devices: logout of both sessions" logout_two $t $rxe $siw
	ok "two devices: isertd stops with status 0 (every connection freed)" isertd_stop
	ok "two devices: siw0's removal completes once isertd stopped" wait_for 30 bash -c "! kill -0 $del 2>/dev/null"
	wait $del
	rdma_down rxe
	rdma_down siw
}

must "iscsid starts" iscsi_start
for_each_rdma one_provider
two_devices
flap_rxe
vm_done
