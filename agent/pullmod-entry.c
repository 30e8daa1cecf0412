/* The pull module's side (see pullmod.h): built only into pullmod.so,
 * together with its own copy of common/, imagepull/ and package.c. */
#include "deploy.h"
#include "log.h"
#include "pull.h"
#include "pullmod.h"

#define EXPORT __attribute__((visibility("default")))

static void fini(void)
{
	pull_library_cleanup();
}

static const struct pullmod_ops ops = {
    .abi = PULLMOD_ABI,
    .pull_image = pull_image,
    .pull_result_free = pull_result_free,
    .deploy_package = deploy_package,
    .fini = fini,
};

EXPORT const struct pullmod_ops *
cell_pullmod_init(const char *prog, enum log_level level, int log_fd);

const struct pullmod_ops *cell_pullmod_init(const char *prog,
					    enum log_level level, int log_fd)
{
	log_init(prog, level);
	log_set_fd(log_fd);
	return &ops;
}
