# Helpers for scripts that run inside the test guest (source "$VM_LIB").
# run.sh exports ISERT_SRC, ISERT_BUILD, VM_WORK (the share folder: its files
# survive the guest) and VM_LIB.  Functions return non-zero on failure and
# never sleep for a fixed time where a condition can be polled.

# The helpers below that run for every check and every poll use bash builtins
# only: under TCG each program started costs the guest about 90 ms of CPU
# (a fork alone about 9 ms), which a poll every 50 ms would spend on itself.
# vm_cs: the guest's uptime in centiseconds, in VM_CS (/proc/uptime has two decimals).
vm_cs() { local up _; read -r up _ < /proc/uptime; VM_CS=$((10#${up/./})); }
# vm_secs VAR CS: CS centiseconds as seconds with one decimal, in VAR.
vm_secs() { printf -v "$1" '%d.%d' $(($2 / 100)) $(($2 % 100 / 10)); }
vm_cs; VM_T0=$VM_CS VM_PASS=0 VM_FAIL=0
vm_now() { vm_cs; printf '%d.%02d\n' $((VM_CS / 100)) $((VM_CS % 100)); }
vm_log() { vm_cs; printf '[%d.%02d] %s\n' $((VM_CS / 100)) $((VM_CS % 100)) "$*"; }
# A sleep without starting sleep(1): a read that times out on a pipe nobody writes.
exec {VM_SLEEP_FD}<> <(:)
vm_sleep() { read -rt "$1" -u $VM_SLEEP_FD _ || :; }

# ok DESC CMD...: one check; its output goes to the console.
# Each line ends with the check's duration and, after "@", the guest uptime it
# started at: the gaps between checks show where a test spends time unchecked.
vm_took() {   # vm_took START: seconds since START (a vm_now value: two decimals), e.g. "1.2s"
	local s; vm_cs; vm_secs s $((VM_CS - 10#${1/./})); echo "${s}s"
}
vm_span() {   # vm_span START_CS: "1.2s @345.6", in VM_SPAN
	local d a; vm_cs; vm_secs d $((VM_CS - $1)); vm_secs a $1; VM_SPAN="${d}s @$a"
}
# A failure whose description contains a line's PATTERN from $VM_KNOWN
# ("PATTERN | reason", see known-failures.txt) is reported, not counted.
VM_KNOWN=${VM_KNOWN:-} VM_XFAIL=0
vm_known() {   # vm_known DESC: listed? The reason in VM_WHY.
	[ -n "$VM_KNOWN" ] && [ -f "$VM_KNOWN" ] || return 1
	local pat why
	while IFS='|' read -r pat why; do
		pat=${pat%"${pat##*[![:space:]]}"}
		case $pat in ''|'#'*) continue;; esac
		case $1 in *"$pat"*) VM_WHY=${why# }; return 0;; esac
	done < "$VM_KNOWN"
	return 1
}
ok() {
	local d=$1 t ok_rc; shift   # ok_rc: a name no check uses (bash scopes are dynamic)
	vm_cs; t=$VM_CS
	"$@"; ok_rc=$?
	vm_span $t
	if [ $ok_rc -eq 0 ]; then
		VM_PASS=$((VM_PASS + 1))
		if vm_known "$d"; then echo "ok - $d [$VM_SPAN] # listed as known failure: remove it from ${VM_KNOWN##*/}"
		else echo "ok - $d [$VM_SPAN]"; fi
		return 0
	fi
	if vm_known "$d"; then
		VM_XFAIL=$((VM_XFAIL + 1)); echo "not ok - $d [$VM_SPAN] # TODO known: $VM_WHY"; return 1
	fi
	VM_FAIL=$((VM_FAIL + 1)); echo "not ok - $d [$VM_SPAN]"; vm_rdma_state; return 1
}
# After a failed check, the state of each RDMA device's QP1 (GSI): on
# Soft-RoCE, QP1 in ERR means no connection to or from the device can be made
# any more, whoever's (tests/chaos/README.md), which a failure should name.
vm_rdma_state() {
	local q
	q=$(rdma res show qp 2>/dev/null | grep 'type GSI') || return 0
	sed 's/^/    QP1: /' <<< "$q"
}
# vm_xfail DESC WHY: a check that failed for a reason the test has shown is not isertd's.
vm_xfail() { VM_XFAIL=$((VM_XFAIL + 1)); echo "not ok - $1 # TODO known: $2"; }
# must DESC CMD...: a check the rest of the script depends on.
must() { ok "$@" || { echo "    (fatal: stopping here)"; vm_done; }; }
# vm_done: closing line and exit status.  Scripts may redefine vm_cleanup_hook.
vm_cleanup_hook() { :; }
vm_done() {
	vm_cleanup_hook
	[ "$VM_XFAIL" -eq 0 ] || echo "($VM_XFAIL known failure(s), each with its reason above)"
	local t; vm_cs; vm_secs t $((VM_CS - VM_T0))
	echo "$VM_PASS passed, $VM_FAIL failed (guest time $t s)"
	[ "$VM_FAIL" -eq 0 ] && [ "$VM_PASS" -gt 0 ]
	exit
}

# wait_for SECONDS CMD...: poll CMD until it succeeds: every 50 ms for the
# first half second, then every 200 ms (CMD is usually a program: 90 ms of
# guest CPU each time, taken from what is being waited for).
wait_for() {
	local end i=0 w=0.05
	vm_cs; end=$((VM_CS + $1 * 100)); shift
	while ! "$@" >/dev/null 2>&1; do
		vm_cs; [ $VM_CS -le $end ] || { vm_log "timed out waiting for: $*"; return 1; }
		i=$((i + 1)); [ $i -le 10 ] || w=0.2
		vm_sleep $w
	done
}

# ---- NVMe -------------------------------------------------------------------
NVME_DEV=/dev/nvme0n1
nvme_ready() {
	wait_for 30 test -b $NVME_DEV || return 1
	local q=/sys/block/${NVME_DEV#/dev/}/queue
	[ "$(cat $q/discard_max_bytes)" -gt 0 ] || { vm_log "$NVME_DEV: no discard"; return 1; }
	[ "$(cat $q/write_cache)" = "write back" ] || { vm_log "$NVME_DEV: write cache is '$(cat $q/write_cache)'"; return 1; }
}

# NVMe command tracing: which commands reach the namespace (nvme_setup_cmd).
TR=/sys/kernel/tracing
nvmetrace_start() {
	echo 0 > $TR/tracing_on
	echo 0 > $TR/events/enable
	echo 1 > $TR/events/nvme/nvme_setup_cmd/enable || return 1
	echo 4096 > $TR/buffer_size_kb
	echo > $TR/trace
	echo 1 > $TR/tracing_on
}
nvmetrace_clear() { echo > $TR/trace; }
# nvmetrace_count KIND: commands for $NVME_DEV since the last clear.  KIND:
# flush; fua (a write with FUA); dealloc (DSM deallocate, or Write Zeroes with
# DEAC); zeroes (Write Zeroes without DEAC); write.
nvmetrace_count() {
	awk -v k="$1" -v disk="disk=${NVME_DEV#/dev/}," '
	function hex(h,   i, v) { v = 0; for (i = 1; i <= length(h); i++) v = v * 16 + index("0123456789abcdef", substr(h, i, 1)) - 1; return v }
	function bit(v, b) { return int(v / b) % 2 }
	function ctrl() { return match($0, /ctrl=0x[0-9a-f]+/) ? hex(substr($0, RSTART + 7, RLENGTH - 7)) : 0 }
	/nvme_setup_cmd:/ && index($0, disk) {
		if (k == "flush" && /cmd=\(nvme_cmd_flush/) n++
		else if (k == "write" && /cmd=\(nvme_cmd_write /) n++
		else if (k == "fua" && /cmd=\(nvme_cmd_write / && bit(ctrl(), 16384)) n++
		else if (k == "dealloc" && /cmd=\(nvme_cmd_dsm/ && match($0, /attributes=[0-9]+/) && bit(substr($0, RSTART + 11, RLENGTH - 11) + 0, 4)) n++
		else if (k == "dealloc" && /cmd=\(nvme_cmd_write_zeroes/ && bit(ctrl(), 512)) n++
		else if (k == "zeroes" && /cmd=\(nvme_cmd_write_zeroes/ && !bit(ctrl(), 512)) n++
	} END { print n + 0 }' $TR/trace
}
nvmetrace_stop() { echo 0 > $TR/tracing_on; echo 0 > $TR/events/nvme/nvme_setup_cmd/enable; }

# ---- Soft-RDMA ----------------------------------------------------------------
# rxe and siw each get their own dummy netdev (neither works on lo) and /24.
# The guest has no NIC: these addresses never leave it.
RDMA_PROVIDERS="rxe siw"
rdma_ip() { case $1 in rxe) echo 10.91.1.1;; siw) echo 10.91.2.1;; *) return 1;; esac; }
rdma_port_active() { grep -q ACTIVE /sys/class/infiniband/"$1"/ports/1/state 2>/dev/null; }
# rdma_up PROVIDER: create PROVIDER0 on a dummy netdev, wait for its port to
# be ACTIVE; prints the IP address to use.
rdma_up() {
	local p=$1 ip nd=vmnet_$1
	ip=$(rdma_ip "$p") || { vm_log "unknown RDMA provider $p"; return 1; }
	if ! ip link show $nd >/dev/null 2>&1; then
		ip link add $nd type dummy && ip addr add $ip/24 dev $nd && ip link set $nd up || return 1
	fi
	if [ ! -e /sys/class/infiniband/${p}0 ]; then
		rdma link add ${p}0 type $p netdev $nd || return 1
	fi
	wait_for 20 rdma_port_active ${p}0 || return 1
	echo "$ip"
}
rdma_down() {
	local p=$1
	[ -e /sys/class/infiniband/${p}0 ] && rdma link delete ${p}0
	ip link del vmnet_$p 2>/dev/null
	return 0
}
# for_each_rdma FUNC ARGS...: FUNC PROVIDER IP ARGS... for rxe, then siw.
for_each_rdma() {
	local f=$1 p ip rc=0; shift
	for p in $RDMA_PROVIDERS; do
		ip=$(rdma_up $p) || { vm_log "cannot bring up $p"; rc=1; continue; }
		"$f" "$p" "$ip" "$@" || rc=1
		rdma_down $p
	done
	return $rc
}

# ---- isertd -------------------------------------------------------------------
ISERTD_PID=
port_listening() { [ -n "$(ss -Hltn "sport = :$1")" ]; }
# ISERTD_SOCK: when set, isertd serves its admin socket there (iserctl -s).
ISERTD_SOCK=${ISERTD_SOCK:-}
# isertd_start CONFIG [PORT]: start the build tree's isertd, wait for its
# listener; log in $VM_WORK/isertd.log.
# --core-dumps: a crash leaves the core isertd_core reads (isertd is not dumpable without it).
# ISERTD_WRAP: a command isertd runs under; ISERTD_WRAP=$UNIT_CONFINE runs it with
# isertd.service's capabilities and system call filter (tests/package/unit_confine.py).
UNIT_CONFINE="python3 $ISERT_SRC/tests/package/unit_confine.py $ISERT_SRC/configs/systemd/isertd.service.in --"
isertd_start() {
	local cfg=$1 port=${2:-3260}
	$ISERTD_WRAP "$ISERT_BUILD/target/isertd" --core-dumps --config "$cfg" ${ISERTD_SOCK:+--admin-socket "$ISERTD_SOCK"} \
		>> "$VM_WORK/isertd.log" 2>&1 &
	ISERTD_PID=$!
	wait_for 20 port_listening "$port" || { vm_log "isertd did not listen on $port"; tail -20 "$VM_WORK/isertd.log"; return 1; }
	kill -0 $ISERTD_PID
}
# A crash (abort, SIGSEGV) leaves a core in $VM_WORK, the share that outlives the guest.
ulimit -c unlimited 2>/dev/null
echo "$VM_WORK/core.%e.%p" > /proc/sys/kernel/core_pattern 2>/dev/null
# isertd_core PID: the backtrace of every thread of a crashed isertd, from its core (then removed).
isertd_core() {
	local f=$VM_WORK/core.isertd.$1
	[ -f "$f" ] || return 0
	vm_log "isertd $1 left a core: its threads' stacks"
	gdb -batch -nx -ex "thread apply all bt 16" "$ISERT_BUILD/target/isertd" "$f" 2>/dev/null |
		grep -E '^(#|Thread)' | head -120 | sed 's/^/    /'
	rm -f "$f"
}
isertd_stop() {
	[ -n "$ISERTD_PID" ] || return 0
	local pid=$ISERTD_PID
	kill -TERM $pid 2>/dev/null
	wait $pid; local rc=$?
	ISERTD_PID=
	[ $rc -eq 0 ] || { vm_log "isertd exited with status $rc"; isertd_core $pid; }
	return $rc
}
# iserctl ARGS...: the build tree's iserctl on $ISERTD_SOCK.
iserctl() { "$ISERT_BUILD/tools/iserctl/iserctl" -s "$ISERTD_SOCK" "$@"; }
# tgtd_stop PID: delete tgtd's targets and stop it.  tgtd 1.0.85 sometimes
# ignores SIGTERM after an iSER session, and a bare wait hangs on it: after 5 s
# it gets SIGKILL.
tgtd_stop() {
	tgtadm --lld iser --op delete --mode system --force >/dev/null 2>&1
	kill $1 2>/dev/null
	wait_for 5 bash -c "! kill -0 $1 2>/dev/null" || kill -9 $1 2>/dev/null
	wait $1 2>/dev/null
	return 0
}

# ---- open-iscsi (kernel initiator) ----------------------------------------------
ISCSI_INITIATOR=iqn.2026-11.org.isert.vm:init1
ISCSI_STRANGER=iqn.2026-11.org.isert.vm:stranger
iscsid_up() { iscsiadm -m session >/dev/null 2>&1; local rc=$?; [ $rc -eq 0 ] || [ $rc -eq 21 ]; }
# iscsi_start [INITIATOR]: iscsid with a fresh node database in the overlay.
iscsi_start() {
	mkdir -p /etc/iscsi /run/lock/iscsi /var/lock/iscsi 2>/dev/null
	rm -rf /etc/iscsi/nodes /etc/iscsi/send_targets /etc/iscsi/ifaces
	echo "InitiatorName=${1:-$ISCSI_INITIATOR}" > /etc/iscsi/initiatorname.iscsi
	# Short timeouts: a broken target should fail a test, not stall it.
	sed -e 's/^node.startup.*/node.startup = manual/' \
		-e 's/^node.session.initial_login_retry_max.*/node.session.initial_login_retry_max = 2/' \
		-e 's/^node.conn\[0\].timeo.login_timeout.*/node.conn[0].timeo.login_timeout = 10/' \
		-e 's/^node.session.timeo.replacement_timeout.*/node.session.timeo.replacement_timeout = 15/' \
		/etc/iscsi/iscsid.conf > /tmp/iscsid.conf && cp /tmp/iscsid.conf /etc/iscsi/iscsid.conf || return 1
	iscsid -f > "$VM_WORK/iscsid.log" 2>&1 &
	wait_for 20 iscsid_up
}
# iscsi_iface NAME INITIATOR: an iface record that logs in as another initiator.
iscsi_iface() {
	iscsiadm -m iface -I "$1" -o new >/dev/null &&
	iscsiadm -m iface -I "$1" -o update -n iface.initiatorname -v "$2" >/dev/null
}
# iscsi_discover PORTAL [IFACE]: prints the target names discovered.
# Over iSER the kernel initiator's discovery session sometimes gets no answer
# to its SendTargets (or its login) and gives up after 30 s, whatever the
# target: in 150 back-to-back discoveries on rxe, 4 against LIO and 5-6
# against isertd (1-3 on siw); the next one works.  So an iSER discovery
# that finds nothing is tried once more, and says so.
iscsi_discover() {
	local out
	out=$(iscsiadm -m discovery -t sendtargets -p "$1" ${2:+-I "$2"} | awk '{print $2}')
	if [ -z "$out" ] && [ "${2:-}" = iser ]; then
		echo "    (iSER discovery through $1 found nothing: once more, see iscsi_discover)" >&2
		out=$(iscsiadm -m discovery -t sendtargets -p "$1" -I iser | awk '{print $2}')
	fi
	[ -n "$out" ] && echo "$out"
}
# iscsi_node IQN PORTAL [IFACE]: make sure a node record exists.
iscsi_node() {
	iscsiadm -m node -T "$1" -p "$2" -I "${3:-default}" >/dev/null 2>&1 ||
		iscsiadm -m node -o new -T "$1" -p "$2" -I "${3:-default}" >/dev/null
}
# iscsi_chap IQN PORTAL USER PASS [MUSER MPASS]: CHAP settings of a node record.
iscsi_chap() {
	local t=$1 p=$2
	iscsi_set() { iscsiadm -m node -T "$t" -p "$p" -o update -n "$1" -v "$2"; }
	iscsi_set node.session.auth.authmethod CHAP &&
	iscsi_set node.session.auth.username "$3" && iscsi_set node.session.auth.password "$4" || return 1
	if [ -n "${5:-}" ]; then
		iscsi_set node.session.auth.username_in "$5" && iscsi_set node.session.auth.password_in "$6"
	fi
}
# Explicit iface: discovery adds records for every iface, and a login without
# -I would try them all.
iscsi_login() { iscsiadm -m node -T "$1" -p "$2" -I "${3:-default}" --login; }
iscsi_logout() { iscsiadm -m node -T "$1" -p "$2" -I "${3:-default}" --logout; }
# iscsi_sid IQN: the session id (sysfs sessionN) logged in to IQN.
iscsi_sid() {
	local s
	for s in /sys/class/iscsi_session/session*; do
		[ "$(cat $s/targetname 2>/dev/null)" = "$1" ] && { echo "${s##*session}"; return 0; }
	done
	return 1
}
# iscsi_disks IQN: "LUN DEV" lines of the session's block devices, by LUN.
iscsi_disks() {
	local sid d
	sid=$(iscsi_sid "$1") || return 1
	for d in /sys/class/iscsi_session/session$sid/device/target*/*:*:*:*/block/*; do
		[ -e "$d" ] || continue
		local hctl=${d%/block/*}; hctl=${hctl##*/}
		echo "${hctl##*:} ${d##*/}"
	done | sort -n
}
iscsi_ndisks_is() { [ "$(iscsi_disks "$1" | wc -l)" -eq "$2" ] && [ -z "$(iscsi_disks "$1" | while read -r l d; do [ -b /dev/$d ] || echo x; done)" ]; }
iscsi_wait_disks() { wait_for 30 iscsi_ndisks_is "$1" "$2"; }
iscsi_no_session() { ! iscsi_sid "$1" >/dev/null; }
# sg_node DEV: the sg device of a disk (sg_xcopy looks for /dev/char/M:m, which needs udev: give it /dev/sgN).
sg_node() {
	local s
	s=$(ls /sys/block/$1/device/scsi_generic/ 2>/dev/null | head -1)
	[ -n "$s" ] || return 1
	[ -c /dev/$s ] || mknod /dev/$s c $(tr ':' ' ' < /sys/class/scsi_generic/$s/dev) || return 1
	echo /dev/$s
}

# ---- file system cycle ---------------------------------------------------------
# fs_write DEV MNT: mkfs.ext4, mount, write files, record their checksums in
# $VM_WORK/DEV.sums, unmount, fsck -n.
fs_write() {
	local dev=$1 mnt=$2 i
	mkfs.ext4 -q -F -E nodiscard "$dev" || return 1
	mkdir -p "$mnt" && mount "$dev" "$mnt" || return 1
	mkdir "$mnt/d"
	for i in 1 2 3 4; do
		head -c $((i * 1024 * 1024 + i * 4099)) /dev/urandom > "$mnt/d/f$i" || return 1
	done
	seq 1 20000 > "$mnt/d/text"
	(cd "$mnt" && find d -type f | sort | xargs sha256sum) > "$VM_WORK/${dev##*/}.sums"
	umount "$mnt" || return 1
	e2fsck -f -n "$dev" > "$VM_WORK/${dev##*/}.fsck" 2>&1 || { cat "$VM_WORK/${dev##*/}.fsck"; return 1; }
}
# fs_verify DEV MNT SUMS: mount read-only, compare with SUMS, unmount.
fs_verify() {
	local dev=$1 mnt=$2 sums=$3 rc
	mkdir -p "$mnt" && mount -o ro "$dev" "$mnt" || return 1
	(cd "$mnt" && sha256sum --quiet -c "$sums"); rc=$?
	[ "$(cd "$mnt" && find d -type f | wc -l)" -eq "$(wc -l < "$sums")" ] || rc=1
	umount "$mnt" || rc=1
	return $rc
}
# Page cache must not answer the read-back: drop it.
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
