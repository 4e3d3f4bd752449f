/*
 * A standalone stand-in for libFuzzer, so the harnesses run under gcc as
 * regression tests: every file of the corpus directories, then N inputs
 * mutated from them with a fixed seed (the same run every time, so a
 * failure reproduces with the same command line).
 *
 * usage: fuzz-NAME [-n ITERATIONS] [-s SEED] [-t SECONDS] [-m MAXLEN] [-d DICT] PATH...
 * PATH is a file or a directory (its regular files, in name order).
 * On a crash or failed invariant the current input is printed in hex and
 * written to ./fuzz-crash-NAME.bin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define MAX_FILE (1u << 20)
#define MAX_TOKENS 512

struct blob {
	uint8_t *data;
	size_t len;
};

static struct blob *corpus;
static size_t ncorpus;
static struct blob tokens[MAX_TOKENS];
static size_t ntokens;
static const uint8_t *cur_data;
static size_t cur_len;
static const char *prog = "fuzz";
static uint64_t rng_state;

/* Sanitizer runtimes (gcc or clang) call this before they exit on an error. */
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "%s: %s%s%s\n", prog, msg, arg ? ": " : "", arg ? arg : "");
	exit(2);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory", NULL);
	return p;
}

static void dump_current(void)
{
	char path[256];
	const char *base = strrchr(prog, '/');
	FILE *f;

	if (!cur_data)
		return;
	fprintf(stderr, "\n%s: failing input (%zu bytes):\n", prog, cur_len);
	for (size_t i = 0; i < cur_len && i < 4096; i++)
		fprintf(stderr, "%02x%s", cur_data[i], (i % 32 == 31) ? "\n" : "");
	fprintf(stderr, "\n");
	snprintf(path, sizeof(path), "fuzz-crash-%s.bin", base ? base + 1 : prog);
	f = fopen(path, "wb");
	if (f) {
		fwrite(cur_data, 1, cur_len, f);
		fclose(f);
		fprintf(stderr, "%s: input written to %s\n", prog, path);
	}
}

