#!/usr/bin/env bash
# Checks that the command examples in the docs use flags the command has: for every
# `build/mantissa SUBCOMMAND ...` line in a code block (fenced or indented) of README.md and
# docs/*.md, each `--flag` must appear in `MANTISSA SUBCOMMAND --help`. A renamed or removed
# flag then fails here instead of in a reader's terminal. Prints one line per unknown flag
# (file:line: flag, subcommand) and exits 1; exits 0 when every example's flags exist.
#
#   tests/docs/check_command_flags.sh MANTISSA [--root DIR]   MANTISSA: the built command
#   tests/docs/check_command_flags.sh MANTISSA --self-test    prove the check can fail
set -euo pipefail

bin=${1:?usage: $0 MANTISSA [--root DIR | --self-test]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  --root)
    root=$(cd "$2" && pwd)
    ;;
  --self-test)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/docs"
    printf '# Demo\n\n```sh\nbuild/mantissa train --epochs 1 \\\n    --precision bf16-mixed\n```\n' > "$tmp/README.md"
    printf '# Guide\n\nText.\n\n    build/mantissa bench --steps 5\n' > "$tmp/docs/guide.md"
    if ! "$0" "$bin" --root "$tmp" > "$tmp/out" 2>&1; then
      echo "self-test: the check rejected examples with existing flags:"; cat "$tmp/out"; exit 1
    fi
    printf '\n```sh\nbuild/mantissa train --epochs 1 \\\n    --no-such-flag 3\n```\n' >> "$tmp/README.md"
    if "$0" "$bin" --root "$tmp" > "$tmp/out" 2>&1; then
      echo "self-test: the check accepted --no-such-flag"; exit 1
    fi
    if ! grep -q 'README.md:9: --no-such-flag is not a flag of .mantissa train' "$tmp/out"; then
      echo "self-test: unexpected report:"; cat "$tmp/out"; exit 1
    fi
    printf '\n    build/mantissa plan --memory 1GiB --modle mlp\n' >> "$tmp/docs/guide.md"
    if "$0" "$bin" --root "$tmp" > "$tmp/out" 2>&1 || ! grep -q 'docs/guide.md:7: --modle' "$tmp/out"; then
      echo "self-test: an indented example's unknown flag was not reported:"; cat "$tmp/out"; exit 1
    fi
    echo "check_command_flags self-test passed"
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: $0 MANTISSA [--root DIR | --self-test]" >&2
    exit 2
    ;;
esac
bin=$(realpath "$bin")
cd "$root"

helps=$(mktemp -d)
trap 'rm -rf "$helps"' EXIT
for sub in train eval compare bench plan info finetune generate; do
  "$bin" "$sub" --help > "$helps/$sub" 2>&1 || true
done

files=(README.md)
for f in docs/*.md; do [[ -f $f ]] && files+=("$f"); done

HELPS=$helps perl - "${files[@]}" <<'PERL'
use strict;
use warnings;
my $helps = $ENV{HELPS};
my %help;
for my $sub (qw(train eval compare bench plan info finetune generate)) {
  open(my $fh, '<', "$helps/$sub") or die "$helps/$sub: $!";
  local $/;
  $help{$sub} = <$fh>;
}
my $problems = 0;
for my $file (@ARGV) {
  open(my $fh, '<', $file) or die "$file: $!";
  my @lines = <$fh>;
  chomp @lines;
  my ($fence, $prev_blank, $indented) = ('', 1, 0);
  my @code;  # [line number, text] of code-block lines, continuations joined
  my $pending;
  for my $i (0 .. $#lines) {
    my $t = $lines[$i];
    my $is_code = 0;
    if ($fence eq '' && $t =~ /^\s*(```|~~~)/) { $fence = $1; next; }
    if ($fence ne '') {
      if ($t =~ /^\s*\Q$fence\E/) { $fence = ''; next; }
      $is_code = 1;
    } elsif ($t =~ /^\s*$/) {
      ($prev_blank, $indented) = (1, 0);
    } else {
      $indented = ($t =~ /^ {4,}\S/ && ($prev_blank || $indented)) ? 1 : 0;
      $prev_blank = 0;
      $is_code = $indented;
    }
    if (!$is_code) { $pending = undef; next; }
    if ($pending) { $pending->[1] .= ' ' . $t; } else { $pending = [$i + 1, $t]; push @code, $pending; }
    $pending = undef unless $t =~ /\\\s*$/;
  }
  for my $c (@code) {
    my ($n, $text) = @$c;
    next if $text =~ /^\s*#/;
    while ($text =~ m{build/mantissa\s+(train|eval|compare|bench|plan|info|finetune|generate)\b([^#|;&]*)}g) {
      my ($sub, $args) = ($1, $2);
      for my $flag ($args =~ /(?<![\w-])(--[a-z0-9][a-z0-9-]*)/g) {
        next if $help{$sub} =~ /(?<![\w-])\Q$flag\E(?![\w-])/;
        print "$file:$n: $flag is not a flag of `mantissa $sub` (not in its --help)\n";
        $problems++;
      }
    }
  }
}
if ($problems) {
  print "check_command_flags: $problems unknown flag(s) in the docs' command examples\n";
  exit 1;
}
print "check_command_flags: every flag of the docs' command examples exists\n";
PERL
