# `iseradm map` checks (sourced by t-initiator-iser.sh and t-multipath.sh): a LUN as a ublk
# block device through the initiator library, used by the kernel's own tools.
# Needs $ADM (iseradm with our initiator name) and lib.sh.

# map_up VAR URL [OPTIONS]: iseradm map --daemon; VAR gets the device.
map_up() {
	local var=$1 out; shift
	out=$(timeout 90 $ADM map --daemon "$@" 2>&1) || { echo "$out" | sed 's/^/    /'; return 1; }
	echo "    $out"
	printf -v "$var" %s "$out"
	[ -b "$out" ]
}
map_down() { timeout 200 $ADM unmap "$1" | sed 's/^/    /'; [ "${PIPESTATUS[0]}" -eq 0 ] && [ ! -e "$1" ]; }
# map_attr DEV FILE VALUE: /sys/block/DEV/FILE is VALUE.
map_attr() { local v; v=$(cat /sys/block/${1#/dev/}/$2); echo "    $2 = $v"; [ "$v" = "$3" ]; }
# map_fio NAME DEV SIZE [FIO OPTIONS]: random 4k-256k writes, all read back with crc32c.
map_fio() {
	local n=$1 dev=$2 sz=$3 out=$VM_WORK/fio-map-$1.txt; shift 3
	fio --name=$n --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite \
		--bsrange=4k-256k --verify=crc32c --verify_fatal=1 --do_verify=1 --size=$sz --eta=never \
		"$@" --output=$out > /dev/null 2>&1
	local rc=$?
	grep -E "err=|verify|WRITE:|READ:" $out | head -4 | sed 's/^/    /'
	[ $rc -eq 0 ] && grep -q "err= 0" $out && ! grep -q "verify failed\|bad magic" $out
}
# map_listed DEV PATTERN: `iseradm maps` shows DEV with PATTERN.
map_listed() {
	local out; out=$($ADM maps 2>&1)
	echo "$out" | sed 's/^/    /'
	awk -v d="$1" '$1 == d { p = 1; print; next } /^\// { p = 0 } p' <<< "$out" | grep -q -- "$2"
}
map_json_has() { local out; out=$($ADM --json maps 2>&1); grep -q -- "$1" <<< "$out" || { echo "$out" | sed 's/^/    /'; return 1; }; }
# map_discard DEV: blkdiscard of the first 8 MiB, which then read as zeroes (thin LU).
map_discard() {
	head -c 8M /dev/urandom | dd of=$1 bs=1M oflag=direct status=none &&
		blkdiscard -o 0 -l 8M $1 && blkdiscard -z -o 8M -l 4M $1 &&
		cmp -n 12M $1 /dev/zero
}
map_ro_refuses() { ! dd if=/dev/zero of=$1 bs=4k count=1 oflag=direct status=none 2>/dev/null; }

# map_queues_up DEV URL N: `iseradm maps` lists DEV with its target, LUN and transport, N queues up.
map_queues_up() {
	local tr=tcp
	[[ $2 == iser://* ]] && tr=iser
	map_listed $1 "/${2#*//*/}  $tr  " &&
		[ "$($ADM maps | awk -v d="$1" '$1 == d { p = 1; next } /^\// { p = 0 } p' | grep -c ': up,')" -eq $3 ]
}
# map_remap_verify URL SUMS: map again, fsck -n clean, the files read back, unmap.
map_remap_verify() {
	local d
	map_up d "$1" && e2fsck -f -n $d > $VM_WORK/map-fsck.txt 2>&1 && fs_verify $d /mnt/map "$2" && map_down $d
}

# map_full LABEL URL URL4K: isertd's thin 256 MiB RAM LUN and its 4096-byte one:
# geometry, maps, fio verify, discard and write zeroes, ext4 across an unmap.
map_full() {
	local l=$1 u=$2 u4k=$3 dev dev4k
	ok "$l: iseradm map --queues 2 gives a block device" map_up dev "$u" --queues 2 --depth 32 || return 1
	ok "$l: 512-byte logical blocks, 256 MiB" map_attr $dev queue/logical_block_size 512 &&
		map_attr $dev size 524288
	ok "$l: iseradm maps lists it with its URL and transport, both queues up" map_queues_up $dev "$u" 2
	ok "$l: fio randwrite 4k-256k QD16, crc32c verify" map_fio ${l// /-} $dev 16m
	ok "$l: discard (UNMAP) and write zeroes (WRITE SAME) read back as zeroes" map_discard $dev
	ok "$l: mkfs.ext4, mount, write, fsck -n clean" fs_write $dev /mnt/map
	ok "$l: iseradm unmap removes the device" map_down $dev
	ok "$l: mapped again, fsck clean and every file reads back" map_remap_verify "$u" "$VM_WORK/${dev##*/}.sums"
	ok "$l: a 4096-byte-block LUN maps with 4096-byte logical blocks" map_up dev4k "$u4k" &&
		map_attr $dev4k queue/logical_block_size 4096 &&
	ok "$l: 4096-byte LUN: fio verify" map_fio ${l// /-}-4k $dev4k 16m --bsrange=4k-128k &&
	ok "$l: 4096-byte LUN: unmapped" map_down $dev4k
}
map_fs() { fs_write $1 /mnt/map && fs_verify $1 /mnt/map $VM_WORK/${1##*/}.sums; }
# map_short LABEL URL [fs]: map, fio verify, [ext4 with fsck], unmap.
map_short() {
	local l=$1 u=$2 dev
	ok "$l: iseradm map gives a block device" map_up dev "$u" || return 1
	ok "$l: fio randwrite 4k-256k QD16, crc32c verify" map_fio ${l// /-} $dev 16m
	[ "$3" = fs ] && ok "$l: mkfs.ext4, mount, write, fsck -n clean, read back" map_fs $dev
	ok "$l: iseradm unmap removes the device" map_down $dev
}

map_kill_restart() { kill -9 $ISERTD_PID; wait $ISERTD_PID 2>/dev/null; ISERTD_PID=; sleep 2; isertd_start $1 $2; }
# map_grown DEV: after the target grew the LUN, a read works (the unit
# attention retried), `maps` flags the change (the state file follows
# within a second), the device keeps its size
# (ublk before Linux 6.16 cannot resize a started device).
map_grown() {
	dd if=$1 of=/dev/null bs=4k count=1 skip=779 iflag=direct status=none &&
		wait_for 10 map_json_has '"capacity_changed":true' && map_listed $1 "capacity changed on the target" &&
		map_attr $1 size 131072
}
# map_target_loss URL CONFIG PORT: isertd killed (-9) and restarted while fio
# verifies the mapped device; then gone for longer than --timeout; back with
# an admin socket, it grows the LUN.
map_target_loss() {
	local u=$1 cfg=$2 port=$3 dev fpid rc out=$VM_WORK/fio-map-kill.txt sock=/run/isertd-map.sock
	ok "target loss: mapped with --timeout 20 (a file LUN: its data outlives isertd)" \
		map_up dev "$u" --timeout 20 || return 1
	# Paced (about 10 s of writes) so the kill lands mid-fio however fast the host is:
	# a byte rate, as --rate_iops with --bsrange paces at the smallest size (82 s).
	fio --name=kill --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite --bsrange=4k-64k \
		--rate=,3m --verify=crc32c --verify_fatal=1 --do_verify=1 --size=32m --eta=never --output=$out \
		>/dev/null 2>&1 &
	fpid=$!
	sleep 3
	ok "target loss: fio still writing when isertd is killed" kill -0 $fpid
	ok "target loss: isertd killed (-9) mid-fio, started again 2 s later" map_kill_restart $cfg $port
	wait $fpid; rc=$?
	grep -E "err=|verify" $out | head -3 | sed 's/^/    /'
	ok "target loss: fio finished with no error and verified" bash -c "[ $rc -eq 0 ] && grep -q 'err= 0' $out"
	ok "target loss: iseradm maps counts the reconnect" wait_for 10 map_json_has '"reconnects":1'
	kill -9 $ISERTD_PID; wait $ISERTD_PID 2>/dev/null; ISERTD_PID=
	ok "target loss: isertd gone for longer than the timeout: a read fails with an I/O error" \
		bash -c "! timeout 90 dd if=$dev of=/dev/null bs=4k count=1 skip=777 iflag=direct status=none"
	# (the state file follows within a second)
	ok "target loss: iseradm maps shows the path failed" wait_for 10 map_listed $dev failed
	ISERTD_SOCK=$sock isertd_start $cfg $port
	ok "target loss: the target back, the queue logs in again and reads work" \
		wait_for 40 dd if=$dev of=/dev/null bs=4k count=1 skip=778 iflag=direct status=none
	ISERTD_SOCK=$sock iserctl set /backstores/file0 size=96M >/dev/null
	ok "capacity: the file LUN grown to 96 MiB (iserctl): I/O goes on, maps says to map again, the device keeps 64 MiB" \
		map_grown $dev
	kill -9 $ISERTD_PID; wait $ISERTD_PID 2>/dev/null; ISERTD_PID=; rm -f $sock
	ok "target loss: with the target gone, iseradm unmap still works" map_down $dev
	isertd_start $cfg $port
}

# map_killed URL: iseradm map killed (-9): the device goes, unmap cleans up.
map_killed() {
	local u=$1 dev
	ok "killed map: mapped" map_up dev "$u" || return 1
	kill -9 "$(map_pid $dev)"
	ok "killed map: the block device is removed by the kernel" wait_for 30 bash -c "[ ! -e $dev ]"
	ok "killed map: iseradm maps says it is dead" map_listed $dev dead
	ok "killed map: iseradm unmap deletes what is left" bash -c "$ADM unmap $dev && [ ! -e /dev/ublkc${dev#/dev/ublkb} ]"
	ok "killed map: nothing listed afterwards" bash -c "! $ADM maps | grep -q '^$dev '"
}

# map_pid DEV: the pid of the iseradm map serving DEV
map_pid() { $ADM --json maps | python3 -c "import json,sys; print([m['pid'] for m in json.load(sys.stdin) if m['device']=='$1'][0])"; }
# map_recovery URL: a --recoverable map killed (-9) mid-fio; --recover takes the
# device over and fio finishes clean; killed again, unmap removes it.
map_recovery() {
	local u=$1 dev dev2 fpid rc out=$VM_WORK/fio-map-recover.txt
	ok "recovery: mapped with --recoverable" map_up dev "$u" --recoverable || return 1
	# Paced, as in map_target_loss: the kill lands mid-fio.
	fio --name=recover --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite --bsrange=4k-64k \
		--rate=,3m --verify=crc32c --verify_fatal=1 --do_verify=1 --size=32m --eta=never --output=$out \
		>/dev/null 2>&1 &
	fpid=$!
	sleep 3
	ok "recovery: fio still writing when iseradm map is killed" kill -0 $fpid
	kill -9 "$(map_pid $dev)"
	ok "recovery: iseradm map killed (-9) mid-fio: the device stays, maps says its I/O waits" \
		wait_for 10 map_listed $dev "its I/O waits"
	ok "recovery: iseradm map --recover takes the device over" map_up dev2 "$u" --recover ${dev#/dev/ublkb} &&
		[ "$dev2" = "$dev" ]
	wait $fpid; rc=$?
	grep -E "err=|verify" $out | head -3 | sed 's/^/    /'
	ok "recovery: fio finished with no error and verified" bash -c "[ $rc -eq 0 ] && grep -q 'err= 0' $out"
	kill -9 "$(map_pid $dev)"
	ok "recovery: killed again, iseradm unmap removes the waiting device" \
		bash -c "sleep 1; $ADM unmap $dev && [ ! -e $dev ] && [ ! -e /dev/ublkc${dev#/dev/ublkb} ]"
}

# map_path_is DEV N STATE: `iseradm maps` shows path N of every queue of DEV in STATE.
map_path_is() {
	local lines
	lines=$($ADM maps | awk -v d="$1" '$1 == d { p = 1; next } /^\// { p = 0 } p' | grep "path $2 ")
	echo "$lines" | sed 's/^/    /'
	[ -n "$lines" ] && ! grep -v ": $3," <<< "$lines" | grep -q .
}
map_refused() { local x; ! map_up x "$@"; }
# map_multipath IP NETDEV URL-ISER URL-TCP URL-OTHER-LU: two paths to one LU,
# the iSER one first (failover); its link goes down under fio and comes back.
map_multipath() {
	local ip=$1 nd=$2 u1=$3 u2=$4 dev fpid rc out=$VM_WORK/fio-map-mp.txt
	ok "multipath: a URL of another LU is refused (VPD 83h differs)" map_refused "$u1" "$5"
	ok "multipath: iseradm map with two URLs of one LU (iSER, TCP)" map_up dev "$u1" "$u2" --queues 2 || return 1
	ok "multipath: maps shows both paths up on both queues" map_queues_up $dev "$u1" 4
	fio --name=mp --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite --bsrange=4k-64k \
		--verify=crc32c --verify_fatal=1 --verify_backlog=64 --size=32m --time_based --runtime=45 --eta=never \
		--output=$out >/dev/null 2>&1 &
	fpid=$!
	sleep 3
	# Link and address: siw's connections to a local address do not notice the link alone.
	# (rxe0 takes no new connection to isertd's listener once its address went away and came back.)
	ip link set $nd down && ip addr flush dev $nd
	ok "multipath: the iSER path's link down mid-fio: maps shows it failed" wait_for 60 map_path_is $dev 0 failed
	ok "multipath: fio still writes over TCP" bash -c "kill -0 $fpid"
	ip addr add $ip/24 dev $nd && ip link set $nd up
	ok "multipath: the link back, the iSER path logs in again" wait_for 60 map_path_is $dev 0 up
	wait $fpid; rc=$?
	grep -E "err=|verify" $out | head -3 | sed 's/^/    /'
	ok "multipath: fio finished with no error and verified" bash -c "[ $rc -eq 0 ] && grep -q 'err= 0' $out"
	ok "multipath: unmapped" map_down $dev
}
