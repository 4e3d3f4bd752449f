#!/bin/bash
# The isert initiator library over iSER (iser:// URLs), on Soft-RoCE and
# Soft-iWARP, against three targets: isertd, tgtd --iser and LIO (ib_isert).
# iseradm discover / login / ls / inq / readcap over iser://, then
# isc-datacheck: patterns of 4 KiB, 128 KiB and 1 MiB (and larger) written
# with the library and read back, from pool buffers, from inside one, from
# malloc'd and read-only memory, and 16 commands in flight; where the target
# has a TCP portal too, every region is read again over TCP (the data is on
# the target, not only in our buffers).  CHAP over iSER against isertd.
# isc-recovery: ABORT TASK and LOGICAL UNIT RESET with commands in flight
# against all three; against isertd with a file LUN a reconnect after the
# target is killed (-9) mid-workload and restarted, then the TMFs again.
# iseradm map (ublk-map.sh): the LUN as /dev/ublkbN, used with fio and ext4,
# against all three targets, over iSER and TCP, through a target restart, a
# killed map (with and without recovery), and two paths with one going down.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/lio.sh"
source "$(dirname "$VM_LIB")/ublk-map.sh"
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
ADM="$ISERT_BUILD/initiator/iseradm --initiator-name $ISCSI_INITIATOR"
DC="$ISERT_BUILD/tests/vm/isc-datacheck -i $ISCSI_INITIATOR"
RC="$ISERT_BUILD/tests/vm/isc-recovery -i $ISCSI_INITIATOR"
TGTD_PID=
TARGETS=${TARGETS:-isertd tgtd lio}   # a subset, for a quicker run by hand
vm_cleanup_hook() {
	local d
	for d in /dev/ublkc*; do [ -e "$d" ] && $ADM unmap "$d" >/dev/null 2>&1; done
	isertd_stop >/dev/null 2>&1
	[ -n "$TGTD_PID" ] && kill $TGTD_PID 2>/dev/null
	return 0
}