static void on_signal(int sig)
{
	dump_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

static uint64_t rnd(void)
{
	/* splitmix64: small, and the same sequence on every platform. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t rnd_below(size_t n)
{
	return n ? (size_t)(rnd() % n) : 0;
}

static bool read_file(const char *path, struct blob *b)
{
	FILE *f = fopen(path, "rb");
	size_t got;

	if (!f)
		return false;
	b->data = xmalloc(MAX_FILE);
	got = fread(b->data, 1, MAX_FILE, f);
	fclose(f);
	b->len = got;
	return true;
}

static void add_corpus_file(const char *path)
{
	corpus = realloc(corpus, (ncorpus + 1) * sizeof(*corpus));
	if (!corpus)
		die("out of memory", NULL);
	if (!read_file(path, &corpus[ncorpus]))
		die("cannot read", path);
	ncorpus++;
}

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static void add_path(const char *path)
{
	struct dirent **names;
	struct stat st;
	int n;

	if (stat(path, &st) < 0)
		die(strerror(errno), path);
	if (!S_ISDIR(st.st_mode)) {
		add_corpus_file(path);
		return;
	}
	n = scandir(path, &names, NULL, name_cmp);
	if (n < 0)
		die(strerror(errno), path);
	for (int i = 0; i < n; i++) {
		char full[4096];

		snprintf(full, sizeof(full), "%s/%s", path, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(full, &st) == 0 && S_ISREG(st.st_mode))
			add_corpus_file(full);
		free(names[i]);
	}
	free(names);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* libFuzzer dictionary format: [name=]"token" per line, \\ \" \xNN escapes. */
static void load_dict(const char *path)
{
	char line[1024];
	FILE *f = fopen(path, "r");

	if (!f)
		die("cannot read dictionary", path);
	while (fgets(line, sizeof(line), f) && ntokens < MAX_TOKENS) {
		char *q = strchr(line, '"'), *e;
		uint8_t tok[512];
		size_t n = 0;

		if (line[0] == '#' || !q)
			continue;
		e = strrchr(line, '"');
		if (e == q)
			continue;
		for (char *c = q + 1; c < e && n < sizeof(tok); c++) {
			if (*c == '\\' && c + 1 < e) {
				c++;
				if (*c == 'x' && c + 2 < e && hexval(c[1]) >= 0 && hexval(c[2]) >= 0) {
					tok[n++] = (uint8_t)(hexval(c[1]) << 4 | hexval(c[2]));
					c += 2;
					continue;
				}
			}
			tok[n++] = (uint8_t)*c;
		}
		tokens[ntokens].data = xmalloc(n);
		memcpy(tokens[ntokens].data, tok, n);
		tokens[ntokens].len = n;
		ntokens++;
	}
	fclose(f);
}

static const uint32_t interesting32[] = {
	0, 1, 2, 3, 4, 0x7f, 0x80, 0xff, 0x100, 511, 512, 513, 8192, 65535, 65536,
	262144, 0xfffffe, 0xffffff, 0x1000000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
};

static size_t insert_bytes(uint8_t *buf, size_t len, size_t max, size_t at, const uint8_t *src, size_t n)
{
	if (len + n > max)
		n = max - len;
	memmove(buf + at + n, buf + at, len - at);
	memcpy(buf + at, src, n);
	return len + n;
}

/* One mutation in place; returns the new length (<= max). */
static size_t mutate_once(uint8_t *buf, size_t len, size_t max)
{
	size_t at = rnd_below(len + 1), n;
	uint8_t tmp[16];
	uint32_t v;

	switch (rnd_below(11)) {
	case 0: /* flip a bit */
		if (len)
			buf[rnd_below(len)] ^= (uint8_t)(1u << rnd_below(8));
		break;
	case 1: /* random byte */
		if (len)
			buf[rnd_below(len)] = (uint8_t)rnd();
		break;
	case 2: /* interesting 32-bit value, either byte order */
		if (len >= 4) {
			at = rnd_below(len - 3);
			v = interesting32[rnd_below(sizeof(interesting32) / sizeof(interesting32[0]))];
			if (rnd() & 1)
				v = __builtin_bswap32(v);
			memcpy(buf + at, &v, 4);
		}
		break;
	case 3: /* insert random bytes */
		n = 1 + rnd_below(sizeof(tmp));
		for (size_t i = 0; i < n; i++)
			tmp[i] = (uint8_t)rnd();
		len = insert_bytes(buf, len, max, at, tmp, n);
		break;
	case 4: /* delete a range */
		if (len) {
			at = rnd_below(len);
			n = 1 + rnd_below(len - at);
			if (rnd() & 1 && n > 8)
				n = 1 + rnd_below(8);
			memmove(buf + at, buf + at + n, len - at - n);
			len -= n;
		}
		break;
	case 5: /* duplicate a range */
		if (len) {
			size_t from = rnd_below(len);

			n = 1 + rnd_below(len - from < 64 ? len - from : 64);
			memcpy(tmp, buf + from, n < sizeof(tmp) ? n : sizeof(tmp));
			len = insert_bytes(buf, len, max, at, tmp, n < sizeof(tmp) ? n : sizeof(tmp));
		}
		break;
	case 6: /* splice: our head, another input's tail */
		if (ncorpus) {
			const struct blob *o = &corpus[rnd_below(ncorpus)];
			size_t from = rnd_below(o->len + 1);

			n = o->len - from;
			if (at + n > max)
				n = max - at;
			memcpy(buf + at, o->data + from, n);
			len = at + n;
		}
		break;
	case 7: /* truncate */
		len = at;
		break;
	case 8: /* dictionary token, inserted or overwriting */
		if (ntokens) {
			const struct blob *t = &tokens[rnd_below(ntokens)];

			if (rnd() & 1 && at + t->len <= len)
				memcpy(buf + at, t->data, t->len);
			else
				len = insert_bytes(buf, len, max, at, t->data, t->len);
		}
		break;
	case 9: /* small arithmetic on a byte */
		if (len)
			buf[rnd_below(len)] += (uint8_t)(rnd_below(33) - 16);
		break;
	case 10: /* special byte */
		if (len) {
			static const uint8_t sp[] = { 0, 0xff, 0x7f, 0x80, '=', ',', '"', '\\', '0', 'x', '{', '[' };

			buf[rnd_below(len)] = sp[rnd_below(sizeof(sp))];
		}
		break;
	}
	return len;
}

static void run_one(const uint8_t *data, size_t len)
{
	/* A private copy, exactly len bytes, so reads past the end are caught. */
	uint8_t *copy = xmalloc(len);

	memcpy(copy, data, len);
	cur_data = copy;
	cur_len = len;
	LLVMFuzzerTestOneInput(copy, len);
	cur_data = NULL;
	free(copy);
}

int main(int argc, char **argv)
{
	unsigned long iterations = 10000, maxlen = 4096, seconds = 0;
	uint64_t seed = 1;
	uint8_t *buf;
	time_t start = time(NULL);
	unsigned long done = 0;
	int opt;

	prog = argv[0];
	while ((opt = getopt(argc, argv, "n:s:t:m:d:")) != -1) {
		switch (opt) {
		case 'n': iterations = strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 't': seconds = strtoul(optarg, NULL, 0); break;
		case 'm': maxlen = strtoul(optarg, NULL, 0); break;
		case 'd': load_dict(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n N] [-s SEED] [-t SECONDS] [-m MAXLEN] [-d DICT] PATH...\n",
				argv[0]);
			return 2;
		}
	}
	if (maxlen == 0 || maxlen > MAX_FILE)
		die("-m must be 1.." "1048576", NULL);
	for (int i = optind; i < argc; i++)
		add_path(argv[i]);
	signal(SIGABRT, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(dump_current);

	for (size_t i = 0; i < ncorpus; i++)
		run_one(corpus[i].data, corpus[i].len);
	run_one((const uint8_t *)"", 0);

	rng_state = seed;
	buf = xmalloc(maxlen);
	for (; done < iterations; done++) {
		size_t len = 0, rounds = 1 + rnd_below(8);

		if (seconds && (done & 255) == 0 && (unsigned long)(time(NULL) - start) >= seconds)
			break;
		if (ncorpus) {
			const struct blob *b = &corpus[rnd_below(ncorpus)];

			len = b->len < maxlen ? b->len : maxlen;
			memcpy(buf, b->data, len);
		}
		for (size_t r = 0; r < rounds; r++)
			len = mutate_once(buf, len, maxlen);
		run_one(buf, len);
	}
	printf("%s: %zu corpus inputs and %lu mutations (seed %llu) in %ld s: no failure\n",
	       prog, ncorpus, done, (unsigned long long)seed, (long)(time(NULL) - start));
	free(buf);
	for (size_t i = 0; i < ncorpus; i++)
		free(corpus[i].data);
	free(corpus);
	for (size_t i = 0; i < ntokens; i++)
		free(tokens[i].data);
	return 0;
}
