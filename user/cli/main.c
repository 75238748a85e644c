// SPDX-License-Identifier: MIT
/*
 * cli/: the top layer. The command line (main.c: subcommands, options,
 * help), the monitor's config file (config.c) and `cgbpf check`
 * (check.c). It may use every folder below it; nothing uses it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include "pyframes_rec.h"
#include "capture/monitor.h"
#include "capture/record.h"
#include "cli/check.h"
#include "cli/config.h"
#include "core/apilib.h"
#include "lib/log.h"
#include "lib/outname.h"
#include "lib/version.h"
#include "out/capwin.h"
#include "sources/python/pycheck.h"
#include "sources/python/pysites.h"
#include "sources/sources.h"
#include "trace/export.h"
#include "trace/merge.h"
#include "trace/stragact.h"
#include "trace/tstats.h"

#define PS_STR_(x) #x
#define PS_STR(x) PS_STR_(x)	/* a number macro as a string literal */


static const char usage_main[] =
"Usage: cgbpf <command> [options]\n"
"\n"
"eBPF profiler for GPU workloads: traces the CUDA driver and runtime API, NCCL\n"
"and NVTX calls of running processes through uprobes, with the scheduler,\n"
"syscalls and CPU stacks around them; no restart, no code change, no kernel\n"
"module. Writes Perfetto traces (open them at https://ui.perfetto.dev).\n"
"\n"
"Commands:\n"
"  record     trace processes into a .perfetto-trace file and print a summary\n"
"  check      show which API functions cgbpf finds (and can probe) in a library\n"
"  monitor    continuous low-overhead monitoring: metrics over HTTP, flight recorder\n"
"  dump       ask a running monitor to write its flight recorder to a trace\n"
"  merge      combine traces of several hosts (or ranks) into one, aligned on\n"
"             wall-clock time, one Perfetto machine per input\n"
"  export     write a saved trace for other tools: --format kineto-json (the\n"
"             PyTorch profiler's JSON, for Holistic Trace Analysis)\n"
"  stats      print the summary tables (cuda_api_sum, osrt_sum, ...) of saved\n"
"             traces, as a table, CSV or JSON\n"
"\n"
"Run 'cgbpf record --help' for its options; 'man cgbpf-record' for details;\n"
"'cgbpf stats --help' for stats'.\n"
"  -h, --help      this help\n"
"  -V, --version   print the version\n";

