#!/bin/bash
# Crash consistency (tests/crash/README.md): isertd's backstore sits on a
# dm-log-writes device over the NVMe namespace, so every write, FUA and flush
# isertd makes durable is logged in order.  The kernel initiator puts a file
# system on the LUN and runs a seeded fsync workload that marks the log after
# each fsync it saw complete; then replay-check.py replays the log to every
# flush, FUA write and mark, and at each the file system mounts, fsck -n is
# clean and every file fsynced before has its contents.  Configurations:
# block, nvme (through an NVMe loop controller) and file backstores,
# write cache on and off, ext4 and XFS, over TCP
# and iSER on Soft-RoCE ($CRASH_CONFIGS picks; "all" is the whole matrix).
# Then isertd-nodurable (FUA and SYNCHRONIZE CACHE acknowledged without being
# made durable) must be caught, with the write cache on and off.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
CRASH=$ISERT_SRC/tests/crash
IQN=iqn.2026-11.org.isert.vm:crash
MNT=/mnt/crash SRV=/srv/crash
LOG_DEV=/dev/mapper/crashlog LW=crashlw
SEED=${CRASH_SEED:-7} NGROUPS=${CRASH_GROUPS:-4}
# "backstore fs write_cache transport" lines.  The default gives each backstore,
# file system, cache setting and transport a run (nvme xfs off iser is also the
# regression test of the nvme backstore's Flush after a deallocation).
CRASH_CONFIGS=${CRASH_CONFIGS:-"block ext4 on tcp
nvme xfs off iser
file xfs on tcp"}
if [ "$CRASH_CONFIGS" = all ]; then
	CRASH_CONFIGS=$(for b in block nvme file; do for f in ext4 xfs; do for w in on off; do for t in tcp iser; do
		echo "$b $f $w $t"; done; done; done; done)
fi
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1; isertd_stop >/dev/null 2>&1
	umount $MNT $SRV 2>/dev/null; nvmet_down; dmsetup remove $LW crashdata crashlog 2>/dev/null
}

must "nvme: $NVME_DEV present" nvme_ready
must "iscsid" iscsi_start
RXE_IP=$(rdma_up rxe) || RXE_IP=

# XFS needs 300 MiB; the data region is sized for each file system, the log takes the rest.
data_mb() { case $1 in xfs) echo 320;; *) echo 64;; esac; }

# dm_create NAME TABLE: a device-mapper device and its /dev/mapper node (no udev here).
dm_create() { dmsetup create "$1" --table "$2" && dmsetup mknodes "$1"; }
# lw_setup MB: a fresh log-writes device of MB over the namespace's first MB, its log after it.
lw_setup() {
	local ds=$(($1 * 2048)) total
	total=$(blockdev --getsz $NVME_DEV) || return 1
	dm_create crashdata "0 $ds linear $NVME_DEV 0" &&
	dm_create crashlog "0 $((total - ds)) linear $NVME_DEV $ds" &&
	dd if=/dev/zero of=$LOG_DEV bs=4096 count=1 oflag=direct status=none &&
	dm_create $LW "0 $ds log-writes /dev/mapper/crashdata $LOG_DEV"
}
lw_mark() { dmsetup message $LW 0 mark "$1"; }

# The nvme backstore passes NVMe commands through to a controller, so
# dm-log-writes cannot sit under it directly: the kernel's NVMe target (nvmet)
# exports the log-writes device as a namespace of a loop controller, whose
# FUA writes and flushes become REQ_FUA and REQ_PREFLUSH bios on it.
NVMET=/sys/kernel/config/nvmet NQN=nqn.2026-11.org.isert.vm:crash
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000c0ffee00
nvmet_up() {
	local s=$NVMET/subsystems/$NQN p=$NVMET/ports/1
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	mkdir $s && echo 1 > $s/attr_allow_any_host && mkdir $s/namespaces/1 &&
	echo -n /dev/mapper/$LW > $s/namespaces/1/device_path && echo 1 > $s/namespaces/1/enable &&
	mkdir -p $p && echo loop > $p/addr_trtype && ln -s $s $p/subsystems/$NQN &&
	nvme connect -t loop -n $NQN --hostnqn=$HOSTNQN >/dev/null && wait_for 20 nvmet_ng
}
nvmet_ng() {   # the loop controller's namespace as a generic (passthrough) device
	local c
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat $c/subsysnqn 2>/dev/null)" = $NQN ] && [ -c /dev/ng${c##*nvme}n1 ] && { echo /dev/ng${c##*nvme}n1; return 0; }
	done
	return 1
}
nvmet_down() {
	nvme disconnect -n $NQN >/dev/null 2>&1
	rm -f $NVMET/ports/1/subsystems/$NQN; rmdir $NVMET/ports/1 2>/dev/null
	[ -d $NVMET/subsystems/$NQN ] && { echo 0 > $NVMET/subsystems/$NQN/namespaces/1/enable
		rmdir $NVMET/subsystems/$NQN/namespaces/1 $NVMET/subsystems/$NQN; }
	return 0
}