# iserbench_iser NAME URL: a short vdbench-style run with data validation over iSER.
iserbench_iser() {
	local d=$VM_WORK/iserbench-$1
	mkdir -p $d
	cat > $d/parm <<EOF
sd=sd1,lun=$2,threads=8,size=64m
wd=wd1,sd=sd1,xfersize=(4k,40,64k,40,1m,20),rdpct=50,seekpct=random
rd=rd1,wd=wd1,iorate=max,elapsed=4,interval=1
EOF
	timeout 120 "$ISERT_BUILD/tools/iserbench/iserbench" -f $d/parm -o $d/out -v -i $ISCSI_INITIATOR > $d/stdout.txt 2>&1 || {
		tail -20 $d/stdout.txt | sed 's/^/    /'; return 1; }
	grep avg_ $d/stdout.txt | sed 's/^/    /'
	grep -q avg_ $d/stdout.txt && [ -s $d/out/report.html ]
}
# adm_has PATTERN ARGS...: iseradm succeeds and its output has PATTERN.
adm_has() {
	local pat=$1 out rc; shift
	out=$(timeout 60 $ADM "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	[ $rc -eq 0 ] && grep -q -- "$pat" <<< "$out"
}
# adm_grep PATTERN ARGS...: iseradm's output has PATTERN, whatever its exit code.
adm_grep() {
	local pat=$1 out; shift
	out=$(timeout 60 $ADM "$@" 2>&1)
	echo "$out" | sed 's/^/    /'
	grep -q -- "$pat" <<< "$out"
}
# adm_exit CODE ARGS...: iseradm fails with exit code CODE.
adm_exit() {
	local want=$1 out rc; shift
	out=$(timeout 60 $ADM "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	[ $rc -eq "$want" ]
}
# checks NAME SECONDS PROGRAM ARGS...: a program that prints ok/not ok lines
# and "# N failed" (isc-datacheck, isc-recovery), its output indented under one check.
checks() {
	local out=$VM_WORK/$1.txt t=$2; shift 2
	timeout "$t" "$@" > "$out" 2>&1; local rc=$?
	sed 's/^/    /' "$out"
	[ $rc -eq 0 ] && grep -q "^# 0 failed" "$out"
}
datacheck() { local n=$1; shift; checks datacheck-$n 300 $DC "$@"; }
# recovery NAME MODE ARGS...: isc-recovery's own checks.
recovery() { local n=$1; shift; checks recovery-$n 120 $RC "$@"; }
# ls_rounds N URL: iseradm ls N times; each makes a discovery connection and
# then a login connection at once, the pattern that broke siw's listener
# (EADDRNOTAVAIL, then "Connection refused", then a kernel BUG) until the
# library waited a moment between iWARP connections (common/transport/rdma.c).
ls_rounds() {
	local n=$1 i out; shift
	for i in $(seq "$n"); do
		out=$(timeout 60 $ADM ls "$1" 2>&1)
		grep -q "rdma_connect" <<< "$out" && { echo "    round $i:"; echo "$out" | sed 's/^/    /'; return 1; }
	done
	return 0
}
# tmf_checks LABEL URL READ-SIZE [OPTIONS]: ABORT TASK of a large READ
# (4 times), LU RESET with 32 commands in flight.
tmf_checks() {
	local l=$1 u=$2 sz=$3 n=${1// /-}; shift 3
	ok "$l: ABORT TASK of a $sz READ in flight over iSER (x4): one callback, TMF answered, session usable after" \
		recovery $n-abort abort -s $sz --lba 65536 "$@" $u
	ok "$l: LU RESET over iSER with 32 commands of 256 KiB in flight: each completes once, I/O works after" \
		recovery $n-lu-reset lu-reset -q 32 -b 256k --lba 90000 "$@" $u
}
# isertd_restart PID CONFIG PORT: once isc-recovery (PID) has killed isertd, start it again.
isertd_restart() {
	local old=$ISERTD_PID st
	while kill -0 $old 2>/dev/null; do
		kill -0 $1 2>/dev/null || { vm_log "isc-recovery ended before it killed isertd"; return 1; }
		vm_sleep 0.05
	done
	wait $old; st=$?
	ISERTD_PID=
	[ $st -eq 137 ] || { vm_log "isertd ended with status $st, not by SIGKILL"; return 1; }
	isertd_start $2 $3
}
# isertd_reconnect PROVIDER IP: a file LUN, whose data outlives the process;
# isc-recovery kills isertd (-9) with writes in flight, the script restarts it.
isertd_reconnect() {
	local p=$1 ip=$2 t=$VM_PREFIX:persist cfg=/tmp/isertd-file-$p.json img=/tmp/isertd-file-$p.img
	local out=$VM_WORK/recovery-isertd-$p-reconnect.txt rpid rc
	rm -f $img
	sed "s/@IP@/$ip/; s/@POLL@/event/; s|@FILE@|$img|" "$(dirname "$VM_LIB")/isertd-iser-file.json" > $cfg
	ok "$p isertd: starts with a file LUN" isertd_start $cfg 3265 || return 1
	timeout 150 $RC reconnect --kill-pid $ISERTD_PID -n 1024 -b 32k -q 16 --kill-after 256 iser://$ip/$t/0 \
		> $out 2>&1 &
	rpid=$!
	ok "$p isertd: killed (-9) by isc-recovery with writes in flight, restarted with the same config" \
		isertd_restart $rpid $cfg 3265
	wait $rpid; rc=$?
	sed 's/^/    /' $out
	ok "$p isertd: reconnect over iSER: every write completed once without error, reconnects >= 1, data reads back" \
		bash -c "[ $rc -eq 0 ] && grep -q '^# 0 failed' $out"
	[ $p = siw ] && map_target_loss iser://$ip/$t/0 $cfg 3265
	# The file backstore completes through io_uring, so an ABORT TASK can find
	# the READ still executing ("function complete"); the RAM one answers inline.
	tmf_checks "$p isertd file LUN" iser://$ip/$t/0 8m
	ok "$p isertd: the restarted isertd stops cleanly" isertd_stop
	rm -f $img
}

on_isertd() {
	local p=$1 ip=$2 t=$VM_PREFIX:open c=$VM_PREFIX:chap
	sed "s/@IP@/$ip/; s/@POLL@/event/" "$(dirname "$VM_LIB")/isertd-iser.json" > /tmp/isertd-iser-$p.json
	ok "$p isertd: starts with an iSER portal on $ip:3260" isertd_start /tmp/isertd-iser-$p.json 3262 || return 1
	ok "$p isertd: iseradm discover iser://$ip lists $t" adm_has " $t\$" discover iser://$ip
	ok "$p isertd: iseradm login over iSER, RDMAExtensions in force" \
		adm_has "iSER: RDMAExtensions Yes" login iser://$ip/$t/0
	# ls logs in to every target: the CHAP one refuses us, the open one lists its LUNs.
	ok "$p isertd: iseradm ls iser://$ip lists both LUNs" adm_grep "LUN 1: ISERT" ls iser://$ip
	[ $p = siw ] && ok "$p isertd: 20 x iseradm ls (a login right after each discovery), every connect made" \
		ls_rounds 20 iser://$ip
	ok "$p isertd: iseradm inq over iSER" adm_has "Vendor: ISERT" inq iser://$ip/$t/0
	ok "$p isertd: iseradm inq --vpd 0x83 over iSER" adm_has "VPD page 0x83" inq iser://$ip/$t/0 --vpd 83
	ok "$p isertd: iseradm readcap over iSER (LUN 1: 4096-byte blocks)" \
		adm_has "Block size: 4096" readcap iser://$ip/$t/1
	ok "$p isertd: data written and read back over iSER (4 KiB-8 MiB, QD 16), and over TCP" \
		datacheck isertd-$p -s 4k,128k,1m,8m --verify-url iscsi://127.0.0.1:3262/$t/0 iser://$ip/$t/0
	ok "$p isertd: data on a 4096-byte-block LUN, 32 commands of 256 KiB in flight" \
		datacheck isertd-$p-lun1 -s 4k,1m -q 32 -b 256k --verify-url iscsi://127.0.0.1:3262/$t/1 iser://$ip/$t/1
	ok "$p isertd: CHAP over iSER logs in" adm_has "Block size: 512" readcap "iser://$CHAP_USER%$CHAP_PASS@$ip/$c/0"
	ok "$p isertd: CHAP over iSER with a wrong secret is refused (exit 4)" \
		adm_exit 4 readcap "iser://$CHAP_USER%wrong-secret@$ip/$c/0"
	ok "$p isertd: without CHAP the CHAP target refuses over iSER (exit 3 or 4)" \
		bash -c "$ADM readcap iser://$ip/$c/0 >/dev/null 2>&1; rc=\$?; [ \$rc -eq 3 ] || [ \$rc -eq 4 ]"
	ok "$p isertd: data over a CHAP session on iSER" \
		datacheck isertd-$p-chap -s 4k,1m "iser://$CHAP_USER%$CHAP_PASS@$ip/$c/0"
	ok "$p isertd: an iser:// URL to a port with no iSER portal fails cleanly (exit 2)" \
		adm_exit 2 readcap iser://$ip:3299/$t/0
	ok "$p isertd: iserbench over iser://, 4 KiB-1 MiB random read/write with -v validation, no errors" \
		iserbench_iser $p iser://$ip/$t/0
	tmf_checks "$p isertd" iser://$ip/$t/0 8m
	if [ $p = rxe ]; then
		map_full "$p isertd map" iser://$ip/$t/0 iser://$ip/$t/1
		map_short "tcp isertd map" iscsi://127.0.0.1:3262/$t/1 fs
		map_killed iser://$ip/$t/0
		map_recovery iser://$ip/$t/0
	else
		map_short "$p isertd map" iser://$ip/$t/0
		map_multipath $ip vmnet_$p iser://$ip/$t/0 iscsi://127.0.0.1:3262/$t/0 iser://$ip/$t/1
	fi
	ok "$p isertd: survived and stops cleanly" isertd_stop
	isertd_reconnect $p $ip
}

on_tgtd() {
	local p=$1 ip=$2 t=$VM_PREFIX:tgt T="tgtadm --lld iser"
	truncate -s 64M /dev/shm/tgt-$p.img
	# Its TCP portal off the iSER address: iWARP shares TCP's port space.
	tgtd --iscsi portal=127.0.0.1:3263 --iser pool_sz_mb=64 -f > "$VM_WORK/tgtd-$p.log" 2>&1 &
	TGTD_PID=$!
	# tgt 1.0.85 over iSER also needs an initiator-name ACL (fixed upstream later).
	ok "$p tgtd: starts with an iSER target" bash -c "
		for i in \$(seq 100); do $T --op show --mode target >/dev/null 2>&1 && break; sleep 0.1; done
		$T --op new --mode target --tid 1 -T $t && $T --op new --mode logicalunit --tid 1 --lun 1 -b /dev/shm/tgt-$p.img &&
		$T --op bind --mode target --tid 1 -I ALL && $T --op bind --mode target --tid 1 -Q $ISCSI_INITIATOR" || {
		kill $TGTD_PID; wait $TGTD_PID; TGTD_PID=; return 1; }
	ok "$p tgtd: iseradm discover iser://$ip lists $t" adm_has " $t\$" discover iser://$ip
	# A failed login costs a minute of reconnects per check: the rest would only repeat it.
	ok "$p tgtd: iseradm login over iSER, RDMAExtensions in force" adm_has "iSER: RDMAExtensions Yes" login iser://$ip/$t/1 &&
	ok "$p tgtd: iseradm ls iser://$ip lists LUN 1" adm_has "LUN 1:" ls iser://$ip &&
	ok "$p tgtd: iseradm inq over iSER" adm_has "Vendor: IET" inq iser://$ip/$t/1 &&
	ok "$p tgtd: iseradm readcap over iSER" adm_has "Blocks: 131072" readcap iser://$ip/$t/1 &&
	ok "$p tgtd: data written and read back over iSER (4-512 KiB: tgtd caps a command at 512 KiB, QD 16)" \
		datacheck tgtd-$p -s 4k,128k,512k iser://$ip/$t/1 &&
	# tgtd 1.0.85 moves data for tasks after it answered the TMF that covers
	# them: an ABORT TASK gets "task does not exist" for a READ whose data
	# it is still to RDMA-WRITE (its log: abort_task_set finds no command,
	# then "rdma_wr err:remote access error"), a LU RESET "function complete"
	# while READs it did not abort still go on.  The library takes the answer
	# as the end of those tasks and drops their buffers' registrations: the
	# late RDMA WRITE breaks the connection.  Pool buffers stay registered.
	tmf_checks "$p tgtd" iser://$ip/$t/1 512k --pool
	if [ $p = rxe ]; then
		map_short "$p tgtd map" iser://$ip/$t/1 fs
		# A tgtd target belongs to one driver, and names are unique across them:
		# the same image again as a target of its iscsi (TCP) driver.
		ok "tcp tgtd: the same image as $t-tcp, a target of tgtd's TCP driver" bash -c "
			tgtadm --lld iscsi --op new --mode target --tid 2 -T $t-tcp &&
			tgtadm --lld iscsi --op new --mode logicalunit --tid 2 --lun 1 -b /dev/shm/tgt-$p.img &&
			tgtadm --lld iscsi --op bind --mode target --tid 2 -I ALL" &&
			map_short "tcp tgtd map" iscsi://127.0.0.1:3263/$t-tcp/1
	else
		map_short "$p tgtd map" iser://$ip/$t/1
	fi
	ok "$p tgtd: survived" kill -0 $TGTD_PID
	tgtd_stop $TGTD_PID; TGTD_PID=
	rm -f /dev/shm/tgt-$p.img
}

# LIO: one target, an iSER portal per provider plus a TCP portal for the cross-check.
LIO_IQN=$VM_PREFIX:lio
lio_iser_setup() {
	local ip=$1 tpg; tpg=$(lio_tpg $LIO_IQN)
	if [ ! -d $tpg ]; then
		lio_ram lioram 64 && lio_target $LIO_IQN 127.0.0.1:3264 0 rd_mcp_0/lioram &&
			lio_acl $LIO_IQN $ISCSI_INITIATOR 1 && lio_enable $LIO_IQN || return 1
	fi
	mkdir -p $tpg/np/$ip:3260 && echo 1 > $tpg/np/$ip:3260/iser
}
lio_iser_teardown() {   # the RDMA device goes away next: LIO lets go of it first
	local np; np=$(lio_tpg $LIO_IQN)/np/$1:3260
	[ -d $np ] || return 0
	echo 0 > $np/iser 2>/dev/null; rmdir $np
}
on_lio() {
	local p=$1 ip=$2 t=$LIO_IQN
	ok "$p LIO: iSER portal on $ip:3260 (ib_isert)" lio_iser_setup $ip || { lio_iser_teardown $ip; return 1; }
	ok "$p LIO: iseradm discover iser://$ip lists $t" adm_has " $t\$" discover iser://$ip
	ok "$p LIO: iseradm login over iSER, RDMAExtensions in force" adm_has "iSER: RDMAExtensions Yes" login iser://$ip/$t/0
	ok "$p LIO: iseradm ls iser://$ip lists LUN 0" adm_has "LUN 0: LIO-ORG" ls iser://$ip
	ok "$p LIO: iseradm inq over iSER" adm_has "Vendor: LIO-ORG" inq iser://$ip/$t/0
	ok "$p LIO: iseradm readcap over iSER" adm_has "Blocks: 131072" readcap iser://$ip/$t/0
	ok "$p LIO: data written and read back over iSER (4 KiB-8 MiB, QD 16), and over TCP" \
		datacheck lio-$p -s 4k,128k,1m,8m --verify-url iscsi://127.0.0.1:3264/$t/0 iser://$ip/$t/0
	tmf_checks "$p LIO" iser://$ip/$t/0 8m
	if [ $p = rxe ]; then
		map_short "$p LIO map" iser://$ip/$t/0 fs
		map_short "tcp LIO map" iscsi://127.0.0.1:3264/$t/0
	fi
	lio_iser_teardown $ip
}

one_provider() {
	local p=$1 ip=$2
	vm_log "=== initiator library over iSER on $p ($ip)"
	ok "$p: no iSER portal yet: iseradm fails with a clear error (exit 2)" adm_exit 2 discover iser://$ip
	local tg
	for tg in $TARGETS; do on_$tg $p $ip; done
	return 0
}

for_each_rdma one_provider
vm_done
