/*
 * The nvme backstore's logic without I/O (nvme_cmd.c): Identify pages
 * parsed, backstore requests turned into NVMe commands piece by piece,
 * NVMe status turned into -errno.  Pure functions, so the unit tests check
 * every dword against hand-built pages and requests; nvme.c does the
 * system calls.
 */
#ifndef NVME_CMD_H
#define NVME_CMD_H

#include <linux/nvme_ioctl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVME_ID_SIZE 4096

/* I/O command opcodes (NVM Command Set). */
enum {
	NVME_OPC_FLUSH = 0x00,
	NVME_OPC_WRITE = 0x01,
	NVME_OPC_READ = 0x02,
	NVME_OPC_COMPARE = 0x05,
	NVME_OPC_WRITE_ZEROES = 0x08,
	NVME_OPC_DSM = 0x09,
};

/* Identify Controller ONCS bits. */
#define NVME_ONCS_COMPARE      (1u << 0)
#define NVME_ONCS_DSM          (1u << 2)
#define NVME_ONCS_WRITE_ZEROES (1u << 3)
#define NVME_ONCS_VERIFY       (1u << 7)
/* Identify Controller FUSES: fused Compare and Write. */
#define NVME_FUSES_CAW         (1u << 0)

/* cdw12 of Read, Write, Write Zeroes. */
#define NVME_RW_FUA  (1u << 30)
#define NVME_WZ_DEAC (1u << 25)
/* cdw11 of Dataset Management: deallocate. */
#define NVME_DSM_AD  (1u << 2)

/* Largest request the backstore sends when nothing smaller is known (MDTS 0, no sysfs). */
#define NVME_DEFAULT_MAX_IO (128u * 1024)
/* NLB is 16 bits (zero-based): 65536 blocks per Read/Write/Write Zeroes. */
#define NVME_MAX_NLB 65536u
/* A DSM range counts blocks in 32 bits. */
#define NVME_DSM_MAX_NLB 0xffffffffu

struct nvme_ctrl_id {
	char serial[21];      /* SN, trailing spaces cut */
	char model[41];       /* MN, trailing spaces cut */
	uint32_t max_xfer;    /* bytes per data command from MDTS; 0: no limit */
	uint32_t max_wz;      /* bytes per Write Zeroes from WZSL; 0: no limit */
	uint16_t oncs;
	uint16_t fuses;
	bool vwc;             /* volatile write cache present */
	uint16_t oacs;        /* Optional Admin Command Support (bit 1: Format NVM) */
	uint8_t fna;          /* Format NVM Attributes */
	uint32_t sanicap;     /* Sanitize Capabilities */
	uint32_t nn;          /* Number of Namespaces */
};


struct nvme_ns_id {
	uint64_t nsze;        /* blocks */
	uint32_t lba_size;    /* bytes, 512..4096 */
	uint8_t lbaf;         /* the format in use (FLBAS) */
	uint8_t dlfeat;
	uint8_t nguid[16];
	uint8_t eui64[8];
};

/* DLFEAT: a deallocated block reads as zeroes; Write Zeroes may deallocate (DEAC). */
#define NVME_DLFEAT_READ_MASK  0x07u
#define NVME_DLFEAT_READ_ZERO  0x01u
#define NVME_DLFEAT_WZ_DEAC    0x08u

/*
 * Identify Controller (CNS 1) into c; page_size is CAP.MPSMIN in bytes
 * (MDTS counts in it).  0, or -EINVAL with why naming the field.
 */
int nvme_parse_ctrl(const uint8_t *id, uint32_t page_size, struct nvme_ctrl_id *c, char *why, size_t whylen);
/* The NVM command set's Identify Controller (CNS 6, CSI 0): WZSL into c->max_wz. */
void nvme_parse_ctrl_nvm(const uint8_t *id, uint32_t page_size, struct nvme_ctrl_id *c);
/* Identify Namespace (CNS 0) into n.  0, or -EINVAL with why naming the field and what to do. */
int nvme_parse_ns(const uint8_t *id, struct nvme_ns_id *n, char *why, size_t whylen);
/* The LU's identity: NGUID in hex, else EUI64 in hex, else "SN-nsid" (spaces as '_'). */
void nvme_serial(const struct nvme_ctrl_id *c, const struct nvme_ns_id *n, uint32_t nsid, char *out, size_t outlen);

/* What the namespace is to the engine. */
struct nvme_geo {
	uint32_t nsid;
	uint32_t lba_shift;   /* log2 of the LBA size */
	uint32_t max_io;      /* bytes per data command: a multiple of the LBA size, at most NVME_MAX_NLB blocks */
	uint32_t max_wz;      /* bytes per Write Zeroes (WZSL); 0: NVME_MAX_NLB blocks */
};