static const char usage_record[] =
"Usage: cgbpf record [options] -p PID[,PID...]\n"
"       cgbpf record [options] -- COMMAND [ARGS...]\n"
"       cgbpf record [options] -a [--comm NAME,...] [--cgroup CGROUP,...]\n"
"\n"
"Traces the GPU API calls (CUDA driver and runtime, NCCL, NVTX) of the given\n"
"processes, or of COMMAND and its children, with the scheduler, syscalls and\n"
"CPU stacks around them, until they exit, --duration passes, or Ctrl-C.\n"
"A process that has not loaded a traced library yet is probed the moment it\n"
"maps it.\n"
"\n"
"Options:\n"
"  -p, --pid PID[,PID...]    trace these running processes (and their children)\n"
"  -a, --all                 system-wide: every process on the host that loads\n"
"                            a traced library, now or later, containers too\n"
"      --comm NAME[,NAME...] with -a: only processes of these names (the main\n"
"                            thread's comm, at most 15 characters)\n"
"      --cgroup CG[,CG...]   with -a: only processes in these cgroups (a cgroup\n"
"                            v2 path like /system.slice/x.service, or a\n"
"                            container id, 4+ hex digits) or below them\n"
"  -o, --output FILE         trace file (default cgbpf-YYYYMMDD-HHMMSS.perfetto-trace);\n"
"                            %p pid of the first target (of each process with\n"
"                            --split-per-process), %h host name, %n file number,\n"
"                            %q{VAR} the target's environment variable VAR, %% %\n"
"      --force               replace existing files (trace, --summary-file)\n"
"      --inject[=all]        load cgbpf's injection library into each -p target\n"
"                            that maps libcuda (with -a: each process that maps\n"
"                            it, later ones too; without --comm/--cgroup, -a\n"
"                            asks on a terminal or needs --inject=all), for its\n"
"                            GPU timeline (CUPTI); holds one thread for a few\n"
"                            ms through ptrace (docs/security.md). Without it\n"
"                            cgbpf never stops, signals or ptraces a process\n"
"      --split-per-process   one trace per traced process, named by -o with its\n"
"                            %p and %q (.%p is added before the extension when\n"
"                            -o has no %p); turns --sched and --sample-hz off;\n"
"                            with capture windows each process counts its own\n"
"                            steps and gets its own window files (its own %n)\n"
"  -d, --duration TIME       stop after TIME (e.g. 500ms, 10s, 2m, 1h; plain number: s)\n"
"                            (with -- COMMAND the command keeps running)\n"
"      --summary-only        print the summary, write no trace\n"
"      --no-summary          write the trace, print no summary\n"
"      --summary-file FILE   also write the summary to FILE\n"
"      --trace LIST          API sources, comma-separated: cuda (driver API),\n"
"                            cudart (runtime API), nccl, nvtx; 'all' (default)\n"
"                            or 'none' (system events only)\n"
"      --no-follow           do not trace children forked by the targets\n"
"      --delay TIME          start recording TIME after the start (the probes\n"
"                            are attached at once); --duration counts after it\n"
"      --capture-range KIND  record only inside ranges: cudaProfilerApi (from\n"
"                            cuProfilerStart/cudaProfilerStart to ..Stop) or nvtx\n"
"                            (while an NVTX range of --nvtx-capture is open)\n"
"      --nvtx-capture RANGE[@DOMAIN]\n"
"                            the NVTX range (push/pop or start/end) of nvtx\n"
"      --capture-range-end stop|repeat[:N]\n"
"                            stop: end cgbpf after the first range (default);\n"
"                            repeat: one file per range (at most N), named\n"
"                            FILE-1.perfetto-trace, ... (or %n in -o)\n"
"      --schedule wait=W,warmup=U,active=A[,repeat=R][,skip_first=S]\n"
"                            steps = occurrences of the range, as torch.profiler:\n"
"                            W not traced, U traced not written, A written; one\n"
"                            file per cycle, R cycles (0: until the end),\n"
"                            after S steps skipped (per process with\n"
"                            --split-per-process)\n"
"      --ring-size MIB       BPF ring buffer size in MiB, power of two (default 64)\n"
"      --sched SCOPE         scheduler events: all (every CPU's context switches,\n"
"                            default), targets (only traced threads) or off\n"
"      --syscall-threshold TIME\n"
"                            syscalls of traced threads lasting at least TIME\n"
"                            become slices (default 1us; 'off' disables)\n"
"      --sample-hz HZ        CPU stack samples of traced threads per second\n"
"                            (default 99; 0 disables)\n"
"      --backtrace-threshold TIME\n"
"                            user stack of every CUDA API call lasting at least\n"
"                            TIME (default 100us; 'off' disables)\n"
"      --stack-copy BYTES    user stack bytes copied per sample/backtrace for\n"
"                            DWARF unwinding of code without frame pointers\n"
"                            (default 8192, max 16384; 0: frame pointers only)\n"
"      --python MODE         Python call sites of API calls (CPython 3.8-3.13):\n"
"                            leaf (default: the innermost frame, and the\n"
"                            innermost frame of the user's own code when it\n"
"                            differs), stack (the whole Python stack) or off;\n"
"                            slow-call backtraces and CPU samples get mixed\n"
"                            Python and native stacks unless off\n"
"      --nccl-hang-after TIME\n"
"                            an NCCL operation some ranks entered and another\n"
"                            has not after TIME is said on stderr at once, with\n"
"                            what that rank is doing (default 30s; 'off');\n"
"                            communicators whose every rank is traced here\n"
"  -v, --verbose             debug messages, including libbpf's\n"
"  -h, --help                this help\n"
"\n"
"Examples:\n"
"  sudo cgbpf record -p 4242 -o train.perfetto-trace\n"
"  sudo cgbpf record -p 4242,4243 --duration 10s\n"
"  sudo cgbpf record -o run.perfetto-trace -- python train.py\n"
"  sudo cgbpf record --summary-only -- ./my_cuda_app\n"
"  sudo cgbpf record -a --duration 30s -o host.perfetto-trace\n"
"  sudo cgbpf record -a --comm python --cgroup 3fa2b1c4 -d 10s\n"
"  sudo cgbpf record --split-per-process -o 'rank%q{RANK}.%h.%p.perfetto-trace' \\\n"
"       -- torchrun --nproc-per-node 8 train.py\n"
"  sudo cgbpf record --capture-range cudaProfilerApi -o win.perfetto-trace -- ./app\n"
"  sudo cgbpf record --capture-range nvtx --nvtx-capture step \\\n"
"       --schedule wait=2,warmup=1,active=3,repeat=2 -o steps.perfetto-trace -- python train.py\n"
"  sudo cgbpf record --split-per-process -o 'rank%q{RANK}.%p.perfetto-trace' \\\n"
"       --capture-range nvtx --nvtx-capture step --schedule wait=100,warmup=0,active=6,repeat=1 \\\n"
"       -- torchrun --nproc-per-node 8 train.py\n"
"\n"
"Exit status: 0 on success (with -- COMMAND: the command's exit status),\n"
"1 when cgbpf could not trace (a message says why), 2 for usage errors.\n";

/* Parses a non-negative decimal integer with nothing after it. */
static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/* "10s", "500ms", "2m", "1h", "3" (seconds) -> ns. */
static int parse_duration(const char *s, uint64_t *ns)
{
	static const struct { const char *unit; uint64_t mult; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000ull },
		{ "m", 60000000000ull }, { "h", 3600000000000ull }, { "", 1000000000ull },
	};
	char *end;
	uint64_t v;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		if (v > UINT64_MAX / units[i].mult || v == 0)
			return -EINVAL;
		*ns = v * units[i].mult;
		return 0;
	}
	return -EINVAL;
}

/* A duration as parse_duration (a plain number is us here), "0" or "off". */
static int parse_threshold(const char *s, uint64_t *ns)
{
	char buf[32];

	if (!strcmp(s, "off")) {
		*ns = THRESHOLD_OFF;
		return 0;
	}
	if (!strcmp(s, "0")) {
		*ns = 0;
		return 0;
	}
	if (*s && strspn(s, "0123456789") == strlen(s) && strlen(s) < sizeof(buf) - 2) {
		snprintf(buf, sizeof(buf), "%sus", s);
		s = buf;
	}
	return parse_duration(s, ns);
}

static int parse_pids(const char *s, struct record_opts *o)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		pid_t *n;

		if (parse_u64(tok, &v) || v == 0 || v > 4194304) {
			err = -EINVAL;
			break;
		}
		n = realloc(o->pids, (o->npids + 1) * sizeof(*n));
		if (!n) {
			err = -ENOMEM;
			break;
		}
		o->pids = n;
		o->pids[o->npids++] = v;
	}
	if (!o->npids)
		err = -EINVAL;
	free(copy);
	return err;
}

