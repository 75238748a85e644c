/* SPDX-License-Identifier: MIT */
/* `cgbpf check --python -p PID`: the interpreter cgbpf finds in a process
 * and every Python thread's stack, read from user space (issue 12). */
#ifndef CGBPF_PYCHECK_H
#define CGBPF_PYCHECK_H

/* Prints what pyfind__probe finds in pid and, when it supports it, each
 * thread state's stack as pycode resolves it. Returns the exit code: 0
 * stacks printed, 1 no Python or one cgbpf will not read (the line says
 * why), or the process could not be read. */
int pycheck__run(int pid);

#endif
