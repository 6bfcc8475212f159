/* The regression runner: calls a harness's LLVMFuzzerTestOneInput once per file, for each
 * file named and each regular file in each directory named (in name order), the way a
 * libFuzzer binary runs a corpus without fuzzing. Exit 0 when every input ran, 1 when an
 * argument cannot be read or none was found; a failed check aborts. Depends on libc only. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs the harness over the regular file at path. Returns 0, or -1 when it cannot be read. */
static int run_file(const char *path)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	if (!f || fstat(fileno(f), &st) != 0) {
		fprintf(stderr, "run_corpus: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	/* exactly the file's bytes, so that AddressSanitizer sees a read past the input */
	size_t n = (size_t)st.st_size;
	uint8_t *input = malloc(n ? n : 1);
	int bad = !input || fread(input, 1, n, f) != n;
	fclose(f);
	if (bad) {
		fprintf(stderr, "run_corpus: %s: cannot read\n", path);
		free(input);
		return -1;
	}
	fprintf(stderr, "run_corpus: %s\n", path); /* the input that failed, when one does */
	LLVMFuzzerTestOneInput(input, n);
	free(input);
	return 0;
}

static int only_files(const struct dirent *e)
{
	return e->d_name[0] != '.';
}

/* Runs every regular file of dir; adds their number to *count. Returns 0 or -1. */
static int run_dir(const char *dir, unsigned *count)
{
	struct dirent **names;
	int n = scandir(dir, &names, only_files, alphasort);
	if (n < 0) {
		fprintf(stderr, "run_corpus: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(path) == 0)
				++*count;
			else
				rc = -1;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			rc |= run_dir(argv[i], &count);
		else if (run_file(argv[i]) == 0)
			count++;
		else
			rc = -1;
	}
	printf("run_corpus: %u inputs ran\n", count);
	if (count == 0)
		fprintf(stderr, "run_corpus: no input found\n");
	return rc || count == 0 ? 1 : 0;
}