/* Appends the comma-separated entries of s (each 1..maxlen characters) to
 * *list; 0 or -EINVAL. At most 8 entries in all: BPF checks each. */
static int split_list(const char *s, char ***list, size_t *n, size_t maxlen)
{
	char *copy = strdup(s), *save = NULL, *tok;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	if (!*s || s[strlen(s) - 1] == ',' || strstr(s, ",,") || *s == ',')
		err = -EINVAL;
	for (tok = strtok_r(copy, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
		char **nl;

		if (strlen(tok) > maxlen || *n >= 8) {
			err = -EINVAL;
			break;
		}
		nl = realloc(*list, (*n + 1) * sizeof(*nl));
		if (nl)
			*list = nl;
		if (!nl || !(tok = strdup(tok))) {
			err = -ENOMEM;
			break;
		}
		nl[(*n)++] = tok;
	}
	free(copy);
	return err;
}

/* Frees what the option parsers allocated in o. */
static void free_lists(struct record_opts *o)
{
	free(o->pids);
	for (size_t i = 0; i < o->ncomm; i++)
		free(o->comms[i]);
	for (size_t i = 0; i < o->ncgroup; i++)
		free(o->cgroups[i]);
	free(o->comms);
	free(o->cgroups);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "cgbpf: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'cgbpf record --help'.\n");
	return 2;
}

/* The long options of record without a short form. */
enum { OPT_SUMMARY_ONLY = 256, OPT_NO_SUMMARY, OPT_SUMMARY_FILE, OPT_NO_FOLLOW,
       OPT_NO_STOP, OPT_RING, OPT_SCHED, OPT_SYSCALL_THRESHOLD, OPT_SAMPLE_HZ,
       OPT_BACKTRACE_THRESHOLD, OPT_STACK_COPY, OPT_TRACE, OPT_COMM, OPT_CGROUP,
       OPT_FORCE, OPT_SPLIT, OPT_DELAY, OPT_CAPTURE_RANGE, OPT_NVTX_CAPTURE,
       OPT_CAPTURE_END, OPT_SCHEDULE, OPT_PYTHON, OPT_INJECT, OPT_NCCL_HANG };

static const struct option record_options[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "output", required_argument, NULL, 'o' },
	{ "duration", required_argument, NULL, 'd' },
	{ "summary-only", no_argument, NULL, OPT_SUMMARY_ONLY },
	{ "no-summary", no_argument, NULL, OPT_NO_SUMMARY },
	{ "summary-file", required_argument, NULL, OPT_SUMMARY_FILE },
	{ "no-follow", no_argument, NULL, OPT_NO_FOLLOW },
	{ "no-stop", no_argument, NULL, OPT_NO_STOP },
	{ "ring-size", required_argument, NULL, OPT_RING },
	{ "sched", required_argument, NULL, OPT_SCHED },
	{ "syscall-threshold", required_argument, NULL, OPT_SYSCALL_THRESHOLD },
	{ "sample-hz", required_argument, NULL, OPT_SAMPLE_HZ },
	{ "backtrace-threshold", required_argument, NULL, OPT_BACKTRACE_THRESHOLD },
	{ "stack-copy", required_argument, NULL, OPT_STACK_COPY },
	{ "trace", required_argument, NULL, OPT_TRACE },
	{ "all", no_argument, NULL, 'a' },
	{ "comm", required_argument, NULL, OPT_COMM },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "split-per-process", no_argument, NULL, OPT_SPLIT },
	{ "delay", required_argument, NULL, OPT_DELAY },
	{ "capture-range", required_argument, NULL, OPT_CAPTURE_RANGE },
	{ "nvtx-capture", required_argument, NULL, OPT_NVTX_CAPTURE },
	{ "capture-range-end", required_argument, NULL, OPT_CAPTURE_END },
	{ "schedule", required_argument, NULL, OPT_SCHEDULE },
	{ "python", required_argument, NULL, OPT_PYTHON },
	{ "inject", optional_argument, NULL, OPT_INJECT },
	{ "nccl-hang-after", required_argument, NULL, OPT_NCCL_HANG },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* The record options given explicitly whose defaults --split-per-process
 * would otherwise override without a word. */
struct record_given {
	bool sched, hz;
};

/* Applies one record option that tunes what the sources record (ring size,
 * scheduler, Python, thresholds, samples) to o, and turns down any other
 * (getopt_long has said what); 0, or 2 after a usage message. */
static int record_tuning_option(int c, const char *arg, struct record_opts *o,
				struct record_given *given)
{
	uint64_t v;

