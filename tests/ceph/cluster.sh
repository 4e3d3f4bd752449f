#!/bin/bash
# A throw-away single-node Ceph cluster (one mon, one memstore OSD, pool "rbd")
# for the RBD backstore tests. See tests/ceph/README.md.
#
#   cluster.sh start DIR          start in DIR (caller owns it); writes DIR/ceph.conf, DIR/keyring
#   cluster.sh stop DIR           stop the daemons started in DIR (TERM, then KILL)
#   cluster.sh run [--] CMD ARGS  temp dir, start, CMD with CEPH_CONF exported, stop, remove;
#                                 exits with CMD's status (77 if ceph is not installed)
set -uo pipefail

START_TIMEOUT=${CEPH_START_TIMEOUT:-60}   # seconds for each daemon / step to come up
STOP_GRACE=${CEPH_STOP_GRACE:-10}         # seconds between TERM and KILL

say() { echo "cluster.sh: $*" >&2; }

need_binaries() {
	local b missing=()
	for b in ceph-mon ceph-osd ceph ceph-authtool monmaptool rbd python3; do
		command -v "$b" >/dev/null || missing+=("$b")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "skipped: not installed: ${missing[*]}"
	say "fix: apt-get install ceph-mon ceph-osd ceph-common python3 (or run tools/deps.sh)"
	exit 77
}

# fail WHAT LOG...: the named step did not come up; show the logs' tails, exit 1.
fail() {
	local what=$1 log; shift
	say "FAILED: $what"
	for log in "$@"; do
		[ -s "$log" ] || continue
		echo "---- tail of $log" >&2
		tail -n 25 "$log" >&2
	done
	return 1
}

# Two free loopback TCP ports (the kernel picks them; the small window until the
# mon binds them is the only race).
free_ports() {
	python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])'
}

# start_daemon NAME CMD...: run a ceph daemon in the foreground, in the background of this
# shell (so it stays in the caller's process group: a test runner killing the group kills it).
start_daemon() {
	local name=$1; shift
	"$@" -f -c "$DIR/ceph.conf" </dev/null >"$DIR/$name.out" 2>&1 &
	echo $! >"$DIR/$name.pid"
	STARTED=1
	disown $!  # no "Killed" job report when the signal path KILLs it
}

# step SECS CMD...: CMD, KILLed after SECS (rbd ignores TERM while it waits on the cluster).
# timeout puts it in a process group of its own, in the background so that a signal's trap
# runs at once (bash defers traps until a foreground command ends) and can KILL that group.
STEP_PID=
step() {
	timeout -s KILL "$1" "${@:2}" &
	STEP_PID=$!
	wait "$STEP_PID"
	local rc=$?
	STEP_PID=
	return $rc
}

alive() { running "$(cat "$DIR/$1.pid" 2>/dev/null)"; }

write_conf() {
	local v2=$1 v1=$2
	cat >"$DIR/ceph.conf" <<EOF
# Written by tests/ceph/cluster.sh: a throw-away test cluster, not for real data.
[global]
fsid = $(python3 -c 'import uuid; print(uuid.uuid4())')
mon_host = [v2:127.0.0.1:$v2,v1:127.0.0.1:$v1]
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_ipv6 = false
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = $DIR/keyring
# Everything a daemon or client writes stays in DIR (the defaults are /var/run/ceph,
# /var/log/ceph, /var/lib/ceph: shared between clusters and root-only).
run_dir = $DIR
crash_dir = $DIR/crash
# One OSD: pools of one replica, no failure domain to spread over.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
# A librados client (rbd, librbd in isertd) gives up connecting after 15 s rather than
# 300 s when the cluster is down, so a test of that case fails fast with an error.
client_mount_timeout = 15

[client]
# Clients log only when asked (e.g. CEPH_ARGS="--debug-rbd 20"); one file per process.
log_file = $DIR/\$name.\$pid.log
log_to_file = false

[mon]
log_file = $DIR/\$name.log
# No pid file of its own: a daemon removes it as it begins to shut down; cluster.sh
# keeps DIR/\$name.pid.
pid_file =
mon_data = $DIR/\$name
keyring = $DIR/\$name/keyring
mon_cluster_log_file = $DIR/cluster.log
# The mon stops itself when its disk has less than 5 % free; a test box's /tmp may.
mon_data_avail_crit = 1
# The mon batches map changes for up to 1 s before it commits them; creating the
# OSD, the pool and its PGs takes a few such rounds: start-up 7 s -> 1.7 s with 0.1 s.
paxos_propose_interval = 0.1
# The mon marks an OSD down that sent no beacon for this long (default 900 s); with one
# OSD there are no peers to report a KILLed one down sooner (osd_heartbeat_grace is
# between OSDs, so it is left alone).
mon_osd_report_timeout = 20

[osd]
log_file = $DIR/\$name.log
# No pid file of its own: a daemon removes it as it begins to shut down; cluster.sh
# keeps DIR/\$name.pid.
pid_file =
osd_data = $DIR/\$name
keyring = $DIR/\$name/keyring
# memstore: objects live in the OSD's memory; no block device, no journal, fast mkfs.
osd_objectstore = memstore
# Capacity the OSD reports (RAM is only used for what is written); CEPH_MEMSTORE_BYTES.
memstore_device_bytes = ${CEPH_MEMSTORE_BYTES:-1073741824}
# A watch whose client (e.g. a killed isertd holding an image open) stops pinging
# expires after 10 s rather than 30 s, so a restarted client gets the exclusive lock
# sooner.
osd_client_watch_timeout = 10
# Beacons to the mon every 5 s (default 300 s), for mon_osd_report_timeout above.
osd_beacon_report_interval = 5
EOF
}

