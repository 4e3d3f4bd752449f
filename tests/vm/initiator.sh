# The Linux kernel initiator sequences, run against any target that exposes
# the layout below (isertd from isertd-*.json, LIO from lio.sh).  Sourced by
# the t-*.sh scripts after lib.sh.
#
#   PREFIX:open    ACL for $ISCSI_INITIATOR, no CHAP, LUNs 0 and 1
#   PREFIX:chap    ACL with one-way CHAP vm-init1 / vm-init1-secret, LUN 0
#   PREFIX:mutual  the same plus mutual CHAP vm-target / vm-target-secret, LUN 0
#   PREFIX:nvme    LUN 0 on /dev/nvme0n1 (write cache, UNMAP), no CHAP
# Nothing admits $ISCSI_STRANGER.
VM_PREFIX=iqn.2026-11.org.isert.vm
CHAP_USER=vm-init1 CHAP_PASS=vm-init1-secret
CHAP_MUSER=vm-target CHAP_MPASS=vm-target-secret

has_line() { grep -qx -- "$1"; }
# login_refused IQN PORTAL [IFACE]: the login fails and leaves no session.
login_refused() {
	local out rc
	out=$(iscsi_login "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	[ $rc -ne 0 ] && iscsi_no_session "$1"
}
login_wait() {   # login_wait IQN PORTAL NLUNS: log in and wait for the disks
	iscsi_login "$1" "$2" >/dev/null && iscsi_wait_disks "$1" "$3"
}
logout_gone() { iscsi_logout "$1" "$2" >/dev/null && iscsi_no_session "$1"; }

# fs_roundtrip IQN PORTAL NLUNS: ext4 on every LUN, files written, fsck -n
# clean; logout and a new login; the files read back identical.
fs_roundtrip() {
	local t=$1 p=$2 n=$3 lun dev disks
	must "$t: login, $n LUN(s) appear as block devices" login_wait "$t" "$p" "$n"
	disks=$(iscsi_disks "$t")
	echo "$disks" | sed 's/^/    LUN /'
	while read -r lun dev; do
		ok "$t LUN $lun ($dev): mkfs.ext4, mount, write, unmount, fsck -n clean" fs_write /dev/$dev /mnt/lun$lun
		cp "$VM_WORK/$dev.sums" "$VM_WORK/${t##*:}-lun$lun.sums"
	done <<< "$disks"
	must "$t: logout" logout_gone "$t" "$p"
	must "$t: second login" login_wait "$t" "$p" "$n"
	disks=$(iscsi_disks "$t")
	while read -r lun dev; do
		ok "$t LUN $lun ($dev): files read back identical after re-login" \
			fs_verify /dev/$dev /mnt/lun$lun "$VM_WORK/${t##*:}-lun$lun.sums"
	done <<< "$disks"
	must "$t: logout" logout_gone "$t" "$p"
}

# suite_tcp PORTAL: discovery, no CHAP, one-way and mutual CHAP, refusals.
suite_tcp() {
	local p=$1 found
	found=$(iscsi_discover "$p")
	echo "$found" | sed 's/^/    discovered /'
	ok "discovery lists $VM_PREFIX:open" has_line "$VM_PREFIX:open" <<< "$found"
	ok "discovery lists $VM_PREFIX:chap" has_line "$VM_PREFIX:chap" <<< "$found"
	ok "discovery lists $VM_PREFIX:mutual" has_line "$VM_PREFIX:mutual" <<< "$found"

	fs_roundtrip $VM_PREFIX:open "$p" 2

	local t=$VM_PREFIX:chap
	iscsi_node $t "$p"
	ok "$t: login without CHAP is refused" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER wrong-secret-123
	ok "$t: login with a wrong CHAP secret is refused" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS
	fs_roundtrip $t "$p" 1

	t=$VM_PREFIX:mutual
	iscsi_node $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS $CHAP_MUSER wrong-target-secret
	ok "$t: a target that fails mutual CHAP is refused by the initiator" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS $CHAP_MUSER $CHAP_MPASS
	fs_roundtrip $t "$p" 1

	# Another initiator name, no ACL: refused, whatever discovery showed it.
	must "iface for $ISCSI_STRANGER" iscsi_iface stranger $ISCSI_STRANGER
	iscsi_node $VM_PREFIX:open "$p" stranger
	ok "$ISCSI_STRANGER (no ACL): login to $VM_PREFIX:open refused" login_refused $VM_PREFIX:open "$p" stranger
	iscsiadm -m node -I stranger -o delete >/dev/null 2>&1
	iscsiadm -m iface -I stranger -o delete >/dev/null 2>&1
}

# ---- NVMe through the block backstore ---------------------------------------
sysfs_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
sysfs_gt0() { [ "$(cat "$1" 2>/dev/null || echo 0)" -gt 0 ]; }
count_ge1() {   # count_ge1 KIND: at least one such NVMe command since the last clear
	local n; n=$(nvmetrace_count "$1"); echo "    $n $1 command(s) on $NVME_DEV ($(nvmetrace_count zeroes) plain Write Zeroes)"
	[ "$n" -ge 1 ]
}
sectors_equal() {   # sectors_equal DEV LBA COUNT FILE: direct read matches FILE
	dd if="$1" iflag=direct bs=512 skip="$2" count="$3" status=none | cmp - "$4"
}
# fs_trim_roundtrip IQN PORTAL DEV: ext4, write, delete half, fstrim reaches
# the namespace as discards, fsck -n, re-login, the rest reads back.
fs_trim_cycle() {
	local dev=$1 mnt=/mnt/nvme out
	fs_write "$dev" $mnt || return 1
	mount "$dev" $mnt || return 1
	head -c $((24 << 20)) /dev/urandom > $mnt/big && sync -f $mnt/big && rm $mnt/big && sync -f $mnt || return 1
	nvmetrace_clear
	out=$(fstrim -v $mnt) || { umount $mnt; return 1; }
	echo "    $out"
	umount $mnt || return 1
	cp $TR/trace "$VM_WORK/trace-fstrim.txt"   # for a failure's post-mortem
	count_ge1 dealloc && e2fsck -f -n "$dev" >/dev/null
}

suite_nvme() {
	local p=$1 t=$VM_PREFIX:nvme lun dev hctl
	must "nvme: $NVME_DEV present with discard and a volatile write cache" nvme_ready
	must "discovery lists $t" has_line $t <<< "$(iscsi_discover "$p")"
	must "$t: login, 1 LUN" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	hctl=$(basename "$(readlink -f /sys/block/$dev/device)")
	ok "$t ($dev): initiator sees a volatile write cache" sysfs_is /sys/class/scsi_disk/$hctl/cache_type "write back"
	ok "$t ($dev): initiator sees FUA support" sysfs_is /sys/class/scsi_disk/$hctl/FUA 1
	ok "$t ($dev): initiator sees discard support" sysfs_gt0 /sys/block/$dev/queue/discard_max_bytes
	echo "    provisioning_mode $(cat /sys/class/scsi_disk/$hctl/provisioning_mode 2>/dev/null)"

	must "tracing NVMe commands" nvmetrace_start
	head -c 65536 /dev/urandom > /tmp/pat64k
	nvmetrace_clear
	ok "WRITE(10) FUA=1 via SG_IO succeeds" sg_dd if=/tmp/pat64k of=/dev/$dev bs=512 count=128 seek=40960 oflag=sgio,fua
	ok "WRITE with FUA reaches $NVME_DEV as a FUA write" count_ge1 fua
	ok "the FUA write's data reads back through the target" sectors_equal /dev/$dev 40960 128 /tmp/pat64k
	ok "the FUA write's data is on the namespace" sectors_equal $NVME_DEV 40960 128 /tmp/pat64k
	nvmetrace_clear
	ok "SYNCHRONIZE CACHE succeeds" sg_sync /dev/$dev
	ok "SYNCHRONIZE CACHE reaches $NVME_DEV as a flush" count_ge1 flush
	nvmetrace_clear
	ok "UNMAP succeeds" sg_unmap --force --lba=40960 --num=128 /dev/$dev
	ok "UNMAP reaches $NVME_DEV as a deallocation" count_ge1 dealloc
	ok "O_DIRECT writes through the block backstore (fio verify, io_uring)" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
			--iodepth=8 --size=8m --offset=64m --verify=crc32c --do_verify=1 --output="$VM_WORK/fio.log"
	nvmetrace_clear
	ok "$t ($dev): ext4 written, fstrim reaches $NVME_DEV as deallocations, fsck -n clean" fs_trim_cycle /dev/$dev
	nvmetrace_stop
	cp "$VM_WORK/$dev.sums" "$VM_WORK/nvme.sums"
	must "$t: logout" logout_gone $t "$p"
	must "$t: second login" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "$t ($dev): files read back identical after re-login" fs_verify /dev/$dev /mnt/nvme "$VM_WORK/nvme.sums"
	must "$t: logout" logout_gone $t "$p"
	ok "the file system is on the namespace itself (fsck -n on $NVME_DEV)" e2fsck -f -n $NVME_DEV
}

# ---- live changes through isertd's admin socket (iserctl) --------------------
# PREFIX:live: ACL for $ISCSI_INITIATOR, LUN 0 a 64 MiB RAM backstore (ext4
# here), LUN 1 the 64 MiB file backstore "vol"; isertd runs with
# --admin-socket $ISERTD_SOCK.
LIVE_HOT=33554432 LIVE_GROWN=134217728
kmsg_mark() { echo "isertvm: $1" > /dev/kmsg; }
dmesg_since() { dmesg | sed -n "/isertvm: $1\$/,\$p"; }   # dmesg_since MARK
dmesg_has() { dmesg_since "$1" | grep -q -- "$2"; }        # dmesg_has MARK PATTERN
live_login() {   # live_login IQN PORTAL IFACE: log in, 2 LUNs appear
	iscsi_node "$1" "$2" "$3" && iscsi_login "$1" "$2" "$3" >/dev/null && iscsi_wait_disks "$1" 2
}
lun_dev() { iscsi_disks "$1" | awk -v l="$2" '$1 == l {print $2}'; }   # lun_dev IQN LUN
hctl_of() { basename "$(readlink -f /sys/block/$1/device)"; }          # hctl_of DEV
size_is() { [ "$(blockdev --getsize64 "$1" 2>/dev/null)" = "$2" ]; }    # size_is DEV BYTES
lun_size_is() {  # lun_size_is IQN LUN BYTES: the LUN is a block device of BYTES
	local d; d=$(lun_dev "$1" "$2") && [ -n "$d" ] && [ -b /dev/$d ] && size_is /dev/$d "$3"
}
# isertd's view of the session: "TSIH PEER" (a relogin would change both).
isertd_session() { iserctl sessions | awk -v t="$1" '$4 == t {print $1, $5}'; }
# rw_at DEV OFFSET_MB: 1 MiB written there with O_DIRECT and read back.
rw_at() {
	head -c 1048576 /dev/urandom > /tmp/live-1m &&
	dd if=/tmp/live-1m of="$1" bs=1M seek="$2" oflag=direct status=none &&
	dd if="$1" bs=1M skip="$2" count=1 iflag=direct status=none | cmp - /tmp/live-1m
}
live_fs_start() {   # live_fs_start DEV MNT SUMS: ext4, mounted, a file written and synced
	mkfs.ext4 -q -F -E nodiscard "$1" && mkdir -p "$2" && mount "$1" "$2" || return 1
	head -c $((4 << 20)) /dev/urandom > "$2/before" && sync -f "$2/before" &&
		(cd "$2" && sha256sum before) > "$3"
}
live_fs_check() {   # live_fs_check DEV MNT SUMS: the file reads back from the LUN, a new one writes, fsck -n clean
	drop_caches
	(cd "$2" && sha256sum --quiet -c "$3") || return 1
	head -c $((1 << 20)) /dev/urandom > "$2/after" && sync -f "$2/after" || return 1
	umount "$2" && e2fsck -f -n "$1" > "$VM_WORK/live.fsck" 2>&1 || { cat "$VM_WORK/live.fsck"; return 1; }
}
live_no_errors() {  # live_no_errors MARK: no I/O, ext4 or connection error in dmesg since MARK
	local bad
	bad=$(dmesg_since "$1" | grep -E "I/O error|EXT4-fs error|EXT4-fs warning|Aborting journal|detected conn error|session recovery")
	[ -z "$bad" ] || { echo "$bad" | sed 's/^/    /'; return 1; }
}
live_hot_add() {   # live_hot_add IQN: backstore hot, LUN 2 on it, mapped_lun2 for $ISCSI_INITIATOR
	local out rc
	out=$(iserctl create /backstores/hot type=ram size=32M 2>&1 &&
		iserctl create /iscsi/$1/tpg1/luns backstore=hot 2>&1 &&
		iserctl create /iscsi/$1/tpg1/acls/$ISCSI_INITIATOR/mapped_lun2 tpg_lun=2 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	[ $rc -eq 0 ] && grep -q "/luns/lun2\$" <<< "$out" && grep -q "1 session told" <<< "$out"
}
session_same() {   # session_same IQN SID "TSIH PEER": the same kernel and isertd session, logged in
	[ "$(iscsi_sid "$1")" = "$2" ] && [ "$(isertd_session "$1")" = "$3" ] &&
		iscsiadm -m session -r "$2" -P 1 | grep -q "iSCSI Session State: LOGGED_IN"
}

# live_changes LABEL IQN PORTAL IFACE: in one session of the kernel initiator
# with ext4 mounted on LUN 0, iserctl hot-adds a 32 MiB RAM LUN (backstore,
# LUN, then the ACL's mapped LUN: REPORTED LUNS DATA HAS CHANGED reaches the
# kernel on its next command) and iscsiadm --rescan makes it a disk; then it
# grows LUN 1's file backstore to 128 MiB (CAPACITY DATA HAS CHANGED) and a
# rescan of the device shows the size.  The ext4 file reads back, no I/O
# error, and the session is the one from before.  Leaves the session logged in.
live_changes() {
	local l="$1: live" t=$2 portal=$3 iface=$4 mark="live $1" mnt=/mnt/live sums=$VM_WORK/live-$1.sum
	local sid who dev0 dev1 hctl1 dev2
	ok "$l: login to $t, LUN 0 (RAM) and LUN 1 (64 MiB file) appear" live_login $t $portal $iface || return 1
	sid=$(iscsi_sid $t) who=$(isertd_session $t) dev0=$(lun_dev $t 0) dev1=$(lun_dev $t 1)
	hctl1=$(hctl_of $dev1)
	echo "    session $sid (isertd TSIH and peer: $who); LUN 0 $dev0, LUN 1 $dev1 ($hctl1)"
	ok "$l: isertd sees the session (iserctl sessions)" test -n "$who"
	ok "$l: LUN 1 ($dev1) is 64 MiB" size_is /dev/$dev1 67108864
	ok "$l: ext4 on LUN 0 ($dev0): mkfs, mount, a 4 MiB file written and synced" live_fs_start /dev/$dev0 $mnt $sums ||
		return 1
	kmsg_mark "$mark"

	ok "$l: iserctl creates a 32 MiB RAM backstore, LUN 2 on it and the ACL's mapped_lun2 (1 session told)" \
		live_hot_add $t
	# The next command of each LUN gets the unit attention: an ext4 write on
	# LUN 0 (the kernel retries it), a TEST UNIT READY on LUN 1.
	head -c 65536 /dev/urandom > $mnt/during && sync -f $mnt/during
	sg_turs /dev/$dev1 >/dev/null 2>&1
	ok "$l: the kernel got REPORTED LUNS DATA HAS CHANGED" \
		wait_for 10 dmesg_has "$mark" "LUN assignments on this target have changed"
	iscsiadm -m session -r $sid --rescan >/dev/null
	ok "$l: after iscsiadm --rescan LUN 2 is a new disk of 32 MiB" wait_for 30 lun_size_is $t 2 $LIVE_HOT
	dev2=$(lun_dev $t 2)
	echo "    LUN 2 $dev2 ($(hctl_of $dev2))"
	ok "$l: 1 MiB written and read back on the hot-added LUN 2 ($dev2)" rw_at /dev/$dev2 31

	ok "$l: iserctl set /backstores/vol size=128M" iserctl set /backstores/vol size=128M
	sg_turs /dev/$dev1 >/dev/null 2>&1
	ok "$l: the kernel got CAPACITY DATA HAS CHANGED on LUN 1 ($hctl1)" \
		wait_for 10 dmesg_has "$mark" "$hctl1: Capacity data has changed"
	echo 1 > /sys/block/$dev1/device/rescan
	ok "$l: after a rescan blockdev --getsize64 $dev1 is 128 MiB" wait_for 10 size_is /dev/$dev1 $LIVE_GROWN
	ok "$l: 1 MiB written and read back at 127 MiB of LUN 1 (the grown part)" rw_at /dev/$dev1 127

	ok "$l: the ext4 file on LUN 0 reads back unchanged, a new one writes, fsck -n clean" \
		live_fs_check /dev/$dev0 $mnt $sums
	ok "$l: dmesg shows no I/O, ext4 or connection error since the changes" live_no_errors "$mark"
	ok "$l: the same session (SID $sid, isertd TSIH and peer $who), logged in, no relogin" session_same $t $sid "$who"
}
live_end() {   # live_end IQN PORTAL IFACE: unmount (if a check stopped early), log out
	umount /mnt/live 2>/dev/null
	iscsi_logout "$1" "$2" "$3" >/dev/null && iscsi_no_session "$1"
}