	switch (c) {
	case OPT_NO_STOP:
		/* Scripts written for earlier versions pass it; targets are
		 * never paused now. */
		warn("--no-stop is no longer needed: cgbpf never stops a target");
		return 0;
	case OPT_RING:
		if (parse_u64(arg, &v) || v == 0 || v > 4096 || (v & (v - 1)))
			return usage_error("invalid --ring-size '%s': a power of two from 1 to 4096 (MiB)",
					   arg);
		o->ring_mib = v;
		return 0;
	case OPT_PYTHON:
		if (!strcmp(arg, "leaf"))
			o->python = PY_MODE_LEAF;
		else if (!strcmp(arg, "stack"))
			o->python = PY_MODE_STACK;
		else if (!strcmp(arg, "off"))
			o->python = PY_MODE_OFF;
		else
			return usage_error("invalid --python '%s': expected leaf, stack or off", arg);
		return 0;
	case OPT_SCHED:
		given->sched = true;
		if (!strcmp(arg, "all"))
			o->sched = SCHED_ALL;
		else if (!strcmp(arg, "targets"))
			o->sched = SCHED_TARGETS;
		else if (!strcmp(arg, "off"))
			o->sched = SCHED_OFF;
		else
			return usage_error("invalid --sched '%s': expected all, targets or off", arg);
		return 0;
	case OPT_SYSCALL_THRESHOLD:
		if (parse_threshold(arg, &o->syscall_threshold_ns))
			return usage_error("invalid --syscall-threshold '%s': expected e.g. 1us, 50us, 2ms or off",
					   arg);
		return 0;
	case OPT_SAMPLE_HZ:
		given->hz = true;
		if (parse_u64(arg, &v) || v > 10000)
			return usage_error("invalid --sample-hz '%s': 0 (off) to 10000", arg);
		o->sample_hz = v;
		return 0;
	case OPT_BACKTRACE_THRESHOLD:
		if (parse_threshold(arg, &o->backtrace_threshold_ns))
			return usage_error("invalid --backtrace-threshold '%s': expected e.g. 100us, 1ms or off",
					   arg);
		return 0;
	case OPT_STACK_COPY:
		if (parse_u64(arg, &v) || v > 16384)
			return usage_error("invalid --stack-copy '%s': 0 to 16384 bytes", arg);
		o->stack_copy = v;
		return 0;
	case OPT_NCCL_HANG:
		if (parse_threshold(arg, &v) || v == 0)
			return usage_error("invalid --nccl-hang-after '%s': expected e.g. 30s or off",
					   arg);
		o->nccl_hang_ns = v == THRESHOLD_OFF ? 0 : v;
		return 0;
	default:
		fprintf(stderr, "Try 'cgbpf record --help'.\n");
		return 2;
	}
}

/* Applies one record option (getopt_long's c, with its argument arg) to
 * o: here what to trace, where to write, when to capture and -v, the rest
 * in record_tuning_option; 0, or 2 after a usage message. */
static int record_option(int c, const char *arg, struct record_opts *o,
			 struct record_given *given)
{
	switch (c) {
	case 'p':
		if (parse_pids(arg, o))
			return usage_error("invalid --pid '%s': expected PID[,PID...]", arg);
		return 0;
	case 'o':
		if (!*arg)
			return usage_error("empty --output%s", "");
		o->output = arg;
		return 0;
	case 'd':
		if (parse_duration(arg, &o->duration_ns))
			return usage_error("invalid --duration '%s': expected e.g. 500ms, 10s, 2m", arg);
		return 0;
	case OPT_SUMMARY_ONLY:
		o->summary_only = true;
		return 0;
	case OPT_NO_SUMMARY:
		o->no_summary = true;
		return 0;
	case OPT_SUMMARY_FILE:
		o->summary_path = arg;
		return 0;
	case 'a':
		o->all = true;
		return 0;
	case OPT_COMM:
		if (split_list(arg, &o->comms, &o->ncomm, 15))
			return usage_error("invalid --comm '%s': names of 1 to 15 characters, "
					   "comma-separated", arg);
		return 0;
	case OPT_CGROUP:
		if (split_list(arg, &o->cgroups, &o->ncgroup, 4095))
			return usage_error("invalid --cgroup '%s': cgroup paths or container "
					   "ids, comma-separated", arg);
		return 0;
	case OPT_TRACE: {
		char msg[160];

		if (apilib__parse_trace(arg, &o->trace_mask, msg, sizeof(msg)))
			return usage_error("%s", msg);
		return 0;
	}
	case OPT_FORCE:
		o->force = true;
		return 0;
	case OPT_INJECT:
		if (arg && strcmp(arg, "all"))
			return usage_error("invalid --inject=%s: the only value is 'all' (with -a)", arg);
		o->inject = true;
		o->inject_all = arg != NULL;
		return 0;
	case OPT_SPLIT:
		o->split = true;
		return 0;
	case OPT_NO_FOLLOW:
		o->follow = false;
		return 0;
	case 'v':
		log_verbosity = LOG_DEBUG;
		return 0;
	case OPT_DELAY:
		if (parse_duration(arg, &o->cap.delay_ns))
			return usage_error("invalid --delay '%s': expected e.g. 500ms, 10s, 2m", arg);
		return 0;
	case OPT_CAPTURE_RANGE:
	case OPT_NVTX_CAPTURE:
	case OPT_CAPTURE_END:
	case OPT_SCHEDULE: {
		char msg[200];
		int e = c == OPT_CAPTURE_RANGE ? capture__parse_range(arg, &o->cap, msg, sizeof(msg)) :
			c == OPT_NVTX_CAPTURE ? capture__parse_nvtx(arg, &o->cap, msg, sizeof(msg)) :
			c == OPT_CAPTURE_END ? capture__parse_end(arg, &o->cap, msg, sizeof(msg)) :
			capture__parse_schedule(arg, &o->cap, msg, sizeof(msg));

		if (e)
			return usage_error("%s", msg);
		return 0;
	}
	default:
		return record_tuning_option(c, arg, o, given);
	}
}

/* One pass of record options over argv, then COMMAND if any; 0, 1 after
 * --help, or 2. */
static int record_args(int argc, char **argv, struct record_opts *o, struct record_given *given)
{
	int c, ret;

	/* '+': stop at the first non-option so COMMAND keeps its own options. */
	while ((c = getopt_long(argc, argv, "+p:o:d:avh", record_options, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_record, stdout);
			return 1;
		}
		ret = record_option(c, optarg, o, given);
		if (ret)
			return ret;
	}
	if (optind < argc)
		o->cmd = &argv[optind];
	return 0;
}

