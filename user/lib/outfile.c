// SPDX-License-Identifier: MIT
/* Output files: created new, never through a link, owned by the sudo user. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/log.h"
#include "lib/outfile.h"

static pthread_once_t sudo_once = PTHREAD_ONCE_INIT;
static bool sudo_set;
static uid_t sudo_uid;
static gid_t sudo_gid;

/* A uid or gid: decimal, and not -1 (which chown reads as "leave it"). */
static bool parse_id(const char *s, uint32_t *v)
{
	char *end;
	unsigned long long x;

	if (!s || !*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || x >= UINT32_MAX)
		return false;
	*v = x;
	return true;
}

static void read_sudo(void)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID");
	uint32_t uid, gid;

	/* sudo makes both ids 0; anything else is not "root under sudo". */
	if (!u || getuid() != 0 || geteuid() != 0)
		return;
	if (!parse_id(u, &uid) || !parse_id(g, &gid)) {
		warn("SUDO_UID=%s SUDO_GID=%s do not name a user: the files cgbpf writes stay "
		     "root's", u, g ? g : "(unset)");
		return;
	}
	if (!uid)
		return;	/* root ran sudo: root owns them anyway */
	sudo_uid = uid;
	sudo_gid = gid;
	sudo_set = true;
}

bool outfile__sudo_user(uid_t *uid, gid_t *gid)
{
	pthread_once(&sudo_once, read_sudo);
	if (!sudo_set)
		return false;
	*uid = sudo_uid;
	*gid = sudo_gid;
	return true;
}

int outfile__give(int fd)
{
	uid_t uid;
	gid_t gid;

	if (!outfile__sudo_user(&uid, &gid))
		return 0;
	return fchown(fd, uid, gid) ? -errno : 0;
}

static void give_or_warn(int fd, const char *path)
{
	int err = outfile__give(fd);
	uid_t uid;
	gid_t gid;

	/* A root-squashing NFS export, say: the file is still as private as
	 * its mode, only not the user's. */
	if (err && outfile__sudo_user(&uid, &gid))
		warn("cannot give %s to uid %u (SUDO_UID): %s; it stays root's", path,
		     (unsigned)uid, strerror(-err));
}

static int create(int dirfd, const char *path, mode_t mode, bool replace)
{
	/* O_EXCL|O_NOFOLLOW: a new inode of cgbpf's own, whatever lies at path. */
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
	int fd = openat(dirfd, path, flags, mode);

	for (int tries = 0; fd < 0 && errno == EEXIST && tries < 2; tries++) {
		struct stat st;

		if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno != ENOENT)
				return -errno;
		} else if (S_ISLNK(st.st_mode)) {
			return -ELOOP;
		} else if (S_ISDIR(st.st_mode)) {
			return -EISDIR;
		} else if (!S_ISREG(st.st_mode)) {
			return -EINVAL;
		} else if (!replace) {
			return -EEXIST;
		} else if (tries) {
			/* Replaced, and a file is back already: someone races us. */
			return -EEXIST;
		} else if (unlinkat(dirfd, path, 0) && errno != ENOENT) {
			/* Unlinking, not truncating: another user who holds the
			 * old file open must not read the new contents. */
			return -errno;
		}
		fd = openat(dirfd, path, flags, mode);
	}
	if (fd < 0)
		return -errno;
	give_or_warn(fd, path);
	return fd;
}

int outfile__create(int dirfd, const char *path, mode_t mode)
{
	return create(dirfd, path, mode, true);
}

int outfile__create_new(int dirfd, const char *path, mode_t mode)
{
	return create(dirfd, path, mode, false);
}

FILE *outfile__fopen_new(const char *path, mode_t mode, bool replace)
{
	int fd = create(AT_FDCWD, path, mode, replace);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return f;
}

FILE *outfile__fopen(const char *path, mode_t mode)
{
	return outfile__fopen_new(path, mode, true);
}

int outfile__discard(int fd, const char *path)
{
	struct stat mine, there;

	if (fstat(fd, &mine) || lstat(path, &there))
		return -errno;
	if (mine.st_dev != there.st_dev || mine.st_ino != there.st_ino)
		return -ESTALE;
	return unlink(path) ? -errno : 0;
}

const char *outfile__strerror(int err)
{
	switch (err) {
	case -ELOOP:
		return "it is a symbolic link, and cgbpf writes no file through one: name the "
		       "file itself";
	case -EISDIR:
		return "it is a directory";
	case -EINVAL:
		return "it is not a regular file (cgbpf writes regular files only)";
	case -EEXIST:
		return "another process created it again while cgbpf replaced it";
	default:
		return strerror(-err);
	}
}

int outfile__mkdir(const char *path, mode_t mode)
{
	struct stat st;
	int fd, err = 0;

	if (mkdir(path, mode)) {
		if (errno != EEXIST)
			return -errno;
		if (stat(path, &st))
			return -errno;
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Only the directory just made (owned by cgbpf's euid) is given away:
	 * one put there meanwhile by someone else keeps its owner. */
	if (fstat(fd, &st))
		err = -errno;
	else if (st.st_uid == geteuid())
		give_or_warn(fd, path);
	close(fd);
	return err;
}
