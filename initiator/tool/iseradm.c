/*
 * iseradm: discover, log in to and inspect iSCSI targets with the isert
 * initiator library.  Human output by default, --json for scripts.
 * Exit codes: 0 ok, 1 usage, 2 cannot connect, 3 login refused,
 * 4 authentication failed, 5 SCSI command failed, 6 other error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/netaddr.h"
#include "isert/initiator.h"
#include "map.h"
#include "ua.h"
#include "version.h"

enum { EX_OK = 0, EX_USAGE = 1, EX_CONNECT = 2, EX_LOGIN = 3, EX_AUTH = 4, EX_SCSI = 5, EX_OTHER = 6 };

static bool json_out;
static struct isc_options opts;

/* The library is silent unless asked: a tool wants its warnings on stderr. */
static void log_stderr(enum isc_log_level lvl, const char *msg, void *arg)
{
	static const char *const name[] = { "error", "warning", "info", "debug" };
	(void)arg;
	fprintf(stderr, "iseradm %s: %s\n", name[lvl <= ISC_LOG_DEBUG ? lvl : ISC_LOG_DEBUG], msg);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iseradm [options] COMMAND ARGS\n"
		"commands:\n"
		"  discover PORTAL            list targets and their portals (SendTargets)\n"
		"  login URL | --target IQN --portal PORTAL\n"
		"                             log in, print negotiated parameters and LUNs, log out\n"
		"  ls PORTAL                  discover, then list every LUN of every target\n"
		"  inq URL [--vpd PAGE]       INQUIRY (standard or a VPD page in hex)\n"
		"  readcap URL                READ CAPACITY (16)\n"
		"  logout URL                 log in and log out cleanly (checks logout)\n"
		"  map URL [URL...]           expose the LUN as /dev/ublkbN (ublk) until unmapped or stopped;\n"
		"                             several URLs: paths to one LU (multipath)\n"
		"  unmap DEV                  stop a map and remove its device (/dev/ublkbN or N)\n"
		"  maps                       list mapped devices: URL, transport, queue states\n"
		"PORTAL: host[:port], iscsi://host[:port] or iser://host[:port] (iSER: RDMA)\n"
		"URL: iscsi://[user[%%password]@]host[:port]/target-iqn/lun, iser://... the same over iSER\n"
		"options:\n"
		"  --json                     machine-readable output\n"
		"  --initiator-name IQN       our iSCSI name\n"
		"  --user U --password P      CHAP (one-way)\n"
		"  --target-user U --target-password P   mutual CHAP (the target proves itself)\n"
		"  --chap-alg LIST            CHAP_A preference, e.g. 8,7 (5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256)\n"
		"  --header-digest, --data-digest   offer CRC32C digests\n"
		"  --version                  print iseradm's version and the library's, and exit\n"
		"map options:\n"
		"  --queues N                 ublk queues, one thread and one session each (default 1)\n"
		"  --depth N                  requests per queue (default 64, at most 1024)\n"
		"  --max-io KIB               largest request (default 512; the LUN's limit lowers it)\n"
		"  --timeout S                replacement timeout: I/O waits this long for a re-login,\n"
		"                             then fails (default 120)\n"
		"  --daemon                   detach once the device is up (prints the device first)\n"
		"  --policy failover|round-robin   several paths: the first usable one, or each in turn\n"
		"  --recoverable              if iseradm map dies, the device waits for --recover\n"
		"  --recover N                take over /dev/ublkbN of a killed --recoverable map\n"
		"exit codes: 0 ok, 1 usage, 2 cannot connect, 3 login refused, 4 auth failed,\n"
		"            5 SCSI error, 6 other error\n");
}