/* Rejects what to trace and what to write when the options contradict
 * each other; 0, or 2 after a usage message. */
static bool confirm_inject_all(void)
{
	char line[16];

	if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
		return false;
	fprintf(stderr, "cgbpf: -a --inject loads cgbpf's injection library into every process "
		"on this host that maps libcuda, now or later (each holds one thread for a few "
		"ms). Go on? [y/N] ");
	return fgets(line, sizeof(line), stdin) && (line[0] == 'y' || line[0] == 'Y');
}

static int record_check(struct record_opts *o)
{
	char msg[200];

	if (o->cmd && o->npids)
		return usage_error("use either -p PID or -- COMMAND, not both%s", "");
	if (!o->cmd && !o->npids && !o->all)
		return usage_error("nothing to trace: give -p PID, -- COMMAND or -a%s", "");
	if ((o->ncomm || o->ncgroup) && !o->all)
		return usage_error("--comm and --cgroup filter -a: add -a%s", "");
	if (o->all && o->cmd && (o->ncomm || o->ncgroup))
		return usage_error("-a with -- COMMAND traces the command whatever the filters: "
				   "drop --comm/--cgroup or the command%s", "");
	if (o->inject && o->cmd)
		return usage_error("--inject is for running processes (-p, -a): a command record "
				   "starts gets the injection library in its environment%s", "");
	if (o->inject && o->all && !o->npids && !o->ncomm && !o->ncgroup && !o->inject_all &&
	    !confirm_inject_all())
		return usage_error("-a --inject without --comm or --cgroup injects into every "
				   "process on the host that maps libcuda: say --inject=all%s", "");
	if (o->summary_only && o->no_summary)
		return usage_error("--summary-only and --no-summary exclude each other%s", "");
	if (o->no_summary && o->summary_path)
		return usage_error("--no-summary and --summary-file exclude each other%s", "");
	if (capture__check(&o->cap, msg, sizeof(msg)))
		return usage_error("%s", msg);
	if (o->summary_only && o->output)
		return usage_error("--summary-only writes no trace: drop --output%s", "");
	return 0;
}

/* Names the trace file when --output was not given (into buf, which must
 * outlive o) and checks the name; 0, or 2 after a usage message. */
static int record_name_output(struct record_opts *o, char *buf, size_t len)
{
	char why[PATH_MAX + 256];

	if (!o->summary_only && !o->output) {
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(buf, len, "cgbpf-%Y%m%d-%H%M%S.perfetto-trace", &tm);
		o->output = buf;
	}
	if (o->output && outname__check(o->output, why, sizeof(why)))
		return usage_error("%s", why);
	return 0;
}

/* Settles --split-per-process: rejects what it cannot record yet, turns
 * the scheduler and samples off, and puts the PID into the output name
 * (into buf, which must outlive o) unless it has %p; 0, or 2 after a
 * usage message. */
static int record_split(struct record_opts *o, const struct record_given *given,
			char *buf, size_t len)
{
	if (!o->split)
		return 0;
	if (o->summary_only)
		return usage_error("--split-per-process writes traces: drop --summary-only%s", "");
	if (given->sched && o->sched != SCHED_OFF)
		return usage_error("--split-per-process records no scheduler data yet: drop --sched "
				   "or give --sched off%s", "");
	if (given->hz && o->sample_hz)
		return usage_error("--split-per-process records no CPU samples yet: drop --sample-hz "
				   "or give --sample-hz 0%s", "");
	o->sched = SCHED_OFF;
	o->sample_hz = 0;
	if (!outname__uses(o->output, 'p')) {
		if (outname__add_pid(o->output, buf, len))
			return usage_error("--output '%s' is too long", o->output);
		o->output = buf;
	}
	return 0;
}

/* record's nccl_stragglers: the named rank's activity from its trace. */
static int nccl_activity(const struct straggle_named *who, char *const *paths, int npaths,
			 FILE *f)
{
	return stragact__print(who, paths, npaths, SUMTAB_TEXT, f);
}

static int cmd_record(int argc, char **argv)
{
	struct record_opts o = {
		.follow = true, .ring_mib = 64, .sched = SCHED_ALL,
		.syscall_threshold_ns = 1000, .sample_hz = 99, .backtrace_threshold_ns = 100000,
		.stack_copy = 8192, .trace_mask = TRACE_ALL, .python = PY_MODE_LEAF,
		.nccl_hang_ns = 30000000000ull, .nccl_activity = nccl_activity,
	};
	struct record_given given = { 0 };
	char default_out[64], split_out[PATH_MAX];
	int ret;

	ret = record_args(argc, argv, &o, &given);
	if (ret) {
		ret = ret == 1 ? 0 : 2;	/* 1: --help */
		goto out;
	}
	ret = record_check(&o);
	if (!ret)
		ret = record_name_output(&o, default_out, sizeof(default_out));
	if (!ret)
		ret = record_split(&o, &given, split_out, sizeof(split_out));
	if (!ret)
		ret = record__run(&o);
out:
	free_lists(&o);
	return ret;
}

static const char usage_check[] =
"Usage: cgbpf check [--attach] LIBRARY [FUNCTION...]\n"
"       cgbpf check --python --pid PID\n"
"\n"
"Resolves FUNCTIONs (default: every CUDA driver API function cgbpf traces)\n"
"in LIBRARY's ELF symbols and prints their file offsets; with --attach\n"
"(root) also attaches and detaches real entry and return uprobes.\n"
"Exit status 1 when a named FUNCTION is missing or a probe fails.\n"
"\n"
"With --python: the CPython interpreter cgbpf finds in process PID (or\n"
"why it will read no Python frames there) and each Python thread's stack,\n"
"read from user space as record reads them (root or the same user).\n"
"Exit status 1 when there is no Python cgbpf can read.\n"
"\n"
"Examples:\n"
"  sudo cgbpf check --attach /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
"  sudo cgbpf check --python -p 1234\n";