do_start() {
	DIR=$1
	need_binaries
	[ -d "$DIR" ] || { say "no such directory: $DIR"; return 1; }
	[ -z "$(ls -A "$DIR")" ] || { say "not empty (a cluster there already?): $DIR"; return 1; }
	DIR=$(cd "$DIR" && pwd)
	# Unix sockets (admin sockets in DIR) are limited to 107 bytes.
	[ ${#DIR} -le 60 ] || { say "DIR path too long for the admin sockets (> 60): $DIR"; return 1; }
	local t0=$SECONDS t0ns ports
	t0ns=$(date +%s%N)
	ports=$(free_ports) || { say "cannot pick free ports"; return 1; }
	# shellcheck disable=SC2086
	set -- $ports
	write_conf "$1" "$2"
	export CEPH_CONF=$DIR/ceph.conf
	local conf=(-c "$DIR/ceph.conf")

	# Keys: mon. (only in the mon's store) and client.admin (DIR/keyring, for clients).
	# (-c /dev/null: ceph-authtool -n mon. would take the [mon] log_file.)
	ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null &&
	ceph-authtool -c /dev/null --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
	ceph-authtool -c /dev/null "$DIR/mon.keyring" --import-keyring "$DIR/keyring" >/dev/null &&
	monmaptool --create --fsid "$(sed -n 's/^fsid = //p' "$DIR/ceph.conf")" \
		--addv a "[v2:127.0.0.1:$1,v1:127.0.0.1:$2]" "$DIR/monmap" >/dev/null &&
	ceph-mon "${conf[@]}" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring" \
		>"$DIR/mon.a.mkfs" 2>&1 ||
		{ fail "mon mkfs" "$DIR/mon.a.mkfs" "$DIR/mon.a.log"; return 1; }
	start_daemon mon.a ceph-mon -i a

	# The first command doubles as the wait for the mon (retried until it answers).
	local osd_uuid osd_key
	osd_uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
	osd_key=$(ceph-authtool --gen-print-key)
	printf '{"cephx_secret": "%s"}\n' "$osd_key" >"$DIR/osd.0.new.json"
	until step 10 ceph osd new "$osd_uuid" 0 -i "$DIR/osd.0.new.json" \
		>"$DIR/osd.0.new.out" 2>&1; do
		alive mon.a && [ $((SECONDS - t0)) -lt "$START_TIMEOUT" ] ||
			{ fail "mon.a did not answer within ${START_TIMEOUT}s (ceph osd new)" \
				"$DIR/osd.0.new.out" "$DIR/mon.a.out" "$DIR/mon.a.log"; return 1; }
		sleep 0.5
	done
	mkdir -p "$DIR/osd.0"
	step "$START_TIMEOUT" ceph-osd "${conf[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" --key "$osd_key" \
		>"$DIR/osd.0.mkfs" 2>&1 ||
		{ fail "osd.0 mkfs" "$DIR/osd.0.mkfs" "$DIR/osd.0.log"; return 1; }
	printf '[osd.0]\n\tkey = %s\n' "$osd_key" >"$DIR/osd.0/keyring"
	start_daemon osd.0 ceph-osd -i 0

	step "$START_TIMEOUT" ceph osd pool create rbd 8 8 >"$DIR/pool.out" 2>&1 ||
		{ fail "ceph osd pool create rbd" "$DIR/pool.out"; return 1; }

	# osd.0 logs this once the mon has marked it up (no mgr, so no PG states to poll).
	local t1=$SECONDS
	until grep -q 'state: booting -> active' "$DIR/osd.0.log" 2>/dev/null; do
		alive osd.0 && [ $((SECONDS - t1)) -lt "$START_TIMEOUT" ] ||
			{ fail "osd.0 did not come up within ${START_TIMEOUT}s" \
				"$DIR/osd.0.out" "$DIR/osd.0.log"; return 1; }
		sleep 0.2
	done
	# Writes rbd_info etc.: returns once the pool's PGs are active.
	step "$START_TIMEOUT" rbd pool init rbd >"$DIR/pool-init.out" 2>&1 ||
		{ fail "rbd pool init (PGs of pool rbd not active within ${START_TIMEOUT}s?)" \
			"$DIR/pool-init.out" "$DIR/osd.0.log"; return 1; }
	local t=$(( ($(date +%s%N) - t0ns) / 1000000 ))
	say "ceph cluster up in $((t / 1000)).$(printf %03d $((t % 1000))) s (mon 127.0.0.1:$1 v2, :$2 v1; CEPH_CONF=$DIR/ceph.conf)"
}

# running PID: the process exists and is not a zombie waiting for its parent.
running() { [ -r "/proc/$1/stat" ] && ! grep -qs ') Z ' "/proc/$1/stat"; }

# daemon_pid DIR NAME: the pid of DIR's daemon NAME if it is running.
daemon_pid() {
	local pid
	pid=$(cat "$1/$2.pid" 2>/dev/null) || return 1
	# Only a daemon of this DIR (a stale pid file could name another process by now).
	grep -qs -- "$1/ceph.conf" "/proc/$pid/cmdline" && echo "$pid"
}

# stop_one DIR NAME GRACE: TERM the daemon, KILL it after GRACE seconds, wait until it is gone.
stop_one() {
	local name=$2 grace=$3 pid i
	pid=$(daemon_pid "$1" "$name") || return 0
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < grace * 10; i++)); do
		running "$pid" || return 0
		sleep 0.1
	done
	[ "$grace" -gt 0 ] && say "$name still running ${grace}s after TERM: KILL $pid"
	kill -KILL "$pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		running "$pid" || return 0
		sleep 0.05
	done
	say "$name ($pid) did not exit"
	return 1
}

