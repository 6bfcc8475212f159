/* Runs a libFuzzer harness (the LLVMFuzzerTestOneInput linked with it) over inputs as a
 * plain program, for the regression tests of a build without libFuzzer. Each argument is
 * a file or a directory whose regular files are all inputs (not recursive, in name order).
 * Exit 0 when every input ran (a harness that finds a bug aborts), 1 when an input could
 * not be read or there was none. Test code only. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "run_corpus: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t k;
	while (buf && (k = fread(buf + len, 1, cap - len, f)) > 0) {
		len += k;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	int err = ferror(f) || !buf;
	fclose(f);
	if (err) {
		fprintf(stderr, "run_corpus: %s: read error\n", path);
		free(buf);
		return -1;
	}
	/* an exact-size copy, so that the sanitizers see a read past the input's end */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	printf("ran %s (%zu bytes)\n", path, len);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv)
{
	int inputs = 0, failed = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "run_corpus: %s: %s\n", argv[i], strerror(errno));
			failed++;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed += run_file(argv[i]) != 0;
			inputs++;
			continue;
		}
		struct dirent **list;
		int n = scandir(argv[i], &list, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "run_corpus: %s: %s\n", argv[i], strerror(errno));
			failed++;
			continue;
		}
		for (int k = 0; k < n; k++) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", argv[i], list[k]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				failed += run_file(path) != 0;
				inputs++;
			}
			free(list[k]);
		}
		free(list);
	}
	if (!inputs)
		fprintf(stderr, "run_corpus: no inputs\n");
	return failed || !inputs ? 1 : 0;
}
