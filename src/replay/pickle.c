/* The pickle writer (pickle.h): opcodes straight to a FILE, the first error kept. Integers
 * take the smallest of BININT1, BININT2, BININT and LONG1 (two's complement, at most 8 bytes
 * here), strings SHORT_BINUNICODE or BINUNICODE. Depends on libc only. */
#include "pickle.h"

#include <errno.h>
#include <string.h>

enum {
	OP_PROTO = 0x80, OP_STOP = '.', OP_MARK = '(', OP_EMPTY_LIST = ']', OP_EMPTY_DICT = '}',
	OP_APPENDS = 'e', OP_SETITEMS = 'u', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M',
	OP_LONG1 = 0x8a, OP_BINFLOAT = 'G', OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE = 'X',
	OP_NONE = 'N', OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_TUPLE2 = 0x86,
};

static void put(struct gp_pickle *pk, const void *p, size_t n)
{
	if (!pk->err && fwrite(p, 1, n, pk->f) != n)
		pk->err = -EIO;
}

static void op(struct gp_pickle *pk, int c)
{
	unsigned char b = (unsigned char)c;
	put(pk, &b, 1);
}

void gp_pickle_begin(struct gp_pickle *pk, FILE *f)
{
	memset(pk, 0, sizeof *pk);
	pk->f = f;
	unsigned char h[2] = {OP_PROTO, 4};
	put(pk, h, 2);
}

int gp_pickle_end(struct gp_pickle *pk)
{
	if (pk->depth && !pk->err)
		pk->err = -EINVAL;
	op(pk, OP_STOP);
	return pk->err;
}

static void open_(struct gp_pickle *pk, int opcode, bool dict)
{
	if (pk->depth >= GP_PICKLE_DEPTH) {
		pk->err = pk->err ? pk->err : -EINVAL;
		return;
	}
	op(pk, opcode);
	op(pk, OP_MARK);
	pk->is_dict[pk->depth] = dict;
	pk->count[pk->depth++] = 0;
}

void gp_pickle_list_open(struct gp_pickle *pk) { open_(pk, OP_EMPTY_LIST, false); }
void gp_pickle_dict_open(struct gp_pickle *pk) { open_(pk, OP_EMPTY_DICT, true); }

void gp_pickle_next(struct gp_pickle *pk)
{
	if (!pk->depth) {
		pk->err = pk->err ? pk->err : -EINVAL;
		return;
	}
	int d = pk->depth - 1;
	if (++pk->count[d] == GP_PICKLE_BATCH) {
		op(pk, pk->is_dict[d] ? OP_SETITEMS : OP_APPENDS);
		op(pk, OP_MARK);
		pk->count[d] = 0;
	}
}

void gp_pickle_close(struct gp_pickle *pk)
{
	if (!pk->depth) {
		pk->err = pk->err ? pk->err : -EINVAL;
		return;
	}
	int d = --pk->depth;
	op(pk, pk->is_dict[d] ? OP_SETITEMS : OP_APPENDS); /* an empty batch adds nothing */
}

void gp_pickle_int(struct gp_pickle *pk, int64_t v)
{
	unsigned char b[10];
	if (v >= 0 && v < 256) {
		b[0] = OP_BININT1;
		b[1] = (unsigned char)v;
		put(pk, b, 2);
	} else if (v >= 0 && v < 65536) {
		b[0] = OP_BININT2;
		b[1] = (unsigned char)v;
		b[2] = (unsigned char)(v >> 8);
		put(pk, b, 3);
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		uint32_t u = (uint32_t)(int32_t)v;
		b[0] = OP_BININT;
		for (int i = 0; i < 4; i++)
			b[1 + i] = (unsigned char)(u >> (8 * i));
		put(pk, b, 5);
	} else {
		/* the fewest little-endian bytes whose top bit still gives v's sign */
		uint64_t u = (uint64_t)v;
		int n = 8;
		while (n > 1) {
			unsigned char top = (unsigned char)(u >> (8 * (n - 1)));
			unsigned char next = (unsigned char)(u >> (8 * (n - 2)));
			if ((v >= 0 && top == 0 && !(next & 0x80)) || (v < 0 && top == 0xff && (next & 0x80)))
				n--;
			else
				break;
		}
		b[0] = OP_LONG1;
		b[1] = (unsigned char)n;
		for (int i = 0; i < n; i++)
			b[2 + i] = (unsigned char)(u >> (8 * i));
		put(pk, b, (size_t)n + 2);
	}
}

void gp_pickle_float(struct gp_pickle *pk, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	unsigned char b[9] = {OP_BINFLOAT};
	for (int i = 0; i < 8; i++)
		b[1 + i] = (unsigned char)(u >> (8 * (7 - i))); /* big-endian */
	put(pk, b, 9);
}

void gp_pickle_str(struct gp_pickle *pk, const char *s)
{
	size_t n = strlen(s);
	if (n < 256) {
		unsigned char h[2] = {OP_SHORT_BINUNICODE, (unsigned char)n};
		put(pk, h, 2);
	} else {
		uint32_t u = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
		unsigned char h[5] = {OP_BINUNICODE, (unsigned char)u, (unsigned char)(u >> 8),
				      (unsigned char)(u >> 16), (unsigned char)(u >> 24)};
		put(pk, h, 5);
		n = u;
	}
	put(pk, s, n);
}

void gp_pickle_bool(struct gp_pickle *pk, bool v) { op(pk, v ? OP_NEWTRUE : OP_NEWFALSE); }
void gp_pickle_none(struct gp_pickle *pk) { op(pk, OP_NONE); }
void gp_pickle_tuple2(struct gp_pickle *pk) { op(pk, OP_TUPLE2); }
void gp_pickle_empty_list(struct gp_pickle *pk) { op(pk, OP_EMPTY_LIST); }

void gp_pickle_kv_int(struct gp_pickle *pk, const char *key, int64_t v)
{
	gp_pickle_str(pk, key);
	gp_pickle_int(pk, v);
	gp_pickle_next(pk);
}

void gp_pickle_kv_str(struct gp_pickle *pk, const char *key, const char *v)
{
	gp_pickle_str(pk, key);
	gp_pickle_str(pk, v);
	gp_pickle_next(pk);
}

void gp_pickle_kv_bool(struct gp_pickle *pk, const char *key, bool v)
{
	gp_pickle_str(pk, key);
	gp_pickle_bool(pk, v);
	gp_pickle_next(pk);
}