static int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "attach", no_argument, NULL, 'a' },
		{ "python", no_argument, NULL, 'P' },
		{ "pid", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bool attach = false, python = false;
	uint64_t pid = 0;
	int c;

	while ((c = getopt_long(argc, argv, "aPp:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			attach = true;
			break;
		case 'P':
			python = true;
			break;
		case 'p':
			if (parse_u64(optarg, &pid) || pid == 0 || pid > 4194304) {
				fprintf(stderr, "cgbpf: bad --pid value '%s' (a process id)\n", optarg);
				return 2;
			}
			break;
		case 'v':
			log_verbosity = LOG_DEBUG;
			break;
		case 'h':
			fputs(usage_check, stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'cgbpf check --help'.\n");
			return 2;
		}
	}
	if (python || pid) {
		if (!python || !pid || attach || optind < argc) {
			fprintf(stderr, "cgbpf: check --python takes --pid PID and nothing else\n"
				"Try 'cgbpf check --help'.\n");
			return 2;
		}
		return pycheck__run((int)pid);
	}
	if (optind >= argc) {
		fprintf(stderr, "cgbpf: check needs a LIBRARY\nTry 'cgbpf check --help'.\n");
		return 2;
	}
	return check__run(argv[optind], argv + optind + 1, argc - optind - 1, attach);
}

static const char usage_monitor[] =
"Usage: cgbpf monitor [options]\n"
"\n"
"Watches every process on the host that loads a traced library (as record -a)\n"
"for as long as it runs, at almost no cost per call: BPF keeps per process and\n"
"function call counts, time, log2 latency histograms, errors and bytes in maps;\n"
"the metrics endpoint reads them when scraped (Prometheus text format).\n"
"With --flight-recorder, the last TIME of full-detail events are also kept in\n"
"memory and written as a .perfetto-trace into --dump-dir on 'cgbpf dump',\n"
"SIGUSR1, a POST to /dump, or a trigger: a synchronization or NCCL call slower\n"
"than --trigger-slow, a call returning an error, a traced process dying on a\n"
"signal or with a non-zero status. SIGTERM or Ctrl-C stops it cleanly; its\n"
"probes go with it.\n"
"\n"
"Options:\n"
"      --listen ADDR:PORT    metrics endpoint (default " MONITOR_DEFAULT_LISTEN ")\n"
"      --interval TIME       how often aggregates of exited processes are\n"
"                            dropped, after one interval scrapable (default 10s)\n"
"      --flight-recorder TIME keep the last TIME of full-detail events for dumps\n"
"                            (default off: aggregates only, the cheapest mode)\n"
"      --flight-memory MIB   memory for the flight recorder, its one dump's\n"
"                            snapshot included (default 64)\n"
"      --dump-dir DIR        where dumps are written (default " MONITOR_DEFAULT_DUMP_DIR ",\n"
"                            created 0700 when missing); dumps are 0600\n"
"      --trigger-slow TIME   a synchronization or NCCL call lasting TIME dumps\n"
"                            (default 10s; 'off')\n"
"      --no-trigger-errors   calls returning an error do not dump\n"
"      --no-trigger-exit     processes dying abnormally do not dump\n"
"      --nccl-hang-after TIME\n"
"                            an NCCL operation some ranks of a communicator\n"
"                            entered and another has not after TIME is said on\n"
"                            stderr and dumps (default 30s; 'off')\n"
"      --syscall-threshold TIME\n"
"                            also aggregate syscalls of traced processes lasting\n"
"                            TIME or more (default off: while on, every syscall\n"
"                            on the host takes the traced path, ~0.2 us)\n"
"      --python-sites N      per process, the API calls and time of its N Python\n"
"                            call sites (file:line function) of most API time as\n"
"                            metric labels, the rest as site=\"other\"\n"
"                            (1 to " PS_STR(PYSITES_TOP_MAX) "; default off)\n"
"      --python-site-sample K\n"
"                            with --python-sites: read the Python frames of one\n"
"                            call in K, at random, and count it K times\n"
"                            (default " PS_STR(PYSITES_SAMPLE_DEFAULT) "; 1: every call, exact)\n"
"      --trace LIST          API sources, as for record (default all)\n"
"      --comm NAME[,NAME...] only processes of these names\n"
"      --cgroup CG[,CG...]   only processes in these cgroups / containers\n"
"      --ring-size MIB       BPF ring buffer (default 16 with the flight\n"
"                            recorder, 4 without)\n"
"      --config FILE         read options from FILE first: one per line, as on\n"
"                            the command line without the dashes\n"
"                            ('listen 127.0.0.1:9464'); # starts a comment\n"
"  -v, --verbose             debug messages\n"
"  -h, --help                this help\n"
"\n"
"Examples:\n"
"  sudo cgbpf monitor\n"
"  sudo cgbpf monitor --flight-recorder 30s --dump-dir /var/tmp --trigger-slow 5s\n"
"  curl -s 127.0.0.1:9464/metrics | grep cgbpf_calls_total\n"
"  sudo cgbpf monitor --python-sites 10   # + cgbpf_python_site_calls_total{site=...}\n"
"  cgbpf dump\n";

static const struct option monitor_options[] = {
	{ "listen", required_argument, NULL, 'L' },
	{ "interval", required_argument, NULL, 'I' },
	{ "flight-recorder", required_argument, NULL, 'F' },
	{ "flight-memory", required_argument, NULL, 'M' },
	{ "dump-dir", required_argument, NULL, 'D' },
	{ "trigger-slow", required_argument, NULL, 'S' },
	{ "no-trigger-errors", no_argument, NULL, 'E' },
	{ "no-trigger-exit", no_argument, NULL, 'X' },
	{ "nccl-hang-after", required_argument, NULL, 'H' },
	{ "trace", required_argument, NULL, 'T' },
	{ "comm", required_argument, NULL, 'C' },
	{ "cgroup", required_argument, NULL, 'G' },
	{ "ring-size", required_argument, NULL, 'R' },
	{ "syscall-threshold", required_argument, NULL, 'Y' },
	{ "python-sites", required_argument, NULL, 'P' },
	{ "python-site-sample", required_argument, NULL, 'K' },
	{ "config", required_argument, NULL, 'c' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

static int monitor_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "cgbpf: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'cgbpf monitor --help'.\n");
	return 2;
}

/* One pass of monitor options over argv; 0, 1 after --help, or 2. */
static int monitor_args(int argc, char **argv, struct record_opts *o, struct monitor_opts *mo,
			bool from_file)
{
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "vh", monitor_options, NULL)) != -1) {
		uint64_t v;

		switch (c) {
		case 'L':
			mo->listen = optarg;
			break;
		case 'I':
			if (parse_duration(optarg, &mo->interval_ns))
				return monitor_error("invalid --interval '%s': expected e.g. 10s, 1m",
						     optarg);
			break;
		case 'F':
			if (!strcmp(optarg, "off"))
				mo->flight_ns = 0;
			else if (parse_duration(optarg, &mo->flight_ns))
				return monitor_error("invalid --flight-recorder '%s': expected e.g. "
						     "30s, 2m or off", optarg);
			break;
		case 'M':
			if (parse_u64(optarg, &v) || v < 1 || v > 65536)
				return monitor_error("invalid --flight-memory '%s': 1 to 65536 (MiB)",
						     optarg);
			mo->flight_bytes = v << 20;
			break;
		case 'D':
			mo->dump_dir = optarg;
			break;
		case 'S':
			if (parse_threshold(optarg, &v))
				return monitor_error("invalid --trigger-slow '%s': expected e.g. 5s or "
						     "off", optarg);
			mo->trigger_slow_ns = v == THRESHOLD_OFF ? 0 : v;
			break;
		case 'E':
			mo->trigger_errors = false;
			break;
		case 'X':
			mo->trigger_exit = false;
			break;
		case 'H':
			if (parse_threshold(optarg, &v) || v == 0)
				return monitor_error("invalid --nccl-hang-after '%s': expected e.g. 30s "
						     "or off", optarg);
			mo->nccl_hang_ns = v == THRESHOLD_OFF ? 0 : v;
			break;
		case 'T': {
			char msg[160];

			if (apilib__parse_trace(optarg, &o->trace_mask, msg, sizeof(msg)))
				return monitor_error("%s", msg);
			break;
		}
		case 'C':
			if (split_list(optarg, &o->comms, &o->ncomm, 15))
				return monitor_error("invalid --comm '%s': names of 1 to 15 characters, "
						     "comma-separated", optarg);
			break;
		case 'G':
			if (split_list(optarg, &o->cgroups, &o->ncgroup, 4095))
				return monitor_error("invalid --cgroup '%s': cgroup paths or container "
						     "ids, comma-separated", optarg);
			break;
		case 'Y':
			if (parse_threshold(optarg, &o->syscall_threshold_ns))
				return monitor_error("invalid --syscall-threshold '%s': expected e.g. "
						     "1us, 1ms or off", optarg);
			break;
		case 'R':
			if (parse_u64(optarg, &v) || v == 0 || v > 4096 || (v & (v - 1)))
				return monitor_error("invalid --ring-size '%s': a power of two from 1 "
						     "to 4096 (MiB)", optarg);
			o->ring_mib = v;
			break;
		case 'P':
			if (!strcmp(optarg, "off"))
				v = 0;
			else if (parse_u64(optarg, &v) || v < 1 || v > PYSITES_TOP_MAX)
				return monitor_error("invalid --python-sites '%s': 1 to "
						     PS_STR(PYSITES_TOP_MAX) " (call sites per process) "
						     "or off", optarg);
			mo->python_sites = v;
			break;
		case 'K':
			if (parse_u64(optarg, &v) || v < 1 || v > PYSITES_SAMPLE_MAX)
				return monitor_error("invalid --python-site-sample '%s': 1 to "
						     PS_STR(PYSITES_SAMPLE_MAX) " (one call in K)", optarg);
			mo->python_site_sample = v;
			break;
		case 'c':
			if (from_file)
				return monitor_error("--config '%s' inside a config file", optarg);
			break;	/* read before this pass */
		case 'v':
			log_verbosity = LOG_DEBUG;
			break;
		case 'h':
			fputs(usage_monitor, stdout);
			return 1;
		default:
			fprintf(stderr, "Try 'cgbpf monitor --help'.\n");
			return 2;
		}
	}
	if (optind < argc)
		return monitor_error("unexpected argument '%s'", argv[optind]);
	return 0;
}

