/* CHECK(cond): the test programs' assertion outside cmocka (end-to-end programs, the soak):
 * prints the file, line and condition and exits 1. Test code only. */
#ifndef GP_TEST_CHECK_H
#define GP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

#endif
