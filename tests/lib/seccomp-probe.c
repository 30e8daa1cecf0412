// SPDX-License-Identifier: Apache-2.0
/* The seccomp tests' probe (tests/integration/test_agent_seccomp.py), built
 * static by the test and put into an image: `seccomp-probe NAME…` calls
 * each named syscall with zero arguments and prints "NAME RC ERRNO";
 * `seccomp-probe threads` starts and joins four threads. Zero arguments
 * make every call here harmless when a filter lets it through (a NULL
 * pointer, an fd 0, a command 0). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define S(n)                                                                   \
	{                                                                      \
#n, SYS_##n                                                    \
	}
static const struct {
	const char *name;
	long nr;
} calls[] = {
    S(add_key),
    S(request_key),
    S(keyctl),
    S(bpf),
    S(perf_event_open),
    S(kexec_load),
    S(kexec_file_load),
    S(open_by_handle_at),
    S(userfaultfd),
    S(init_module),
    S(finit_module),
    S(delete_module),
    S(acct),
    S(iopl),
    S(ioperm),
    S(settimeofday),
    S(clock_settime),
    S(lookup_dcookie),
    S(fanotify_init),
    S(kcmp),
    S(swapon),
    S(swapoff),
    S(uselib),
    S(vmsplice),
    S(move_pages),
    S(migrate_pages),
    S(sysfs),
    S(ustat),
    S(nfsservctl),
    S(getpid),
    S(chroot),
    S(getppid),
    S(mkdir),
};

static void *worker(void *arg)
{
	return arg;
}

static int threads(void)
{
	pthread_t t[4];

	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, worker, NULL))
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	puts("threads ok");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "threads"))
		return threads();
	for (int i = 1; i < argc; i++) {
		size_t k;

		for (k = 0; k < sizeof(calls) / sizeof(calls[0]); k++)
			if (!strcmp(calls[k].name, argv[i]))
				break;
		if (k == sizeof(calls) / sizeof(calls[0])) {
			printf("%s unknown\n", argv[i]);
			continue;
		}
		errno = 0;
		long rc = syscall(calls[k].nr, 0, 0, 0, 0, 0, 0);
		printf("%s %ld %d\n", argv[i], rc, rc < 0 ? errno : 0);
	}
	return 0;
}
