# Sourced by the recipe accuracy scripts: fp8_recipe_names BINARY SCRIPT prints the FP8/FP4
# recipes BINARY knows (from its refusal of an unknown one), space-separated, or ends SCRIPT
# with a message when the binary is missing or names none.
fp8_recipe_names() {
  local m=$1 script=$2 names
  [ -x "$m" ] || { echo "$script: no mantissa binary at $m (build it first)" >&2; exit 1; }
  names=$({ "$m" train --model mlp --precision transformer-engine --fp8-recipe '?' 2>&1 || true; } |
    sed -n 's/.*valid recipes are: \([a-z0-9, -]*\).*/\1/p' | tr -d ',')
  [ -n "$names" ] || { echo "$script: found no recipe names in $m's refusal of --fp8-recipe '?'" >&2; exit 1; }
  echo "$names"
}
