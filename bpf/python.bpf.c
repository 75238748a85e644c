// SPDX-License-Identifier: MIT
/*
 * The Python frame reader (bpf/python.bpf.h says what and why). Its
 * functions are global BPF functions, each verified once on its own: the
 * thread-state walk, one frame, and the record. Loops are unrolled and
 * carry no counter the verifier must follow (Linux 5.15 has no
 * bpf_loop), and what varies per iteration lives in the callee.
 */
#include "python.bpf.h"
#include "pycode.bpf.h"
#include "stacks.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

static __always_inline __u64 py_buf64(const __u8 *buf, __u32 off)
{
	return *(const __u64 *)(buf + (off & (PY_BUF - 1)));
}

static __always_inline __u32 py_buf32(const __u8 *buf, __u32 off)
{
	return *(const __u32 *)(buf + (off & (PY_BUF - 1)));
}

static __always_inline __u8 py_buf8(const __u8 *buf, __u32 off)
{
	return buf[off & (PY_BUF - 1)];
}

static __always_inline int py_read64(__u64 *v, __u64 addr)
{
	return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
}

/*
 * The thread state of the current thread (pid_tgid) in its process's
 * interpreters: the one whose thread_id is the thread's fs base, found
 * from the per-thread cache when still valid, else by walking the lists.
 * Returns it, or 0 with the reason counted (PYS_NO_TSTATE, PYS_READ_TSTATE).
 * remember_miss: cache "none" (API calls); not the sampler's misses, whose
 * samples of a thread being created (before the thread binds its new
 * thread state) would hide the thread's first calls.
 */
__noinline __u64 py_tstate_find(__u64 pid_tgid, __u32 remember_miss)
{
	__u32 tgid = pid_tgid >> 32;
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_tcache *c, nc = {};
	__u64 fsbase, id = 0, interp = 0, ts = 0;
	__u16 o_id, o_next, o_head, o_inext;

	if (!pp)
		return 0;
	py_count_read();
	fsbase = task->thread.fsbase;
	o_id = pp->off.ts_thread_id;
	c = bpf_map_lookup_elem(&py_tstate, &pid_tgid);
	if (c) {
		if (c->tstate) {
			if (!py_read64(&id, c->tstate + o_id) && id == fsbase)
				return c->tstate;
		} else if (bpf_ktime_get_boot_ns() - c->miss_ts < PY_MISS_NS) {
			py_count(PYS_NO_TSTATE);
			return 0;
		}
	}
	py_count(PYS_TSTATE_WALKS);
	o_next = pp->off.ts_next;
	o_head = pp->off.interp_threads_head;
	o_inext = pp->off.interp_next;
	if (py_read64(&interp, pp->runtime + pp->off.runtime_interp_head))
		goto fail;
#pragma unroll
	for (int i = 0; i < PY_INTERP_MAX; i++) {
		if (!interp)
			break;
		if (py_read64(&ts, interp + o_head))
			goto fail;
#pragma unroll
		for (int j = 0; j < PY_THREADS_MAX; j++) {
			if (!ts)
				break;
			if (py_read64(&id, ts + o_id))
				goto fail;
			if (id == fsbase)
				goto found;
			if (py_read64(&ts, ts + o_next))
				goto fail;
		}
		if (py_read64(&interp, interp + o_inext))
			goto fail;
	}
	/* Not a Python thread (yet): remembered for PY_MISS_NS. */
	if (remember_miss) {
		nc.miss_ts = bpf_ktime_get_boot_ns();
		bpf_map_update_elem(&py_tstate, &pid_tgid, &nc, BPF_ANY);
	}
	py_count(PYS_NO_TSTATE);
	return 0;
found:
	nc.tstate = ts;
	bpf_map_update_elem(&py_tstate, &pid_tgid, &nc, BPF_ANY);
	return ts;
fail:
	/* Not remembered: the list may have been changing under the walk. */
	py_count(PYS_READ_TSTATE);
	return 0;
}

enum { PYW_FAIL = 0, PYW_MORE, PYW_DONE };

