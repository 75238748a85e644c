/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files of a traced process's ELF files (the symbols of a
 * stripped binary), looked up where the process's own tools would look,
 * inside its root: /usr/lib/debug/.build-id/xx/yyyy.debug, then the
 * .gnu_debuglink name next to the file, in its .debug/ and under
 * /usr/lib/debug. Every path is resolved inside the root directory given
 * (ldpath__open_at: RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so a
 * symbolic link a container plants cannot make root cgbpf open a file of
 * the host, and only regular files are opened. A candidate is used only
 * if it is the file's: the same build id, or, for a file without one, the
 * debuglink's CRC-32 over a candidate of at most DEBUGFILE_CRC_MAX bytes.
 */
#ifndef CGBPF_DEBUGFILE_H
#define CGBPF_DEBUGFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A debug file found by its CRC alone is read whole: not past this. */
#define DEBUGFILE_CRC_MAX (1ull << 30)

struct debugfile_req {
	const char *path;	/* the ELF file, as the process sees it ("/usr/lib/libx.so") */
	const char *link;	/* its .gnu_debuglink file name, or NULL */
	uint32_t crc;		/* and the CRC-32 the link gives */
	const uint8_t *build_id;	/* its build id, or NULL */
	size_t build_id_len;
};

/*
 * Finds and opens the debug file of q->path: in the root rootfd (an O_PATH
 * directory descriptor; -1: none, the process is gone), then by build id
 * only in hostfd's (cgbpf's own root, where distribution debug packages
 * install; -1: not there). A read-only descriptor of a matching regular
 * file with its path inside the root it was found in written to found, or
 * -ENOENT.
 */
int debugfile__find(int rootfd, int hostfd, const struct debugfile_req *q, char *found,
		    size_t found_len);

/* Whether the ELF file open at fd is q's debug file: its build id is
 * q's, or q has none and the file's CRC-32 is q->crc. */
bool debugfile__matches(int fd, const struct debugfile_req *q);

/* Whether name can be a .gnu_debuglink file name: a plain file name, not
 * a path ("/", ".", ".." are refused). */
bool debugfile__link_name(const char *name);

#endif
