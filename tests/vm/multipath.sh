# dm-multipath helpers for scripts in the test guest (t-multipath.sh,
# t-cluster.sh): multipathd with udevd, one map over the paths of one LU,
# where the I/O goes, and fio rounds that write and verify the map.
# Source after lib.sh.

# mp_udev: udevd in the guest (multipathd finds paths and dm devices through
# udev).  systemd's tools refuse to act in a chroot unless told.
mp_udev() {
	export SYSTEMD_IGNORE_CHROOT=1
	[ -S /run/udev/control ] || /lib/systemd/systemd-udevd --daemon || return 1
	udevadm trigger --action=add && udevadm settle -t 30
}
# MP_FIND: multipath.conf's find_multipaths (default no: every ISERT disk is a
# map; yes: only LUs seen through two paths, where other disks must stay plain).
mp_conf() {
	mkdir -p /etc/multipath
	sed "s/@FIND@/${MP_FIND:-no}/" > /etc/multipath.conf <<'EOF'
defaults {
	user_friendly_names no
	find_multipaths @FIND@
	polling_interval 1
}
blacklist {
	devnode "^(nvme|nullb|ram|loop|dm-)"
}
devices {
	device {
		vendor "ISERT"
		product ".*"
		path_grouping_policy group_by_prio
		prio alua
		hardware_handler "1 alua"
		path_checker tur
		failback immediate
		no_path_retry 60
		fast_io_fail_tmo 5
	}
}
EOF
}
mp_start() {
	mp_conf && mp_udev || return 1
	multipathd -d -s > "$VM_WORK/multipathd.log" 2>&1 &
	MP_PID=$!
	wait_for 30 multipathd show daemon
}
mp_stop() {
	multipath -F >/dev/null 2>&1
	[ -n "${MP_PID:-}" ] && kill $MP_PID 2>/dev/null && wait $MP_PID 2>/dev/null
	MP_PID=
	return 0
}
# mp_dev IP: the disk of the session whose connection goes to IP.
mp_dev() {
	local c s
	for c in /sys/class/iscsi_connection/connection*; do
		[ "$(cat $c/persistent_address 2>/dev/null)" = "$1" ] || continue
		s=${c##*/connection}; s=${s%%:*}
		ls /sys/class/iscsi_session/session$s/device/target*/*:*:*:*/block 2>/dev/null | head -1
		return 0
	done
	return 1
}
# mp_map_of DEV1 DEV2: the dm device whose two paths are DEV1 and DEV2.
mp_map() { ls /sys/block/$1/holders 2>/dev/null | head -1; }
mp_two_paths() { [ -n "$(mp_map $1)" ] && [ "$(mp_map $1)" = "$(mp_map $2)" ] && [ -b /dev/$(mp_map $1) ]; }
# mp_prio DEV: multipathd's priority of the path.
mp_prio() { multipathd show paths raw format "%d %p" | awk -v d="$1" '$1 == d {print $2}'; }
mp_prio_above() {   # mp_prio_above DEV1 DEV2: DEV1's priority is higher
	local a b; a=$(mp_prio $1) b=$(mp_prio $2)
	echo "    priorities: $1 $a, $2 $b"
	[ -n "$a" ] && [ -n "$b" ] && [ "$a" -gt "$b" ]
}
mp_sectors() { awk '{print $3 + $7}' /sys/block/$1/stat; }   # sectors read + written
# mp_io_on DEV OTHER: over one second I/O reaches DEV and none reaches OTHER.
mp_io_on() {
	local a1 b1 a2 b2
	a1=$(mp_sectors $1) b1=$(mp_sectors $2); sleep 1; a2=$(mp_sectors $1) b2=$(mp_sectors $2)
	[ $((a2 - a1)) -gt 0 ] && [ $((b2 - b1)) -eq 0 ]
}
# mp_fio_loop DEV: fio rounds (32 MiB of random 4k-64k writes, then all of it
# verified) until $VM_WORK/mp.stop exists; one line per round in mp-fio.txt.
mp_fio_loop() {
	local i=0 rc
	: > "$VM_WORK/mp-fio.txt"
	while [ ! -e "$VM_WORK/mp.stop" ]; do
		i=$((i + 1))
		fio --name=mp --filename=/dev/$1 --direct=1 --ioengine=libaio --iodepth=16 --rw=randwrite \
			--bsrange=4k-64k --size=32m --offset=$(( (i % 4) * 32 ))m --verify=crc32c --verify_fatal=1 \
			--do_verify=1 --eta=never --output="$VM_WORK/mp-fio-$i.txt"
		rc=$?
		echo "round $i rc $rc" >> "$VM_WORK/mp-fio.txt"
		[ $rc -eq 0 ] || grep -E "verify|error|err=" "$VM_WORK/mp-fio-$i.txt" | head -5 >> "$VM_WORK/mp-fio.txt"
	done
}
mp_fio_clean() {   # at least N rounds ended, every one with status 0
	local n
	n=$(grep -c "^round" "$VM_WORK/mp-fio.txt")
	sed 's/^/    /' "$VM_WORK/mp-fio.txt" | tail -3
	echo "    $n fio rounds"
	[ "$n" -ge "$1" ] && ! grep -q "^round .* rc [1-9]" "$VM_WORK/mp-fio.txt" && [ "$(grep -c . "$VM_WORK/mp-fio.txt")" -eq "$n" ]
}
mp_rounds_ge() { [ "$(grep -c "^round" "$VM_WORK/mp-fio.txt")" -ge "$1" ]; }
mp_show() { multipathd show paths raw format "%d %t %T %p %s" | sed 's/^/    /'; }