static int cmd_monitor(int argc, char **argv)
{
	struct monitor_opts mo = {
		.listen = MONITOR_DEFAULT_LISTEN, .interval_ns = 10000000000ull,
		.flight_bytes = 64ull << 20,
		.trigger_slow_ns = 10000000000ull, .trigger_errors = true, .trigger_exit = true,
		.nccl_hang_ns = 30000000000ull,
	};
	struct record_opts o = {
		.all = true, .follow = true, .ring_mib = 0,
		.sched = SCHED_OFF, .syscall_threshold_ns = THRESHOLD_OFF, .sample_hz = 0,
		.backtrace_threshold_ns = THRESHOLD_OFF, .stack_copy = 0,
		.trace_mask = TRACE_ALL, .summary_only = true, .no_summary = true, .monitor = &mo,
	};
	char **fav = NULL, msg[256];
	const char *cfg = NULL;
	int fac = 0, ret;

	for (int i = 1; i < argc; i++) {
		const char *c = NULL;

		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			c = argv[++i];
		else if (!strncmp(argv[i], "--config=", 9))
			c = argv[i] + 9;
		if (c && cfg) {
			fprintf(stderr, "cgbpf: --config given twice\nTry 'cgbpf monitor --help'.\n");
			return 2;
		}
		if (c)
			cfg = c;
	}
	if (cfg) {
		/* The file's options first: the command line's override them. */
		if (config__read(cfg, &fav, &fac, msg, sizeof(msg))) {
			fprintf(stderr, "cgbpf: --config %s: %s\n", cfg, msg);
			return 2;
		}
		ret = monitor_args(fac, fav, &o, &mo, true);
		if (ret) {
			ret = ret == 1 ? 0 : 2;	/* 1: --help */
			goto out;
		}
	}
	ret = monitor_args(argc, argv, &o, &mo, false);
	if (ret) {
		ret = ret == 1 ? 0 : 2;
		goto out;
	}
	if (mo.python_site_sample && !mo.python_sites) {
		ret = monitor_error("%s", "--python-site-sample needs --python-sites N");
		goto out;
	}
	if (!mo.python_site_sample)
		mo.python_site_sample = PYSITES_SAMPLE_DEFAULT;
	/* Without a flight recorder the ring carries only process events and
	 * triggers: a small one keeps the daemon's resident memory small. */
	if (!o.ring_mib)
		o.ring_mib = mo.flight_ns ? 16 : 4;
	o.nccl_hang_ns = mo.nccl_hang_ns;
	ret = record__run(&o);
out:
	/* The options point into the file's argv: it lives until here. */
	config__free(fav, fac);
	free_lists(&o);
	return ret;
}