static int parse_uint(const char *opt, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || !*v || *end || n < lo || n > hi) {
		fprintf(stderr, "iseradm: %s %s: a number from %u to %u\n", opt, v, lo, hi);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

static int exit_code(int err)
{
	switch (err) {
	case 0: return EX_OK;
	case -EACCES: return EX_AUTH;
	case -EPERM: return EX_LOGIN;
	case -EIO: return EX_SCSI;
	case -ECONNREFUSED: case -EHOSTUNREACH: case -ENETUNREACH: case -ETIMEDOUT: case -EINVAL:
	case -ECONNRESET: case -ENODEV: case -EPROTONOSUPPORT:
		return EX_CONNECT;
	}
	return EX_OTHER;
}

static int fail(const char *what, int err, const char *msg)
{
	if (json_out) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "error", json_object_new_string(msg));
		json_object_object_add(o, "errno", json_object_new_int(-err));
		json_object_object_add(o, "exit_code", json_object_new_int(exit_code(err)));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
		json_object_put(o);
	} else {
		fprintf(stderr, "iseradm: %s: %s\n", what, msg);
	}
	return exit_code(err);
}

static void print_json(json_object *o)
{
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static const char *alg_name(int a)
{
	switch (a) {
	case 5: return "MD5";
	case 6: return "SHA-1";
	case 7: return "SHA-256";
	case 8: return "SHA3-256";
	}
	return "none";
}

static int parse_portal(const char *arg, struct isc_url *u)
{
	char err[300];
	if (isc_url_parse(arg, true, u, err, sizeof(err))) {
		fprintf(stderr, "iseradm: %s\n", err);
		return -EINVAL;
	}
	return 0;
}

static int parse_url(const char *arg, struct isc_url *u, bool lun_needed)
{
	char err[300];
	if (isc_url_parse(arg, !lun_needed, u, err, sizeof(err))) {
		fprintf(stderr, "iseradm: %s\n", err);
		return -EINVAL;
	}
	if (!u->target[0]) {
		fprintf(stderr, "iseradm: '%s' names no target\n", arg);
		return -EINVAL;
	}
	return 0;
}

static int do_discover(const char *portal)
{
	struct isc_url u;
	if (parse_portal(portal, &u))
		return EX_USAGE;
	struct isc_discovery *d = NULL;
	char err[512];
	opts.iser = u.iser;
	int rc = isc_discover_sync(u.host, u.port, &opts, &d, err, sizeof(err));
	if (rc)
		return fail("discover", rc, err);
	if (json_out) {
		json_object *arr = json_object_new_array();
		for (unsigned i = 0; i < d->ntargets; i++) {
			json_object *t = json_object_new_object(), *ps = json_object_new_array();
			json_object_object_add(t, "target", json_object_new_string(d->targets[i].name));
			for (unsigned j = 0; j < d->targets[i].nportals; j++) {
				const struct isc_portal *p = &d->targets[i].portals[j];
				json_object *po = json_object_new_object();
				json_object_object_add(po, "address", json_object_new_string(p->addr));
				json_object_object_add(po, "port", json_object_new_int(p->port));
				json_object_object_add(po, "tpgt", json_object_new_int(p->tpgt));
				json_object_array_add(ps, po);
			}
			json_object_object_add(t, "portals", ps);
			json_object_array_add(arr, t);
		}
		print_json(arr);
	} else {
		for (unsigned i = 0; i < d->ntargets; i++)
			for (unsigned j = 0; j < d->targets[i].nportals; j++) {
				const struct isc_portal *p = &d->targets[i].portals[j];
				char at[NETADDR_HOST_LEN];
				netaddr_join(at, sizeof(at), p->addr, p->port);
				printf("%s,%u %s\n", at, p->tpgt, d->targets[i].name);
			}
	}
	isc_discovery_free(d);
	return EX_OK;
}

static struct isc_session *open_session(const struct isc_url *u, int *code)
{
	struct isc_session *s = isc_session_new(&opts);
	if (!s) {
		*code = fail("session", -ENOMEM, "out of memory");
		return NULL;
	}
	int rc = isc_connect_url_sync(s, u);
	if (rc) {
		*code = fail("login", rc, isc_errmsg(s));
		isc_session_free(s);
		return NULL;
	}
	return s;
}

#define MAX_LUNS 1024

/*
 * LUNs of a logged-in session, each with size and identity; JSON array or
 * text lines.  Only the LUNs the target's answer held are used; *cut says
 * its list names more (more than MAX_LUNS, or more than it sent).
 */
static json_object *list_luns(struct isc_session *s, const char *indent, bool *cut)
{
	uint64_t luns[MAX_LUNS];
	unsigned n = 0;
	json_object *arr = json_object_new_array();
	*cut = false;
	int rc = isc_report_luns2_sync(s, luns, MAX_LUNS, &n, cut, NULL);
	if (rc) {
		if (!json_out)
			printf("%sREPORT LUNS failed: %s\n", indent, isc_errmsg(s));
		return arr;
	}
	for (unsigned i = 0; i < n; i++) {
		struct isc_inquiry inq = { 0 };
		struct isc_capacity cap = { 0 };
		struct isc_result r;
		/* INQUIRY does not report a pending unit attention (SAM), READ CAPACITY would. */
		clear_unit_attentions(s, luns[i]);
		isc_inquiry_sync(s, luns[i], &inq, &r);
		int rc1 = isc_readcap16_sync(s, luns[i], &cap, &r);
		bool has_cap = rc1 == 0;
		json_object *o = json_object_new_object();
		json_object_object_add(o, "lun", json_object_new_int64((int64_t)luns[i]));
		json_object_object_add(o, "vendor", json_object_new_string(inq.vendor));
		json_object_object_add(o, "product", json_object_new_string(inq.product));
		json_object_object_add(o, "revision", json_object_new_string(inq.revision));
		json_object_object_add(o, "type", json_object_new_int(inq.peripheral_type));
		if (has_cap) {
			json_object_object_add(o, "blocks", json_object_new_int64((int64_t)cap.blocks));
			json_object_object_add(o, "block_size", json_object_new_int64(cap.block_size));
			json_object_object_add(o, "bytes", json_object_new_int64((int64_t)(cap.blocks * cap.block_size)));
		}
		json_object_array_add(arr, o);
		if (!json_out) {
			if (has_cap)
				printf("%sLUN %" PRIu64 ": %-8s %-16s %-4s  %" PRIu64 " blocks x %u bytes (%.2f GiB)\n",
				       indent, luns[i], inq.vendor, inq.product, inq.revision, cap.blocks,
				       cap.block_size, (double)cap.blocks * cap.block_size / (1u << 30));
			else
				printf("%sLUN %" PRIu64 ": %-8s %-16s %-4s  type 0x%02x\n", indent, luns[i], inq.vendor,
				       inq.product, inq.revision, inq.peripheral_type);
		}
	}
	if (*cut && !json_out)
		printf("%sLUN list cut: the target's REPORT LUNS names more LUNs than the %u shown\n", indent, n);
	return arr;
}

static json_object *params_json(const struct isc_params *p)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "portal", json_object_new_string(p->portal));
	json_object_object_add(o, "tsih", json_object_new_int(p->tsih));
	json_object_object_add(o, "target_alias", json_object_new_string(p->target_alias));
	json_object_object_add(o, "auth", json_object_new_string(p->auth));
	json_object_object_add(o, "chap_alg", json_object_new_string(alg_name(p->chap_alg)));
	json_object_object_add(o, "HeaderDigest", json_object_new_string(p->header_digest ? "CRC32C" : "None"));
	json_object_object_add(o, "DataDigest", json_object_new_string(p->data_digest ? "CRC32C" : "None"));
	json_object_object_add(o, "ImmediateData", json_object_new_boolean(p->immediate_data));
	json_object_object_add(o, "InitialR2T", json_object_new_boolean(p->initial_r2t));
	json_object_object_add(o, "MaxRecvDataSegmentLength", json_object_new_int64(p->max_recv_dsl));
	json_object_object_add(o, "transport", json_object_new_string(p->iser ? "iser" : "tcp"));
	if (p->iser) {
		json_object_object_add(o, "InitiatorRecvDataSegmentLength", json_object_new_int64(p->initiator_recv_dsl));
		json_object_object_add(o, "TargetRecvDataSegmentLength", json_object_new_int64(p->target_recv_dsl));
	}
	json_object_object_add(o, "TargetMaxRecvDataSegmentLength", json_object_new_int64(p->target_max_recv_dsl));
	json_object_object_add(o, "MaxBurstLength", json_object_new_int64(p->max_burst));
	json_object_object_add(o, "FirstBurstLength", json_object_new_int64(p->first_burst));
	json_object_object_add(o, "MaxOutstandingR2T", json_object_new_int64(p->max_outstanding_r2t));
	json_object_object_add(o, "ErrorRecoveryLevel", json_object_new_int64(p->erl));
	json_object_object_add(o, "DefaultTime2Wait", json_object_new_int64(p->time2wait));
	json_object_object_add(o, "DefaultTime2Retain", json_object_new_int64(p->time2retain));
	json_object_object_add(o, "cmd_window", json_object_new_int64(p->cmd_window));
	return o;
}

