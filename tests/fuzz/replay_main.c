/*
 * replay_main.c: runs a libFuzzer harness over files and directories given
 * on the command line, so that every corpus is replayed by `make test`
 * with an ordinary compiler (and under ASan+UBSan with SANITIZE=1).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	char *data;
	size_t len;

	if (gp_read_file(path, 16 << 20, &data, &len) != 0) {
		fprintf(stderr, "cannot read %s\n", path);
		return 1;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)data, len);
	free(data);
	return 0;
}

int
main(int argc, char **argv)
{
	int i, count = 0, errors = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "cannot stat %s\n", argv[i]);
			errors++;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			DIR *dir = opendir(argv[i]);
			struct dirent *de;
			char path[4096];
			while (dir != NULL && (de = readdir(dir)) != NULL) {
				if (de->d_name[0] == '.')
					continue;
				snprintf(path, sizeof(path), "%s/%s", argv[i],
				    de->d_name);
				errors += replay_file(path);
				count++;
			}
			if (dir != NULL)
				closedir(dir);
		} else {
			errors += replay_file(argv[i]);
			count++;
		}
	}
	printf("replayed %d inputs, %d unreadable\n", count, errors);
	return errors == 0 && count > 0 ? 0 : 1;
}