/*
 * Reads the frame at v->next of process tgid into frames[v->n] of slot's
 * record and moves v->next to the frame it returns to. PYW_MORE: go on;
 * PYW_DONE: the walk is over (no frame left, max frames, or with leaf a
 * frame user space marked as user code: v->stop); PYW_FAIL: unreadable.
 * A code object py_codes does not have sets v->unknown.
 * The walk's state lives in the map value, not in the caller's registers:
 * the verifier then has no counter to follow through the unrolled loop.
 * A 3.12+ C-stack shim frame is skipped; the frame under it (frames[n -
 * 1]) is the entry frame of an eval loop.
 */
__noinline int py_frame_one(__u32 slot, __u32 tgid, __u32 max, __u32 leaf)
{
	struct py_scratch_v *v = bpf_map_lookup_elem(&py_scratch, &slot);
	struct py_proc *pp;
	struct py_rec_frame *f;
	__u64 code, frame;
	__u32 fr, n;
	__u8 ok, lk;

	if (!v)
		return PYW_FAIL;
	/* The offsets py_emit() copied: no py_procs lookup per frame. */
	pp = (struct py_proc *)((char *)&v->off - offsetof(struct py_proc, off));
	frame = v->next;
	n = v->n;
	if (!frame || n >= max || n >= PY_FRAMES_MAX)
		return PYW_DONE;
	fr = pp->off.frame_read;
	if (!fr || fr > PY_BUF)
		return PYW_FAIL;
	if (bpf_probe_read_user(v->buf, fr, (const void *)frame))
		return PYW_FAIL;
	code = py_buf64(v->buf, pp->off.frame_code);
	v->next = py_buf64(v->buf, pp->off.frame_back);
	ok = pp->off.owner_kind;
	if (ok == 2 && py_buf8(v->buf, pp->off.frame_owner) == 3) {
		if (n > 0)
			v->r.frames[(n - 1) & (PY_FRAMES_MAX - 1)].flags |= PYF_ENTRY;
		return PYW_MORE;
	}
	f = &v->r.frames[n & (PY_FRAMES_MAX - 1)];
	f->code = code;
	lk = pp->off.lasti_kind;
	if (lk == PY_LASTI_BYTES || lk == PY_LASTI_UNITS)
		f->lasti = (__s32)py_buf32(v->buf, pp->off.frame_lasti);
	else
		f->lasti = (__s32)(py_buf64(v->buf, pp->off.frame_lasti) -
				   (code + pp->off.code_adaptive));
	f->flags = ok == 0 || (ok == 1 && py_buf8(v->buf, pp->off.frame_owner)) ? PYF_ENTRY : 0;
	v->n = n + 1;
	{
		struct py_code_key k = { .tgid = tgid, .code = code };
		__u8 *c = bpf_map_lookup_elem(&py_codes, &k);

		if (!c) {
			v->unknown = 1;
			py_code_describe(slot, tgid, code);
		} else if (leaf && *c == PY_CODE_USER) {
			v->stop = 1;
			return PYW_DONE;
		} else if (slot && *c == PY_CODE_SENT) {
			py_code_describe(slot, tgid, code);
		}
	}
	return PYW_MORE;
}

/* The thread state's current frame, 0 if none or unreadable (counted). */
static __always_inline __u64 py_current_frame(const struct py_proc *pp, __u64 ts)
{
	__u64 frame = 0, cf = 0;

	if (pp->off.frame_kind == PY_FRAME_CFRAME) {
		if (py_read64(&cf, ts + pp->off.ts_cframe) || !cf ||
		    py_read64(&frame, cf + pp->off.cframe_current_frame)) {
			py_count(PYS_READ_TSTATE);
			return 0;
		}
	} else if (py_read64(&frame, ts + pp->off.ts_frame)) {
		py_count(PYS_READ_TSTATE);
		return 0;
	}
	if (!frame)
		py_count(PYS_NO_FRAME);
	return frame;
}

/*
 * Sends slot's record: the v->n frames the walk left there. Apart from
 * py_emit() so that nothing there depends on the count. 0 or -1.
 */
