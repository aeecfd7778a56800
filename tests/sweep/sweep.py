#!/usr/bin/env python3
"""Hostile-input sweep of the mantissa command line (tests/sweep/README.md).

Runs bad command lines and configs (cli_cases.py) and mutated checkpoints (checkpoint_cases.py)
through the binary, each under a time limit and a memory cap, classifies every outcome and
prints a table of counts and the findings with their reproduction commands. Exits 1 when it
finds a crash, a run without bound, a bad value taken where it must be refused, or a corrupted
checkpoint taken with another result than the clean file's (bit flips inside weight data are
counted apart: without a checksum nothing can tell them from trained weights).
"""

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checkpoint_cases  # noqa: E402
import cli_cases  # noqa: E402
import runner  # noqa: E402
import safetensors_edit  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAILING = {"crash", "unbounded", "accepted-bad-input", "accepted-changed", "control-refused"}
DIVERGED_EXIT_STATUS = 4  # mantissa's status for a run whose loss became NaN or inf (docs/cli.md)
REPORTED = {"rejected-unnamed", "refused-unnamed", "weight-flip-undetected", "long-as-asked"}


class Sweep:
    def __init__(self, args):
        self.args = args
        self.binary = os.path.abspath(args.binary)
        self.work = args.work
        self.counts = Counter()
        self.findings = []  # (class, note, command, output tail)
        self.started = time.monotonic()

    def run(self, argv, **kw):
        return runner.run([self.binary] + argv, timeout_s=self.args.timeout, mem_mb=self.args.mem_mb,
                          cwd=self.scratch, **kw)

    def finding(self, cls, section, note, outcome):
        self.counts[(section, cls)] += 1
        if cls in FAILING or cls in REPORTED:
            tail = "\n".join(outcome.output.strip().splitlines()[-3:])[-600:] if outcome else ""
            self.findings.append((cls, section, note, outcome.command() if outcome else "", tail))

    def progress(self, n, total):
        if n and n % 250 == 0:
            print(f"sweep: {n} of {total} ({(time.monotonic() - self.started) / 60:.1f} min)", flush=True)

    # Setup -----------------------------------------------------------------------------------
    def setup(self):
        self.scratch = os.path.join(self.work, "scratch")
        os.makedirs(self.scratch, exist_ok=True)
        self.corpus = os.path.join(self.work, "corpus.txt")
        with open(self.corpus, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\n" * 60)
        self.paths = {"missing": os.path.join(self.work, "no-such-file"), "dir": self.work,
                      "binary": os.path.join(self.work, "binary.bin")}
        with open(self.paths["binary"], "wb") as f:
            f.write(bytes(range(256)) * 64)
        self.clean = {}
        for kind in checkpoint_cases.kinds(self.corpus):
            if self.args.kinds and kind.name not in self.args.kinds:
                continue
            ck_dir = os.path.join(self.work, "clean", kind.name)
            shutil.rmtree(ck_dir, ignore_errors=True)
            # Three steps with a checkpoint at step 2: the resume goes on to step 3 on the schedule
            # of the run that wrote the file (a cosine schedule spans --max-steps).
            o = self.run(["train"] + kind.flags.split() + ["--max-steps", "3", "--every-n-train-steps", "2",
                                                           "--checkpoint-dir", ck_dir])
            found = [f for f in os.listdir(ck_dir) if "step=2." in f] if os.path.isdir(ck_dir) else []
            path = os.path.join(ck_dir, found[0]) if found else ""
            if o.returncode != 0 or not found:
                print(f"sweep: the clean run of {kind.name} failed:\n{o.command()}\n{o.output[-2000:]}")
                sys.exit(2)
            eval_ref = self.eval_metrics(kind, path)
            resume_ref = self.resume_metrics(kind, path)
            if eval_ref[1] is None or resume_ref[1] is None:
                print(f"sweep: the clean eval or resume of {kind.name} failed:\n"
                      f"{(eval_ref[0] if eval_ref[1] is None else resume_ref[0]).output[-2000:]}")
                sys.exit(2)
            # A second resume: fields that differ between two clean runs are not compared.
            again = self.resume_metrics(kind, path)[1]
            unstable = {k for k in resume_ref[1] if resume_ref[1].get(k) != again.get(k)}
            if unstable:
                print(f"sweep: {kind.name}: not compared, as two clean resumes differ there: {sorted(unstable)}")
            self.clean[kind.name] = (kind, path, eval_ref[1], resume_ref[1], unstable)

    def eval_argv(self, kind, path, metrics):
        argv = ["eval", "--checkpoint", path, "--threads", "1", "--limit-test-batches", "1",
                "--metrics-json", metrics]
        if "--model gpt" in kind.flags:
            argv += ["--text", self.corpus, "--batch-size", "4"]
        return argv

    def resume_argv(self, kind, path, metrics):
        return ["train"] + kind.flags.split() + ["--max-steps", "3", "--resume", path, "--metrics-json", metrics]

    def _metrics(self, argv, metrics):
        """Runs ARGV; its outcome and the comparable part of the metrics JSON it wrote."""
        if os.path.exists(metrics):
            os.unlink(metrics)
        o = self.run(argv)
        m = None
        if o.returncode == 0 and os.path.exists(metrics):
            with open(metrics) as f:
                m = checkpoint_cases.comparable(json.load(f))
        return o, m

    def eval_metrics(self, kind, path):
        metrics = os.path.join(self.scratch, "eval-metrics.json")
        return self._metrics(self.eval_argv(kind, path, metrics), metrics)

    def resume_metrics(self, kind, path):
        metrics = os.path.join(self.scratch, "resume-metrics.json")
        return self._metrics(self.resume_argv(kind, path, metrics), metrics)

    # Command lines ----------------------------------------------------------------------------
    def cli(self):
        gpt = self.clean.get("gpt-bf16-mixed")
        mlp = self.clean.get("32-true-adamw")
        lora = self.clean.get("nf4-dq-qlora")
        vit_dir = os.path.join(self.work, "clean", "vit")
        self.run(["train", "--model", "vit", "--train-subset", "64", "--batch-size", "32", "--max-steps", "1",
                  "--threads", "1", "--limit-val-batches", "1", "--limit-test-batches", "1", "--no-progress-bar",
                  "--checkpoint-dir", vit_dir])
        bases = cli_cases.Bases(os.path.abspath(self.args.fixtures), self.corpus,
                                mlp[1] if mlp else self.paths["missing"],
                                gpt[1] if gpt else self.paths["missing"],
                                os.path.join(vit_dir, "last.safetensors"), self.scratch,
                                lora[1] if lora else self.paths["missing"])
        cases = (cli_cases.flag_cases(self.binary, bases, self.paths) + cli_cases.unknown_flag_cases(bases)
                 + cli_cases.precision_cases(bases) + cli_cases.config_cases(self.binary, bases, self.scratch)
                 + cli_cases.model_size_cases(bases))
        if self.args.quick:
            cases = cases[:: max(1, len(cases) // self.args.quick)][: self.args.quick]
        print(f"sweep: {len(cases)} command lines", flush=True)
        for n, case in enumerate(cases):
            self.progress(n, len(cases))
            for path, content in case.files.items():
                with open(path, "wb") as f:
                    f.write(content)
            o = self.run(case.argv, stdin_data=case.stdin)
            cls = runner.exit_kind(o, self.args.mem_mb)
            if cls == "unbounded" and case.work_count and o.peak_rss_mb < 0.5 * self.args.mem_mb:
                cls = "long-as-asked"
            if cls == "rejected" and o.returncode == DIVERGED_EXIT_STATUS:
                # Trained and diverged (a huge --lr): a result, unless the value must be refused.
                cls = "accepted-bad-input" if case.expect == "reject" else "diverged"
            if cls == "accepted":
                cls = "accepted-bad-input" if case.expect == "reject" else "accepted"
            elif cls == "rejected":
                named = any(n in o.output for n in case.names)
                cls = "rejected" if named else "rejected-unnamed"
            self.finding(cls, "command line", f"[{case.group}] {case.note}", o)
            for path in case.files:
                os.unlink(path)
            self._clean_scratch()

    def _clean_scratch(self):
        for entry in os.listdir(self.scratch):
            p = os.path.join(self.scratch, entry)
            if entry.startswith(".sweep-out"):
                continue
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                try:
                    os.unlink(p)
                except OSError:
                    pass

    # Checkpoints ------------------------------------------------------------------------------
    def checkpoints(self):
        total = 0
        plan = []
        for i, (name, (kind, path, _, _, _)) in enumerate(sorted(self.clean.items())):
            st = safetensors_edit.load(path)
            a = self.args
            muts = checkpoint_cases.all_mutations(st, seed=i, header_limit=a.header_per_kind,
                                                  metadata_limit=a.metadata_per_kind, state_limit=a.state_per_kind,
                                                  plausible_limit=a.plausible_per_kind, weight_flips=a.flips_per_kind)
            if self.args.quick:
                muts = muts[:: max(1, len(muts) // max(1, self.args.quick // (2 * len(self.clean))))]
            plan.append((name, muts))
            total += len(muts)
        print(f"sweep: {total} mutated checkpoints, each given to eval and to a resume", flush=True)
        out_dir = os.path.join(self.work, "findings")
        os.makedirs(out_dir, exist_ok=True)
        done = 0
        for name, muts in plan:
            kind, clean_path, eval_ref, resume_ref, unstable = self.clean[name]
            for j, mut in enumerate(muts):
                self.progress(done, total)
                done += 1
                path = os.path.join(out_dir, f"{name}-{j:03d}.safetensors")
                with open(path, "wb") as f:
                    f.write(checkpoint_cases.without_checksums(mut.data) if self.args.strip_checksums else mut.data)
                keep = False
                for how, ref, get in (("eval", eval_ref, self.eval_metrics),
                                      ("resume", resume_ref, self.resume_metrics)):
                    o, m = get(kind, path)
                    cls = runner.exit_kind(o, self.args.mem_mb)
                    if cls == "accepted":
                        if m is None:
                            cls = "accepted-changed"  # exit 0 without its metrics
                        else:
                            diff = sorted(k for k in set(m) | set(ref) if k not in unstable and m.get(k) != ref.get(k))
                            if not diff:
                                cls = "accepted-same"
                            elif mut.group in ("weight-data", "state-plausible"):
                                cls = "weight-flip-undetected"
                            else:
                                cls = "accepted-changed"
                            if diff:
                                o.output += "\nchanged: " + ", ".join(
                                    f"{k} {json.dumps(ref.get(k))[:60]} -> {json.dumps(m.get(k))[:60]}" for k in diff[:4])
                    elif cls == "rejected":
                        cls = "refused" if os.path.basename(path) in o.output else "refused-unnamed"
                        if mut.group == "control":
                            cls = "control-refused"
                    if mut.group == "control" and cls == "accepted-changed":
                        cls = "control-refused"
                    section = f"checkpoint {how}"
                    self.finding(cls, section, f"{name} [{mut.group}] {mut.label}", o)
                    self.counts[(f"checkpoint {how} by group", f"{mut.group}: {cls}")] += 1
                    keep = keep or cls in FAILING or cls in ("refused-unnamed", "weight-flip-undetected")
                if not keep:
                    os.unlink(path)
                self._clean_scratch()

    # Report -----------------------------------------------------------------------------------
    def report(self):
        lines = ["# mantissa hostile-input sweep", "",
                 f"binary: {self.binary}", f"minutes: {(time.monotonic() - self.started) / 60:.1f}", "",
                 "| section | outcome | count |", "|---|---|---|"]
        for (section, cls), n in sorted(self.counts.items()):
            lines.append(f"| {section} | {cls} | {n} |")
        order = ["crash", "unbounded", "accepted-bad-input", "accepted-changed", "control-refused",
                 "rejected-unnamed", "refused-unnamed", "weight-flip-undetected", "long-as-asked"]
        for cls in order:
            items = [f for f in self.findings if f[0] == cls]
            if not items:
                continue
            failing = "fails the sweep" if cls in FAILING else "reported, does not fail the sweep"
            lines += ["", f"## {cls} ({len(items)}; {failing})", ""]
            for _, section, note, command, tail in items:
                lines.append(f"- {section}: {note}")
                lines.append(f"  `{command[:400]}`")
                for t in tail.splitlines():
                    lines.append(f"    {t[:300]}")
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.work, "report.md"), "w") as f:
            f.write(text)
        summary = text if self.args.verbose else "\n".join(
            line for line in lines if line.startswith("|") or line.startswith("#") or line.startswith("- "))
        print(summary)
        print(f"\nsweep: full report in {os.path.join(self.work, 'report.md')}")
        return any(f[0] in FAILING for f in self.findings)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default=os.path.join(REPO, "build", "mantissa"))
    p.add_argument("--fixtures", default=os.path.join(REPO, "tests", "fixtures"))
    p.add_argument("--work", help="directory for the run's files (default: a new temporary one)")
    p.add_argument("--only", choices=("cli", "checkpoints"))
    p.add_argument("--kinds", nargs="*", help="checkpoint kinds to make (default: all)")
    p.add_argument("--quick", type=int, default=0, help="run about this many cases of each section")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds per command")
    p.add_argument("--mem-mb", type=int, default=4096, help="address-space cap per command")
    p.add_argument("--header-per-kind", type=int, default=25, help="dtype, shape, offset and name edits")
    p.add_argument("--metadata-per-kind", type=int, default=25, help="edits of the trainer state (and 6 more)")
    p.add_argument("--state-per-kind", type=int, default=25, help="impossible state values (NaN, inf, ...)")
    p.add_argument("--plausible-per-kind", type=int, default=6, help="state values training could write")
    p.add_argument("--flips-per-kind", type=int, default=4, help="bit flips in weight data")
    p.add_argument("--strip-checksums", action="store_true",
                   help="remove mantissa.checksums from every mutated file, as in files written before "
                        "mantissa stored them: the checks behind the checksums then face the damage alone")
    p.add_argument("--verbose", action="store_true", help="print the whole report, not only the table")
    args = p.parse_args()
    if not os.access(args.binary, os.X_OK):
        print(f"sweep: no binary at {args.binary} (build it: ninja -C build mantissa_cli)")
        return 2
    keep = bool(args.work)
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="mantissa-sweep-"))
    os.makedirs(args.work, exist_ok=True)
    s = Sweep(args)
    s.setup()
    if args.only in (None, "cli"):
        s.cli()
    if args.only in (None, "checkpoints"):
        s.checkpoints()
    failed = s.report()
    if not keep and not failed:
        shutil.rmtree(args.work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
