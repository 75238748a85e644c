/* SPDX-License-Identifier: MIT */
/*
 * Files and directories cgbpf writes on the user's behalf (traces,
 * summaries, merged traces, monitor dumps). cgbpf runs as root, often in
 * directories other users can write (/tmp, /var/tmp, a shared scratch), so
 * an output is always a new file that cgbpf created itself: never opened
 * through a symbolic link, never a file someone else prepared and may hold
 * open. Under sudo it then belongs to the user who ran sudo (SUDO_UID,
 * SUDO_GID), given with fchown on the open descriptor.
 */
#ifndef CGBPF_OUTFILE_H
#define CGBPF_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Mode of traces, summaries and merged traces (the umask may tighten it). */
#define OUTFILE_MODE 0640
/* Mode of monitor dumps (other users' command lines) and their directory. */
#define OUTFILE_PRIVATE_MODE 0600
#define OUTDIR_PRIVATE_MODE 0700

/* True when cgbpf runs as root under sudo: *uid and *gid are then the
 * invoking user's (SUDO_UID, SUDO_GID), read once. False as plain root, as
 * a user, or when those variables do not parse (said once, as a warning). */
bool outfile__sudo_user(uid_t *uid, gid_t *gid);

/* Gives the open file or directory fd to the sudo user, if any; 0 or
 * -errno. Never by path: the descriptor is the object cgbpf created. */
int outfile__give(int fd);

/* Creates path (relative to dirfd, or AT_FDCWD) for writing as a new file
 * with mode (the umask applies): a regular file already there is replaced
 * by a new one, never written into; a symbolic link (-ELOOP), a directory
 * (-EISDIR) or any other kind of file (-EINVAL) is refused; a file created
 * there by someone else meanwhile fails (-EEXIST). Given to the sudo user
 * (a warning if that fails: the file stays root's, as private as mode).
 * Returns the descriptor (close-on-exec) or -errno. */
int outfile__create(int dirfd, const char *path, mode_t mode);

/* outfile__create that replaces nothing: a regular file already at path
 * is refused with -EEXIST (record's files without --force); the other
 * refusals are outfile__create's. */
int outfile__create_new(int dirfd, const char *path, mode_t mode);

/* outfile__create as a stdio stream ("w"); NULL with errno set. */
FILE *outfile__fopen(const char *path, mode_t mode);
/* The same that replaces a regular file only when replace is true (else
 * errno EEXIST, as outfile__create_new). */
FILE *outfile__fopen_new(const char *path, mode_t mode, bool replace);

/* Removes path if it still names the file open as fd (one cgbpf created
 * and wrote nothing useful to); another file there now is left alone.
 * 0 or -errno. fd stays open. */
int outfile__discard(int fd, const char *path);

/* What went wrong in words, for outfile__create's errors that strerror
 * words badly ("Too many levels of symbolic links"). */
const char *outfile__strerror(int err);

/* Creates the directory path with mode when it does not exist, given to the
 * sudo user; an existing one is left as it is. 0 or -errno (-ENOTDIR: there
 * is something else at path). */
int outfile__mkdir(const char *path, mode_t mode);

#endif
