"""Which kernels of one build compile to the same SASS as in other builds: each kernel's SASS with
its addresses and encodings dropped, compared kernel by kernel. For showing that a build whose
defines differ from the builds a test suite ran on runs only kernels that suite ran (no GPU).

    python3 -m tools.sass_same NEW.so TESTED_A.so [TESTED_B.so ...]

Prints, for each kernel of NEW, the first other library with the same SASS for it (or "none"), then
a count; exits 1 if some kernel matches none. cuobjdump: $CUOBJDUMP, else on PATH.
"""
import hashlib
import os
import re
import subprocess
import sys

from tools.sass_loops import cuobjdump


def kernel_sass(text):
    """{mangled kernel name: digest of its instructions} from `cuobjdump -sass` output; each line's
    /*address*/ and /* encoding */ comments are dropped, so that only the instructions compare."""
    out, name, lines = {}, None, []
    for line in text.splitlines() + ["Function : <end>"]:
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name is not None:
                out[name] = hashlib.sha1("\n".join(lines).encode()).hexdigest()
            name, lines = m[1], []
        elif name is not None:
            ins = re.sub(r"/\*[^*]*\*/", "", line).strip()
            if ins:
                lines.append(ins)
    return out


def library(path):
    return kernel_sass(subprocess.run([cuobjdump(), "-sass", path], check=True, capture_output=True, text=True).stdout)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    new, others = library(sys.argv[1]), [(p, library(p)) for p in sys.argv[2:]]
    names = dict(zip(new, subprocess.run(["c++filt"], input="\n".join(new), capture_output=True,
                                         text=True).stdout.split("\n")))
    unmatched = 0
    for k, digest in new.items():
        same = next((p for p, lib in others if lib.get(k) == digest), None)
        unmatched += same is None
        print(f"{os.path.basename(same) if same else 'none':>12}  {names[k][:150]}")
    print(f"{len(new) - unmatched} of {len(new)} kernels have the SASS of one of {len(others)} other builds")
    sys.exit(1 if unmatched else 0)


if __name__ == "__main__":
    main()
