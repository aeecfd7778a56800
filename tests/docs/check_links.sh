#!/usr/bin/env bash
# Checks the Markdown docs (README.md, docs/*.md, bench/README.md and the logs in bench/results):
#   - every relative link resolves to an existing file or folder of the repository, and a link
#     with an anchor (`file.md#heading`, `#heading`) names a heading of that file (GitHub's
#     anchor spelling: lower case, punctuation dropped, spaces as hyphens, -1, -2 for repeats);
#   - no doc cites the machine-local shared/ folder (`../shared`), which is not in the repository;
#   - every command example runs the command by the path the README's commands build,
#     `build/mantissa`, never a bare `mantissa` (it is not on PATH): in code blocks (fenced or
#     indented) any `mantissa SUBCOMMAND`, and in inline code a `mantissa SUBCOMMAND ARG...`
#     (a bare `mantissa train` in prose names the subcommand and is fine).
# Prints one line per problem (file:line: what) and exits 1; exits 0 when the docs are clean.
#
#   tests/docs/check_links.sh [--root DIR]   check the docs at DIR (default: this repository)
#   tests/docs/check_links.sh --self-test    prove the checker fails on broken docs
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  --root)
    root=$(cd "$2" && pwd)
    ;;
  --self-test)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/docs"
    cat > "$tmp/README.md" <<'MD'
# Demo

Run `build/mantissa train --epochs 1`; `mantissa train` names the subcommand.
See [the guide](docs/guide.md#the-first-run-1), [below](#demo) and [a site](https://example.org).

```sh
build/mantissa info
```
MD
    cat > "$tmp/docs/guide.md" <<'MD'
# Guide

## The first run

## The first run

Back to the [README](../README.md).

    build/mantissa train --precision bf16-mixed
MD
    if ! "$0" --root "$tmp" > "$tmp/out" 2>&1; then
      echo "self-test: the checker rejected clean docs:"; cat "$tmp/out"; exit 1
    fi
    expect_failure() {  # description, file, text to append, pattern the report must match
      cp "$tmp/$2" "$tmp/$2.orig"
      printf '%s\n' "$3" >> "$tmp/$2"
      if "$0" --root "$tmp" > "$tmp/out" 2>&1; then
        echo "self-test: the checker accepted $1"; exit 1
      fi
      if ! grep -q -- "$4" "$tmp/out"; then
        echo "self-test: unexpected report for $1:"; cat "$tmp/out"; exit 1
      fi
      mv "$tmp/$2.orig" "$tmp/$2"
    }
    expect_failure "a link to a missing file" README.md "[x](docs/missing.md)" \
      "README.md:9: .*docs/missing.md.* no such file"
    expect_failure "a link to a missing anchor" README.md "[x](docs/guide.md#the-second-run)" \
      "README.md:9: .*#the-second-run.* no heading"
    expect_failure "a missing anchor in the same file" docs/guide.md "[x](#guide-1)" \
      "docs/guide.md:10: .*#guide-1.* no heading"
    expect_failure "a link whose text spans two lines" README.md $'[two\nlines](docs/nope.md)' \
      "README.md:9: .*docs/nope.md.* no such file"
    expect_failure "a bare mantissa command in inline code over two lines" README.md $'Try `mantissa\ntrain --epochs 1`.' \
      "README.md:9: .*bare .mantissa train"
    expect_failure "a citation of ../shared" docs/guide.md "See ../shared/notes.md." \
      "docs/guide.md:10: .*shared"
    expect_failure "a bare mantissa in a fenced block" README.md $'```sh\nmantissa eval --checkpoint x\n```' \
      "README.md:10: .*bare .mantissa eval"
    expect_failure "a bare mantissa after mpirun" README.md $'```sh\nmpirun -np 2 mantissa train\n```' \
      "README.md:10: .*bare .mantissa train"
    expect_failure "a bare mantissa in an indented block" docs/guide.md $'\n    mantissa bench --steps 5' \
      "docs/guide.md:11: .*bare .mantissa bench"
    expect_failure "a bare mantissa command in inline code" README.md 'Try `mantissa plan --model mlp`.' \
      "README.md:9: .*bare .mantissa plan"
    echo "check_links self-test passed"
    exit 0
    ;;
  "") ;;
  *)
    echo "usage: $0 [--root DIR | --self-test]" >&2
    exit 2
    ;;
esac
cd "$root"

