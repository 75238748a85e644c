// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/lib/scfilter.c, the seccomp filter interpreter that
 * record --inject asks before it makes a call in another process: answers
 * of real-shaped filters, every ALU and jump form, the programs the kernel
 * would refuse, and which answer wins between filters.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <linux/audit.h>
#include "lib/scfilter.h"
#include "tap.h"

#define NR offsetof(struct seccomp_data, nr)
#define ARCH offsetof(struct seccomp_data, arch)
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))

static struct seccomp_data call(int nr, uint64_t a0, uint64_t a2)
{
	struct seccomp_data d = { .nr = nr, .arch = AUDIT_ARCH_X86_64 };

	d.args[0] = a0;
	d.args[2] = a2;
	return d;
}

#define RUN(f, d) scfilter__run(f, sizeof(f) / sizeof(f[0]), &(d))

int main(void)
{
	/* Kills on mmap with PROT_EXEC, after an arch check; else allows. */
	struct sock_filter kill_exec[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARCH),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 9, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 4, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	/* Docker-like: clone3 answers ENOSYS; clone with CLONE_NEWUSER
	 * (0x10000000) is refused with EPERM; the rest allowed. */
	struct sock_filter docker[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 435, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 56, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x10000000, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	/* ALU, scratch and X: returns ALLOW | ((nr + 3) * 2 ^ 1) % 7 via A. */
	struct sock_filter alu[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR),
		BPF_STMT(BPF_ALU | BPF_ADD | BPF_K, 3),
		BPF_STMT(BPF_LDX | BPF_IMM, 2),
		BPF_STMT(BPF_ALU | BPF_MUL | BPF_X, 0),
		BPF_STMT(BPF_ALU | BPF_XOR | BPF_K, 1),
		BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, 7),
		BPF_STMT(BPF_ST, 3),
		BPF_STMT(BPF_LD | BPF_IMM, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LDX | BPF_MEM, 3),
		BPF_STMT(BPF_ALU | BPF_OR | BPF_X, 0),
		BPF_STMT(BPF_RET | BPF_A, 0),
	};
	struct sock_filter jump_out[] = {
		BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter misaligned[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter past_data[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, sizeof(struct seccomp_data)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter no_ret[] = {
		BPF_STMT(BPF_LD | BPF_IMM, 1),
	};
	struct sock_filter div0[] = {
		BPF_STMT(BPF_LD | BPF_IMM, 8),
		BPF_STMT(BPF_LDX | BPF_IMM, 0),
		BPF_STMT(BPF_ALU | BPF_DIV | BPF_X, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct seccomp_data d;

	d = call(9, 0, 5);
	check(RUN(kill_exec, d) == SECCOMP_RET_KILL_PROCESS, "mmap PROT_READ|PROT_EXEC: killed");
	d = call(9, 0, 3);
	check(RUN(kill_exec, d) == SECCOMP_RET_ALLOW, "mmap PROT_READ|PROT_WRITE: allowed");
	d = call(10, 0, 5);
	check(RUN(kill_exec, d) == SECCOMP_RET_ALLOW, "mprotect: allowed");
	d = call(9, 0, 5);
	d.arch = AUDIT_ARCH_I386;
	check(RUN(kill_exec, d) == SECCOMP_RET_KILL_THREAD, "another arch: killed");
	d = call(435, 0, 0);
	check(RUN(docker, d) == (SECCOMP_RET_ERRNO | ENOSYS), "clone3: ENOSYS");
	d = call(56, 0x3d0f00, 0);
	check(RUN(docker, d) == SECCOMP_RET_ALLOW, "clone of a thread: allowed");
	d = call(56, 0x10000000 | 0x3d0f00, 0);
	check(RUN(docker, d) == (SECCOMP_RET_ERRNO | EPERM), "clone with CLONE_NEWUSER: EPERM");
	d = call(4, 0, 0);
	check(RUN(alu, d) == (SECCOMP_RET_ALLOW | ((((4 + 3) * 2) ^ 1) % 7)), "ALU, X and scratch");
	check(RUN(jump_out, d) == -EINVAL, "a jump out of the program: refused");
	check(RUN(misaligned, d) == -EINVAL, "a misaligned load: refused");
	check(RUN(past_data, d) == -EINVAL, "a load past seccomp_data: refused");
	check(RUN(no_ret, d) == -EINVAL, "no return: refused");
	check(RUN(div0, d) == 0, "division by zero: 0 (KILL_THREAD), as the kernel");
	check(scfilter__stricter(SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS) ==
	      SECCOMP_RET_KILL_PROCESS, "KILL_PROCESS wins over ALLOW");
	check(scfilter__stricter(SECCOMP_RET_KILL_THREAD, SECCOMP_RET_TRAP) ==
	      SECCOMP_RET_KILL_THREAD, "KILL_THREAD over TRAP");
	check(scfilter__stricter(SECCOMP_RET_LOG, SECCOMP_RET_ERRNO | 5) == (SECCOMP_RET_ERRNO | 5),
	      "ERRNO over LOG");
	check(scfilter__stricter(SECCOMP_RET_USER_NOTIF, SECCOMP_RET_ERRNO) == SECCOMP_RET_ERRNO,
	      "ERRNO over USER_NOTIF");
	check(!scfilter__harmful(SECCOMP_RET_ERRNO | 1) && !scfilter__harmful(SECCOMP_RET_ALLOW) &&
	      !scfilter__harmful(SECCOMP_RET_LOG) && !scfilter__harmful(SECCOMP_RET_TRACE),
	      "ERRNO, ALLOW, LOG, TRACE do not hurt");
	check(scfilter__harmful(SECCOMP_RET_KILL_PROCESS) && scfilter__harmful(SECCOMP_RET_TRAP) &&
	      scfilter__harmful(SECCOMP_RET_USER_NOTIF) && scfilter__harmful(0x12340000),
	      "KILL, TRAP, USER_NOTIF and unknown actions do");
	check(!strcmp(scfilter__name(SECCOMP_RET_ERRNO | 38), "ERRNO"), "names");
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