static const char usage_dump[] =
"Usage: cgbpf dump [--listen ADDR:PORT]\n"
"\n"
"Asks the cgbpf monitor listening at ADDR:PORT (default " MONITOR_DEFAULT_LISTEN ")\n"
"to write its flight recorder into its --dump-dir; prints the file it writes.\n"
"Monitoring goes on. The monitor must run with --flight-recorder.\n";

static int cmd_dump(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *listen = MONITOR_DEFAULT_LISTEN;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'L') {
			listen = optarg;
		} else if (c == 'h') {
			fputs(usage_dump, stdout);
			return 0;
		} else {
			fprintf(stderr, "Try 'cgbpf dump --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cgbpf: dump takes no argument\nTry 'cgbpf dump --help'.\n");
		return 2;
	}
	return monitor__request_dump(listen);
}

static const char usage_merge[] =
"Usage: cgbpf merge TRACE TRACE... -o OUTPUT\n"
"\n"
"Combines cgbpf traces recorded on several hosts (or of several ranks) into\n"
"one trace where each input is its own machine (Perfetto machine_id), so one\n"
"view shows every rank of a job. The first TRACE is the host machine; the\n"
"others are aligned to it on REALTIME (wall-clock time, as good as the\n"
"hosts' NTP) from each trace's clock snapshot. Inputs are streamed: memory\n"
"stays bounded whatever their size. OUTPUT is written only when every input\n"
"merged cleanly.\n"
"\n"
"Options:\n"
"  -o, --output FILE   the merged trace (required)\n"
"  -v, --verbose       debug messages\n"
"  -h, --help          this help\n"
"\n"
"Example:\n"
"  cgbpf merge node0.perfetto-trace node1.perfetto-trace -o job.perfetto-trace\n";

static int cmd_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *output = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "o:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 'v':
			log_verbosity = LOG_DEBUG;
			break;
		case 'h':
			fputs(usage_merge, stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'cgbpf merge --help'.\n");
			return 2;
		}
	}
	if (!output) {
		fprintf(stderr, "cgbpf: merge needs -o OUTPUT\nTry 'cgbpf merge --help'.\n");
		return 2;
	}
	if (argc - optind < 2) {
		fprintf(stderr, "cgbpf: merge needs at least two traces\n"
				"Try 'cgbpf merge --help'.\n");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], output)) {
			fprintf(stderr, "cgbpf: merge: the output %s is also an input\n", output);
			return 2;
		}
	}
	return merge__run((const char *const *)argv + optind, argc - optind, output);
}

int main(int argc, char **argv)
{
	sources__init();
	if (argc < 2) {
		fputs(usage_main, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("cgbpf %s\n", CGBPF_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 1, argv + 1);
	if (!strcmp(argv[1], "merge"))
		return cmd_merge(argc - 1, argv + 1);
	if (!strcmp(argv[1], "export"))
		return export__main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return tstats__main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "monitor"))
		return cmd_monitor(argc - 1, argv + 1);
	if (!strcmp(argv[1], "dump"))
		return cmd_dump(argc - 1, argv + 1);
	fprintf(stderr, "cgbpf: unknown command '%s'\n\n%s", argv[1], usage_main);
	return 2;
}