static void print_params(const struct isc_params *p)
{
	printf("  portal %s, TSIH %u%s%s\n", p->portal, p->tsih, p->target_alias[0] ? ", alias " : "",
	       p->target_alias);
	printf("  auth %s%s%s\n", p->auth, p->chap_alg ? " " : "", p->chap_alg ? alg_name(p->chap_alg) : "");
	printf("  HeaderDigest %s, DataDigest %s\n", p->header_digest ? "CRC32C" : "None",
	       p->data_digest ? "CRC32C" : "None");
	printf("  ImmediateData %s, InitialR2T %s\n", p->immediate_data ? "Yes" : "No",
	       p->initial_r2t ? "Yes" : "No");
	printf("  MaxRecvDataSegmentLength %u (target's %u), MaxBurstLength %u, FirstBurstLength %u\n",
	       p->max_recv_dsl, p->target_max_recv_dsl, p->max_burst, p->first_burst);
	printf("  MaxOutstandingR2T %u, ErrorRecoveryLevel %u, command window %u\n", p->max_outstanding_r2t,
	       p->erl, p->cmd_window);
	if (p->iser)
		printf("  iSER: RDMAExtensions Yes, InitiatorRecvDataSegmentLength %u, TargetRecvDataSegmentLength %u\n",
		       p->initiator_recv_dsl, p->target_recv_dsl);
}

