#!/bin/bash
# Here, before each device call: the engine the recordings run with is src/ at ENGINE (the commit
# the session began at), whatever another engineer has changed in the working tree since. Writes
# ENGINE's version of every changed file under .s23/eng/ and names files ENGINE lacks in
# .s23/eng/DELETE; record.sh puts them back on the device's copy (this working tree is not touched).
set -eu
ENGINE=${ENGINE:-c0fca5d}
rm -rf .s23/eng && mkdir -p .s23/eng && : > .s23/eng/DELETE
for f in $(git diff --name-only "$ENGINE" -- src) $(git ls-files --others --exclude-standard src); do
  if git cat-file -e "$ENGINE:$f" 2>/dev/null; then
    mkdir -p ".s23/eng/$(dirname "$f")" && git show "$ENGINE:$f" > ".s23/eng/$f"
  else
    echo "$f" >> .s23/eng/DELETE
  fi
done
git rev-parse "$ENGINE" > .s23/eng/ENGINE
find .s23/eng -type f | sort
