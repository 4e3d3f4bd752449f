# Helpers for the guest benchmarks (tools/bench/guest.sh, bench-map.sh).

# CPU seconds of process PID, and of the whole guest (busy: user, nice, system, irq, softirq).
proc_cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' /proc/$1/stat; }
busy_cpu() { awk '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8) / 100}' /proc/stat; }
# cpu_mark PID: "process-CPU guest-CPU" now (process "-" without a PID)
cpu_mark() { echo "$([ -n "$1" ] && proc_cpu $1 || echo -) $(busy_cpu)"; }
# fio_read_result FILE: "IOPS MiB/s" of the read side of fio's JSON output
fio_read_result() {
	python3 -c 'import json,sys;j=json.load(open(sys.argv[1]))["jobs"][0]["read"];print(int(j["iops"]), round(j["bw"]/1024,1))' "$1"
}
# bench_login IQN PORTAL IFACE [LUN]: discovery and login with the kernel
# initiator through IFACE (iser, or default for TCP); prints LUN's disk (the first
# disk without LUN).
bench_login() {
	[ -n "$(iscsi_discover $2 $3)" ] &&
		iscsiadm -m node -T $1 -p $2 -I $3 --login >/dev/null && iscsi_wait_disks $1 1 &&
		iscsi_disks $1 | awk -v l="${4:-}" 'l == "" || $1 == l {print $2; exit}'
}
# bench_logout: every session logged out, every node record deleted.
bench_logout() { iscsiadm -m node --logoutall=all >/dev/null 2>&1; iscsiadm -m node -o delete >/dev/null 2>&1; }
