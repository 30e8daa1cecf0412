// SPDX-License-Identifier: Apache-2.0
/* File-system helpers: atomic writes, bounded reads, tree removal that never
 * follows a symlink. */
#ifndef CELL_FSUTIL_H
#define CELL_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

int fs_mkdir_p(const char *path, mode_t mode, struct cerr *e);
/* Write data to path through a temporary file in the same directory, fsync
 * it, rename it into place and fsync the directory: when this returns 0 the
 * new content survives a crash of the process or of the machine; on an
 * error before the rename (ENOSPC, EIO) the old content is untouched. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
		    struct cerr *e);
/* The same without the two fsyncs: the new content replaces the old whole
 * or not at all, and survives the process dying (kill -9), but not the
 * machine. For state a reboot makes moot (a cell's units die with it) on
 * a path that is timed: each fsync costs about a millisecond. */
int fs_replace(const char *path, const void *data, size_t len, mode_t mode,
	       struct cerr *e);
/* fsync the directory that holds path (a rename or create in it is durable
 * only then). */
int fs_sync_dir_of(const char *path, struct cerr *e);
/* Read a whole file into out (which sets the cap); EFBIG when larger. */
int fs_read_file(const char *path, struct buf *out, struct cerr *e);
int fs_read_fd(int fd, struct buf *out, struct cerr *e);
/* Files that someone else controls (an image's, a package's, a container's):
 * read only when they are regular files. pathfd is an O_PATH fd (so opening
 * it had no effect, even on a device node); it is checked with fstat and
 * reopened O_NONBLOCK (a FIFO swapped in meanwhile cannot block), then read
 * up to out's cap. Not regular: EINVAL "is a fifo" (a device, a socket…).
 * fs_read_regular_file opens path O_PATH|O_NOFOLLOW itself. */
int fs_read_regular(int pathfd, struct buf *out, struct cerr *e);
int fs_read_regular_file(const char *path, struct buf *out, struct cerr *e);
/* "a fifo", "a character device", … for st_mode's type. */
const char *fs_type_name(mode_t mode);
/* The directory name inside dirfd, made with mode when missing, opened
 * (never through a symlink): its fd, or -1 with e set. */
int fs_subdir_at(int dirfd, const char *name, mode_t mode, struct cerr *e);
/* Remove name (file or tree) inside dirfd without following symlinks and
 * without crossing into other mounts. A missing name is not an error. */
int fs_rm_rf_at(int dirfd, const char *name, struct cerr *e);
int fs_rm_rf(const char *path, struct cerr *e);
bool fs_exists(const char *path);
/* Is path the root of a mount? (Its device differs from its parent's, or it
 * is the same inode as its parent: "/".) */
bool fs_is_mountpoint(const char *path);
/* Undo /proc/self/mountinfo's octal escapes (\040 for a space) in place. */
void fs_mountinfo_unescape(char *s);
/* Mount points strictly beneath dir (an absolute, clean path) in this mount
 * namespace, deepest first so they can be unmounted in order; NULL when
 * there are none (a NULL-terminated vector otherwise, strv_free it). */
char **fs_mounts_beneath(const char *dir);
/* Write all of buf to fd, retrying short writes and EINTR. A full disk
 * shows as -1 with errno ENOSPC (never as a silent short write). */
int fs_write_all(int fd, const void *buf, size_t len);
int fs_pwrite_all(int fd, const void *buf, size_t len, off_t off);

#endif
