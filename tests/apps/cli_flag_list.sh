# Shared by the scripts that check every flag of every command: sourced after cli_test_lib.sh.
# commands: the commands `mantissa --help` lists, one a line.
commands() {
  "$cli" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }'
}

# value_flags COMMAND: the long name of every option of COMMAND that takes a value, and its type
# (INT, FLOAT, TEXT, FILE, ...), one "NAME TYPE" a line, from `mantissa COMMAND --help`. An
# option line reads "  -n,--name TYPE=default   Description"; a switch has no TYPE.
value_flags() {
  "$cli" "$1" --help | awk '
    /^[A-Za-z]/ { on = ($0 ~ /^Options:/) ; next }
    on && /^ +-/ {
      sub(/^ +/, "")
      left = $0
      cut = index(left, "  ")
      if (cut > 0) left = substr(left, 1, cut - 1)
      n = split(left, parts, " ")
      if (n < 2) next
      split(parts[1], names, ",")
      long = ""
      for (i in names) if (names[i] ~ /^--/ && long == "") long = names[i]
      if (long == "" || long == "--help" || long == "--version") next
      type = parts[2]
      sub(/=.*/, "", type)
      print long, type
    }'
}