# stop_daemons DIR GRACE (0: KILL both at once). The OSD first: it tells the mon it is
# going down and waits (up to 5 s) for the answer.
stop_daemons() {
	local pid
	if [ "$2" -eq 0 ]; then
		for pid in $(daemon_pid "$1" osd.0) $(daemon_pid "$1" mon.a); do kill -KILL "$pid"; done
	fi
	stop_one "$1" osd.0 "$2"
	stop_one "$1" mon.a "$2"
}

do_run() {
	[ "${1:-}" = -- ] && shift
	[ $# -gt 0 ] || { say "usage: cluster.sh run [--] CMD ARGS..."; exit 2; }
	need_binaries
	local dir cmd_pid=
	dir=$(mktemp -d /tmp/ceph-test.XXXXXX) || exit 1
	# shellcheck disable=SC2064
	trap "stop_daemons '$dir' $STOP_GRACE; rm -rf '$dir'" EXIT
	# On a signal (e.g. a test runner's timeout): end CMD and KILL the daemons at once: their
	# data is thrown away anyway, and meson KILLs us 0.5 s after its TERM, which would
	# leave DIR behind if a graceful stop took longer.
	# shellcheck disable=SC2317  # (called from the traps below)
	on_signal() {
		[ -n "$cmd_pid" ] && kill "-$1" "$cmd_pid" 2>/dev/null
		[ -n "$STEP_PID" ] && kill -KILL -- "-$STEP_PID" 2>/dev/null
		trap - EXIT
		stop_daemons "$dir" 0
		rm -rf "$dir"
		exit "$2"
	}
	trap 'on_signal TERM 143' TERM
	trap 'on_signal INT 130' INT
	do_start "$dir" || exit 1
	export CEPH_CONF=$dir/ceph.conf
	# In the background so that a TERM runs the trap now, not after CMD ends.
	"$@" <&0 &
	cmd_pid=$!
	wait "$cmd_pid"
	local rc=$?
	cmd_pid=
	exit "$rc"
}

case "${1:-}" in
start) [ $# -eq 2 ] || { say "usage: cluster.sh start DIR"; exit 2; }
       # A failed start leaves nothing running (but a DIR in use is not touched).
       STARTED=; do_start "$2" || { [ -n "$STARTED" ] && stop_daemons "$DIR" 0; exit 1; } ;;
stop)  [ $# -eq 2 ] || { say "usage: cluster.sh stop DIR"; exit 2; }
       d=$(cd "$2" && pwd) || exit 1; stop_daemons "$d" "$STOP_GRACE" ;;
run)   shift; do_run "$@" ;;
*)     sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
esac
