// SPDX-License-Identifier: MIT
/*
 * A classic BPF interpreter for seccomp filters (user/lib/scfilter.h),
 * after the kernel's rules (Documentation/userspace-api/seccomp_filter.rst,
 * kernel/seccomp.c's checks): 32-bit accumulator and index, 16 scratch
 * words, loads only of aligned 32-bit words of struct seccomp_data,
 * forward jumps only, a program ends on a return.
 */
#include <errno.h>
#include <string.h>

#include "lib/scfilter.h"

int64_t scfilter__run(const struct sock_filter *f, size_t n, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	const uint8_t *data = (const uint8_t *)d;

	if (!n || n > BPF_MAXINSNS)
		return -EINVAL;
	for (size_t pc = 0; pc < n; pc++) {
		const struct sock_filter *i = &f[pc];
		uint32_t k = i->k, src = BPF_SRC(i->code) == BPF_X ? x : k;

		switch (BPF_CLASS(i->code)) {
		case BPF_LD:
			if (i->code == (BPF_LD | BPF_W | BPF_ABS)) {
				if (k % 4 || k + 4 > sizeof(*d))
					return -EINVAL;
				memcpy(&a, data + k, 4);
			} else if (i->code == (BPF_LD | BPF_W | BPF_LEN)) {
				a = sizeof(*d);
			} else if (i->code == (BPF_LD | BPF_IMM)) {
				a = k;
			} else if (i->code == (BPF_LD | BPF_MEM) && k < BPF_MEMWORDS) {
				a = mem[k];
			} else {
				return -EINVAL;
			}
			break;
		case BPF_LDX:
			if (i->code == (BPF_LDX | BPF_W | BPF_LEN))
				x = sizeof(*d);
			else if (i->code == (BPF_LDX | BPF_IMM))
				x = k;
			else if (i->code == (BPF_LDX | BPF_MEM) && k < BPF_MEMWORDS)
				x = mem[k];
			else
				return -EINVAL;
			break;
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return -EINVAL;
			mem[k] = BPF_CLASS(i->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(i->code)) {
			case BPF_ADD: a += src; break;
			case BPF_SUB: a -= src; break;
			case BPF_MUL: a *= src; break;
			case BPF_DIV: if (!src) return 0; a /= src; break;	/* the kernel: returns 0 */
			case BPF_MOD: if (!src) return 0; a %= src; break;
			case BPF_AND: a &= src; break;
			case BPF_OR: a |= src; break;
			case BPF_XOR: a ^= src; break;
			case BPF_LSH: a = src < 32 ? a << src : 0; break;
			case BPF_RSH: a = src < 32 ? a >> src : 0; break;
			case BPF_NEG: a = -a; break;
			default: return -EINVAL;
			}
			break;
		case BPF_JMP: {
			size_t to;

			if (BPF_OP(i->code) == BPF_JA) {
				to = pc + 1 + k;
			} else {
				int t;

				switch (BPF_OP(i->code)) {
				case BPF_JEQ: t = a == src; break;
				case BPF_JGT: t = a > src; break;
				case BPF_JGE: t = a >= src; break;
				case BPF_JSET: t = (a & src) != 0; break;
				default: return -EINVAL;
				}
				to = pc + 1 + (t ? i->jt : i->jf);
			}
			if (to >= n)
				return -EINVAL;
			pc = to - 1;
			break;
		}
		case BPF_RET:
			if (BPF_RVAL(i->code) == BPF_K)
				return k;
			if (BPF_RVAL(i->code) == BPF_A)
				return a;
			return -EINVAL;
		case BPF_MISC:
			if (BPF_MISCOP(i->code) == BPF_TAX)
				x = a;
			else if (BPF_MISCOP(i->code) == BPF_TXA)
				a = x;
			else
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	return -EINVAL;	/* ran off the end */
}

uint32_t scfilter__stricter(uint32_t a, uint32_t b)
{
	return (int32_t)(a & SECCOMP_RET_ACTION_FULL) < (int32_t)(b & SECCOMP_RET_ACTION_FULL) ? a : b;
}

int scfilter__harmful(uint32_t ret)
{
	uint32_t act = ret & SECCOMP_RET_ACTION_FULL;

	/* ERRNO fails the call (the injection may fail, the process goes
	 * on); TRACE without a tracer is ENOSYS; anything else, unknown
	 * actions too (the kernel kills on those), hurts or stops it. */
	return act != SECCOMP_RET_ERRNO && act != SECCOMP_RET_TRACE && act != SECCOMP_RET_LOG &&
	       act != SECCOMP_RET_ALLOW;
}

const char *scfilter__name(uint32_t ret)
{
	switch (ret & SECCOMP_RET_ACTION_FULL) {
	case SECCOMP_RET_KILL_PROCESS: return "KILL_PROCESS";
	case SECCOMP_RET_KILL_THREAD: return "KILL_THREAD";
	case SECCOMP_RET_TRAP: return "TRAP";
	case SECCOMP_RET_ERRNO: return "ERRNO";
	case SECCOMP_RET_USER_NOTIF: return "USER_NOTIF";
	case SECCOMP_RET_TRACE: return "TRACE";
	case SECCOMP_RET_LOG: return "LOG";
	case SECCOMP_RET_ALLOW: return "ALLOW";
	}
	return "an unknown action (killed, as the kernel does)";
}