static int do_login(const struct isc_url *u)
{
	int code;
	struct isc_session *s = open_session(u, &code);
	if (!s)
		return code;
	struct isc_params p;
	isc_get_params(s, &p);
	if (!json_out) {
		printf("Logged in to %s\n", u->target);
		print_params(&p);
	}
	bool cut;
	json_object *luns = list_luns(s, "  ", &cut);
	if (json_out) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "target", json_object_new_string(u->target));
		json_object_object_add(o, "session", params_json(&p));
		json_object_object_add(o, "luns", luns);
		json_object_object_add(o, "luns_truncated", json_object_new_boolean(cut));
		print_json(o);
	} else {
		json_object_put(luns);
	}
	int rc = isc_logout_sync(s);
	if (!json_out)
		printf("%s\n", rc ? "Logout failed" : "Logged out");
	isc_session_free(s);
	return EX_OK;
}

static int do_ls(const char *portal)
{
	struct isc_url pu;
	if (parse_portal(portal, &pu))
		return EX_USAGE;
	struct isc_discovery *d = NULL;
	char err[512];
	opts.iser = pu.iser;
	int rc = isc_discover_sync(pu.host, pu.port, &opts, &d, err, sizeof(err));
	if (rc)
		return fail("discover", rc, err);
	json_object *arr = json_object_new_array();
	int worst = EX_OK;
	for (unsigned i = 0; i < d->ntargets; i++) {
		struct isc_url u = pu;
		snprintf(u.target, sizeof(u.target), "%s", d->targets[i].name);
		if (!json_out)
			printf("Target: %s\n", u.target);
		json_object *t = json_object_new_object();
		json_object_object_add(t, "target", json_object_new_string(u.target));
		struct isc_session *s = isc_session_new(&opts);
		if (!s)
			break;
		/* Log in through the portal we were given: advertised wildcard addresses are not reachable. */
		rc = isc_connect_url_sync(s, &u);
		if (rc) {
			if (!json_out)
				printf("  login failed: %s\n", isc_errmsg(s));
			json_object_object_add(t, "error", json_object_new_string(isc_errmsg(s)));
			if (worst == EX_OK)
				worst = exit_code(rc);
		} else {
			bool cut;
			json_object_object_add(t, "luns", list_luns(s, "  ", &cut));
			json_object_object_add(t, "luns_truncated", json_object_new_boolean(cut));
			isc_logout_sync(s);
		}
		isc_session_free(s);
		json_object_array_add(arr, t);
	}
	if (json_out)
		print_json(arr);
	else
		json_object_put(arr);
	isc_discovery_free(d);
	return worst;
}