# crash_config BACKSTORE FS WC TRANSPORT: isertd's configuration on stdout.
crash_config() {
	local path=/dev/mapper/$LW kind=block portals='{ "ip": "127.0.0.1", "port": 3260 }'
	[ "$1" = file ] && path=$SRV/lun.img kind=file
	[ "$1" = nvme ] && path=$(nvmet_ng) kind=nvme
	[ "$4" = iser ] && portals="$portals, { \"ip\": \"$RXE_IP\", \"port\": 3260, \"iser\": true }"
	cat <<-EOF
	{ "backstores": [ { "name": "crash", "type": "$kind", "path": "$path", "thin": true,
	    "write_cache": $([ "$3" = on ] && echo true || echo false) } ],
	  "targets": [ { "iqn": "$IQN", "tpgs": [ { "tag": 1, "portals": [ $portals ],
	    "luns": [ { "lun": 0, "backstore": "crash" } ],
	    "acls": [ { "initiator": "$ISCSI_INITIATOR", "mapped_luns": [ { "mapped_lun": 0, "tpg_lun": 0 } ] } ] } ] } ] }
	EOF
}

mkfs_any() { case $1 in xfs) mkfs.xfs -q -f "$2";; *) mkfs.ext4 -q -F "$2";; esac; }

# crash_run NAME BACKSTORE FS WC TRANSPORT ISERTD: the workload through
# isertd, then the replay check; its output in $VM_WORK/NAME.replay.
# Status 3: the replay found inconsistent points; 1: the run itself failed.
crash_run() {
	local name=$1 bs=$2 fs=$3 wc=$4 tr=$5 bin=$6 mb portal iface=default dev rc
	mb=$(data_mb "$fs")
	[ "$bs" = file ] && mb=$((mb + 64))   # room for the backstore's own ext4
	lw_setup $mb || return 1
	if [ "$bs" = file ]; then
		mkfs.ext4 -q -F /dev/mapper/$LW && mkdir -p $SRV && mount /dev/mapper/$LW $SRV &&
		truncate -s $(data_mb "$fs")M $SRV/lun.img || return 1
	fi
	[ "$bs" = nvme ] && { nvmet_up || return 1; }
	crash_config "$bs" "$fs" "$wc" "$tr" > /tmp/crash.json
	"$bin" --config /tmp/crash.json >> "$VM_WORK/isertd.log" 2>&1 &
	ISERTD_PID=$!
	wait_for 20 port_listening 3260 || return 1
	portal=127.0.0.1:3260
	[ "$tr" = iser ] && portal=$RXE_IP:3260 iface=iser
	iscsi_node $IQN $portal $iface && iscsi_login $IQN $portal $iface >/dev/null && iscsi_wait_disks $IQN 1 || return 1
	dev=/dev/$(iscsi_disks $IQN | awk '{print $2}')
	[ "$(cat /sys/block/${dev#/dev/}/queue/write_cache)" = "$([ $wc = on ] && echo 'write back' || echo 'write through')" ] ||
		{ vm_log "$dev: the initiator sees write cache '$(cat /sys/block/${dev#/dev/}/queue/write_cache)'"; return 1; }
	rm -f "$VM_WORK/$name.manifest"
	mkfs_any "$fs" "$dev" && lw_mark mkfs && mkdir -p $MNT && mount -t "$fs" "$dev" $MNT &&
	python3 "$CRASH/fsync-workload.py" $MNT "$VM_WORK/$name.manifest" --seed $SEED --groups $NGROUPS \
		--mark-cmd "dmsetup message $LW 0 mark" &&
	umount $MNT && lw_mark umount || return 1
	iscsi_logout $IQN $portal $iface >/dev/null
	kill -TERM $ISERTD_PID; wait $ISERTD_PID; rc=$?; ISERTD_PID=
	[ "$bs" = file ] && { umount $SRV || return 1; }
	[ "$bs" = nvme ] && nvmet_down
	dmsetup remove $LW || return 1   # the log's last entries are written
	[ $rc -eq 0 ] || { vm_log "isertd exited with $rc"; return 1; }
	local inner=()
	[ "$bs" = file ] && inner=(--inner lun.img --inner-fs "$fs")
	python3 "$CRASH/replay-check.py" $LOG_DEV "$VM_WORK/$name.manifest" --fs "$([ "$bs" = file ] && echo ext4 || echo "$fs")" \
		--size $((mb << 20)) --work /tmp/replay "${inner[@]}" > "$VM_WORK/$name.replay" 2>&1
	rc=$?
	dmsetup remove crashdata crashlog
	sed 's/^/    /' "$VM_WORK/$name.replay" | tail -8
	return $rc
}

while read -r bs fs wc tr; do
	[ -n "$bs" ] || continue
	[ "$tr" = iser ] && [ -z "$RXE_IP" ] && { ok "Soft-RoCE for $bs $fs wc=$wc over iSER" false; continue; }
	ok "replay: $bs backstore, $fs, write cache $wc, $tr: every flush, FUA and fsync point consistent" \
		crash_run "$bs-$fs-wc$wc-$tr" "$bs" "$fs" "$wc" "$tr" "$ISERT_BUILD/target/isertd"
	vm_cleanup_hook
done <<< "$CRASH_CONFIGS"

# The check must be able to fail: a target that acknowledges before the data is durable.
broken() { crash_run "nodurable-$1" block ext4 "$1" tcp "$ISERT_BUILD/target/isertd-nodurable"; [ $? -eq 3 ]; }
for wc in on off; do
	ok "isertd-nodurable (write cache $wc: $([ $wc = on ] && echo 'SYNCHRONIZE CACHE' || echo 'FUA writes') not made durable) is caught by the replay" \
		broken $wc
	vm_cleanup_hook
done
vm_done
