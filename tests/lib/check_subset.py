#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks the project's schema subset (tests/lib/perfetto_subset.proto)
against Perfetto's full schema: every message, field and enum value of the
subset must exist there with the same number, type, label, oneof, packing
and default, and every enum must have all of Perfetto's values.

Usage: check_subset.py [SUBSET [FULL]]
FULL defaults to $CGBPF_SHARED/perfetto/perfetto_trace.proto, else
<repo>/../shared/perfetto/perfetto_trace.proto. Without it the comparison is
skipped with one line saying so; the subset is still compiled, and the
comparison itself is tried on altered copies of the subset (it must find
each alteration), so this check can fail on a clone too.
Prints "ok N - ..." / "not ok N - ..." and "N passed, M failed, K skipped".
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SUBSET = os.path.join(HERE, "perfetto_subset.proto")

try:
    from google.protobuf import descriptor_pb2
except ImportError:
    print("not ok 1 - python protobuf missing: run with /usr/bin/python3 "
          "(Debian python3-protobuf)")
    print("0 passed, 1 failed")
    sys.exit(1)


def full_schema():
    base = os.environ.get("CGBPF_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
    return os.path.join(base, "perfetto", "perfetto_trace.proto")


def compile_proto(path, tmp):
    """FileDescriptorProto of a .proto file (protoc's own reading of it)."""
    out = os.path.join(tmp, os.path.basename(path) + ".pb")
    r = subprocess.run(["protoc", "-I", os.path.dirname(os.path.abspath(path)),
                        "--descriptor_set_out=" + out, os.path.basename(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("protoc cannot compile %s: %s" % (path, r.stderr.strip()))
    with open(out, "rb") as f:
        fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    return fds.file[0]


def index(fdp):
    """{full name: DescriptorProto}, {full name: EnumDescriptorProto}."""
    msgs, enums = {}, {}
    pkg = "." + fdp.package if fdp.package else ""

    def walk(ms, es, prefix):
        for e in es:
            enums[prefix + "." + e.name] = e
        for m in ms:
            name = prefix + "." + m.name
            msgs[name] = m
            walk(m.nested_type, m.enum_type, name)
    walk(fdp.message_type, fdp.enum_type, pkg)
    return msgs, enums


def field_facts(m, fd):
    """What must agree between the subset and the full schema."""
    return {
        "number": fd.number,
        "label": descriptor_pb2.FieldDescriptorProto.Label.Name(fd.label),
        "type": descriptor_pb2.FieldDescriptorProto.Type.Name(fd.type),
        "type_name": fd.type_name or None,
        "oneof": m.oneof_decl[fd.oneof_index].name if fd.HasField("oneof_index") else None,
        "packed": fd.options.packed if fd.options.HasField("packed") else None,
        "default": fd.default_value if fd.HasField("default_value") else None,
    }


def compare(sub, full):
    """[(what, [problems])] per message and enum of the subset."""
    smsgs, senums = index(sub)
    fmsgs, fenums = index(full)
    out = []
    head = []
    if sub.package != full.package:
        head.append("package %r, Perfetto's is %r" % (sub.package, full.package))
    if (sub.syntax or "proto2") != (full.syntax or "proto2"):
        head.append("syntax %r, Perfetto's is %r" % (sub.syntax, full.syntax))
    out.append(("file: package and syntax", head))
    for name in sorted(smsgs):
        m, probs = smsgs[name], []
        fm = fmsgs.get(name)
        if fm is None:
            out.append(("message %s" % name, ["no such message in Perfetto's schema"]))
            continue
        ffields = {fd.name: fd for fd in fm.field}
        for fd in m.field:
            ffd = ffields.get(fd.name)
            if ffd is None:
                probs.append("field %s: not in Perfetto's schema" % fd.name)
                continue
            a, b = field_facts(m, fd), field_facts(fm, ffd)
            for k in a:
                if a[k] != b[k]:
                    probs.append("field %s: %s %r, Perfetto's is %r" % (fd.name, k, a[k], b[k]))
        out.append(("message %s (%d fields)" % (name, len(m.field)), probs))
    for name in sorted(senums):
        e, probs = senums[name], []
        fe = fenums.get(name)
        if fe is None:
            out.append(("enum %s" % name, ["no such enum in Perfetto's schema"]))
            continue
        fv = {v.name: v.number for v in fe.value}
        sv = {v.name: v.number for v in e.value}
        for k, n in sv.items():
            if k not in fv:
                probs.append("value %s: not in Perfetto's schema" % k)
            elif fv[k] != n:
                probs.append("value %s = %d, Perfetto's is %d" % (k, n, fv[k]))
        for k in fv:
            if k not in sv:
                probs.append("value %s = %d missing (a value cgbpf might write "
                             "would not decode)" % (k, fv[k]))
        out.append(("enum %s (%d values)" % (name, len(e.value)), probs))
    return out


def alterations(text):
    """(what, altered text) pairs the comparison must catch."""
    return [
        ("a field number changed",
         text.replace("optional uint64 track_uuid = 11;\n  oneof counter_value_field",
                      "optional uint64 track_uuid = 13;\n  oneof counter_value_field")),
        ("a field type changed",
         text.replace("repeated int32 switch_next_pid = 3", "repeated uint32 switch_next_pid = 3")),
        ("a field taken out of its oneof",
         text.replace("    bytes compressed_packets = 50;\n", "").replace(
             "  optional uint32 machine_id = 98;",
             "  optional uint32 machine_id = 98;\n  optional bytes compressed_packets = 50;")),
        ("packing dropped",
         text.replace("waking_common_flags = 12 [packed = true]", "waking_common_flags = 12")),
        ("an enum value renumbered",
         text.replace("TYPE_SLICE_END = 2;", "TYPE_SLICE_END = 7;")),
        ("a field that Perfetto does not have",
         text.replace("  optional uint32 machine_id = 98;",
                      "  optional uint32 machine_id = 98;\n  optional uint32 cgbpf_extra = 999;")),
    ]


def main(argv):
    subset = argv[1] if len(argv) > 1 else SUBSET
    fullp = argv[2] if len(argv) > 2 else full_schema()
    n = passed = failed = skipped = 0

    def result(ok, what, probs=()):
        nonlocal n, passed, failed
        n += 1
        if ok:
            passed += 1
            print("ok %d - %s" % (n, what))
        else:
            failed += 1
            print("not ok %d - %s" % (n, what))
            for p in probs:
                print("#   " + p)

    if not shutil.which("protoc"):
        print("not ok 1 - protoc not found: install protobuf-compiler (make deps)")
        print("0 passed, 1 failed")
        return 1
    tmp = tempfile.mkdtemp(prefix="check_subset-")
    try:
        try:
            sub = compile_proto(subset, tmp)
            result(True, "protoc compiles %s" % os.path.relpath(subset, REPO))
        except RuntimeError as e:
            result(False, "protoc compiles %s" % subset, [str(e)])
            print("%d passed, %d failed" % (passed, failed))
            return 1

        # The comparison must catch each alteration of the subset; compared
        # with the subset itself it must find nothing.
        with open(subset) as f:
            text = f.read()
        clean = all(not p for _, p in compare(sub, sub))
        result(clean, "the comparison finds nothing between the subset and itself")
        for what, alt in alterations(text):
            d = os.path.join(tmp, "alt%d" % n)
            os.mkdir(d)
            path = os.path.join(d, os.path.basename(subset))
            with open(path, "w") as f:
                f.write(alt)
            if alt == text:
                result(False, "the comparison catches %s" % what,
                       ["the alteration no longer applies to the subset: update alterations()"])
                continue
            found = [p for _, ps in compare(compile_proto(path, tmp), sub) for p in ps]
            result(bool(found), "the comparison catches %s" % what, found[:3])

        if not os.path.isfile(fullp):
            skipped += 1
            print("skipped: Perfetto's schema %s not found (CI has it; clone shared/ beside "
                  "the repository or set CGBPF_SHARED): the subset's numbers and types were "
                  "not compared with it" % fullp)
        else:
            full = compile_proto(fullp, tmp)
            for what, probs in compare(sub, full):
                result(not probs, "%s as in Perfetto's schema" % what, probs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