files=(README.md)
for f in docs/*.md bench/README.md bench/results/*.md; do [[ -f $f ]] && files+=("$f"); done

perl -CSD -Mutf8 - "${files[@]}" <<'PERL'
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;

my $problems = 0;
my %anchors_of;  # file -> { anchor => 1 }
my $subcommands = qr/(?:train|eval|compare|bench|plan|info|finetune|generate|help|--version|--help)/;

sub report { my ($file, $line, $what) = @_; print "$file:$line: $what\n"; $problems++; }

# The lines of a file with those inside fenced code blocks marked.
sub read_lines {
  my ($file) = @_;
  open(my $fh, '<', $file) or return ();
  my @lines = <$fh>;
  close($fh);
  chomp @lines;
  my @out;
  my $fence = '';
  for my $text (@lines) {
    if ($fence eq '' && $text =~ /^\s*(```+|~~~+)/) {
      $fence = substr($1, 0, 3);
      push @out, { text => $text, code => 'fence-line' };
    } elsif ($fence ne '' && $text =~ /^\s*\Q$fence\E/) {
      $fence = '';
      push @out, { text => $text, code => 'fence-line' };
    } else {
      push @out, { text => $text, code => ($fence ne '' ? 'fenced' : '') };
    }
  }
  return @out;
}

# GitHub's anchor of a heading: markup dropped, lower case, punctuation other than - and _
# removed, spaces as hyphens.
sub slug {
  my ($h) = @_;
  $h =~ s/\[([^\]]*)\]\([^)]*\)/$1/g;  # links keep their text
  $h =~ s/<[^>]+>//g;                  # HTML tags
  $h =~ s/[`*]//g;                     # code and emphasis marks
  $h = lc $h;
  $h =~ s/[^\w\- ]//g;
  $h =~ s/ /-/g;
  return $h;
}

sub anchors {
  my ($file) = @_;
  return $anchors_of{$file} if $anchors_of{$file};
  my %seen;
  my %set;
  for my $l (read_lines($file)) {
    next if $l->{code};
    next unless $l->{text} =~ /^#{1,6}\s+(.*?)\s*#*\s*$/;
    my $s = slug($1);
    my $a = exists $seen{$s} ? "$s-" . ++$seen{$s} : $s;
    $seen{$s} //= 0;
    $set{$a} = 1;
  }
  $anchors_of{$file} = \%set;
  return \%set;
}

# Inline code and links of one paragraph (they may span lines); $first is its first line.
sub check_paragraph {
  my ($file, $first, $para) = @_;
  my $dir = dirname($file);
  my $line_at = sub { my $pos = shift; $first + (substr($para, 0, $pos) =~ tr/\n//) };
  # Inline code: commands with arguments; then blank the code out before looking for links.
  while ($para =~ /(`+)(.+?)\1/gs) {
    my ($span, $at) = ($2, $-[0]);
    if ($span =~ /^\s*(?:\S+=\S*\s+|mpirun\s+(?:-\S+\s+\S+\s+)*)*mantissa\s+($subcommands)\s+\S/) {
      report($file, $line_at->($at), "bare `mantissa $1 ...` command in inline code: write build/mantissa");
    }
  }
  (my $rest = $para) =~ s/(`+)(.+?)\1/my $c = $&; $c =~ s{[^\n]}{ }g; $c/gse;
  while ($rest =~ /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g) {
    my ($target, $n) = ($1, $line_at->($-[0]));
    next if $target =~ /^[a-z][a-z0-9+.-]*:/i;  # http:, https:, mailto:
    my ($path, $anchor) = $target =~ /^([^#]*)(?:#(.*))?$/;
    if ($path =~ m{(^|/)shared(/|$)}) {
      report($file, $n, "link to $target: the shared/ folder is not in the repository");
      next;
    }
    my $resolved = $path eq '' ? $file : File::Spec->canonpath("$dir/$path");
    1 while $resolved =~ s{(^|/)(?!\.\./)[^/]+/\.\./}{$1};
    if ($resolved =~ m{^\.\./} || $resolved =~ m{^/}) {
      report($file, $n, "link to $target leaves the repository");
      next;
    }
    if (!-e $resolved) {
      report($file, $n, "link to $target: no such file ($resolved)");
      next;
    }
    if (defined $anchor && $anchor ne '' && $resolved =~ /\.md$/i && -f $resolved) {
      report($file, $n, "link to $target: no heading with anchor #$anchor in $resolved")
        unless anchors($resolved)->{$anchor};
    }
  }
}

for my $file (@ARGV) {
  my @lines = read_lines($file);
  my $prev_blank = 1;
  my $in_indented = 0;
  my ($para, $para_first) = ('', 0);
  my $flush = sub { check_paragraph($file, $para_first, $para) if $para ne ''; $para = ''; };
  for my $i (0 .. $#lines) {
    my $n = $i + 1;
    my $text = $lines[$i]{text};
    my $code = $lines[$i]{code};
    # Indented code block: 4+ spaces after a blank line (or continuing one), outside fences.
    if (!$code) {
      if ($text =~ /^\s*$/) { $prev_blank = 1; $flush->(); next; }
      $in_indented = ($text =~ /^ {4,}\S/ && ($prev_blank || $in_indented)) ? 1 : 0;
      $prev_blank = 0;
      $code = 'indented' if $in_indented;
    }
    report($file, $n, "cites the machine-local shared/ folder (not in the repository)")
      if $text =~ m{\.\./shared\b};
    if ($code) {
      $flush->();
      next unless $code eq 'fenced' || $code eq 'indented';
      next if $text =~ /^\s*#/;  # a shell comment
      while ($text =~ /(?:^|[\s;&|(])mantissa[ \t]+($subcommands)(?=\s|$)/g) {
        report($file, $n, "bare `mantissa $1` in a code block: write build/mantissa (the README's commands build it there; it is not on PATH)");
      }
      next;
    }
    $flush->() if $text =~ /^#{1,6}\s/;  # a heading is a paragraph of its own
    ($para, $para_first) = ('', $n) if $para eq '';
    $para .= ($para eq '' ? '' : "\n") . $text;
    $flush->() if $text =~ /^#{1,6}\s/;
  }
  $flush->();
}
if ($problems) {
  print "check_links: $problems problem(s) in the docs\n";
  exit 1;
}
print "check_links: every link resolves and every command example runs build/mantissa\n";
PERL