__noinline int py_send(__u32 slot, __u64 pid_tgid, __u64 spec)
{
	struct py_scratch_v *v = bpf_map_lookup_elem(&py_scratch, &slot);
	__u32 leaf = (spec >> 48) & 1, n;
	struct rec_py_frames *r;
	__u64 size;

	if (!v)
		return -1;
	n = v->n;
	if (!n || n > PY_FRAMES_MAX) {
		py_count(PYS_NO_FRAME);
		return -1;
	}
	r = &v->r;
	if (!v->next)
		r->frames[(n - 1) & (PY_FRAMES_MAX - 1)].flags |= PYF_ENTRY;
	r->truncated = v->next && !v->stop;
	if (r->truncated && !leaf)
		py_count(PYS_TRUNCATED);
	r->nframes = n;
	r->what = spec & 0xff;
	r->lib = (spec >> 8) & 0xff;
	r->func = (spec >> 16) & 0xffff;
	r->mode = leaf ? PY_MODE_LEAF : PY_MODE_STACK;
	size = offsetof(struct rec_py_frames, frames) + (__u64)n * sizeof(struct py_rec_frame);
	if (size > sizeof(*r))
		return -1;
	fill_hdr(&r->hdr, REC_PY_FRAMES, size, pid_tgid);
	/* No wakeup but for a new code object: the record this one belongs
	 * to comes next and asks for one when the ring needs it. */
	if (slot ? bpf_ringbuf_output(&samples, r, size,
				      v->unknown ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP) :
		   bpf_ringbuf_output(&events, r, size,
				      v->unknown ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP)) {
		count_drop(REC_PY_FRAMES);
		py_count(PYS_RING_FULL);
		return -1;
	}
	py_count(PYS_FRAMES);
	return 0;
}

__noinline int py_emit(__u32 slot, __u64 pid_tgid, __u64 spec)
{
	__u32 tgid = pid_tgid >> 32, max = (spec >> 32) & 0xffff, leaf = (spec >> 48) & 1;
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_scratch_v *v;
	__u64 ts;
	int ret = -1;

	if (!pp)
		return -1;
	slot = slot ? 1 : 0;
	v = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!v)
		return -1;
	if (slot == 0 && !scratch_take(&v->busy)) {
		py_count(PYS_BUSY);
		return -1;
	}
	ts = py_tstate_find(pid_tgid, slot == 0);
	if (!ts)
		goto out;
	v->next = py_current_frame(pp, ts);
	if (!v->next)
		goto out;
	v->n = 0;
	v->stop = 0;
	v->unknown = 0;
	v->off = pp->off;
#pragma unroll
	for (int i = 0; i < PY_FRAMES_MAX + PY_SHIMS_MAX; i++) {
		int w = py_frame_one(slot, tgid, max, leaf);

		if (w == PYW_FAIL) {
			py_count(PYS_READ_FRAME);
			goto out;
		}
		if (w == PYW_DONE)
			break;
	}
	ret = py_send(slot, pid_tgid, spec);
out:
	if (slot == 0)
		scratch_give(&v->busy);
	return ret;
}

/*
 * The interpreter's code_dealloc (the function PyCode_Type.tp_dealloc
 * points at, probed per process by user/sources/python/pysrc.c before it fills py_procs):
 * a code object is being freed, and its address may soon hold another. Its
 * py_codes entry goes (a deleted entry cannot be written back by user
 * space, whose updates need one to exist: see set_class()), so the next walk that meets the address describes what is
 * there then (REC_PY_CODE), and user space
 * names the frames after it from that description on (user/sources/python/pycode.c keeps
 * each description with its time). py_codes_gen moves on: a thread's leaf
 * cache (struct py_leaf_tc) may hold this address as its last user code, with or
 * without a py_codes entry (the LRU map may have dropped it).
 */
SEC("uprobe")
int BPF_KPROBE(py_code_free, __u64 code)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, slot = PY_GEN_FREES;
	struct py_code_key k = { .tgid = tgid, .code = code };
	__u64 *g;

	if (!bpf_map_lookup_elem(&py_procs, &tgid))
		return 0;
	bpf_map_delete_elem(&py_codes, &k);
	g = bpf_map_lookup_elem(&py_codes_gen, &slot);
	if (g)
		__sync_fetch_and_add(g, 1);
	py_count(PYS_CODE_FREED);
	return 0;
}