static void hexdump(const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i += 16) {
		printf("  %04x:", i);
		for (uint32_t j = i; j < i + 16 && j < n; j++)
			printf(" %02x", p[j]);
		printf("\n");
	}
}

static int do_inq(const struct isc_url *u, int vpd)
{
	int code;
	struct isc_session *s = open_session(u, &code);
	if (!s)
		return code;
	struct isc_result r;
	int rc;
	if (vpd >= 0) {
		uint8_t buf[1024] = { 0 };
		rc = isc_vpd_sync(s, u->lun, (uint8_t)vpd, buf, sizeof(buf), &r);
		if (is_unit_attention(rc, &r))
			rc = isc_vpd_sync(s, u->lun, (uint8_t)vpd, buf, sizeof(buf), &r);
		if (!rc) {
			uint32_t n = sizeof(buf) - (r.underflow ? r.residual : 0);
			if (n > 4 && 4u + ((uint32_t)buf[2] << 8 | buf[3]) < n)
				n = 4u + ((uint32_t)buf[2] << 8 | buf[3]);
			if (json_out) {
				json_object *o = json_object_new_object(), *a = json_object_new_array();
				for (uint32_t i = 0; i < n; i++)
					json_object_array_add(a, json_object_new_int(buf[i]));
				json_object_object_add(o, "page", json_object_new_int(vpd));
				json_object_object_add(o, "data", a);
				print_json(o);
			} else {
				printf("VPD page 0x%02x, %u bytes\n", vpd, n);
				hexdump(buf, n);
			}
		}
	} else {
		struct isc_inquiry inq;
		rc = isc_inquiry_sync(s, u->lun, &inq, &r);
		if (is_unit_attention(rc, &r))
			rc = isc_inquiry_sync(s, u->lun, &inq, &r);
		if (!rc) {
			if (json_out) {
				json_object *o = json_object_new_object();
				json_object_object_add(o, "vendor", json_object_new_string(inq.vendor));
				json_object_object_add(o, "product", json_object_new_string(inq.product));
				json_object_object_add(o, "revision", json_object_new_string(inq.revision));
				json_object_object_add(o, "type", json_object_new_int(inq.peripheral_type));
				json_object_object_add(o, "qualifier", json_object_new_int(inq.peripheral_qualifier));
				print_json(o);
			} else {
				printf("Vendor: %s\nProduct: %s\nRevision: %s\nPeripheral type: 0x%02x\n", inq.vendor,
				       inq.product, inq.revision, inq.peripheral_type);
			}
		}
	}
	if (rc)
		code = fail("inquiry", rc, isc_errmsg(s));
	else
		code = EX_OK;
	isc_logout_sync(s);
	isc_session_free(s);
	return code;
}

static int do_readcap(const struct isc_url *u)
{
	int code;
	struct isc_session *s = open_session(u, &code);
	if (!s)
		return code;
	struct isc_capacity cap;
	struct isc_result r;
	int rc = isc_readcap16_sync(s, u->lun, &cap, &r);
	if (is_unit_attention(rc, &r))
		rc = isc_readcap16_sync(s, u->lun, &cap, &r);
	if (rc) {
		code = fail("readcap", rc, isc_errmsg(s));
	} else {
		code = EX_OK;
		if (json_out) {
			json_object *o = json_object_new_object();
			json_object_object_add(o, "blocks", json_object_new_int64((int64_t)cap.blocks));
			json_object_object_add(o, "block_size", json_object_new_int64(cap.block_size));
			json_object_object_add(o, "bytes", json_object_new_int64((int64_t)(cap.blocks * cap.block_size)));
			json_object_object_add(o, "thin", json_object_new_boolean(cap.thin));
			print_json(o);
		} else {
			printf("Blocks: %" PRIu64 "\nBlock size: %u\nSize: %" PRIu64 " bytes\nThin provisioned: %s\n",
			       cap.blocks, cap.block_size, cap.blocks * cap.block_size, cap.thin ? "yes" : "no");
		}
	}
	isc_logout_sync(s);
	isc_session_free(s);
	return code;
}

