/* SPDX-License-Identifier: MIT */
/*
 * Code objects described by BPF (issue 12): bpf/pycode.bpf.c sends a
 * REC_PY_CODE record (bpf/pycode_rec.h) for a code object a frame walk
 * meets and py_codes does not have, so that user space can name its
 * frames after the process has exited.
 */
#ifndef CGBPF_PYCODE_BPF_H
#define CGBPF_PYCODE_BPF_H

/*
 * Describes the code object at code of process tgid in a REC_PY_CODE
 * record: slot 0 (uprobes) to the events ring, then marks it PY_CODE_SENT
 * in py_codes where it has no entry (once per code
 * object; two CPUs racing send it twice,
 * harmlessly); slot 1 (the sampler, NMI) to the samples ring, unmarked,
 * for a code object without an entry or with PY_CODE_SENT (the rings are
 * drained one after the other: a record in one must not count on a record
 * in the other, which user space may take later). Nothing is sent for an
 * object that is not a code object or cannot be read (counted:
 * PYS_CODE_FAIL). 0 or -1. A global BPF function, verified once.
 */
extern int py_code_describe(__u32 slot, __u32 tgid, __u64 code);

#endif