/* Bytes per data command: MDTS, the block layer's limits where known (0: unknown), NLB's 16 bits. */
uint32_t nvme_max_io(uint32_t mdts_bytes, uint32_t queue_max_bytes, uint32_t queue_max_segments,
		     uint32_t lba_size);

/* The steps a backstore request becomes (one or more commands of one kind each). */
enum nvme_step {
	NVME_STEP_READ,
	NVME_STEP_WRITE,
	NVME_STEP_FLUSH,
	NVME_STEP_DSM,       /* UNMAP: Dataset Management, deallocate, one range per command */
	NVME_STEP_WZ,        /* zeroes: Write Zeroes */
	NVME_STEP_WZ_DEAC,   /* UNMAP where deallocated blocks read as zeroes: Write Zeroes, deallocate */
	NVME_STEP_FILL,      /* WRITE SAME or zeroes without Write Zeroes: Writes from a pattern buffer */
};

/* One DSM range (little-endian on the wire). */
struct nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb;
	uint64_t slba;
};

struct nvme_plan {
	enum nvme_step step;
	uint64_t offset, len;        /* bytes; LBA-size multiples */
	uint8_t *buf;                /* READ/WRITE: len bytes; FILL: fill_len bytes of whole patterns */
	uint32_t fill_len;           /* FILL: a multiple of pattern_len and of the LBA size */
	uint32_t pattern_len;        /* FILL: WRITE SAME's pattern (zeroes: the LBA size) */
	bool fua;                    /* WRITE, FILL, WZ: durable at completion */
	struct nvme_dsm_range *range;   /* DSM: where the range is written (4-byte aligned) */
};

/*
 * The command for the piece of p starting done bytes in; returns the
 * piece's length in bytes, 0 when nothing is left (FLUSH: one piece of
 * length p->len, which may be 0).  cmd is wholly written.
 */
uint64_t nvme_build(const struct nvme_geo *g, const struct nvme_plan *p, uint64_t done, struct nvme_uring_cmd *cmd);

/* The NVMe status a passthrough command ended with (cqe->res > 0, or an ioctl's return) as -errno. */
int nvme_status_errno(int status);
/* Does status say the command itself is not supported (fall back and stop trying it)? */
bool nvme_status_unsupported(int status);
/* "SCT 2h SC 85h (Compare Failure)" style, for a log line. */
const char *nvme_status_str(int status, char *buf, size_t len);

/* SANITIZE's erase methods (target/scsi/cmd/sanitize.c) as NVMe admin commands. */
enum { NVME_ADMIN_GET_LOG_PAGE = 0x02, NVME_ADMIN_FORMAT_NVM = 0x80, NVME_ADMIN_SANITIZE = 0x84 };
#define NVME_OACS_FORMAT       (1u << 1)
#define NVME_FNA_FORMAT_ALL    (1u << 0)   /* a format applies to every namespace */
#define NVME_FNA_SECERASE_ALL  (1u << 1)   /* a secure erase applies to every namespace */
#define NVME_FNA_CRYPTO        (1u << 2)   /* cryptographic erase supported by Format NVM */
#define NVME_SANICAP_CES       (1u << 0)   /* Sanitize: crypto erase */
#define NVME_SANICAP_BES       (1u << 1)   /* Sanitize: block erase */
#define NVME_SANITIZE_LOG      0x81
#define NVME_SMART_LOG         0x02        /* SMART / Health Information: mandatory in every version */
#define NVME_LOG_RAE           (1u << 15)  /* Get Log Page: retain asynchronous events (clear none) */
enum nvme_erase_how { NVME_ERASE_NONE, NVME_ERASE_SANITIZE, NVME_ERASE_FORMAT };
struct nvme_erase {
	enum nvme_erase_how how;
	uint8_t opcode;
	uint32_t nsid;        /* Sanitize: 0 (it acts on the whole NVM subsystem) */
	uint32_t cdw10;
};
/*
 * How to block-erase (crypto false) or crypto-erase namespace nsid of ns
 * (whole: the LU is the whole namespace): NVMe Sanitize where SANICAP has
 * the action and the controller has this one namespace (Sanitize erases
 * them all), else Format NVM with Secure Erase Settings 001b (user data) or
 * 010b (cryptographic, FNA bit 2) in the namespace's current LBA format
 * where the controller formats (OACS) and the format reaches only this
 * namespace or it is the only one; else NVME_ERASE_NONE.  Pure.
 */
void nvme_erase_plan(const struct nvme_ctrl_id *c, const struct nvme_ns_id *ns, uint32_t nsid, bool whole,
		     bool crypto, struct nvme_erase *e);
/* Sanitize Status log page (512 bytes): 1 done, 0 in progress (*progress of 65536), -EIO failed. */
int nvme_sanitize_status(const uint8_t *log, uint16_t *progress);

#endif