static int do_logout(const struct isc_url *u)
{
	int code;
	struct isc_session *s = open_session(u, &code);
	if (!s)
		return code;
	int rc = isc_logout_sync(s);
	code = rc ? fail("logout", rc, isc_errmsg(s)) : EX_OK;
	if (!rc && !json_out)
		printf("Logged out of %s\n", u->target);
	isc_session_free(s);
	return code;
}

int main(int argc, char **argv)
{
	enum { O_JSON = 256, O_NAME, O_USER, O_PASS, O_TUSER, O_TPASS, O_ALG, O_HD, O_DD, O_TARGET, O_PORTAL,
	       O_VPD, O_HELP, O_QUEUES, O_DEPTH, O_MAXIO, O_TIMEOUT, O_DAEMON, O_RECOVERABLE, O_RECOVER, O_POLICY,
	       O_VERSION };
	static const struct option lo[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "initiator-name", required_argument, NULL, O_NAME },
		{ "user", required_argument, NULL, O_USER },
		{ "password", required_argument, NULL, O_PASS },
		{ "target-user", required_argument, NULL, O_TUSER },
		{ "target-password", required_argument, NULL, O_TPASS },
		{ "chap-alg", required_argument, NULL, O_ALG },
		{ "header-digest", no_argument, NULL, O_HD },
		{ "data-digest", no_argument, NULL, O_DD },
		{ "target", required_argument, NULL, O_TARGET },
		{ "portal", required_argument, NULL, O_PORTAL },
		{ "vpd", required_argument, NULL, O_VPD },
		{ "help", no_argument, NULL, O_HELP },
		{ "version", no_argument, NULL, O_VERSION },
		{ "queues", required_argument, NULL, O_QUEUES },
		{ "depth", required_argument, NULL, O_DEPTH },
		{ "max-io", required_argument, NULL, O_MAXIO },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "daemon", no_argument, NULL, O_DAEMON },
		{ "recoverable", no_argument, NULL, O_RECOVERABLE },
		{ "recover", required_argument, NULL, O_RECOVER },
		{ "policy", required_argument, NULL, O_POLICY },
		{ 0 },
	};
	isc_options_default(&opts);
	isc_set_log_cb(log_stderr, NULL, getenv("ISC_DEBUG") ? ISC_LOG_DEBUG : ISC_LOG_INFO);
	opts.reconnect_timeout_s = 0; /* a one-shot tool reports a lost connection */
	opts.nop_interval_s = 0;
	const char *target = NULL, *portal = NULL;
	int vpd = -1, c;
	struct map_opts mo;
	map_opts_default(&mo);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case O_JSON: json_out = true; break;
		case O_NAME: opts.initiator_name = optarg; break;
		case O_USER: opts.user = optarg; break;
		case O_PASS: opts.password = optarg; break;
		case O_TUSER: opts.target_user = optarg; break;
		case O_TPASS: opts.target_password = optarg; break;
		case O_HD: opts.header_digest = true; break;
		case O_DD: opts.data_digest = true; break;
		case O_TARGET: target = optarg; break;
		case O_PORTAL: portal = optarg; break;
		case O_VPD: vpd = (int)strtol(optarg, NULL, 16); if (vpd < 0 || vpd > 255) vpd = 0; break;
		case O_ALG: {
			memset(opts.chap_algs, 0, sizeof(opts.chap_algs));
			int n = 0;
			for (char *t = strtok(optarg, ","); t && n < 4; t = strtok(NULL, ","))
				opts.chap_algs[n++] = atoi(t);
			break;
		}
		case O_QUEUES:
			if (parse_uint("--queues", optarg, 1, 64, &mo.queues))
				return EX_USAGE;
			break;
		case O_DEPTH:
			if (parse_uint("--depth", optarg, 1, 1024, &mo.depth))
				return EX_USAGE;
			break;
		case O_MAXIO:
			if (parse_uint("--max-io", optarg, 4, 16384, &mo.max_io_kib))
				return EX_USAGE;
			break;
		case O_TIMEOUT:
			if (parse_uint("--timeout", optarg, 1, 86400, &mo.timeout_s))
				return EX_USAGE;
			break;
		case O_DAEMON: mo.daemon = true; break;
		case O_RECOVERABLE: mo.recoverable = true; break;
		case O_POLICY:
			if (strcmp(optarg, "failover") && strcmp(optarg, "round-robin")) {
				fprintf(stderr, "iseradm: --policy %s: failover or round-robin\n", optarg);
				return EX_USAGE;
			}
			mo.round_robin = !strcmp(optarg, "round-robin");
			break;
		case O_RECOVER: {
			unsigned id;
			if (parse_uint("--recover", optarg, 0, 1u << 20, &id))
				return EX_USAGE;
			mo.recover_id = (int)id;
			break;
		}
		case 'h':
		case O_HELP: usage(stdout); return EX_OK;
		case O_VERSION: puts("iseradm " ISERT_VERSION " (libisert-initiator " ISC_LIB_VERSION ")"); return EX_OK;
		default: usage(stderr); return EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	const char *cmd = argv[optind++];
	const char *arg = optind < argc ? argv[optind] : NULL;
	struct isc_url u;
	if (!strcmp(cmd, "discover") || !strcmp(cmd, "ls")) {
		if (!arg && !portal) {
			fprintf(stderr, "iseradm %s: PORTAL missing\n", cmd);
			return EX_USAGE;
		}
		return !strcmp(cmd, "ls") ? do_ls(arg ? arg : portal) : do_discover(arg ? arg : portal);
	}
	mo.json = json_out;
	if (!strcmp(cmd, "maps"))
		return exit_code(map_list(json_out));
	if (!strcmp(cmd, "unmap")) {
		if (!arg) {
			fprintf(stderr, "iseradm unmap: DEV missing (/dev/ublkbN)\n");
			return EX_USAGE;
		}
		return map_unmap(arg, json_out) ? EX_OTHER : EX_OK;
	}
	if (!strcmp(cmd, "map")) {
		if (!arg) {
			fprintf(stderr, "iseradm map: URL missing\n");
			return EX_USAGE;
		}
		unsigned n = (unsigned)(argc - optind);
		if (n > MAP_MAX_PATHS) {
			fprintf(stderr, "iseradm map: at most %d URLs (paths) for one LUN\n", MAP_MAX_PATHS);
			return EX_USAGE;
		}
		struct isc_url urls[MAP_MAX_PATHS];
		for (unsigned i = 0; i < n; i++)
			if (parse_url(argv[optind + (int)i], &urls[i], true))
				return EX_USAGE;
		opts.nop_interval_s = 0; /* map sets its own */
		return exit_code(map_run(urls, n, &opts, &mo));
	}
	if (!strcmp(cmd, "login") && !arg && target && portal) {
		if (parse_portal(portal, &u))
			return EX_USAGE;
		snprintf(u.target, sizeof(u.target), "%s", target);
		return do_login(&u);
	}
	if (!arg) {
		fprintf(stderr, "iseradm %s: URL missing\n", cmd);
		return EX_USAGE;
	}
	bool need_lun = !strcmp(cmd, "inq") || !strcmp(cmd, "readcap");
	if (strcmp(cmd, "login") && strcmp(cmd, "logout") && !need_lun) {
		fprintf(stderr, "iseradm: unknown command '%s'\n", cmd);
		usage(stderr);
		return EX_USAGE;
	}
	if (parse_url(arg, &u, need_lun))
		return EX_USAGE;
	if (!strcmp(cmd, "login"))
		return do_login(&u);
	if (!strcmp(cmd, "logout"))
		return do_logout(&u);
	if (!strcmp(cmd, "inq"))
		return do_inq(&u, vpd);
	return do_readcap(&u);
}
